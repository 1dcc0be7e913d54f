"""A Redis primary, one replica and one Sentinel, each a redis-server of its own.

`RedisSentinelSet(...).start()` runs them on free ports (nothing persisted);
`kill_primary()` SIGKILLs the primary, `wait_for_failover()` waits until the
Sentinel names the promoted replica; `stop()` ends every process it started.
Django settings for the queue's cache: `cache_config(db)`.
"""

from __future__ import annotations

import signal
import subprocess
from typing import Any

from .procs import free_port, wait_until
from .redis_servers import REDIS, RedisServers

__all__ = ["RedisSentinelSet"]



class RedisSentinelSet(RedisServers):
    """A primary, a replica and a Sentinel on `host`."""

    def __init__(self, host: str = "127.0.0.1", *, down_after_ms: int = 1000) -> None:
        super().__init__(host, "laterite-sentinel-")
        self.down_after_ms = down_after_ms
        self.ports = {"a": free_port(host), "b": free_port(host), "sentinel": free_port(host)}
        self.primary = "a"
        # Its own service name: django-redis keeps one pool per LOCATION for the whole
        # process, so two sets under one name would share the first one's.
        self.service = f"laterite{self.ports['sentinel']}"

    # -- processes ----------------------------------------------------------------

    def _server(self, name: str, *extra: str) -> subprocess.Popen:
        return self._redis(name, self.ports[name], *extra)

    def start(self) -> RedisSentinelSet:
        self._server("a")
        wait_until(lambda: self.client("a").ping(), 15, "redis primary")
        self._server("b", "--replicaof", self.host, str(self.ports["a"]))
        wait_until(self._replica_in_sync, 30, "redis replica")
        conf = self.dir / "sentinel.conf"
        conf.write_text("\n".join([
            f"port {self.ports['sentinel']}",
            f"bind {self.host}",
            "protected-mode no",
            f"dir {self.dir}",
            f"logfile {self.dir / 'sentinel.log'}",
            f"sentinel monitor {self.service} {self.host} {self.ports['a']} 1",
            f"sentinel down-after-milliseconds {self.service} {self.down_after_ms}",
            f"sentinel failover-timeout {self.service} 5000",
            f"sentinel parallel-syncs {self.service} 1",
            "",
        ]))
        self.procs["sentinel"] = subprocess.Popen(
            [REDIS, str(conf), "--sentinel"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
        wait_until(lambda: self.primary_port() == self.ports["a"], 15, "redis sentinel")
        wait_until(lambda: self._sentinel().execute_command(
            "SENTINEL", "REPLICAS", self.service), 15, "the sentinel to see the replica")
        return self

    def _replica_in_sync(self) -> bool:
        info = self.client("b").info("replication")
        return info.get("master_link_status") == "up"

    def client(self, name: str) -> Any:
        import redis

        return redis.Redis(host=self.host, port=self.ports[name], socket_timeout=2)

    def _sentinel(self) -> Any:
        return self.client("sentinel")

    def primary_port(self) -> int:
        """The port of the primary as the Sentinel names it."""
        _, port = self._sentinel().execute_command(
            "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
        return int(port)

    def replica(self) -> str:
        return "b" if self.primary == "a" else "a"

    def kill_primary(self) -> None:
        """SIGKILL the primary: what a crashed host looks like to the others."""
        proc = self.procs[self.primary]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def wait_for_failover(self, timeout: float = 60) -> str:
        """Wait until the Sentinel names the replica as primary; return its name."""
        replica = self.replica()
        wait_until(lambda: self.primary_port() == self.ports[replica], timeout,
                   "the sentinel's failover")
        wait_until(lambda: self.client(replica).info("replication")["role"] == "master",
                   timeout, "the promoted replica")
        self.primary = replica
        return replica

    def restart_old_primary(self) -> None:
        """Start the killed server again, as a replica of the new primary."""
        old = self.replica()
        self._server(old, "--replicaof", self.host, str(self.ports[self.primary]))
        wait_until(lambda: self.client(old).info("replication").get("master_link_status")
                   == "up", 30, "the old primary as a replica")

    def pause_replica(self) -> None:
        """SIGSTOP the replica: it stops acknowledging the primary's writes."""
        self.procs[self.replica()].send_signal(signal.SIGSTOP)

    def resume_replica(self) -> None:
        self.procs[self.replica()].send_signal(signal.SIGCONT)

    # -- Django ---------------------------------------------------------------------

    def location(self, db: int = 0) -> str:
        return f"redis://{self.service}/{db}"

    def cache_config(self, db: int = 0, **options: Any) -> dict[str, Any]:
        """A django-redis cache that finds the primary through the Sentinel."""
        return {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": self.location(db),
            "OPTIONS": {
                "CLIENT_CLASS": "django_redis.client.SentinelClient",
                "CONNECTION_FACTORY": "django_redis.pool.SentinelConnectionFactory",
                "SENTINELS": [(self.host, self.ports["sentinel"])],
                "SOCKET_CONNECT_TIMEOUT": 2,
                "SOCKET_TIMEOUT": 5,
                **options,
            },
        }
