"""Start, pause, resume and stop worker process trees; tell when they idle.

Linux only (reads /proc). Every signal goes to a process id (or the process
group) that this module started; nothing is matched by name.
"""

import contextlib
import os
import signal
import subprocess
import time

__all__ = ["WorkerGroup"]

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid):
    """Return (ppid, pgid, cpu ticks) of `pid`, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name may hold spaces: split after its closing parenthesis.
    fields = data[data.rindex(b")") + 2 :].split()
    return int(fields[1]), int(fields[2]), int(fields[11]) + int(fields[12])


def _table():
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                table[int(entry)] = st
    return table


class WorkerGroup:
    """The worker processes of one system: each command in its own session."""

    def __init__(self, commands, env, cwd, log_path):
        self.log = open(log_path, "ab")  # noqa: SIM115 - closed by stop()
        self.procs = []
        for argv in commands:
            self.log.write(("\n$ " + " ".join(argv) + "\n").encode())
            self.log.flush()
            self.procs.append(
                subprocess.Popen(
                    argv,
                    env=env,
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=self.log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        self.started = time.monotonic()

    def pids(self):
        """Every live process of the group: the leaders and their descendants."""
        table = _table()
        leaders = {p.pid for p in self.procs}
        found = {pid for pid in leaders if pid in table}
        grew = True
        while grew:  # descendants, including those that left the session
            grew = False
            for pid, (ppid, pgid, _) in table.items():
                if pid not in found and (ppid in found or pgid in leaders):
                    found.add(pid)
                    grew = True
        return found

    def dead(self):
        """Return the exit codes of leaders that have exited."""
        return [p.returncode for p in self.procs if p.poll() is not None]

    def cpu_ticks(self):
        return sum(st[2] for pid in self.pids() if (st := _stat(pid)) is not None)

    def wait_idle(self, min_age=0.8, window=0.3, max_ticks=2, timeout=60.0):
        """Wait until the whole tree uses (almost) no CPU: started up, waiting for work.

        Return the seconds waited; raise RuntimeError if a leader exited.
        """
        t0 = time.monotonic()
        while time.monotonic() - self.started < min_age:
            time.sleep(0.05)
        while True:
            if self.dead():
                raise RuntimeError(f"worker exited with {self.dead()} (see the worker log)")
            before = self.cpu_ticks()
            time.sleep(window)
            used = self.cpu_ticks() - before
            # Allow a little CPU per process: pollers wake a few times a second.
            if used <= max_ticks * max(1, len(self.procs)):
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                return time.monotonic() - t0

    def _signal_all(self, sig):
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def pause(self):
        """SIGSTOP every process, so jobs pushed now wait for `resume`."""
        self._signal_all(signal.SIGSTOP)
        self._paused = True

    def resume(self):
        self._signal_all(signal.SIGCONT)
        self._paused = False

    def stop(self, grace=10.0):
        """SIGTERM the tree, then SIGKILL whatever is left after `grace` seconds."""
        if getattr(self, "_paused", False):
            self.resume()
        pids = self.pids()
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        self._signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if all(p.poll() is not None for p in self.procs) and not (self.pids() | _alive(pids)):
                break
            time.sleep(0.05)
        for pid in self.pids() | _alive(pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=5)
        self.log.close()


def _alive(pids):
    return {pid for pid in pids if _stat(pid) is not None}
