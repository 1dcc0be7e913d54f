-- ARGV: prefix, now, then name and rule_hash of each schedule. A state with another rule
-- takes this one and its cursor moves forward to now; one with none takes it and keeps
-- its cursor. Returns the names restarted.
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
