"""Running the Redis store's Lua scripts by their SHA, alone or in a pipeline.

Each script call is one `EVALSHA`: one round trip. A script is loaded only when
Redis answers NOSCRIPT (its first use on that server, a restart, SCRIPT FLUSH),
then the call is made again. redis-py's own `Script` objects would instead ask
`SCRIPT EXISTS` before every pipeline that holds one: one more round trip on
each claim of a busy worker (a DELETE and a CLAIM in one pipeline).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import redis_scripts

if TYPE_CHECKING:
    from redis import Redis
    from redis.client import Pipeline

try:
    from redis.exceptions import NoScriptError
except ImportError:  # pragma: no cover - the redis store then refuses to start

    class NoScriptError(Exception):  # type: ignore[no-redef]
        """Stands in for redis-py's, which is not installed."""


__all__ = ["SHAS", "SOURCES", "add", "finish", "run"]

# Script name -> Lua source, and -> the SHA1 that EVALSHA names it by.
SOURCES: dict[str, str] = {
    name: getattr(redis_scripts, name) for name in redis_scripts.__all__ if name != "WAKE_CAP"
}
SHAS: dict[str, str] = {
    name: hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()
    for name, source in SOURCES.items()
}


def run(client: Redis, name: str, args: Sequence[Any]) -> Any:
    """Run script `name` with `args` (the prefix first): one round trip."""
    try:
        return client.execute_command("EVALSHA", SHAS[name], 0, *args)
    except NoScriptError:
        return _load_and_run(client, name, args)


def _load_and_run(client: Redis, name: str, args: Sequence[Any]) -> Any:
    client.execute_command("SCRIPT LOAD", SOURCES[name])
    return client.execute_command("EVALSHA", SHAS[name], 0, *args)


def add(pipe: Pipeline, name: str, args: Sequence[Any]) -> tuple[str, Sequence[Any]]:
    """Queue script `name` in `pipe`; keep what is returned for `finish`."""
    pipe.execute_command("EVALSHA", SHAS[name], 0, *args)
    return name, args


def finish(
    client: Redis, results: list[Any], calls: dict[int, tuple[str, Sequence[Any]]]
) -> list[Any]:
    """Check the results of `pipe.execute(raise_on_error=False)`.

    `calls` maps the position of each script call in the pipeline to what `add`
    returned. A script Redis did not know did not run: it is loaded and run on
    its own, after the pipeline (the scripts so run keep their order; every
    caller's pipeline holds steps that are correct in either order). Any other
    error is raised.
    """
    for index, result in enumerate(results):
        if isinstance(result, NoScriptError) and index in calls:
            results[index] = _load_and_run(client, *calls[index])
        elif isinstance(result, Exception):
            raise result
    return results
