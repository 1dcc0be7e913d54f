"""The Redis store's schedule state, and the Lua script that fires a tick.

Each schedule is a hash `P:schedule:<name>` (last_tick, fired_at: microseconds
since the epoch; job_id; paused '1'/'0'; rule_hash), and its name is in the set
`P:schedules` (what `remove` looks through, rather than a SCAN of every key).
`DEFINE` restarts a schedule whose rule changed in one script. `FIRE` checks the cursor, moves it,
and pushes the tick's job in one script: Redis runs a script whole or not at
all, so the tick and its job move together, and a second scheduler's FIRE for
the same tick finds the cursor there and pushes nothing. A scheduler that dies
before or after its script leaves either nothing or everything done.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..schedule_state import Fired, ScheduleFire, ScheduleState
from . import scripts as calls
from .values import dt, push_args, text, us

if TYPE_CHECKING:
    from .store import RedisStore

__all__ = ["add", "define", "fire", "pause", "remove",
           "states"]



def _key(store: RedisStore, name: str) -> str:
    return store.key("schedule", name)




def _run(store: RedisStore, script: str, args: Sequence[Any]) -> Any:
    return calls.run(store.client, f"schedule_{script}", [store.prefix, *args])


def _state(name: str, fields: dict) -> ScheduleState:
    values = {text(k): text(v) for k, v in fields.items()}
    job_id = values.get("job_id")
    return ScheduleState(
        name=name, last_tick=dt(values.get("last_tick")), fired_at=dt(values.get("fired_at")),
        job_id=int(job_id) if job_id and job_id != "0" else None,
        paused=values.get("paused") == "1", rule_hash=values.get("rule_hash") or None,
    )


def states(store: RedisStore, names: Sequence[str]) -> dict[str, ScheduleState]:
    pipe = store.client.pipeline(transaction=False)
    for name in names:
        pipe.hgetall(_key(store, name))
    return {name: _state(name, fields)
            for name, fields in zip(names, pipe.execute() if names else [], strict=True)
            if fields}


def add(store: RedisStore, names: Sequence[str], since: datetime) -> int:
    pipe = store.client.pipeline(transaction=False)
    for name in names:
        pipe.hsetnx(_key(store, name), "last_tick", us(since))
    if names:
        pipe.sadd(store.key("schedules"), *names)
    return sum(1 for added in (pipe.execute()[:len(names)] if names else []) if added)


def define(store: RedisStore, rules: Mapping[str, str], now: datetime) -> list[str]:
    if not rules:
        return []
    pairs = [value for name, rule in rules.items() for value in (name, rule)]
    return [text(name) for name in _run(store, "define", [us(now), *pairs])]


def remove(store: RedisStore, keep: Sequence[str]) -> int:
    return int(_run(store, "remove", list(keep)))


def fire(store: RedisStore, step: ScheduleFire) -> Fired:
    if step.tick is None and step.job is None:
        raise ValueError("A ScheduleFire needs a tick, a job, or both.")
    job_args = push_args(str(us(step.job.pushed_at)), [step.job]) if step.job else ["0", 0]
    outcome, job_id = _run(store, "fire", [
        step.name, "" if step.tick is None else us(step.tick),
        "push" if step.job is not None else "advance", "1" if step.skip_if_running else "0",
        *job_args,
    ])
    outcome = text(outcome)
    return Fired(outcome, int(job_id) or None if outcome == "pushed" else None)


def pause(store: RedisStore, name: str, paused: bool, now: datetime) -> ScheduleState:
    flat = _run(store, "pause", [name, "1" if paused else "0", us(now)])
    return _state(name, dict(zip(flat[0::2], flat[1::2], strict=True)))
