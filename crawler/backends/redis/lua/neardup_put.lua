-- neardup_put.lua: an original's element into the postings of its anchors that live on one
-- hash tag, each at its place by store key, unless already there or past MAXP (writing one
-- original's postings twice, a repair, changes nothing). crawler/backends/redis/neardup_anchors.py
-- says why and how the postings are laid out.
--
-- KEYS[1], KEYS[2], ...: per anchor, its bucket hash and the string its postings move to
-- once longer than LONG bytes (the field then holds 'L'), all under one anchor tag.
-- ARGV[1] MAXP, ARGV[2] the element (4 or 8 bytes), ARGV[3] LONG; then per anchor its field.
-- The function put is the commit's too (neardup_state puts it before neardup_commit.lua).

local function put(key, long_key, field, elem, mine, MAXP, LONG)
  local v = redis.call('HGET', key, field) or ''
  local long = v == 'L'
  if long then v = redis.call('GET', long_key) or '' end
  local pos, count, at, last_at = 1, 0, nil, nil
  while pos <= #v do
    local x = struct.unpack('>I4', v, pos)
    local k = x % 2147483648
    if k == mine then return end
    if at == nil and k > mine then at = pos end
    count, last_at = count + 1, pos
    if x >= 2147483648 then pos = pos + 8 else pos = pos + 4 end
  end
  if at == nil and count >= MAXP then return end
  if at == nil then
    v = v .. elem
  else
    v = string.sub(v, 1, at - 1) .. elem .. string.sub(v, at)
    if count + 1 > MAXP then v = string.sub(v, 1, last_at - 1 + #elem) end
  end
  if #v > LONG then
    redis.call('SET', long_key, v)
    if not long then redis.call('HSET', key, field, 'L') end
  else
    redis.call('HSET', key, field, v)
  end
end

-- end of put
local MAXP, elem, LONG = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local mine = struct.unpack('>I4', elem) % 2147483648
for i = 4, #ARGV do
  local key, long_key = KEYS[2 * (i - 3) - 1], KEYS[2 * (i - 3)]
  put(key, long_key, ARGV[i], elem, mine, MAXP, LONG)
end
return mine
