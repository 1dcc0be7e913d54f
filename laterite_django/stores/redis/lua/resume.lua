-- ARGV: prefix, then queue names. Unpauses them and wakes their idle workers.
--!include _common.lua
for i = 2, #ARGV do
  redis.call('SREM', P .. ':paused', ARGV[i])
  wake(ARGV[i], ${WAKE_CAP})
end
return 1
