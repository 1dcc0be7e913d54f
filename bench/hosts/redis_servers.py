"""What the harness's sets of redis-servers share (a Sentinel set, a cluster): each
server started in a folder of its own under the set's temporary folder, and all of them
killed, that folder removed, when the set stops or its start fails."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Self

__all__ = ["REDIS", "RedisServers"]

REDIS = shutil.which("redis-server") or "/usr/bin/redis-server"


class RedisServers:
    """redis-servers on `host`, started by `_redis` and stopped together by `stop`; a
    subclass's `start` brings the set up and returns it (`with` calls it)."""

    def __init__(self, host: str, folder_prefix: str) -> None:
        self.host = host
        self.dir = Path(tempfile.mkdtemp(prefix=folder_prefix))
        self.procs: dict[Any, subprocess.Popen] = {}

    def _redis(self, key: Any, port: int, *extra: str) -> subprocess.Popen:
        """Start a redis-server on `port` that keeps nothing on disk, known as `key`."""
        work = self.dir / str(key)
        work.mkdir(exist_ok=True)
        proc = subprocess.Popen(
            [REDIS, "--port", str(port), "--bind", self.host, "--save", "",
             "--appendonly", "no", "--dir", str(work), "--logfile", str(work / "log"),
             "--protected-mode", "no", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs[key] = proc
        return proc

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)  # a paused one too
                proc.kill()
                proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
