-- push.lua for jobs of which some are of a sequence: push_fair.lua's packed values (13 a
-- job) in ARGV[3], the marks in ARGV[4], then ARGV[5]: one JSON array, per job {} or
-- {key, '1'/'0' (goes on after a failure), the failed job it retries or '0'}; each job
-- of a sequence is its head or held behind it (see _sequence.lua). ARGV[6..8]: the
-- sender, the push's number, '1' if sent again (resend.py). Returns the ids.
--!include _sequence.lua
local sent, number = P .. ':sent:' .. ARGV[6], ARGV[7]
if ARGV[8] == '1' then
  local last = redis.call('GET', sent)
  if last and string.sub(last, 1, #number + 1) == number .. ':' then
    return cjson.decode(string.sub(last, #number + 2))
  end
end
local ids = push_jobs(cjson.decode(ARGV[3]), ARGV[4] ~= '' and cjson.decode(ARGV[4]) or nil, 13)
local seqs = cjson.decode(ARGV[5])
for i, s in ipairs(seqs) do
  if s[1] and ids[i] ~= 0 then
    local id = tostring(ids[i])
    seq_place(jkey(id), id, s[1], s[2], s[3])
  end
end
redis.call('SET', sent, number .. ':' .. cjson.encode(ids), 'EX', ${SENT_TTL})
return ids
