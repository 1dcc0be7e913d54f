-- ARGV: prefix, now, token, worker, limit, again, then the queue names in priority
-- order. Moves due delayed jobs to ready first. Returns one array per claimed job, in
-- the order the worker runs them: id, attempts, name, queue, payload, pushed_at,
-- retry_until, unique_key, priority, last_error, available_at, position (0, 1...),
-- uncounted (false if never set), cancel_requested (false unless a cancel is pending).
--!include _claim.lua
return claim({unpack(ARGV, 7)}, function(q)
  local ready = qkey(q, 'ready')
  while #out < limit do
    local members = redis.call('ZRANGE', ready, 0, limit - #out - 1)
    if #members == 0 then break end
    for _, m in ipairs(members) do
      redis.call('ZREM', ready, m)
      local id = member_id(m)
      local k = jkey(id)
      if redis.call('EXISTS', k) == 1 then take(q, k, id) end
    end
  end
end)
