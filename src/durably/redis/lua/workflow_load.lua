-- Every record with its position and landing time. KEYS: records, written
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
