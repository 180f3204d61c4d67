-- Finish several of the holder's items, each exactly as queue_complete.lua does (fenced on
-- its own lease). KEYS: the first item's hash. ARGV: prefix, worker, now, retention, then
-- the items' refs. Returns, per ref in order, what queue_complete.lua returns for it.
return complete_refs(5, #ARGV, ARGV[2], tonumber(ARGV[3]), ARGV[4])
