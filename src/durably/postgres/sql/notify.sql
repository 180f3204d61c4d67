-- LISTEN cannot take a parameter; the channel is a name durably derived from the table
-- names (letters, digits, underscores), never user input.

-- name: listen
LISTEN {channel};

-- name: unlisten
UNLISTEN {channel};

-- The channels the listening connection LISTENs on, as the server has them.
-- name: channels
SELECT pg_listening_channels();

-- name: ping
SELECT 1;
