-- ARGV: prefix, queue ('' for every queue), the caller's list of ends. Deletes every
-- waiting and running job; those of a batch are listed there as failed ends.
--!include _common.lua
local queues
if ARGV[2] == '' then queues = redis.call('SMEMBERS', P .. ':queues') else queues = {ARGV[2]} end
local count = 0
local ended = ARGV[3]
local function forget(id)
  local k = jkey(id)
  if redis.call('EXISTS', k) == 1 then
    -- A job of a batch is listed as a failed end, counted by the caller (RedisStore.clear).
    local payload = redis.call('HGET', k, 'payload')
    local b, pos = nil, nil
    if payload then b, pos = string.match(payload, '"batch":%[(%d+),(%d+)%]}$') end
    if b then
      redis.call('RPUSH', ended, '[' .. b .. ',' .. pos .. ',1]')
      redis.call('SADD', P .. ':ended-lists', ended)
    end
    drop_key(k, id)
    redis.call('DEL', k)
    count = count + 1
  end
end
for _, q in ipairs(queues) do
  for _, m in ipairs(redis.call('ZRANGE', qkey(q, 'ready'), 0, -1)) do forget(member_id(m)) end
  for _, kind in ipairs({'delayed', 'claimed'}) do
    for _, id in ipairs(redis.call('ZRANGE', qkey(q, kind), 0, -1)) do forget(id) end
  end
  -- Its fair turns too: nothing waits, so its line starts again (see prune_fair.lua).
  redis.call('DEL', qkey(q, 'ready'), qkey(q, 'delayed'), qkey(q, 'claimed'), qkey(q, 'wake'),
    qkey(q, 'fairn'), qkey(q, 'fair'))
  redis.call('SREM', P .. ':queues', q)
end
return count
