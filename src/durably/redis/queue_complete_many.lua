-- Finish several of the holder's items, each exactly as queue_complete.lua does (fenced on
-- its own lease). KEYS: the first item's hash. ARGV: prefix, worker, now, retention, then
-- the items' refs. Returns, per ref in order, what queue_complete.lua returns for it.
local worker, now, retention = ARGV[2], tonumber(ARGV[3]), ARGV[4]
local done = {}
for i = 5, #ARGV do done[#done + 1] = complete(ARGV[i], worker, now, retention) end
return done
