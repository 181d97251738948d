-- neardup_commit.lua: one near-duplicate decision recorded, if nothing it depended on changed
-- since the worker read it (crawler/backends/redis/neardup.py decides; this only checks and
-- writes). Every key is under the crawl's near-duplicate tag ({<crawl>}:nd): one cluster slot.
--
-- KEYS[1] :v (seq, forget, floor, epoch; per host id its model's pages and template length)
-- KEYS[2] :hc   KEYS[3] :pend   KEYS[4] :recent   KEYS[5] the URL's :u bucket   KEYS[6] the
-- fingerprint's :f bucket   KEYS[7] the :r chunk of the URL's id (refetched) or of the next id;
-- then, only where used (each key costs Redis ~1,300 instructions): the next :r chunk
-- (flag 1: a new id may land there), the old fingerprint's :f bucket, the host's model log :tl,
-- template :t and snapshot :ts. A new original's anchor postings are written after, by its
-- worker (neardup_anchors.py).
-- ARGV[1], packed big-endian (each argument, and each value of an unpack, costs Redis ~1,000
-- instructions: a Lua string made): host id, own id, owner, forget, seq (as read), template
-- length read, MAXP, model version (-1: no lesson), ids per chunk, first chunk number, RECENT,
-- flags; then each string after its 4-byte length: action, host, URL field, fingerprint, its
-- field, anchors, their postings' lengths, (host id, template length) of each candidate's
-- host, log entry, blocks made template, snapshot, old fingerprint and its field, the worker's
-- epoch (the state's, if it has none yet), the host id in decimal. ARGV[2]: a new original's
-- record (apart: a copy of it in Lua costs Redis more).
-- Numbers given to redis.call go as strings (string.format '%d'): Redis formats a Lua number
-- with '%.17g', ~2,000 instructions.
-- Returns '' (retry) or, packed big-endian, the host's counts (8 bytes: pages * 2^26 +
-- duplicates), seq (8), the store key (4) and the posting element: one string, which Redis
-- converts for ~1,000 instructions where a table of seven cost ~7,000.
local hid, own_seen, owner_seen, forget_seen, seq_seen, tlen_seen, MAXP, learned,
  SLOTS, chunk, RECENT, flags, action, host, ufield, fp, ffield, anchors, lens, checks, entry,
  made, snapshot, old_fp, old_field, epoch, hids = struct.unpack(
  '>I4I4I4I4I8I4I4i4I4I4I4I4I4c0I4c0I4c0I4c0I4c0I4c0I4c0I4c0I4c0I4c0I4c0I4c0I4c0I4c0I4c0',
  ARGV[1])
local record = ARGV[2]
local SHIFT = 2 ^ 24  -- :v packs a host's pages learned * SHIFT + its template length
local TRIM = 64  -- entries :recent sheds at once, past RECENT (its floor: the newest shed)
-- the optional keys, in their order (KEYS[0]: nil, a key not given)
local last = 7
local function given(yes)
  if not yes then return 0 end
  last = last + 1
  return last
end
local near = flags % 2 == 1
local nxt = given(near)  -- the next :r chunk: KEYS[nxt] (0: not given)
local old_key = KEYS[given(old_fp ~= '')]
local log_key = KEYS[given(learned >= 0)]
local template_key = KEYS[given(made ~= '')]
local snapshot_key = KEYS[given(snapshot ~= '')]

-- the commit takes its place in the order at once; a refused one gives it back
local seq = redis.call('HINCRBY', KEYS[1], 'seq', '1')
local function retry()
  redis.call('HINCRBY', KEYS[1], 'seq', '-1')
  return ''
end

-- what the decision read must be as it was: certainly so if nothing was committed since
if seq - 1 ~= seq_seen then
  local function meta(m)  -- a host's (pages learned, template length) from its :v field
    m = tonumber(m or 0)
    return math.floor(m / SHIFT), m % SHIFT
  end
  local v = redis.call('HMGET', KEYS[1], 'forget', 'floor', hids)
  local pages, tlen = meta(v[3])
  if tlen ~= tlen_seen then return retry() end
  if learned >= 0 and pages ~= learned then return retry() end
  if tonumber(redis.call('HGET', KEYS[5], ufield) or 0) ~= own_seen then return retry() end
  if tonumber(v[1] or 0) ~= forget_seen then return retry() end
  if fp ~= '' and tonumber(redis.call('HGET', KEYS[6], ffield) or 0) ~= owner_seen then
    return retry()
  end
  for i = 1, #checks, 8 do
    local h, n = struct.unpack('>I4I4', checks, i)
    local _, now = meta(redis.call('HGET', KEYS[1], string.format('%d', h)))
    if now ~= n then return retry() end
  end
  if #lens > 0 then
    -- originals stored since the read: did one take a posting of an anchor of this page
    -- (one with fewer than MAXP postings, whose list it would change)?
    if tonumber(v[2] or 0) > seq_seen then return retry() end
    local mine, any = {}, false
    for i = 1, #lens do
      if string.byte(lens, i) < MAXP then
        mine[string.sub(anchors, 4 * i - 3, 4 * i)] = true
        any = true
      end
    end
    -- each commit since the read stored at most one original: read no more entries (each
    -- read costs Redis ~1,500 instructions) than commits happened, 32 at most at a time
    local newer = seq - 1 - seq_seen
    local from, more = 0, any
    while more and from < newer do
      local n = math.min(newer - from, 32)
      local got = redis.call('LRANGE', KEYS[4], from, from + n - 1)
      more = #got == n
      for _, e in ipairs(got) do
        if struct.unpack('>I4', e) <= seq_seen then more = false break end
        for j = 5, #e, 4 do
          if mine[string.sub(e, j, j + 3)] then return retry() end
        end
      end
      from = from + n
    end
  end
end

local function teach()  -- what the worker learned into its copy of the host's model
  if learned < 0 then return end
  if snapshot ~= '' then  -- a pruning: the snapshot replaces the log so far
    redis.call('SET', snapshot_key, snapshot)
    redis.call('DEL', log_key)
  else
    redis.call('RPUSH', log_key, entry)
  end
  redis.call('HINCRBY', KEYS[1], hids, made == '' and '16777216'  -- (SHIFT)
    or string.format('%d', SHIFT + #made / 4))
  if made ~= '' then redis.call('APPEND', template_key, made) end
end

local function counts(dup, k, elem)  -- :hc packs pages * 2^26 + duplicates
  local c = redis.call('HINCRBY', KEYS[2], host, dup and '67108865' or '67108864')
  if seq == 1 then  -- names this state; forget and floor first, where a read finds them soon
    -- a value past hash-max-listpack-value (64 B) makes :v and :hc hashtables: a field (a host)
    -- found without scanning the others, ~4,000 instructions less a look-up at 40 hosts
    local wide = string.rep('.', 65)
    redis.call('HSET', KEYS[1], 'epoch', epoch, 'forget', '0', 'floor', '0', 'hashtable', wide)
    redis.call('HSET', KEYS[2], ' hashtable', wide)
  end
  return struct.pack('>I8I8I4', c, seq, k or 0) .. (elem or '')
end

if action == 'unchanged' then return counts(false) end
local id, at = own_seen, 7  -- its :r chunk: KEYS[at]
local ids
if id == 0 then
  id = seq  -- a new URL's id is its commit's place (a refused commit gives it back)
  local past = id - (chunk + 1) * SLOTS  -- (a new id is in the worker's chunk or after)
  if action == 'new' and past >= 0 then  -- its record goes in a chunk the worker declared
    if past >= SLOTS or not near then return retry() end
    at = nxt
  end
  ids = string.format('%d', id)
  redis.call('HSET', KEYS[5], ufield, ids)
else
  ids = string.format('%d', id)
  local was = redis.call('HGET', KEYS[at], ids)
  if was then  -- a refetched original: what it said goes
    if string.sub(was, 1, 8) ~= old_fp then return retry() end  -- (another version read)
    if tonumber(redis.call('HGET', old_key, old_field) or 0) == id then
      redis.call('HDEL', old_key, old_field)
    end
    if action ~= 'new' then redis.call('HDEL', KEYS[at], ids) end
    redis.call('HINCRBY', KEYS[1], 'forget', '1')
  end
end
if action == 'new' then
  redis.call('HSET', KEYS[at], ids, record)
  redis.call('HSET', KEYS[6], ffield, ids)
  -- its postings: under its id, or (stored again under an id it had) a fresh store key
  local k, ks, elem = id, ids, struct.pack('>I4', id)
  if own_seen ~= 0 then
    k = seq
    ks, elem = string.format('%d', k), struct.pack('>I4I4', k + 2147483648, id)
  end
  if #anchors > 0 then
    local recent = (own_seen == 0 and elem or struct.pack('>I4', k)) .. anchors
    redis.call('HSET', KEYS[3], ks, own_seen == 0 and recent or elem .. anchors)
    if redis.call('LPUSH', KEYS[4], recent) > RECENT + TRIM then
      local gone = redis.call('RPOP', KEYS[4], '64')  -- the oldest, the newest of them last
      redis.call('HSET', KEYS[1], 'floor', string.format('%d', struct.unpack('>I4', gone[#gone])))
    end
  end
  teach()
  return counts(false, k, elem)
elseif action == 'near' then
  teach()
end
return counts(action == 'exact' or action == 'near')
