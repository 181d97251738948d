-- fence.lua: a partition owner's writes, applied only while it still owns the partition; one
-- call may carry the writes of n partitions of one owner (on one server).
--
-- KEYS[1], KEYS[2]  partition 1's lease ({<tag>}:lease, valued <owner>/<epoch>) and count of
--           the owner's calls applied ({<tag>}:seq); KEYS[2j-1], KEYS[2j] partition j's
-- KEYS[2n+j] partition j's epoch counter ({<tag>}:epoch); KEYS[3n+1..] the writes' keys
-- ARGV[1]   the header, 2 bytes big-endian each (string.byte: tonumber's strtod costs more
--           than a write): n, then each partition's number of writes
-- ARGV[5j-3..5j+1] partition j's lease value, epoch, lease TTL (ms), this call's number ("":
--           a call that may run twice, a lease renewal) and the previous call's
-- ARGV[5n+2] the writes' shapes, 4 bytes each: its key's index in KEYS, its argument count
-- ARGV[5n+3..] the writes, each a command then its arguments
--
-- Every partition is checked first: a lost lease is FENCED, a call whose predecessor is
-- missing (a failover lost acknowledged writes) REWOUND; either error names the partitions
-- (j) and nothing is written. A lapsed lease nobody claimed since (a claim raises the epoch)
-- is the owner's again. A numbered call already applied (sent again after a lost reply) has
-- its writes skipped. Returns "" or, if some were skipped, one byte per partition ("1":
-- skipped). Tables are made only where they must be: each costs more than a write.
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
