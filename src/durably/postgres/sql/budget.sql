-- The server's connection limit, what superusers keep of it, and the connections open now
-- (every database's: they all count against the one limit).

-- name: connections
SELECT current_setting('max_connections')::int,
       current_setting('superuser_reserved_connections')::int,
       (SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'client backend');
