-- KEYS: ready. ARGV: prefix, workflow
make_ready(ARGV[2], now_us())
return 1
