-- fence.lua: the writes of a partition's owner, applied only while it still owns the partition.
--
-- KEYS[1]   the partition's lease ({<tag>}:lease): its value names the owner and its epoch
-- KEYS[2]   the partition's epoch counter ({<tag>}:epoch)
-- KEYS[3]   the count of the owner's calls applied ({<tag>}:seq)
-- KEYS[4..] every key the writes touch, all under the partition's hash tag (one cluster slot)
-- ARGV[1]   the lease value the owner holds; ARGV[2] its epoch; ARGV[3] the lease TTL (ms)
-- ARGV[4]   the number of this call ("" for a call that may run twice: a lease renewal)
-- ARGV[5..] the writes, each as: command, index of its key in KEYS, n, then its n arguments
--
-- A lease that lapsed (Redis was away longer than the TTL, or the owner stalled) while nobody
-- claimed the partition (a claim raises the epoch first) is the owner's again. Otherwise a
-- worker that lost the partition gets the error FENCED and writes nothing: the check and the
-- writes are one step. A numbered call already applied (its reply was lost with the
-- connection, and the owner sends it again) is not applied twice: the reply is DONE. A call
-- whose predecessor is missing (a failover lost the owner's latest acknowledged writes: the
-- replica had not received them) is refused with REWOUND: the owner reloads the partition.
-- Returns each write's reply, in order.
local owner = redis.call('GET', KEYS[1])
if owner ~= ARGV[1] then
  if owner or redis.call('GET', KEYS[2]) ~= ARGV[2] then
    return redis.error_reply('FENCED the partition has another owner')
  end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
end
if ARGV[4] ~= '' then
  local applied = tonumber(redis.call('GET', KEYS[3]) or '0')
  if applied >= tonumber(ARGV[4]) then
    return 'DONE'
  end
  if applied < tonumber(ARGV[4]) - 1 then
    return redis.error_reply('REWOUND the partition lost writes it had acknowledged')
  end
  redis.call('SET', KEYS[3], ARGV[4])
end
local replies, i = {}, 5
while i <= #ARGV do
  local n = tonumber(ARGV[i + 2])
  replies[#replies + 1] = redis.call(ARGV[i], KEYS[tonumber(ARGV[i + 1])],
                                     unpack(ARGV, i + 3, i + 2 + n))
  i = i + 3 + n
end
return replies
