"""The harness's own store servers, bound on the bridge's address: a PostgreSQL cluster
(initdb in a directory of its own, run by the `postgres` user) and a redis-server.

They are the harness's alone, so restarting them under the hosts disturbs no one
else's PostgreSQL or Redis; `stop()` ends them and removes their directories.
`cpu_seconds()` is the CPU time the server's processes used so far (for the
store's CPU beside the throughput).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import psutil

from .procs import wait_until

__all__ = ["OwnPostgres", "OwnRedis"]

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _as_postgres(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", "postgres", "--", *argv], check=True,
                          capture_output=True, text=True)


class OwnPostgres:
    """A PostgreSQL cluster listening on `host`:`port` (trust authentication)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.dir = Path(tempfile.mkdtemp(prefix="laterite-pg-"))
        self.data = self.dir / "data"
        shutil.chown(self.dir, "postgres", "postgres")

    def start(self) -> OwnPostgres:
        if not self.data.exists():
            _as_postgres(str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres",
                         "--auth=trust", "-E", "UTF8", "--no-sync")
            with (self.data / "postgresql.conf").open("a") as conf:
                conf.write("\n".join([
                    f"listen_addresses = '{self.host}'",
                    f"port = {self.port}",
                    f"unix_socket_directories = '{self.dir}'",
                    "max_connections = 200",
                    "shared_buffers = 256MB",
                    "logging_collector = off",
                    "",
                ]))
            with (self.data / "pg_hba.conf").open("a") as hba:
                hba.write("host all all 0.0.0.0/0 trust\n")
        _as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l",
                     str(self.dir / "log"), "-w", "-t", "60", "start")
        return self

    def restart(self, mode: str = "immediate") -> None:
        """Stop (`immediate`: as a crash does) and start again."""
        _as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")
        self.start()

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        return _as_postgres(str(PG_BIN / "psql"), "-h", self.host, "-p", str(self.port),
                            "-U", "postgres", "-d", dbname, "-Atqc", sql).stdout

    def pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def cpu_seconds(self) -> float:
        """CPU time of the postmaster and its processes (backends alive now, and the
        finished ones it waited for)."""
        main = psutil.Process(self.pid())
        total = sum(main.cpu_times()[:4])
        for child in main.children(recursive=True):
            try:
                times = child.cpu_times()
                total += times.user + times.system
            except psutil.NoSuchProcess:
                pass
        return total

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run(["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D",
                            str(self.data), "-m", "immediate", "-w", "stop"],
                           capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


class OwnRedis:
    """A redis-server on `host`:`port`, its writes in an append-only file, so a restart
    (even after SIGKILL: each write reaches the file before its reply) loses none."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.dir = Path(tempfile.mkdtemp(prefix="laterite-redis-"))
        self.proc: subprocess.Popen | None = None

    def start(self) -> OwnRedis:
        self.proc = subprocess.Popen(
            ["/usr/bin/redis-server", "--bind", self.host, "--port", str(self.port),
             "--dir", str(self.dir), "--save", "", "--appendonly", "yes",
             "--appendfsync", "everysec", "--protected-mode", "no",
             "--logfile", str(self.dir / "log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_until(self._ping, 30, "redis-server")
        return self

    def _ping(self) -> bool:
        import redis

        return bool(redis.Redis(host=self.host, port=self.port, socket_timeout=2).ping())

    def restart(self) -> None:
        """SIGKILL it (a crash) and start it again on its append-only file."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.start()

    def cpu_seconds(self) -> float:
        assert self.proc is not None
        times = psutil.Process(self.proc.pid).cpu_times()
        return times.user + times.system

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)
