-- fence.lua: the writes of a partition's owner, applied only while it still owns the partition.
--
-- KEYS[1]   the partition's lease ({<tag>}:lease): its value names the owner and its epoch
-- KEYS[2..] every key the writes touch, all under the partition's hash tag (one cluster slot)
-- ARGV[1]   the lease value the owner holds
-- ARGV[2..] the writes, each as: command, index of its key in KEYS, n, then its n arguments
--
-- A worker that lost the partition (its lease expired and another worker took it) gets the
-- error FENCED and writes nothing: the check and the writes are one step. Returns each
-- write's reply, in order.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('FENCED the partition has another owner')
end
local replies, i = {}, 2
while i <= #ARGV do
  local n = tonumber(ARGV[i + 2])
  replies[#replies + 1] = redis.call(ARGV[i], KEYS[tonumber(ARGV[i + 1])],
                                     unpack(ARGV, i + 3, i + 2 + n))
  i = i + 3 + n
end
return replies
