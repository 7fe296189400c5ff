package breaker

import "github.com/redis/go-redis/v9"

// Both scripts read the clock of the Redis server (TIME), so replicas with
// skewed clocks agree on windows and deadlines. Results:
// {decision, ms, gen, state, transition, outage[, calls, failures]}, where
// outage is how long (ms) the breaker has not been closed: since it opened
// from closed, across reopenings (the field outage holds when that was).

// allowScript decides whether one delivery may be attempted.
//
//	KEYS[1] state hash
//	ARGV[1] probes handed out per half-open period
//	ARGV[2] probe deadline (ms): when probes that never reported are replaced
//	ARGV[3] state hash TTL (ms)
//
// decision: 0 blocked (ms = how long until the breaker may let one through),
// 1 allowed, 2 allowed as a probe of half-open period gen.
var allowScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call('HMGET', KEYS[1], 'state', 'until', 'gen', 'outage')
local state = v[1]
if not state or state == 'closed' then
  return {1, 0, 0, 'closed', '', 0}
end
local untilms = tonumber(v[2]) or 0
local gen = tonumber(v[3]) or 0
local started = tonumber(v[4]) or 0
local outage = 0
if started > 0 then
  outage = now - started
end
local transition = ''
if state == 'open' then
  if now < untilms then
    return {0, untilms - now, gen, 'open', '', outage}
  end
  state = 'half_open'
  transition = 'half_open'
  gen = gen + 1
  untilms = now + tonumber(ARGV[2])
  redis.call('HSET', KEYS[1], 'state', state, 'until', untilms, 'since', now, 'gen', gen, 'tokens', ARGV[1], 'ok', 0)
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
elseif now >= untilms then
  -- Half-open, and the probes never reported (their deliverer died):
  -- hand out new ones; results of the old ones no longer count.
  gen = gen + 1
  untilms = now + tonumber(ARGV[2])
  redis.call('HSET', KEYS[1], 'until', untilms, 'gen', gen, 'tokens', ARGV[1], 'ok', 0)
end
if redis.call('HINCRBY', KEYS[1], 'tokens', -1) < 0 then
  redis.call('HINCRBY', KEYS[1], 'tokens', 1)
  return {0, untilms - now, gen, state, transition, outage}
end
return {2, 0, gen, state, transition, outage}
`)

// recordScript counts attempts' results and moves the breaker: the
// successes a replica gathered since its last call, and at most one failure
// or probe, which alone can move it (a batch of successes only counts).
//
//	KEYS[1] state hash, KEYS[2] call counts, KEYS[3] failing-since (deleted on success)
//	ARGV[1] successes                     ARGV[10] failures (0 or 1)
//	ARGV[2] half-open period of the probe, 0 when the attempt was no probe
//	ARGV[3] failure threshold (percent)   ARGV[4] minimum calls
//	ARGV[5] window (ms)                   ARGV[6] bucket (ms)
//	ARGV[7] sleep window (ms)             ARGV[8] probes that must succeed
//	ARGV[9] state hash TTL (ms)
//
// transition: empty, or opened (closed -> open), reopened (a probe failed),
// closed (the probes succeeded). ms is how long an open breaker stays open.
var recordScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local successes = tonumber(ARGV[1])
local failed = tonumber(ARGV[10])
local ok = failed == 0
local window = tonumber(ARGV[5])
local bucket = tonumber(ARGV[6])
if successes > 0 then
  redis.call('DEL', KEYS[3])
end
local b = math.floor(now / bucket)
redis.call('HINCRBY', KEYS[2], 't:' .. b, successes + failed)
if not ok then
  redis.call('HINCRBY', KEYS[2], 'f:' .. b, failed)
end
redis.call('HSET', KEYS[2], 'window_ms', window, 'bucket_ms', bucket)
redis.call('PEXPIRE', KEYS[2], window + bucket)
local oldest = b - math.ceil(window / bucket) + 1
local calls, failures = 0, 0
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local kind = string.sub(all[i], 1, 2)
  if kind == 't:' or kind == 'f:' then
    if tonumber(string.sub(all[i], 3)) < oldest then
      redis.call('HDEL', KEYS[2], all[i])
    elseif kind == 't:' then
      calls = calls + tonumber(all[i + 1])
    else
      failures = failures + tonumber(all[i + 1])
    end
  end
end
local v = redis.call('HMGET', KEYS[1], 'state', 'until', 'gen', 'outage', 'closed_until')
local state = v[1] or 'closed'
local untilms = tonumber(v[2]) or 0
local gen = tonumber(v[3]) or 0
local outage = tonumber(v[4]) or 0
local forced = tonumber(v[5]) or 0
local probe = tonumber(ARGV[2])
local transition = ''
if state == 'closed' then
  -- An operator forced it closed until closed_until: failures do not open it.
  if not ok and now >= forced and calls >= tonumber(ARGV[4]) and failures * 100 >= tonumber(ARGV[3]) * calls then
    state = 'open'
    transition = 'opened'
  end
elseif state == 'half_open' and probe > 0 and probe == gen then
  if not ok then
    state = 'open'
    transition = 'reopened'
  elseif redis.call('HINCRBY', KEYS[1], 'ok', 1) >= tonumber(ARGV[8]) then
    state = 'closed'
    transition = 'closed'
    untilms = 0
    redis.call('HSET', KEYS[1], 'state', 'closed', 'until', 0, 'since', now, 'tokens', 0, 'ok', 0, 'outage', 0)
    redis.call('PEXPIRE', KEYS[1], ARGV[9])
    -- A fresh window: the failures that opened it are history.
    redis.call('DEL', KEYS[2])
    calls, failures = 0, 0
  end
end
if state == 'open' and transition ~= '' then
  untilms = now + tonumber(ARGV[7])
  redis.call('HSET', KEYS[1], 'state', 'open', 'until', untilms, 'since', now, 'gen', gen, 'tokens', 0, 'ok', 0)
  if transition == 'opened' or outage == 0 then
    outage = now
    redis.call('HSET', KEYS[1], 'outage', now)
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[9])
end
local left, age = 0, 0
if state ~= 'closed' then
  left = math.max(untilms - now, 0)
  if outage > 0 then
    age = now - outage
  end
end
return {0, left, gen, state, transition, age, calls, failures}
`)
