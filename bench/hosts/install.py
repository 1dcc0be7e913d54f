"""Install the Debian packages the harness runs (pgbouncer, redis-sentinel) if missing."""

from __future__ import annotations

import os
import shutil
import subprocess

__all__ = ["ensure", "missing_reason"]

# Debian package -> a program it installs.
PROGRAMS = {
    "pgbouncer": "/usr/sbin/pgbouncer",
    "redis-sentinel": "/usr/bin/redis-sentinel",
    "iproute2": "/usr/sbin/ip",
}


def _present(package: str) -> bool:
    program = PROGRAMS[package]
    return os.path.exists(program) or shutil.which(os.path.basename(program)) is not None


def ensure(*packages: str) -> None:
    """apt-get install the `packages` that are not installed yet (needs root)."""
    wanted = [p for p in packages if not _present(p)]
    if not wanted:
        return
    if os.geteuid() != 0:
        raise PermissionError(f"{', '.join(wanted)} not installed, and not root to install it")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-qq", *wanted], check=True, env=env,
                   stdout=subprocess.DEVNULL)


def missing_reason(*packages: str) -> str | None:
    """Install `packages` if needed; say why they cannot be had, or return None."""
    try:
        ensure(*packages)
    except (PermissionError, subprocess.CalledProcessError, FileNotFoundError) as e:
        return str(e)
    return None
