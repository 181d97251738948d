-- fence.lua: the writes of a partition's owner, applied only while it still owns the partition.
--
-- KEYS[1]   the partition's lease ({<tag>}:lease): its value names the owner and its epoch
-- KEYS[2]   the partition's epoch counter ({<tag>}:epoch)
-- KEYS[3]   the count of the owner's calls applied ({<tag>}:seq)
-- KEYS[4..] every key the writes touch, all under the partition's hash tag (one cluster slot)
-- ARGV[1]   the lease value the owner holds; ARGV[2] its epoch; ARGV[3] the lease TTL (ms)
-- ARGV[4]   the number of this call ("" for a call that may run twice: a lease renewal)
-- ARGV[5]   the number of the call before it ("0" for the first)
-- ARGV[6]   the writes' shapes, 4 bytes each: the index of its key in KEYS, then how many
--           arguments it has, each 2 bytes big-endian (read with string.byte: no tonumber,
--           whose strtod costs more than the write)
-- ARGV[7..] the writes, each as: command, then its arguments
--
-- A lease that lapsed (Redis was away longer than the TTL, or the owner stalled) while nobody
-- claimed the partition (a claim raises the epoch first) is the owner's again. Otherwise a
-- worker that lost the partition gets the error FENCED and writes nothing: the check and the
-- writes are one step. A numbered call already applied (its reply was lost with the
-- connection, and the owner sends it again) is not applied twice: the reply is DONE. A call
-- whose predecessor is missing (a failover lost the owner's latest acknowledged writes: the
-- replica had not received them) is refused with REWOUND: the owner reloads the partition.
-- Returns how many writes were applied (their replies are not read: building them costs).
local owner, applied
if ARGV[4] ~= '' then
  local got = redis.call('MGET', KEYS[1], KEYS[3])
  owner, applied = got[1], got[2] or '0'
else
  owner = redis.call('GET', KEYS[1])
end
if owner ~= ARGV[1] then
  if owner or redis.call('GET', KEYS[2]) ~= ARGV[2] then
    return redis.error_reply('FENCED the partition has another owner')
  end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
end
if ARGV[4] ~= '' then
  if applied ~= ARGV[5] then  -- (the usual case compares strings: no number is parsed)
    if tonumber(applied) >= tonumber(ARGV[4]) then
      return 'DONE'
    end
    return redis.error_reply('REWOUND the partition lost writes it had acknowledged')
  end
  redis.call('SET', KEYS[3], ARGV[4])
end
local shapes, i = ARGV[6], 7
local byte = string.byte
for at = 1, #shapes, 4 do
  local k1, k2, n1, n2 = byte(shapes, at, at + 3)
  local n = n1 * 256 + n2
  redis.call(ARGV[i], KEYS[k1 * 256 + k2], unpack(ARGV, i + 1, i + n))
  i = i + 1 + n
end
return #shapes / 4
