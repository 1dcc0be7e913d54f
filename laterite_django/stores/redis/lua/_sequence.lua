--!include _push_jobs.lua
-- Ordered sequences (core/sequences.py): of the jobs of one key only the head is in its
-- queue's ready or delayed set; the others are held (their hash has 'held' = '1' and is in
-- no set of its queue) in `P:seq:<key>:held`, a zset by job id, and the head's end promotes
-- the next one. `P:seq:<key>` is a hash: head (its job id), failed ('1': the head failed
-- for good and holds the rest). `P:seqs` is the set of keys with a head, `P:seq-failed`
-- that of the held ones. A job of a sequence keeps its key in 'sk' and '1' in 'sc' if its
-- sequence goes on after a failure.
local function skey(key) return P .. ':seq:' .. key end

-- Promote the next held job of `key` still there (due at its own time, or now), or end
-- the sequence if none is left.
local function seq_next(key, now)
  local s = skey(key)
  local held = s .. ':held'
  while true do
    local nxt = redis.call('ZRANGE', held, 0, 0)[1]
    if not nxt then
      redis.call('DEL', s, held)
      redis.call('SREM', P .. ':seqs', key)
      redis.call('SREM', P .. ':seq-failed', key)
      return
    end
    redis.call('ZREM', held, nxt)
    local k = jkey(nxt)
    if redis.call('HGET', k, 'held') == '1' then
      redis.call('HDEL', k, 'held')
      local f = redis.call('HMGET', k, 'queue', 'available_at')
      local avail = f[2]
      if tonumber(avail) < tonumber(now) then avail = now end
      enqueue(k, f[1], nxt, avail, now)
      redis.call('HSET', s, 'head', nxt)
      redis.call('HDEL', s, 'failed')
      redis.call('SREM', P .. ':seq-failed', key)
      wake(f[1], 1)
      return
    end
  end
end

-- Job `id` of `key` left: if it was the head, the next one goes.
local function seq_done(key, id, now)
  if redis.call('HGET', skey(key), 'head') == id then seq_next(key, now) end
end

-- Head `id` of `key` failed for good: the rest wait behind it.
local function seq_hold(key, id)
  local s = skey(key)
  if redis.call('HGET', s, 'head') == id then
    redis.call('HSET', s, 'failed', '1')
    redis.call('SADD', P .. ':seq-failed', key)
  end
end

-- Job `id` (hash `k`) of sequence `key`, pushed a moment ago by push_jobs: the head of
-- its key if it has none (or a retry of the failed head, `retry_of`), else held: out of
-- its queue's sets, in the key's held zset.
local function seq_place(k, id, key, cont, retry_of)
  local s = skey(key)
  local f = redis.call('HMGET', s, 'head', 'failed')
  redis.call('HSET', k, 'sk', key, 'sc', cont)
  if not f[1] or (f[2] == '1' and retry_of ~= '0' and f[1] == retry_of) then
    redis.call('HSET', s, 'head', id)
    redis.call('HDEL', s, 'failed')
    redis.call('SADD', P .. ':seqs', key)
    redis.call('SREM', P .. ':seq-failed', key)
    return
  end
  local h = redis.call('HMGET', k, 'queue', 'member')
  redis.call('ZREM', qkey(h[1], 'ready'), h[2])
  redis.call('ZREM', qkey(h[1], 'delayed'), id)
  redis.call('HSET', k, 'held', '1')
  redis.call('ZADD', s .. ':held', tonumber(id), id)
end

-- Delete finished job `id` under `token` (delete_claimed); a job of a sequence that ran
-- (`mode` 'done'), or failed for good (`mode` 'failed') in a sequence that goes on, lets
-- the next one go; one failed in a sequence that waits holds the rest.
local function seq_delete(id, token, mode, now)
  local k = jkey(id)
  local f = redis.call('HMGET', k, 'sk', 'sc', 'held')
  local code = delete_claimed(id, token)
  if code == 1 and f[1] then
    if f[3] == '1' then
      redis.call('ZREM', skey(f[1]) .. ':held', id)  -- a held job cancelled
    elseif mode == 'done' or f[2] == '1' then
      seq_done(f[1], id, now)
    else
      seq_hold(f[1], id)
    end
  end
  return code
end
