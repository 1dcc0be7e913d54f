"""PgBouncer (Debian's package) in transaction pooling mode in front of a PostgreSQL.

`PgBouncer(...).start()` writes its configuration in a directory of its own and
runs it (as the `postgres` user when started by root: PgBouncer refuses to run as
root); `stop()`
ends it. Every database name is forwarded to the server as it is, with the
server's `postgres` user (trust authentication on both sides).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from .procs import free_port, wait_until

__all__ = ["PgBouncer", "available"]

BINARY = "/usr/sbin/pgbouncer"


def _user() -> pwd.struct_passwd:
    """The user PgBouncer runs as when started by root: `postgres`, else `nobody`."""
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("no `postgres` or `nobody` user to run pgbouncer as")


def available() -> bool:
    """Whether Debian's pgbouncer is installed."""
    return os.path.exists(BINARY)


class PgBouncer:
    """One PgBouncer process listening on `listen`:`port`, pooling to `server`."""

    def __init__(self, *, server_host: str = "127.0.0.1", server_port: int = 5432,
                 listen: str = "127.0.0.1", port: int | None = None,
                 pool_size: int = 20, min_pool_size: int = 0,
                 round_robin: bool = False) -> None:
        self.server_host, self.server_port = server_host, server_port
        self.listen, self.port = listen, port or free_port(listen)
        self.pool_size, self.round_robin = pool_size, round_robin
        self.min_pool_size = min_pool_size
        self.dir = Path(tempfile.mkdtemp(prefix="laterite-pgbouncer-"))
        self.proc: subprocess.Popen | None = None

    def config(self) -> str:
        return "\n".join([
            "[databases]",
            f"* = host={self.server_host} port={self.server_port} user=postgres",
            "[pgbouncer]",
            f"listen_addr = {self.listen}",
            f"listen_port = {self.port}",
            f"unix_socket_dir = {self.dir}",
            "auth_type = any",
            "pool_mode = transaction",
            f"default_pool_size = {self.pool_size}",
            "max_client_conn = 2000",
            f"min_pool_size = {self.min_pool_size}",
            f"server_round_robin = {1 if self.round_robin else 0}",
            "ignore_startup_parameters = extra_float_digits,options",
            f"logfile = {self.dir / 'pgbouncer.log'}",
            "",
        ])

    def start(self) -> PgBouncer:
        (self.dir / "pgbouncer.ini").write_text(self.config())
        user = _user()
        if os.geteuid() == 0:
            for path in (self.dir, *self.dir.iterdir()):
                os.chown(path, user.pw_uid, user.pw_gid)
        argv = [BINARY, str(self.dir / "pgbouncer.ini")]
        if os.geteuid() == 0:
            argv[1:1] = ["-u", user.pw_name]  # it refuses to run as root
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        wait_until(self._ready, 15, f"pgbouncer on {self.listen}:{self.port}")
        return self

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            said = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"pgbouncer exited: {said}{self.log()}")
        import socket

        with socket.create_connection((self.listen, self.port), timeout=1):
            return True

    def warm(self, dbname: str, servers: int) -> None:
        """Make the pool of `dbname` hold `servers` server connections now: as many
        clients each hold a transaction open at once."""
        import psycopg

        clients = [psycopg.connect(host=self.listen, port=self.port, user="postgres",
                                   dbname=dbname) for _ in range(servers)]
        try:
            for client in clients:
                client.execute("SELECT 1")  # a transaction stays open: a server each
        finally:
            for client in clients:
                client.close()

    def log(self) -> str:
        path = self.dir / "pgbouncer.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
