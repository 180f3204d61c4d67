-- LISTEN cannot take a parameter; the channel is a name durably derived from the table
-- names (letters, digits, underscores), never user input.

-- name: listen
LISTEN {channel};

-- name: ping
SELECT 1;
