-- ARGV: prefix, batch id, queue, 'ready' or 'delayed', start, count, the caller's list
-- of ends. Looks at `count` jobs of that set from index `start` and removes those of
-- the batch (not claimed: a claimed job is in neither set), listing each one's end
-- as FINISH does. Returns {removed, looked at}.
--!include _common.lua
local batch, q, kind = ARGV[2], ARGV[3], ARGV[4]
local start, count, ended = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local set = qkey(q, kind)
local members = redis.call('ZRANGE', set, start, start + count - 1)
local removed = 0
for _, m in ipairs(members) do
  local id = m
  if kind == 'ready' then id = member_id(m) end
  local k = jkey(id)
  local payload = redis.call('HGET', k, 'payload')
  local b, pos = nil, nil
  -- The mark is the payload's last key (workflows.marks): a list in the arguments
  -- that looks like it is not taken for it.
  if payload then b, pos = string.match(payload, '"batch":%[(%d+),(%d+)%]}$') end
  if b == batch then
    drop_key(k, id)
    count_fair(q, redis.call('HGET', k, 'fk'), -1)
    redis.call('ZREM', set, m)
    redis.call('DEL', k)
    redis.call('RPUSH', ended, '[' .. b .. ',' .. pos .. ']')
    redis.call('SADD', P .. ':ended-lists', ended)
    removed = removed + 1
  end
end
return {removed, #members}
