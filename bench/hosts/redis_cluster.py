"""A Redis Cluster of six redis-servers of its own: three primaries, each with a replica.

`RedisClusterSet(port).start()` runs `redis-server --cluster-enabled yes` on the
loopback ports port..port+5 (nothing persisted, each in a directory of its own under
a temporary one), joins them with `redis-cli --cluster create ... --cluster-replicas
1`, and waits until every node says cluster_state:ok and knows every slot's primary;
`stop()` ends every process it started. `kill_primary(port)` SIGKILLs one primary
(a crashed host), `wait_for_failover` waits until its replica took over and
`restart(port)` brings the node back, as a replica.
Django settings for the queue's cache: `cache_config()`.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
from typing import Any

from .procs import wait_until
from .redis_servers import RedisServers

__all__ = ["NODES", "RedisClusterSet"]

REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"
# Three primaries and one replica each.
NODES = 6


def _port_taken(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


class RedisClusterSet(RedisServers):
    """Six cluster-enabled redis-servers on `host`, ports `port`..`port`+5."""

    def __init__(self, port: int, host: str = "127.0.0.1", *, node_timeout_ms: int = 1000
                 ) -> None:
        super().__init__(host, "laterite-cluster-")
        self.ports = [port + i for i in range(NODES)]
        self.node_timeout_ms = node_timeout_ms

    # -- processes ----------------------------------------------------------------

    def _server(self, port: int) -> subprocess.Popen:
        return self._redis(port, port, "--cluster-enabled", "yes", "--cluster-config-file",
                           str(self.dir / str(port) / "nodes.conf"),
                           "--cluster-node-timeout", str(self.node_timeout_ms))

    def start(self) -> RedisClusterSet:
        taken = [port for port in self.ports if _port_taken(self.host, port)]
        if taken:
            raise RuntimeError(
                f"The Redis Cluster's ports {taken} are in use on {self.host}: set "
                f"LATERITE_TEST_CLUSTER_PORT to the first of six free ports.")
        for port in self.ports:
            self._server(port)
        for port in self.ports:
            wait_until(lambda p=port: self.client(p).ping(), 15, f"redis-server on {port}")
        subprocess.run(
            [REDIS_CLI, "--cluster", "create",
             *(f"{self.host}:{port}" for port in self.ports),
             "--cluster-replicas", "1", "--cluster-yes"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
        wait_until(self.ready, 60, "the Redis Cluster (cluster_state:ok everywhere)", 0.2)
        return self

    def ready(self) -> bool:
        """Whether every live node says cluster_state:ok and sees three primaries, each
        with a replica that is in sync."""
        for port, proc in self.procs.items():
            if proc.poll() is not None:
                continue
            client = self.client(port)
            if client.cluster("info")["cluster_state"] != "ok":
                return False
            info = client.info("replication")
            if info["role"] == "slave" and info.get("master_link_status") != "up":
                return False
        return len(self.primaries()) == NODES // 2

    def client(self, port: int) -> Any:
        """A plain client of the node on `port` (not a cluster client)."""
        import redis

        return redis.Redis(host=self.host, port=port, socket_timeout=2)

    def primaries(self) -> list[int]:
        """The ports of the primaries that serve slots, as a live node sees them."""
        for port, proc in self.procs.items():
            if proc.poll() is None:
                slots = self.client(port).execute_command("CLUSTER", "SLOTS")
                return sorted({int(entry[2][1]) for entry in slots})
        return []

    def kill_primary(self, port: int) -> None:
        """SIGKILL the primary on `port`: what a crashed host looks like to the others."""
        proc = self.procs[port]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def wait_for_failover(self, port: int, timeout: float = 60) -> None:
        """Wait until the slots of the killed primary on `port` have a primary again."""
        wait_until(lambda: port not in self.primaries() and self.ready(), timeout,
                   "the cluster's failover")

    def restart(self, port: int) -> None:
        """Start the killed node on `port` again: from its nodes.conf it rejoins the
        cluster, as a replica of the primary that took its slots over."""
        self._server(port)
        wait_until(self.ready, 60, f"the node on {port} back as a replica", 0.2)

    # -- Django ---------------------------------------------------------------------

    def locations(self) -> list[str]:
        return [f"redis://{self.host}:{port}/0" for port in self.ports]

    def cache_config(self, **options: Any) -> dict[str, Any]:
        """A cache alias for the queue on this cluster (LATERITE_QUEUE_REDIS_CLUSTER)."""
        return {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": self.locations(),
            "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 2, "SOCKET_TIMEOUT": 5, **options},
        }
