-- post.lua: a letter added to a partition's inbox once, though its sender sends it again. A
-- sender sends its letters in order, so one sent again (its reply was lost with the connection,
-- or the call that wrote it ran again alike) comes before any later one to the same inbox: a
-- letter whose digest is the sender's mark is there already. Returns 1 if added, else 0.
--
-- KEYS[1]   the partition's inbox ({<tag>}:in)
-- KEYS[2]   the sender's mark there ({<tag>}:in:<sender>): its last letter's digest
-- ARGV[1]   the letter's digest; ARGV[2] the mark's life (ms); ARGV[3] the message's field;
-- ARGV[4]   the letter
if redis.call('GET', KEYS[2]) == ARGV[1] then return 0 end
redis.call('XADD', KEYS[1], '*', ARGV[3], ARGV[4])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return 1
