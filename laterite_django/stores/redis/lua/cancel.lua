-- ARGV: prefix, now, token, then job ids. Per id: {id, 'asked'} for a running job
-- (marked), {id, 'cancelled', name, queue, payload, priority, unique_key, attempts,
-- pushed_at, retried_from_id, retried_from_error} for a waiting or delayed one (out of
-- its queue, held under `token` and marked failing), or {id, 'finished'} for none.
--!include _common.lua
local now, token = ARGV[2], ARGV[3]
local out = {}
for i = 4, #ARGV do
  local id = ARGV[i]
  local k = jkey(id)
  if redis.call('EXISTS', k) == 0 then
    out[#out + 1] = {id, 'finished'}
  elseif redis.call('HEXISTS', k, 'token') == 1 then
    redis.call('HSET', k, 'cancel_requested', now)
    out[#out + 1] = {id, 'asked'}
  else
    local f = redis.call('HMGET', k, 'name', 'queue', 'payload', 'priority', 'unique_key',
      'attempts', 'pushed_at', 'retried_from_id', 'retried_from_error', 'member', 'fk')
    local q = f[2]
    count_fair(q, f[11], -1)
    if f[10] then redis.call('ZREM', qkey(q, 'ready'), f[10]) end
    redis.call('ZREM', qkey(q, 'delayed'), id)
    drop_key(k, id)
    redis.call('HSET', k, 'token', token, 'claimed_at', now, 'claimed_by', 'cancel',
      'failing', '1')
    redis.call('ZADD', qkey(q, 'claimed'), now, id)
    wake_idle()  -- claimed until the failed list has it: a sweep may have to finish it
    out[#out + 1] = {id, 'cancelled', f[1], f[2], f[3], f[4], f[5] or '', f[6], f[7],
      f[8] or '', f[9] or ''}
  end
end
return out
