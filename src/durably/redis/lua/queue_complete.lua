-- Finish the holder's item. KEYS: item hash. ARGV: prefix, ref, worker, now, retention
return complete(ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5])
