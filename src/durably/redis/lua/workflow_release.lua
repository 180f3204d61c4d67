-- End the holder's claim now; the token key keeps its token. KEYS: claim, token. ARGV: token
if current_token(KEYS[2]) == tonumber(ARGV[1]) then redis.call('DEL', KEYS[1]) end
return 1
