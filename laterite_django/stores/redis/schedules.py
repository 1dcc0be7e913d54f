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

from ..schedule_state import REMOVED, Fired, ScheduleFire, ScheduleState
from . import scripts as calls
from .keys import _COMMON
from .values import dt, push_args, text, us

if TYPE_CHECKING:
    from .store import RedisStore

__all__ = ["DEFINE", "FIRE", "PAUSE", "REMOVE", "add", "define", "fire", "pause", "remove",
           "states"]

# Push one job as redis_scripts_push_claim.PUSH does (ARGV from `b`: name, queue, payload,
# priority, pushed_at, available_at, retry_until, has_key, key), due by the server's
# clock; return its id, 0 if dropped as a duplicate of a waiting job with its unique key.
_PUSH_ONE = """
local function push_one(b)
  local now = clock()
  local name, queue, payload = ARGV[b + 1], ARGV[b + 2], ARGV[b + 3]
  local priority, pushed_at, avail = ARGV[b + 4], ARGV[b + 5], due_at(ARGV[b + 6], now)
  local retry_until, has_key, key = ARGV[b + 7], ARGV[b + 8], ARGV[b + 9]
  local id = new_id()
  if has_key == '1' and not take_key(key, id) then return 0 end
  local k = jkey(id)
  redis.call('HSET', k, 'name', name, 'queue', queue, 'payload', payload,
    'priority', priority, 'pushed_at', pushed_at, 'available_at', avail,
    'attempts', 0, 'last_error', '', 'claimed_by', '')
  if retry_until ~= '' then redis.call('HSET', k, 'retry_until', retry_until) end
  if has_key == '1' then redis.call('HSET', k, 'unique_key', key) end
  enqueue(k, queue, id, avail, now)
  redis.call('SADD', P .. ':queues', queue)
  wake(queue, 1)
  return tonumber(id)
end
"""

# ARGV: prefix, name, tick ('' for a push outside the ticks), mode ('push' or
# 'advance'), skip_if_running ('1'/'0'), then the PUSH arguments of one job (now, 1,
# its nine values). Returns {outcome, id}.
FIRE = _COMMON + _PUSH_ONE + """
local name, tick, mode, check = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local now = ARGV[6]
local s = P .. ':schedule:' .. name
if tick ~= '' then
  if redis.call('HGET', s, 'paused') == '1' then return {'paused', 0} end
  local last = redis.call('HGET', s, 'last_tick')
  if last and last ~= '' and tonumber(last) >= tonumber(tick) then return {'lost', 0} end
  if mode == 'advance' then
    redis.call('HSET', s, 'last_tick', tick)
    return {'advanced', 0}
  end
  if check == '1' then
    local held = redis.call('HGET', s, 'job_id')
    if held and held ~= '' and redis.call('EXISTS', jkey(held)) == 1 then
      redis.call('HSET', s, 'last_tick', tick)
      return {'overlap', 0}
    end
  end
end
-- The push first: a script error in it (Redis keeps what a script wrote before an
-- error) leaves the cursor where it was, so the tick is fired again, not lost.
local id = push_one(7)
if tick ~= '' then
  redis.call('HSET', s, 'last_tick', tick, 'fired_at', tick, 'job_id', id)
else
  redis.call('HSETNX', s, 'last_tick', now)
  redis.call('HSET', s, 'fired_at', now, 'job_id', id)
  redis.call('SADD', P .. ':schedules', name)
end
return {'pushed', id}
"""

# ARGV: prefix, name, paused ('1'/'0'), now. A resumed schedule fires no tick up to now.
PAUSE = """
local s = ARGV[1] .. ':schedule:' .. ARGV[2]
local now = ARGV[4]
redis.call('HSETNX', s, 'last_tick', now)
redis.call('SADD', ARGV[1] .. ':schedules', ARGV[2])
redis.call('HSET', s, 'paused', ARGV[3])
if ARGV[3] == '0' then
  local last = redis.call('HGET', s, 'last_tick')
  if last == '' or tonumber(last) < tonumber(now) then redis.call('HSET', s, 'last_tick', now) end
end
return redis.call('HGETALL', s)
"""


# ARGV: prefix, now, then name and rule_hash of each schedule. A state with another rule
# takes this one and its cursor moves forward to now; one with none takes it and keeps
# its cursor. Returns the names restarted.
DEFINE = """
local P, now = ARGV[1], ARGV[2]
local restarted = {}
for i = 3, #ARGV, 2 do
  local s, rule = P .. ':schedule:' .. ARGV[i], ARGV[i + 1]
  if redis.call('EXISTS', s) == 1 then
    redis.call('SADD', P .. ':schedules', ARGV[i])
    local kept = redis.call('HGET', s, 'rule_hash')
    if kept ~= rule then
      redis.call('HSET', s, 'rule_hash', rule)
      if kept and kept ~= '' then
        local last = redis.call('HGET', s, 'last_tick')
        if not last or last == '' or tonumber(last) < tonumber(now) then
          redis.call('HSET', s, 'last_tick', now)
        end
        table.insert(restarted, ARGV[i])
      end
    end
  end
end
return restarted
"""

# ARGV: prefix, then the names to keep. Marks every other schedule's state REMOVED;
# returns how many it marked.
REMOVE = """
local P = ARGV[1]
local keep = {}
for i = 2, #ARGV do keep[ARGV[i]] = true end
local marked = 0
for _, name in ipairs(redis.call('SMEMBERS', P .. ':schedules')) do
  local s = P .. ':schedule:' .. name
  if not keep[name] then
    if redis.call('EXISTS', s) == 0 then
      redis.call('SREM', P .. ':schedules', name)
    elseif redis.call('HGET', s, 'rule_hash') ~= '""" + REMOVED + """' then
      redis.call('HSET', s, 'rule_hash', '""" + REMOVED + """')
      marked = marked + 1
    end
  end
end
return marked
"""


def _key(store: RedisStore, name: str) -> str:
    return store.key("schedule", name)


calls.register("SCHEDULE_FIRE", FIRE)
calls.register("SCHEDULE_PAUSE", PAUSE)
calls.register("SCHEDULE_DEFINE", DEFINE)
calls.register("SCHEDULE_REMOVE", REMOVE)


def _run(store: RedisStore, script: str, args: Sequence[Any]) -> Any:
    return calls.run(store.client, f"SCHEDULE_{script}", [store.prefix, *args])


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
    return [text(name) for name in _run(store, "DEFINE", [us(now), *pairs])]


def remove(store: RedisStore, keep: Sequence[str]) -> int:
    return int(_run(store, "REMOVE", list(keep)))


def fire(store: RedisStore, step: ScheduleFire) -> Fired:
    if step.tick is None and step.job is None:
        raise ValueError("A ScheduleFire needs a tick, a job, or both.")
    job_args = push_args(str(us(step.job.pushed_at)), [step.job]) if step.job else ["0", 0]
    outcome, job_id = _run(store, "FIRE", [
        step.name, "" if step.tick is None else us(step.tick),
        "push" if step.job is not None else "advance", "1" if step.skip_if_running else "0",
        *job_args,
    ])
    outcome = text(outcome)
    return Fired(outcome, int(job_id) or None if outcome == "pushed" else None)


def pause(store: RedisStore, name: str, paused: bool, now: datetime) -> ScheduleState:
    flat = _run(store, "PAUSE", [name, "1" if paused else "0", us(now)])
    return _state(name, dict(zip(flat[0::2], flat[1::2], strict=True)))
