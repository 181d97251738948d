-- fence.lua: the writes of a partition's owner, applied only while it still owns the partition;
-- one call may carry the writes of several partitions of one owner (on one server).
--
-- KEYS[1], KEYS[2]  partition 1's lease ({<tag>}:lease: its value names the owner and its
--           epoch) and count of the owner's calls applied ({<tag>}:seq); KEYS[2j-1], KEYS[2j]
--           partition j's, for j = 1..n
-- KEYS[2n+j] partition j's epoch counter ({<tag>}:epoch)
-- KEYS[3n+1..] every key the writes touch
-- ARGV[1]   the header, 2 bytes big-endian each (read with string.byte: no tonumber, whose
--           strtod costs more than a write): n, then each partition's number of writes
-- ARGV[5j-3..5j+1] partition j's lease value, epoch, lease TTL (ms), the number of this call
--           ("" for a call that may run twice: a lease renewal) and of the call before it
-- ARGV[5n+2] the writes' shapes, 4 bytes each: the index of its key in KEYS, then how many
--           arguments it has; the writes of partition 1 first, then of 2...
-- ARGV[5n+3..] the writes, each as: command, then its arguments
--
-- Checked first, for every partition: a worker that lost one gets the error FENCED, and a call
-- whose predecessor is missing (a failover lost the owner's latest acknowledged writes) gets
-- REWOUND (the owner reloads the partition); either names the partitions (j) and writes
-- nothing. A lease that lapsed (Redis away longer than the TTL, or the owner stalled) while
-- nobody claimed the partition (a claim raises the epoch first) is the owner's again. A
-- numbered call already applied (its reply was lost, and the owner sends it again) has its
-- partition's writes skipped. Returns "" or, when some were skipped, one byte per partition
-- ("1": skipped). Tables are made only where they must be: each costs more than a write.
local byte, head = string.byte, ARGV[1]
local h1, h2 = byte(head, 1, 2)
local n = h1 * 256 + h2
local got = redis.call('MGET', unpack(KEYS, 1, 2 * n))
local fenced, rewound, done = '', '', nil
for j = 1, n do
  local a, owner, applied = 5 * j - 3, got[2 * j - 1], got[2 * j] or '0'
  if owner ~= ARGV[a] and (owner or redis.call('GET', KEYS[2 * n + j]) ~= ARGV[a + 1]) then
    fenced = fenced .. ' ' .. j
  end
  -- (the usual case compares strings: no number is parsed)
  if ARGV[a + 3] ~= '' and applied ~= ARGV[a + 4] then
    if tonumber(applied) < tonumber(ARGV[a + 3]) then
      rewound = rewound .. ' ' .. j
    else
      done = done or {}
      done[j] = true
    end
  end
end
if fenced ~= '' then return redis.error_reply('FENCED' .. fenced) end
if rewound ~= '' then return redis.error_reply('REWOUND' .. rewound) end
local shapes, i, at, skipped = ARGV[5 * n + 2], 5 * n + 3, 1, ''
for j = 1, n do
  local a, skip = 5 * j - 3, done and done[j]
  if got[2 * j - 1] ~= ARGV[a] then  -- a lapsed lease, taken back
    redis.call('SET', KEYS[2 * j - 1], ARGV[a], 'PX', ARGV[a + 2])
  end
  if ARGV[a + 3] ~= '' and not skip then redis.call('SET', KEYS[2 * j], ARGV[a + 3]) end
  local w1, w2 = byte(head, 2 * j + 1, 2 * j + 2)
  local last = at + 4 * (w1 * 256 + w2)
  for s = at, last - 1, 4 do
    local k1, k2, c1, c2 = byte(shapes, s, s + 3)
    local c = c1 * 256 + c2
    if not skip then redis.call(ARGV[i], KEYS[k1 * 256 + k2], unpack(ARGV, i + 1, i + c)) end
    i = i + 1 + c
  end
  at = last
  skipped = done and skipped .. (skip and '1' or '0') or ''
end
return skipped
