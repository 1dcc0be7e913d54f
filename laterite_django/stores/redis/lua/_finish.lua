--!include _push_jobs.lua
-- The body of finish.lua and finish_limited.lua, whose next links take `width` values
-- each (see push_jobs).
local function finish(width)
  local ended = ARGV[3]
  local out = {}
  local records = {}
  for _, e in ipairs(cjson.decode(ARGV[4])) do
    local id, token, record, jobs = e[1], e[2], e[3], e[4]
    local code = delete_claimed(id, token)
    if code == 1 then
      if record ~= '' then records[#records + 1] = record end
      if #jobs > 0 then push_jobs(jobs, nil, width) end
    end
    out[#out + 1] = code
  end
  if #records > 0 then
    -- One item for the ends of this call, separated by spaces: the counting process
    -- reads and parses one string per call, not one per job.
    redis.call('RPUSH', ended, table.concat(records, ' '))
    redis.call('SADD', P .. ':ended-lists', ended)
  end
  return out
end
