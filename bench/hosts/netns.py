"""Simulated hosts on one Linux machine: network namespaces on a bridge.

`Network(hosts=4).create()` makes a bridge holding the services' address
(`Network.server`, e.g. 10.231.7.1) and, per host, a namespace with its own
address on a veth pair to that bridge. A process started with `host.popen(...)`
(`ip netns exec`) reaches the services only over its host's link, so
`cut(host)` (the link down: packets dropped, connections hang as on a real
partition) and `restore(host)` act on that host alone. `destroy()` removes all
of it, and runs at exit of the process that created it whatever happens.
Needs root (CAP_NET_ADMIN).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Host", "Network", "netns_problem"]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def netns_problem() -> str | None:
    """Say why namespaces cannot be made here, or return None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = f"latprobe{os.getpid()}"
    made = _ip("netns", "add", name, check=False)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    _ip("netns", "del", name, check=False)
    return None


@dataclass
class Host:
    """One simulated host: a namespace, its address, the veth end on the bridge."""

    index: int
    namespace: str
    address: str
    link: str  # the veth end on the bridge (root namespace side)
    procs: list[subprocess.Popen] = field(default_factory=list)

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen:
        """Start `argv` inside this host's namespace (in a process group of its own)."""
        proc = subprocess.Popen(["ip", "netns", "exec", self.namespace, *argv],
                                start_new_session=True, **kwargs)
        self.procs.append(proc)
        return proc


class Network:
    """A bridge with the services' address and `hosts` namespaces hanging off it."""

    def __init__(self, hosts: int, *, tag: str = "lat", subnet: int | None = None) -> None:
        # Short names: an interface name has at most 15 characters.
        self.tag = f"{tag}{os.getpid() % 10000}"
        self.subnet = subnet if subnet is not None else 100 + os.getpid() % 150
        self.prefix = f"10.231.{self.subnet}"
        self.server = f"{self.prefix}.1"
        self.bridge = f"{self.tag}br"
        self.hosts = [
            Host(i, f"{self.tag}h{i}", f"{self.prefix}.{10 + i}", f"{self.tag}v{i}")
            for i in range(1, hosts + 1)
        ]
        self._made = False

    def create(self) -> Network:
        atexit.register(self.destroy)
        self._made = True
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.server}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for host in self.hosts:
            inside = f"{self.tag}p{host.index}"
            _ip("netns", "add", host.namespace)
            _ip("link", "add", host.link, "type", "veth", "peer", "name", inside)
            _ip("link", "set", host.link, "master", self.bridge)
            _ip("link", "set", host.link, "up")
            _ip("link", "set", inside, "netns", host.namespace)
            ns = ("-n", host.namespace)
            _ip(*ns, "link", "set", "lo", "up")
            _ip(*ns, "addr", "add", f"{host.address}/24", "dev", inside)
            _ip(*ns, "link", "set", inside, "up")
        return self

    def cut(self, host: Host) -> None:
        """Take `host`'s link down: its packets go nowhere until `restore`."""
        _ip("link", "set", host.link, "down")

    def restore(self, host: Host) -> None:
        _ip("link", "set", host.link, "up")

    def kill(self, host: Host, sig: int) -> None:
        """Send `sig` to every process started on `host` (their whole process groups)."""
        for proc in host.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)

    def destroy(self) -> None:
        """Kill what runs on the hosts and remove the namespaces, links and bridge."""
        if not self._made:
            return
        self._made = False
        import signal

        for host in self.hosts:
            self.kill(host, signal.SIGKILL)
            for proc in host.procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(10)
            _ip("link", "del", host.link, check=False)
            _ip("netns", "del", host.namespace, check=False)
        _ip("link", "del", self.bridge, check=False)

    def __enter__(self) -> Network:
        try:
            return self.create()
        except BaseException:
            self.destroy()
            raise

    def __exit__(self, *exc: object) -> None:
        self.destroy()
