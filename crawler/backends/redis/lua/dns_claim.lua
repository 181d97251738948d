-- dns_claim.lua: a host name's DNS answer shared by the fleet, or else the claim to look it up
-- (dns.py). One step: an answer put between a look and a claim would otherwise be missed, and
-- the name asked again. Returns {answer, its ms left}, 1 (claimed) or 0 (another worker's).
--
-- KEYS[1]   the answer ({<crawl>}:dns:<host>)
-- KEYS[2]   the claim ({<crawl>}:dns:<host>:claim)
-- ARGV[1]   this worker; ARGV[2] the claim's life (ms)
local answer = redis.call('GET', KEYS[1])
if answer then return {answer, redis.call('PTTL', KEYS[1])} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0
