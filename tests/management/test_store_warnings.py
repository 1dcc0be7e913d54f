"""`queue_work` says once, as it starts, what the store's server is set to do that may
lose jobs: a Redis server that evicts keys when full (any `maxmemory-policy` but
`noeviction`) drops job hashes without a word; one that keeps nothing on disk (no
AOF, no RDB) loses every job at a restart. The database stores have no such
setting; on every store, a server as this machine's runs it says nothing (its Redis
keeps nothing on disk, which tests/settings.py says is meant)."""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.test import override_settings

from laterite_django.management import store_check
from laterite_django.stores.redis import RedisStore
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_store_as_set_up_here_has_no_warning(store, caplog):
    assert store.warnings() == []
    with caplog.at_level(logging.WARNING, logger="laterite"):
        assert store_check.wait_for_store(store) is True
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_redis_server_that_evicts_keys_is_said_once_at_start(private_redis, caplog):
    # A private server: the machine's own Redis serves others and is never reconfigured.
    alias = private_redis("--maxmemory-policy", "allkeys-lru")
    store = RedisStore(alias=alias, prefix="laterite-test-evicting", ephemeral=True)
    try:
        (warning,) = store.warnings()
        assert "maxmemory-policy allkeys-lru" in warning and "noeviction" in warning
        assert f"cache {alias!r}" in warning
        with caplog.at_level(logging.WARNING, logger="laterite"):
            assert store_check.wait_for_store(store) is True
    finally:
        store.close()
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert said == [warning]


# -- a Redis server that keeps nothing on disk -------------------------------------


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Start a redis-server on a free port with these arguments; return a cache alias
    of it (only its own cache points there). Each is stopped after the test."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    started: list[subprocess.Popen] = []
    overrides: list[override_settings] = []

    def start(*args: str) -> str:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        directory = tmp_path / str(port)
        directory.mkdir()
        started.append(subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir",
             str(directory), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        client = redis.Redis(port=port, socket_timeout=1)
        wait_for(lambda: _answers(client), timeout=20)
        client.close()
        alias = f"private{port}"
        override = override_settings(CACHES={**settings.CACHES, alias: {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}/0"}})
        override.enable()
        overrides.append(override)
        return alias

    try:
        yield start
    finally:
        for override in reversed(overrides):
            override.disable()
        for proc in started:
            proc.terminate()
            proc.wait(10)


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.exceptions.ConnectionError:
        return False


def persistence_warnings(alias: str) -> list[str]:
    store = RedisStore(alias=alias, prefix="laterite-test-persistence", ephemeral=False)
    try:
        return [w for w in store.warnings() if "keeps nothing on disk" in w]
    finally:
        store.close()


NO_PERSISTENCE = ("--save", "", "--appendonly", "no")


def test_a_redis_that_keeps_nothing_on_disk_is_warned_of(private_redis):
    alias = private_redis(*NO_PERSISTENCE)
    (warning,) = persistence_warnings(alias)
    assert f"cache {alias!r}" in warning
    assert "appendonly no" in warning and 'save ""' in warning
    assert "a restart loses every job" in warning and "batches" in warning
    assert "LATERITE_QUEUE_REDIS_EPHEMERAL" in warning


@pytest.mark.parametrize("persistence", [
    ("--save", "", "--appendonly", "yes"),  # AOF
    ("--save", "3600 1", "--appendonly", "no"),  # RDB snapshots
])
def test_a_redis_that_persists_is_not_warned_of(private_redis, persistence):
    assert persistence_warnings(private_redis(*persistence)) == []


def test_a_redis_whose_config_is_renamed_away_is_not_warned_of(private_redis):
    """Managed services forbid CONFIG: what cannot be read is not guessed at."""
    alias = private_redis(*NO_PERSISTENCE, "--rename-command", "CONFIG", "")
    assert persistence_warnings(alias) == []


@pytest.mark.parametrize("store_kind", ["redis"], indirect=True)
def test_queue_work_says_once_that_its_redis_keeps_nothing_on_disk(workers):
    # The test Redis keeps nothing on disk: tests/settings.py sets EPHEMERAL unless told.
    warned = workers.run("--stop-when-empty",
                         env={"LATERITE_TEST_REDIS_EPHEMERAL": "0"})
    assert warned.returncode == 0, warned.stderr
    assert warned.stderr.count("keeps nothing on disk") == 1, warned.stderr
    quiet = workers.run("--stop-when-empty")
    assert quiet.returncode == 0, quiet.stderr
    assert "keeps nothing on disk" not in quiet.stderr
