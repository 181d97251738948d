-- neardup_commit.lua: one near-duplicate decision recorded, if nothing it depended on changed
-- since the worker read it (crawler/backends/redis/neardup.py decides; this only checks and
-- writes). Every key is under the crawl's near-duplicate tag ({<crawl>}:nd): one cluster slot.
--
-- KEYS[1] :v (seq, forget, floor, epoch)   KEYS[2] :next   KEYS[3] :tp   KEYS[4] :hc   KEYS[5] :pend
-- KEYS[6] :recent   KEYS[7] the URL's :u bucket   KEYS[8] the fingerprint's :f bucket
-- KEYS[9] the :f bucket of the fingerprint the URL's original had (refetched)
-- KEYS[10], KEYS[11] the :o and :r chunks of the URL's id (refetched) or of the next id
-- KEYS[12], KEYS[13] the :o and :r chunks after those (a new id may land in either)
-- KEYS[14..16] the host's template :t, its model's snapshot :ts and log :tl
-- ARGV[1], packed big-endian (each argument costs Redis ~1,000 instructions; one unpack far
-- less): host id, own id, owner, forget, next, seq (as read), template length read, MAXP, model
-- version (-1: no lesson), ids per chunk, first chunk number, RECENT. ARGV[2], each string
-- after its 4-byte length: action, host, URL field, fingerprint, its field, anchors, their
-- postings' lengths, (host id, template length) of each candidate's host, record payload, log
-- entry, blocks made template, snapshot, old fingerprint and its field, the worker's epoch
-- (the state's, if it has none yet).
-- Returns {'retry'} or {'ok', pages, duplicates, seq, host id, store key, element}.
local hid, own_seen, owner_seen, forget_seen, next_seen, seq_seen, tlen_seen, MAXP, learned,
  SLOTS, chunk, RECENT = struct.unpack('>I4I4I4I4I4I8I4I4i4I4I4I4', ARGV[1])
local action, host, ufield, fp, ffield, anchors, lens, checks, payload, entry, made, snapshot,
  old_fp, old_field, epoch = struct.unpack('>' .. string.rep('I4c0', 15), ARGV[2])
local HOSTS = 2 ^ 26  -- :hc packs a host's pages and duplicates as pages * HOSTS + duplicates
local SHIFT = 2 ^ 24  -- :tp packs a host's pages learned * SHIFT + its template length
local ENTRY = 12  -- an :o entry: the original's fingerprint (8 bytes) and host id (4)
local TRIM = 64  -- entries :recent sheds at once, past RECENT (its floor: the newest shed)

local function meta(h)
  local m = tonumber(redis.call('HGET', KEYS[3], h) or 0)
  return math.floor(m / SHIFT), m % SHIFT
end

-- what the decision read must be as it was: certainly so if nothing was committed since
local v = redis.call('HMGET', KEYS[1], 'seq', 'forget', 'floor', 'epoch')
local seq, forget = tonumber(v[1] or 0), tonumber(v[2] or 0)
if seq ~= seq_seen then
  local pages, tlen = meta(hid)
  if tlen ~= tlen_seen then return {'retry'} end
  if learned >= 0 and pages ~= learned then return {'retry'} end
  if tonumber(redis.call('HGET', KEYS[7], ufield) or 0) ~= own_seen then return {'retry'} end
  if forget ~= forget_seen then return {'retry'} end
  if fp ~= '' and tonumber(redis.call('HGET', KEYS[8], ffield) or 0) ~= owner_seen then
    return {'retry'}
  end
  for i = 1, #checks, 8 do
    local h, n = struct.unpack('>I4I4', checks, i)
    local _, now = meta(h)
    if now ~= n then return {'retry'} end
  end
  if #lens > 0 then
    -- originals stored since the read: did one take a posting of an anchor of this page
    -- (one with fewer than MAXP postings, whose list it would change)?
    if tonumber(v[3] or 0) > next_seen then return {'retry'} end
    local mine, any = {}, false
    for i = 1, #lens do
      if string.byte(lens, i) < MAXP then
        mine[string.sub(anchors, 4 * i - 3, 4 * i)] = true
        any = true
      end
    end
    -- each commit since the read stored at most one original: read no more entries (each
    -- read costs Redis ~1,500 instructions) than commits happened, 32 at most at a time
    local newer = seq - seq_seen
    local from, more = 0, any
    while more and from < newer do
      local n = math.min(newer - from, 32)
      local got = redis.call('LRANGE', KEYS[6], from, from + n - 1)
      more = #got == n
      for _, e in ipairs(got) do
        if struct.unpack('>I4', e) <= next_seen then more = false break end
        for j = 5, #e, 4 do
          if mine[string.sub(e, j, j + 3)] then return {'retry'} end
        end
      end
      from = from + n
    end
  end
end

local function teach()  -- what the worker learned into its copy of the host's model
  if learned < 0 then return end
  if snapshot ~= '' then  -- a pruning: the snapshot replaces the log so far
    redis.call('SET', KEYS[15], snapshot)
    redis.call('DEL', KEYS[16])
  else
    redis.call('RPUSH', KEYS[16], entry)
  end
  redis.call('HINCRBY', KEYS[3], hid, SHIFT + #made / 4)
  if made ~= '' then redis.call('APPEND', KEYS[14], made) end
end

local function counts(dup, k, elem)
  local c = redis.call('HINCRBY', KEYS[4], host, HOSTS + (dup and 1 or 0))
  return {'ok', math.floor(c / HOSTS), c % HOSTS, redis.call('HINCRBY', KEYS[1], 'seq', 1), hid,
          k or 0, elem or ''}
end

if not v[4] then redis.call('HSET', KEYS[1], 'epoch', epoch) end  -- names this state
if action == 'unchanged' then return counts(false) end
local id, okey, rkey = own_seen, KEYS[10], KEYS[11]
if id == 0 then
  id = redis.call('INCR', KEYS[2])
  if action == 'new' then  -- its record goes in a chunk the worker declared
    local c = math.floor(id / SLOTS)
    if c == chunk + 1 then okey, rkey = KEYS[12], KEYS[13]
    elseif c ~= chunk then
      redis.call('DECR', KEYS[2])
      return {'retry'}
    end
  end
  redis.call('HSET', KEYS[7], ufield, id)
else
  local at = (id % SLOTS) * ENTRY
  local was = redis.call('GETRANGE', okey, at, at + 7)
  if #was == 8 and was ~= string.rep('\0', 8) then  -- a refetched original: what it said goes
    if was ~= old_fp then return {'retry'} end  -- (the worker read another version of it)
    if tonumber(redis.call('HGET', KEYS[9], old_field) or 0) == id then
      redis.call('HDEL', KEYS[9], old_field)
    end
    redis.call('SETRANGE', okey, at, string.rep('\0', ENTRY))
    redis.call('HDEL', rkey, id)
    redis.call('HINCRBY', KEYS[1], 'forget', 1)
  end
end
if action == 'new' then
  if redis.call('STRLEN', okey) == 0 then  -- a chunk is allocated whole, once
    redis.call('SETRANGE', okey, ENTRY * SLOTS - 1, '\0')
  end
  redis.call('SETRANGE', okey, (id % SLOTS) * ENTRY, fp .. struct.pack('>I4', hid))
  redis.call('HSET', rkey, id, fp .. struct.pack('>I4', hid) .. payload)
  redis.call('HSET', KEYS[8], ffield, id)
  -- its postings: under its id, or (stored again under an id it had) a fresh store key
  local k, elem = id, struct.pack('>I4', id)
  if own_seen ~= 0 then
    k = redis.call('INCR', KEYS[2])
    elem = struct.pack('>I4I4', k + 2147483648, id)
  end
  if #anchors > 0 then
    redis.call('HSET', KEYS[5], k, elem .. anchors)
    if redis.call('LPUSH', KEYS[6], struct.pack('>I4', k) .. anchors) > RECENT + TRIM then
      local gone = redis.call('RPOP', KEYS[6], TRIM)  -- the oldest, the newest of them last
      redis.call('HSET', KEYS[1], 'floor', (struct.unpack('>I4', gone[#gone])))
    end
  end
  teach()
  return counts(false, k, elem)
elseif action == 'near' then
  teach()
end
return counts(action == 'exact' or action == 'near')
