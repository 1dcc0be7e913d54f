-- ARGV: prefix, then the names to keep. Marks every other schedule's state REMOVED;
-- returns how many it marked.
local P = ARGV[1]
local keep = {}
for i = 2, #ARGV do keep[ARGV[i]] = true end
local marked = 0
for _, name in ipairs(redis.call('SMEMBERS', P .. ':schedules')) do
  local s = P .. ':schedule:' .. name
  if not keep[name] then
    if redis.call('EXISTS', s) == 0 then
      redis.call('SREM', P .. ':schedules', name)
    elseif redis.call('HGET', s, 'rule_hash') ~= '${REMOVED}' then
      redis.call('HSET', s, 'rule_hash', '${REMOVED}')
      marked = marked + 1
    end
  end
end
return marked
