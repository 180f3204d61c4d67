-- The work queue. Every claim and settle is one statement; the claim locks its row with
-- FOR UPDATE SKIP LOCKED and repeats every predicate on that locked row, so a concurrent
-- claim that commits underneath is re-checked rather than taken twice.

-- name: enqueue
-- The item, its token's row, and the tenant's place in the rotation when it has none (see
-- `_placed` below). $1 tenant, $2 id, $3 queue, $4 payload, $5 priority, $6 now,
-- $7 available_at, $8 the channel to notify, $9 the call's token.
-- A token already kept means this call is a retry whose first attempt wrote the item (its
-- answer lost): nothing is written again, even when the item has completed since.
-- Whether the row was written is read from the command status, not from RETURNING (a
-- result without rows is cheaper on both ends), so the notification is sent from the
-- FROM clause: also for an id already queued, where it wakes a waiter for nothing new.
-- Either way it is delivered only if the transaction commits.
WITH fresh AS (
    INSERT INTO {work} (tenant, id, queue, payload, priority, state, enqueued_at, available_at)
    SELECT $1::text, $2::text, $3::text, $4::jsonb, $5::integer, 'queued', $6::float8,
           $7::float8
    FROM (SELECT pg_notify($8::text, $3::text)) AS wake
    WHERE NOT EXISTS (SELECT 1 FROM {enqueues} WHERE token = $9::text)
    ON CONFLICT DO NOTHING
    RETURNING seq
),
{_placed}

-- name: enqueue_carrying
-- enqueue for an item with a dedupe key, carrying attempts and failures, or under flow
-- gates: $10 dedupe key, $11 attempts, $12 failures, $13 how long the key outlasts the
-- item (NULL: it is freed when the item finishes), $14 concurrency key, $15 its limit,
-- $16 throttle key, $17 its interval, $18 its burst. A key kept for a finished item
-- writes nothing (the caller answers with that item); with $13 the key's row is written
-- with the item. (The common case binds nine parameters fewer.)
WITH fresh AS (
    INSERT INTO {work} (
        tenant, id, queue, payload, priority, state, enqueued_at, available_at,
        dedupe_key, attempts, failures, concurrency_key, concurrency_limit, throttle_key,
        throttle_seconds, throttle_burst
    )
    SELECT $1::text, $2::text, $3::text, $4::jsonb, $5::integer, 'queued', $6::float8,
           $7::float8, $10::text, $11::integer, $12::jsonb, $14::text, $15::integer,
           $16::text, $17::float8, $18::integer
    FROM (SELECT pg_notify($8::text, $3::text)) AS wake
    WHERE NOT EXISTS (SELECT 1 FROM {enqueues} WHERE token = $9::text)
      AND NOT EXISTS (
          SELECT 1 FROM {dedupe_keys} k
          WHERE k.tenant = $1::text AND k.queue = $3::text AND k.dedupe_key = $10::text
            AND k.expires_at > $6::float8
      )
    ON CONFLICT DO NOTHING
    RETURNING seq
),
keep AS (
    INSERT INTO {dedupe_keys} AS k (tenant, queue, dedupe_key, id, ttl, expires_at, item)
    SELECT $1::text, $3::text, $10::text, $2::text, $13::float8, NULL, NULL
    FROM fresh
    WHERE $10::text IS NOT NULL AND $13::float8 IS NOT NULL
    ON CONFLICT (tenant, queue, dedupe_key) DO UPDATE
    SET id = excluded.id, ttl = excluded.ttl, expires_at = NULL, item = NULL
),
{_placed}

-- name: find_kept
-- The finished item (a JSON array of its row) whose dedupe key is still kept at $4.
SELECT item::text FROM {dedupe_keys}
WHERE tenant = $1::text AND queue = $2::text AND dedupe_key = $3::text
  AND expires_at > $4::float8;

-- name: forget_dedupe_keys
-- Kept keys whose time is up at $1, a batch of at most $2, through the expiry index.
DELETE FROM {dedupe_keys}
WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM {dedupe_keys} WHERE expires_at <= $1::float8 ORDER BY expires_at LIMIT $2
));

-- name: _placed
-- What both enqueues write after the item: its tenant's place in the rotation and the
-- call's token (`fresh` is the inserted item's row, none when nothing was written).
-- The tenant joins the rotation unless it is there: ON CONFLICT DO NOTHING finds the row
-- (committed, or being deleted: then it waits for that transaction) and writes nothing.
-- The shared advisory lock on (queue, tenant), held to commit, is what keeps `tidy` from
-- stranding the tenant: see `tidy`. Shared locks never wait for one another.
placed AS (
    INSERT INTO {rota} (queue, tenant, turn, available_at, seq)
    SELECT $3::text, $1::text,
           coalesce((SELECT t.turn FROM {turns} t WHERE t.queue = $3::text AND t.tenant = $1::text), 0),
           $7::float8, fresh.seq
    FROM fresh
    CROSS JOIN (SELECT pg_advisory_xact_lock_shared(hashtext($3::text), hashtext($1::text))) held
    ON CONFLICT DO NOTHING
),
-- A never-served tenant goes by its oldest item: one enqueued older than that moves it up
-- (rare: it writes only then).
older AS (
    UPDATE {rota} r SET available_at = $7::float8, seq = fresh.seq
    FROM fresh
    WHERE r.queue = $3::text AND r.tenant = $1::text AND r.turn = 0
      AND (r.available_at, r.seq) > ($7::float8, fresh.seq)
)
INSERT INTO {enqueues} (token, tenant, id, written_at)
SELECT $9::text, $1::text, $2::text, $6::float8 FROM fresh

-- name: _freed
-- What complete, complete_many and settle write after the item: each item of ``done``
-- (queue and concurrency key of items that were claimed) no longer runs, so its
-- concurrency key counts one fewer ({gates}).
freed AS (
    UPDATE {gates} g SET running = g.running - d.n
    FROM (SELECT queue, concurrency_key, count(*)::integer AS n FROM done
          WHERE concurrency_key IS NOT NULL GROUP BY queue, concurrency_key) d
    WHERE g.queue = d.queue AND g.key = d.concurrency_key
)
-- name: enqueue_many
-- Many enqueues in one statement: each item as `enqueue_carrying` writes it, each written
-- tenant's place in the rotation, one notification per queue and each call's token.
-- $1 tenants, $2 ids, $3 queues, $4 payloads (JSON text), $5 priorities, $6 now,
-- $7 available_at per item, $8 the channel to notify, $9 tokens, $10 dedupe keys (NULL:
-- none), $11 attempts, $12 failures (JSON text), $13 the keys' time to live (NULL: none;
-- a key kept for a finished item writes nothing), $14 concurrency keys, $15 their limits,
-- $16 throttle keys, $17 their intervals, $18 their bursts (NULL: no gate). An id given
-- twice is tried once (its first); ON CONFLICT skips an item whose id or dedupe key is
-- held. Answers the
-- (tenant, id) pairs written: the caller settles every other item one by one, in the
-- same transaction.
WITH given AS (
    SELECT DISTINCT ON (g.tenant, g.id) g.*
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::integer[], $7::float8[],
                $9::text[], $10::text[], $11::integer[], $12::text[], $14::text[],
                $15::integer[], $16::text[], $17::float8[], $18::integer[])
         WITH ORDINALITY AS g(tenant, id, queue, payload, priority, available_at, token,
                              dedupe_key, attempts, failures, concurrency_key,
                              concurrency_limit, throttle_key, throttle_seconds,
                              throttle_burst, n)
    WHERE NOT EXISTS (SELECT 1 FROM {enqueues} e WHERE e.token = g.token)
      AND NOT EXISTS (
          SELECT 1 FROM {dedupe_keys} k
          WHERE g.dedupe_key IS NOT NULL AND k.tenant = g.tenant AND k.queue = g.queue
            AND k.dedupe_key = g.dedupe_key AND k.expires_at > $6::float8
      )
    ORDER BY g.tenant, g.id, g.n
),
fresh AS (
    INSERT INTO {work} (
        tenant, id, queue, payload, priority, state, enqueued_at, available_at,
        dedupe_key, attempts, failures, concurrency_key, concurrency_limit, throttle_key,
        throttle_seconds, throttle_burst
    )
    SELECT g.tenant, g.id, g.queue, g.payload::jsonb, g.priority, 'queued', $6::float8,
           g.available_at, g.dedupe_key, g.attempts, g.failures::jsonb, g.concurrency_key,
           g.concurrency_limit, g.throttle_key, g.throttle_seconds, g.throttle_burst
    FROM given g
    ORDER BY g.n
    ON CONFLICT DO NOTHING
    RETURNING tenant, id, queue, seq, available_at, dedupe_key
),
-- With a time to live ($13), each written item's dedupe key gets its row.
keep AS (
    INSERT INTO {dedupe_keys} AS k (tenant, queue, dedupe_key, id, ttl, expires_at, item)
    SELECT f.tenant, f.queue, f.dedupe_key, f.id, $13::float8, NULL, NULL
    FROM fresh f
    WHERE f.dedupe_key IS NOT NULL AND $13::float8 IS NOT NULL
    ON CONFLICT (tenant, queue, dedupe_key) DO UPDATE
    SET id = excluded.id, ttl = excluded.ttl, expires_at = NULL, item = NULL
),
-- Each written (queue, tenant)'s oldest item, under the shared advisory lock `_placed`
-- takes for one item.
held AS (
    SELECT f.queue, f.tenant, f.available_at, f.seq
    FROM (
        SELECT DISTINCT ON (queue, tenant) queue, tenant, available_at, seq
        FROM fresh
        ORDER BY queue, tenant, available_at, seq
    ) f
    CROSS JOIN LATERAL (
        SELECT pg_advisory_xact_lock_shared(hashtext(f.queue), hashtext(f.tenant))
    ) locked
),
placed AS (
    INSERT INTO {rota} (queue, tenant, turn, available_at, seq)
    SELECT h.queue, h.tenant,
           coalesce((SELECT t.turn FROM {turns} t WHERE t.queue = h.queue AND t.tenant = h.tenant), 0),
           h.available_at, h.seq
    FROM held h
    ON CONFLICT DO NOTHING
),
older AS (
    UPDATE {rota} r SET available_at = h.available_at, seq = h.seq
    FROM held h
    WHERE r.queue = h.queue AND r.tenant = h.tenant AND r.turn = 0
      AND (r.available_at, r.seq) > (h.available_at, h.seq)
),
tokens AS (
    INSERT INTO {enqueues} (token, tenant, id, written_at)
    SELECT g.token, g.tenant, g.id, $6::float8
    FROM given g JOIN fresh f ON f.tenant = g.tenant AND f.id = g.id
),
wake AS (
    SELECT count(pg_notify($8::text, q.queue)) AS sent FROM (SELECT DISTINCT queue FROM fresh) q
)
SELECT f.tenant, f.id FROM fresh f CROSS JOIN wake;

-- name: enqueued_by
-- Whether the call with token $1 wrote an item (a retry asks, once its insert wrote none).
SELECT 1 FROM {enqueues} WHERE token = $1::text;

-- name: forget_enqueues
-- Tokens older than $1, a batch of at most $2 (reap keeps the table to a few minutes).
DELETE FROM {enqueues}
WHERE ctid = ANY (ARRAY(SELECT ctid FROM {enqueues} WHERE written_at < $1::float8 LIMIT $2));

-- name: drop_terminal
DELETE FROM {work}
WHERE tenant = $1::text AND id = $2::text AND state IN ('completed', 'dead_lettered')
RETURNING 1;

-- name: find_live
SELECT tenant, id, queue, payload::text, priority, dedupe_key, attempts, state, worker,
       enqueued_at, available_at, lease_expires_at, first_claimed_at, claimed_at,
       failures::text,
       concurrency_key, concurrency_limit, throttle_key, throttle_seconds, throttle_burst
FROM {work}
WHERE tenant = $1::text AND state IN ('queued', 'claimed')
  AND (id = $2::text OR (queue = $3::text AND dedupe_key = $4::text))
ORDER BY (id = $2::text) DESC
LIMIT 1;

-- name: count_duplicate
INSERT INTO {counters} AS c (queue, duplicates_suppressed) VALUES ($1::text, 1)
ON CONFLICT (queue) DO UPDATE SET duplicates_suppressed = c.duplicates_suppressed + 1;

-- name: count_reaped
INSERT INTO {counters} AS c (queue, reaped) VALUES ($1::text, $2::bigint)
ON CONFLICT (queue) DO UPDATE SET reaped = c.reaped + $2::bigint;

-- name: claim
-- $1 queue, $2 now, $3 worker, $4 lease seconds, $5 how many, $6 whether to defer to due
-- waiting tenants, $7 how many due tenants to read beyond $5.
-- Tenants in turn order (never served = 0, ties to the oldest due item), then within the
-- tenant priority, age and enqueue order; the served tenants' turns go to the back. A batch
-- takes what $5 single claims in a row would: one item of each tenant in turn, then a
-- second of each, and so on (never several of the first tenant while others wait).
-- The tenants come from the rotation ({rota}), walked in claim order one entry at a time;
-- each entry costs one descent of the age index, to the tenant's oldest queued item, which
-- is its oldest due item when it is due at all. The walk stops at $5 + $7 due tenants (or
-- after 32 entries more: see below), so a claim reads a few entries whatever the tenant
-- count. The $7 beyond are for concurrent claims: a tenant whose due items other claims
-- hold is passed over (SKIP LOCKED) for the next. A claim that comes back short after
-- reading $5 + $7 due tenants says so (a 'more' chore) and the caller claims again with a
-- larger $7.
-- Entries with nothing due are returned as chores (rows without an id, state 'tidy'): the
-- caller runs `tidy` on them, which takes them out of the rotation. When a waiting tenant
-- has come due and $6 is set, nothing is claimed and a 'promote' chore is returned: the
-- caller runs `promote` and claims again with $6 unset, so a promoted tenant is served in
-- its turn.
WITH RECURSIVE pending AS MATERIALIZED (
    SELECT $6::boolean AND EXISTS (
        SELECT 1 FROM {waiting} p WHERE p.queue = $1::text AND p.due <= $2::float8
    ) AS defer
),
walk (tenant, turn, available_at, seq, due, found, step) AS (
    (SELECT r.tenant, r.turn, r.available_at, r.seq, coalesce(o.available_at <= $2::float8, false),
            coalesce(o.available_at <= $2::float8, false)::integer, 1
     FROM {rota} r
     LEFT JOIN LATERAL (
         SELECT w.available_at FROM {work} w
         WHERE w.queue = $1::text AND w.tenant = r.tenant AND w.state = 'queued'
         ORDER BY w.available_at, w.seq LIMIT 1
     ) o ON true
     WHERE r.queue = $1::text AND NOT (SELECT defer FROM pending)
     ORDER BY r.turn, r.available_at, r.seq, r.tenant LIMIT 1)
    UNION ALL
    SELECT r.tenant, r.turn, r.available_at, r.seq, coalesce(o.available_at <= $2::float8, false),
           walk.found + coalesce(o.available_at <= $2::float8, false)::integer, walk.step + 1
    FROM walk
    CROSS JOIN LATERAL (
        SELECT n.tenant, n.turn, n.available_at, n.seq FROM {rota} n
        WHERE n.queue = $1::text
          AND (n.turn, n.available_at, n.seq, n.tenant)
              > (walk.turn, walk.available_at, walk.seq, walk.tenant)
        ORDER BY n.turn, n.available_at, n.seq, n.tenant LIMIT 1
    ) r
    LEFT JOIN LATERAL (
        SELECT w.available_at FROM {work} w
        WHERE w.queue = $1::text AND w.tenant = r.tenant AND w.state = 'queued'
        ORDER BY w.available_at, w.seq LIMIT 1
    ) o ON true
    -- 32 entries more: entries with nothing due wait for `tidy` at the front, and a walk
    -- that meets more than that stops; the caller tidies them and claims again.
    WHERE walk.found < $5::integer + $7::integer AND walk.step < $5::integer + $7::integer + 32
),
tenants AS MATERIALIZED (
    SELECT tenant, step AS position FROM walk WHERE due
),
-- How many items of each tenant a batch may need: with T tenants due, ceil($5 / T). A
-- single claim (or T >= $5) takes one per tenant and stops after $5; otherwise at most
-- T * share rows (fewer than $5 + T) are locked and the round-robin order picks $5 of them.
share AS (
    SELECT greatest(1, ceil($5::float8 / greatest(count(*), 1)))::integer AS per,
           count(*) AS due_tenants
    FROM tenants
),
locked AS MATERIALIZED (
    SELECT ordered.position, item.tenant, item.id, item.queue, item.state, item.available_at,
           item.priority, item.seq, item.concurrency_key, item.concurrency_limit,
           item.throttle_key, item.throttle_seconds, item.throttle_burst
    FROM (SELECT tenant, position FROM tenants ORDER BY position OFFSET 0) ordered
    -- The constant LIMITs (1000 a tenant, 2000 in all) change nothing: a claim takes at most
    -- 1000 items (claim_many caps it), so per <= 1000 and per * due_tenants < 2 * $5. They
    -- are there for the planner, which costs a LIMIT it cannot read at 10% of the rows:
    -- over a million queued rows that estimate crossed jit_above_cost, and every claim
    -- JIT-compiled for 60-200 ms. With them the estimate stays near the real cost.
    CROSS JOIN LATERAL (
        SELECT * FROM (
            SELECT w.tenant, w.id, w.queue, w.state, w.available_at, w.priority, w.seq,
                   w.concurrency_key, w.concurrency_limit, w.throttle_key, w.throttle_seconds,
                   w.throttle_burst
            FROM {work} w
            WHERE w.queue = $1::text AND w.tenant = ordered.tenant
              -- `now` through a subquery: see `picked`'s LIMIT.
              AND w.state = 'queued' AND w.available_at <= (SELECT $2::float8)
              -- Flow gates (durably.stores.flow), as this statement's snapshot has them: an
              -- item whose concurrency key is full or whose throttle key is ahead of its
              -- tolerance is passed over. `gated` re-checks them on the latest rows.
              AND (w.concurrency_key IS NULL OR NOT EXISTS (
                  SELECT 1 FROM {gates} g
                  WHERE g.queue = w.queue AND g.key = w.concurrency_key
                    AND g.running >= w.concurrency_limit))
              AND (w.throttle_key IS NULL OR NOT EXISTS (
                  SELECT 1 FROM {throttles} t
                  WHERE t.queue = w.queue AND t.key = w.throttle_key
                    AND t.tat - (w.throttle_burst - 1) * w.throttle_seconds > $2::float8))
            ORDER BY w.priority DESC, w.available_at, w.seq
            LIMIT (SELECT per FROM share)
            FOR UPDATE SKIP LOCKED
        ) mine
        LIMIT 1000
    ) item
    LIMIT (SELECT CASE WHEN per = 1 THEN $5::bigint ELSE per * due_tenants END FROM share)
),
capped AS MATERIALIZED (SELECT * FROM locked LIMIT 2000),
picked AS MATERIALIZED (
    SELECT tenant, id, queue, state, available_at, concurrency_key, concurrency_limit,
           throttle_key, throttle_seconds, throttle_burst
    FROM (
        SELECT tenant, id, queue, state, available_at, position, concurrency_key,
               concurrency_limit, throttle_key, throttle_seconds, throttle_burst,
               row_number() OVER (PARTITION BY tenant
                                  ORDER BY priority DESC, available_at, seq) AS round,
               -- A batch takes at most one item of a concurrency or throttle key.
               row_number() OVER (PARTITION BY concurrency_key
                                  ORDER BY priority DESC, available_at, seq) AS of_key,
               row_number() OVER (PARTITION BY throttle_key
                                  ORDER BY priority DESC, available_at, seq) AS of_rate
        FROM capped
    ) ranked
    WHERE (concurrency_key IS NULL OR of_key = 1) AND (throttle_key IS NULL OR of_rate = 1)
    ORDER BY round, position
    -- Read through a subquery, as `now` is above: the planner then costs both the same way
    -- in the plans it makes for this call's values and in the generic plan, so the plan
    -- cache keeps the generic plan. Written as plain parameters, the values made the
    -- per-call plans look cheaper from ~20k queued rows (one item taken, not 10% of the
    -- candidates; every queued row due, not a third), and every claim was planned afresh
    -- (~1 ms, more than the claim runs).
    LIMIT (SELECT $5::integer)
),
-- The gates, written on their latest rows: a throttle key moves on (`throttle_admits`)
-- only while the item is still within its tolerance, a concurrency key counts one more
-- only while below the item's limit (a concurrent claim that wrote first is waited for,
-- then re-checked). An item is taken only if every gate it has let it through; a rate
-- slot taken for an item its concurrency key then refuses is spent, never overrun.
rated AS (
    INSERT INTO {throttles} AS t (queue, key, tat, step, tolerance)
    SELECT p.queue, p.throttle_key,
           $2::float8 + (p.throttle_burst - 1) * p.throttle_seconds + p.throttle_seconds,
           p.throttle_seconds, (p.throttle_burst - 1) * p.throttle_seconds
    FROM picked p WHERE p.throttle_key IS NOT NULL
    ON CONFLICT (queue, key) DO UPDATE
    SET tat = greatest(t.tat, $2::float8) + excluded.step
    WHERE t.tat - excluded.tolerance <= $2::float8
    RETURNING t.key
),
counted AS (
    INSERT INTO {gates} AS g (queue, key, running, room)
    SELECT p.queue, p.concurrency_key, 1, p.concurrency_limit
    FROM picked p
    WHERE p.concurrency_key IS NOT NULL
      AND (p.throttle_key IS NULL OR p.throttle_key IN (SELECT key FROM rated))
    ON CONFLICT (queue, key) DO UPDATE SET running = g.running + 1
    WHERE g.running < excluded.room
    RETURNING g.key
),
claimed AS (
    UPDATE {work} w
    SET state = 'claimed', worker = $3::text, claimed_at = $2::float8,
        first_claimed_at = coalesce(w.first_claimed_at, $2::float8),
        lease_expires_at = $2::float8 + $4::float8
    FROM picked
    -- The locked row must still be as it was when locked (it cannot have changed: this
    -- statement holds its lock). Compared with the locked row's own values, not with
    -- constants: constants would let a planner with stale statistics walk the due index
    -- over every queued item, once per claim, instead of looking up the few taken.
    WHERE w.tenant = picked.tenant AND w.id = picked.id AND w.queue = picked.queue
      AND w.state = picked.state AND w.available_at = picked.available_at
      AND (picked.throttle_key IS NULL OR picked.throttle_key IN (SELECT key FROM rated))
      AND (picked.concurrency_key IS NULL OR picked.concurrency_key IN (SELECT key FROM counted))
    RETURNING w.tenant, w.id, w.queue, w.payload::text, w.priority, w.dedupe_key, w.attempts,
              w.state, w.worker, w.enqueued_at, w.available_at, w.lease_expires_at,
              w.first_claimed_at, w.claimed_at, w.failures::text,
              w.concurrency_key, w.concurrency_limit, w.throttle_key, w.throttle_seconds, w.throttle_burst
),
-- The served tenant goes to the back. An entry another claim is moving right now is
-- skipped, not waited for: that claim sends the same tenant to the back as it commits,
-- and waiting would chain every claim of a tenant behind the previous one's commit.
served AS (
    UPDATE {rota} r
    SET turn = nextval('{turn_seq_text}')
    FROM (
        SELECT queue, tenant FROM {rota}
        WHERE queue = $1::text AND tenant IN (SELECT tenant FROM claimed)
        FOR UPDATE SKIP LOCKED
    ) free
    WHERE r.queue = free.queue AND r.tenant = free.tenant
)
SELECT * FROM claimed
UNION ALL
SELECT walk.tenant, NULL, NULL, NULL, NULL, NULL, NULL, 'tidy', NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM walk WHERE NOT walk.due
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'promote', NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM pending WHERE pending.defer
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'more', NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM (SELECT max(found) AS found FROM walk) walked
WHERE walked.found >= $5::integer + $7::integer
  AND (SELECT count(*) FROM claimed) < $5::integer;

-- name: promote
-- $1 queue, $2 now: up to 200 waiting tenants whose first item has come due join the
-- rotation (earliest first; more wait for the next claim), at the turn they had, or turn 0
-- ordered by their oldest item. A tenant with nothing queued is dropped: an enqueue or
-- requeue puts it back itself. A tenant whose advisory lock is taken (a `tidy` holds it) is
-- left for the next claim, so this never waits for a tidy nor a tidy for it.
WITH due AS (
    DELETE FROM {waiting} p
    WHERE (p.queue, p.tenant) IN (
        SELECT queue, tenant FROM {waiting}
        WHERE queue = $1::text AND due <= $2::float8
          AND pg_try_advisory_xact_lock(hashtext(queue), hashtext(tenant))
        ORDER BY due LIMIT 200
        FOR UPDATE SKIP LOCKED
    )
    RETURNING p.tenant
)
INSERT INTO {rota} (queue, tenant, turn, available_at, seq)
SELECT $1::text, due.tenant,
       coalesce((SELECT t.turn FROM {turns} t WHERE t.queue = $1::text AND t.tenant = due.tenant), 0),
       o.available_at, o.seq
FROM due
CROSS JOIN LATERAL (
    SELECT w.available_at, w.seq FROM {work} w
    WHERE w.queue = $1::text AND w.tenant = due.tenant AND w.state = 'queued'
    ORDER BY w.available_at, w.seq LIMIT 1
) o
ON CONFLICT DO NOTHING;

-- name: tidy_lock
-- $1 queue, $2 tenants a claim found with nothing due: those whose advisory lock is free,
-- now held to this transaction's end (see `tidy`).
SELECT tenant FROM unnest($2::text[]) AS chore(tenant)
WHERE pg_try_advisory_xact_lock(hashtext($1::text), hashtext(tenant));

-- name: tidy
-- $1 queue, $2 now, $3 tenants locked by `tidy_lock` in this transaction: each with nothing
-- queued leaves the rotation, each whose oldest queued item is not due yet moves to
-- {waiting}; a tenant with a due item stays. The turn goes back to {turns}.
-- Why no tenant is stranded (an item queued, its tenant in neither table): an enqueue or
-- requeue holds the shared lock from before its rotation check to its commit, and this
-- statement runs after this transaction took the exclusive one, so it reads with a
-- snapshot taken later. An enqueue that locked first has committed before that snapshot
-- (`tidy_lock` found its lock free), so its item is seen here and the tenant stays. One
-- that locks later waits for this commit, then finds the entry gone (ON CONFLICT reads the
-- latest committed row, not its snapshot) and inserts it. Nothing here waits: the rows
-- another claim is moving are skipped, and the {turns} and {waiting} rows of a tenant are
-- written only under its exclusive lock (here and in `promote`).
WITH found AS MATERIALIZED (
    SELECT chore.tenant,
           (SELECT w.available_at FROM {work} w
            WHERE w.queue = $1::text AND w.tenant = chore.tenant AND w.state = 'queued'
            ORDER BY w.available_at, w.seq LIMIT 1) AS oldest
    FROM unnest($3::text[]) AS chore(tenant)
),
gone AS (
    DELETE FROM {rota} r
    WHERE (r.queue, r.tenant) IN (
        SELECT q.queue, q.tenant FROM {rota} q JOIN found ON q.tenant = found.tenant
        WHERE q.queue = $1::text AND (found.oldest IS NULL OR found.oldest > $2::float8)
        FOR UPDATE OF q SKIP LOCKED
    )
    RETURNING r.tenant, r.turn
),
kept AS (
    INSERT INTO {turns} AS t (queue, tenant, turn)
    SELECT $1::text, gone.tenant, gone.turn FROM gone WHERE gone.turn > 0
    ON CONFLICT (queue, tenant) DO UPDATE SET turn = excluded.turn
)
INSERT INTO {waiting} AS p (queue, tenant, due)
SELECT $1::text, gone.tenant, found.oldest
FROM gone JOIN found ON found.tenant = gone.tenant
WHERE found.oldest IS NOT NULL
ON CONFLICT (queue, tenant) DO UPDATE SET due = excluded.due;

-- name: get_item
SELECT tenant, id, queue, payload::text, priority, dedupe_key, attempts, state, worker,
       enqueued_at, available_at, lease_expires_at, first_claimed_at, claimed_at,
       failures::text,
       concurrency_key, concurrency_limit, throttle_key, throttle_seconds, throttle_burst
FROM {work}
WHERE tenant = $1::text AND id = $2::text;

-- name: heartbeat
-- $4 now, $5 lease seconds, $6 max lease seconds.
UPDATE {work}
SET lease_expires_at = LEAST($4::float8 + $5::float8, claimed_at + $6::float8)
WHERE tenant = $1::text AND id = $2::text AND state = 'claimed' AND worker = $3::text
  AND lease_expires_at > $4::float8 AND $4::float8 - claimed_at < $6::float8
RETURNING tenant, id, queue, payload::text, priority, dedupe_key, attempts, state, worker,
          enqueued_at, available_at, lease_expires_at, first_claimed_at, claimed_at,
          failures::text,
          concurrency_key, concurrency_limit, throttle_key, throttle_seconds, throttle_burst;

-- name: complete
-- Completed items are deleted: nothing reads them again, and their id and key are free,
-- unless the key was enqueued with a time to live (see `_kept`).
-- The item is answered as it now stands: completed, without a lease. A concurrency key
-- it held counts one fewer running ({gates}).
WITH done AS (
    DELETE FROM {work}
    WHERE tenant = $1::text AND id = $2::text AND state = 'claimed' AND worker = $3::text
      AND lease_expires_at > $4::float8
    RETURNING tenant, id, queue, payload::text AS payload, priority, dedupe_key, attempts,
              'completed' AS state, worker, enqueued_at, available_at,
              NULL::float8 AS lease_expires_at, first_claimed_at, claimed_at,
              failures::text AS failures, concurrency_key, concurrency_limit, throttle_key,
              throttle_seconds, throttle_burst
),
{_freed},
{_kept},
ended AS (SELECT queue, state, floor($4::float8 / 60)::bigint AS minute FROM done),
{_rated}
SELECT * FROM done;

-- name: complete_many
-- `complete` for many items in one statement (keep the two in step): each row is fenced
-- on its own holder and lease, as `complete` fences it; rows that fail the fence stay.
WITH done AS (
    DELETE FROM {work} AS w
    USING unnest($1::text[], $2::text[]) AS done(tenant, id)
    WHERE w.tenant = done.tenant AND w.id = done.id AND w.state = 'claimed'
      AND w.worker = $3::text AND w.lease_expires_at > $4::float8
    RETURNING w.tenant, w.id, w.queue, w.payload::text AS payload, w.priority, w.dedupe_key,
              w.attempts, 'completed' AS state, w.worker, w.enqueued_at, w.available_at,
              NULL::float8 AS lease_expires_at, w.first_claimed_at, w.claimed_at,
              w.failures::text AS failures, w.concurrency_key, w.concurrency_limit,
              w.throttle_key, w.throttle_seconds, w.throttle_burst
),
{_freed},
{_kept},
ended AS (SELECT queue, state, floor($4::float8 / 60)::bigint AS minute FROM done),
{_rated}
SELECT * FROM done;

-- name: _kept
-- What the statements that finish items write after them: each finished item (`done`)
-- whose dedupe key was enqueued with a time to live keeps the key from now ($4) for that
-- long, with the item as it finished.
kept AS (
    UPDATE {dedupe_keys} k
    SET expires_at = $4::float8 + k.ttl,
        item = jsonb_build_array(d.tenant, d.id, d.queue, d.payload, d.priority, d.dedupe_key,
                                 d.attempts, d.state, d.worker, d.enqueued_at, d.available_at,
                                 d.lease_expires_at, d.first_claimed_at, d.claimed_at,
                                 d.failures, d.concurrency_key, d.concurrency_limit,
                                 d.throttle_key, d.throttle_seconds, d.throttle_burst)
    FROM done d
    WHERE d.dedupe_key IS NOT NULL AND d.state IN ('completed', 'dead_lettered')
      AND k.tenant = d.tenant AND k.queue = d.queue AND k.dedupe_key = d.dedupe_key
      AND k.id = d.id AND k.expires_at IS NULL
)

-- name: _rated
-- What the statements that finish items write after them: the items of ``ended`` (queue,
-- state, minute) counted in their minute's slot of the ring ({throughput}, schema.sql),
-- on this connection's shard, so concurrent finishers of one queue rarely share a row.
rated AS (
    INSERT INTO {throughput} AS t (what, name, slot, shard, minute, completed, failed)
    SELECT 'item', queue, minute % 16, pg_backend_pid() & 63, minute,
           count(*) FILTER (WHERE state = 'completed'),
           count(*) FILTER (WHERE state = 'dead_lettered')
    FROM ended
    GROUP BY queue, minute
    ON CONFLICT (what, name, slot, shard) DO UPDATE SET
        completed = excluded.completed
            + CASE WHEN t.minute = excluded.minute THEN t.completed ELSE 0 END,
        failed = excluded.failed + CASE WHEN t.minute = excluded.minute THEN t.failed ELSE 0 END,
        minute = excluded.minute
    WHERE t.minute <= excluded.minute
)

-- name: finished_per_minute
-- The ring's slots (every shard) of the queues in $1 counting minute $2 or later.
SELECT name, minute, completed, failed FROM {throughput}
WHERE what = 'item' AND name = ANY($1::text[]) AND minute >= $2::bigint;

-- name: settle
-- Fenced on the holder and the exact lease the caller saw: a concurrent heartbeat, reap or
-- settle changes one of them and this writes nothing.
WITH settled AS (
    UPDATE {work}
    SET attempts = $5::integer,
        state = CASE WHEN $6::boolean THEN 'dead_lettered' ELSE 'queued' END,
        worker = NULL, lease_expires_at = NULL, claimed_at = NULL,
        available_at = coalesce($7::float8, available_at),
        failures = failures || jsonb_build_array($8::text)
    WHERE tenant = $1::text AND id = $2::text AND state = 'claimed' AND worker = $3::text
      AND lease_expires_at = $4::float8
    RETURNING tenant, id, queue, payload::text AS payload, priority, dedupe_key, attempts,
              state, worker, enqueued_at, available_at, lease_expires_at, first_claimed_at,
              claimed_at, failures::text AS failures, concurrency_key, concurrency_limit,
              throttle_key, throttle_seconds, throttle_burst,
              pg_notify($9::text, queue)::text, seq
),
-- A dead letter's kept dedupe key starts its time to live ($10 now).
dead AS (SELECT * FROM settled WHERE state = 'dead_lettered'),
kept AS (
    UPDATE {dedupe_keys} k
    SET expires_at = $10::float8 + k.ttl,
        item = jsonb_build_array(d.tenant, d.id, d.queue, d.payload, d.priority, d.dedupe_key,
                                 d.attempts, d.state, d.worker, d.enqueued_at, d.available_at,
                                 d.lease_expires_at, d.first_claimed_at, d.claimed_at,
                                 d.failures, d.concurrency_key, d.concurrency_limit,
                                 d.throttle_key, d.throttle_seconds, d.throttle_burst)
    FROM dead d
    WHERE d.dedupe_key IS NOT NULL
      AND k.tenant = d.tenant AND k.queue = d.queue AND k.dedupe_key = d.dedupe_key
      AND k.id = d.id AND k.expires_at IS NULL
),
done AS (SELECT queue, concurrency_key FROM settled),
{_freed},
ended AS (
    SELECT queue, state, floor($10::float8 / 60)::bigint AS minute FROM dead
),
{_rated},
-- A requeued item's tenant rejoins the rotation as an enqueue's does (see enqueue).
placed AS (
    INSERT INTO {rota} (queue, tenant, turn, available_at, seq)
    SELECT s.queue, s.tenant,
           coalesce((SELECT t.turn FROM {turns} t
                     WHERE t.queue = s.queue AND t.tenant = s.tenant), 0),
           s.available_at, s.seq
    FROM settled s
    CROSS JOIN LATERAL (
        SELECT pg_advisory_xact_lock_shared(hashtext(s.queue), hashtext(s.tenant))
    ) held
    WHERE s.state = 'queued'
    ON CONFLICT DO NOTHING
)
SELECT tenant, id, queue, payload, priority, dedupe_key, attempts, state, worker,
       enqueued_at, available_at, lease_expires_at, first_claimed_at, claimed_at,
       failures, concurrency_key, concurrency_limit, throttle_key, throttle_seconds,
       throttle_burst, pg_notify
FROM settled;

-- name: lapsed
SELECT tenant, id, queue, payload::text, priority, dedupe_key, attempts, state, worker,
       enqueued_at, available_at, lease_expires_at, first_claimed_at, claimed_at,
       failures::text,
       concurrency_key, concurrency_limit, throttle_key, throttle_seconds, throttle_burst
FROM {work}
WHERE state = 'claimed' AND lease_expires_at <= $1::float8
ORDER BY lease_expires_at
LIMIT $2::integer;

-- name: held_by
SELECT tenant, id, queue, payload::text, priority, dedupe_key, attempts, state, worker,
       enqueued_at, available_at, lease_expires_at, first_claimed_at, claimed_at,
       failures::text,
       concurrency_key, concurrency_limit, throttle_key, throttle_seconds, throttle_burst
FROM {work}
WHERE state = 'claimed' AND worker = $1::text
LIMIT $2::integer;

-- name: dead_letters
SELECT tenant, id, queue, payload::text, priority, dedupe_key, attempts, state, worker,
       enqueued_at, available_at, lease_expires_at, first_claimed_at, claimed_at,
       failures::text,
       concurrency_key, concurrency_limit, throttle_key, throttle_seconds, throttle_burst
FROM {work}
WHERE ($1::text IS NULL OR tenant = $1::text) AND state = 'dead_lettered'
  AND ($2::text IS NULL OR queue = $2::text)
ORDER BY seq
LIMIT $3::integer;

-- name: dead_letter_page
-- $1 tenant or NULL, $2 queue or NULL, $3 the page's size, $4 the cursor's seq or NULL:
-- one more than a page after the cursor's place in enqueue order, each with its seq.
SELECT tenant, id, queue, payload::text, priority, dedupe_key, attempts, state, worker,
       enqueued_at, available_at, lease_expires_at, first_claimed_at, claimed_at,
       failures::text,
       concurrency_key, concurrency_limit, throttle_key, throttle_seconds, throttle_burst,
       seq
FROM {work}
WHERE ($1::text IS NULL OR tenant = $1::text) AND state = 'dead_lettered'
  AND ($2::text IS NULL OR queue = $2::text) AND ($4::bigint IS NULL OR seq > $4::bigint)
ORDER BY seq
LIMIT $3::integer + 1;

-- name: stats
-- $1 queue, $2 now, $3 the cap. Each state is counted through its partial index and stops
-- at the cap (the ORDER BY names the index to walk), so a figure below the cap is exact and
-- the read is bounded at any size; the oldest due item is the first entry of the oldest
-- index. See `stats_estimate` for a figure at the cap.
SELECT (SELECT count(*) FROM (SELECT 1 FROM {work}
            WHERE queue = $1::text AND state = 'queued'
            ORDER BY queue, tenant, available_at, seq LIMIT $3::integer) queued),
       (SELECT count(*) FROM (SELECT 1 FROM {work}
            WHERE queue = $1::text AND state = 'claimed'
            ORDER BY lease_expires_at LIMIT $3::integer) claimed),
       (SELECT count(*) FROM (SELECT 1 FROM {work}
            WHERE queue = $1::text AND state = 'dead_lettered'
            ORDER BY tenant, seq LIMIT $3::integer) dead),
       (SELECT available_at FROM {work}
            WHERE queue = $1::text AND state = 'queued' AND available_at <= $2::float8
            ORDER BY queue, available_at LIMIT 1),
       (SELECT reaped FROM {counters} WHERE queue = $1::text),
       (SELECT duplicates_suppressed FROM {counters} WHERE queue = $1::text);

-- name: stats_estimate
-- $1 queue, $2 state: the planner's estimate of the state's items in the queue, from the
-- table's statistics (as fresh as the last ANALYZE), for a count that reached the cap.
EXPLAIN (FORMAT JSON) SELECT 1 FROM {work} WHERE queue = $1::text AND state = $2::text;

-- name: next_due
SELECT min(available_at) FROM {work} WHERE queue = $1::text AND state = 'queued';

-- name: rejoin
-- Every tenant of queue $1 with a queued item joins the rotation if it is not in it (for
-- items written straight into {work}, as the benchmarks and tests fill it; one pass over
-- the queued items). A tenant with nothing due is tidied by the first claim that walks it.
INSERT INTO {rota} (queue, tenant, turn, available_at, seq)
SELECT DISTINCT ON (w.tenant) w.queue, w.tenant,
       coalesce((SELECT t.turn FROM {turns} t WHERE t.queue = w.queue AND t.tenant = w.tenant), 0),
       w.available_at, w.seq
FROM {work} w
WHERE w.queue = $1::text AND w.state = 'queued'
ORDER BY w.tenant, w.available_at, w.seq
ON CONFLICT DO NOTHING;

-- name: last_tick
SELECT tick FROM {schedule_ticks} WHERE name = $1::text;

-- name: advance_tick
-- $1 schedule, $2 tick: the schedule's last fired tick moves on to $2 if that is later. A
-- concurrent call waits for the row, then re-checks against what the other wrote, so one
-- of many calls for a tick moves it. One row, when it moved: the tick kept before (NULL
-- when there was none), kept beside the new one by the same write.
INSERT INTO {schedule_ticks} AS t (name, tick) VALUES ($1::text, $2::float8)
ON CONFLICT (name) DO UPDATE SET tick = excluded.tick, previous = t.tick
WHERE t.tick < excluded.tick
RETURNING t.previous;

-- name: debounce
-- $1 slot, $2 workflow, $3 args, $4 due: a pending workflow of the slot (not begun) takes
-- the arguments and the due time; none pending, the slot names $2. A concurrent start
-- waits for the row, then re-checks against what the other wrote. The pending workflow's id.
INSERT INTO {debounces} AS d (slot, workflow, args, due)
VALUES ($1::text, $2::text, $3::text, $4::float8)
ON CONFLICT (slot) DO UPDATE SET
    workflow = CASE WHEN d.begun THEN excluded.workflow ELSE d.workflow END,
    args = excluded.args, due = excluded.due, begun = false
RETURNING d.workflow;

-- name: begin_debounced
-- $1 slot, $2 workflow, $3 now: the workflow takes the slot if it is due (or took it
-- before): its arguments; else the due time a later start pushed it to (both NULL: the
-- slot names another workflow).
WITH taken AS (
    UPDATE {debounces} SET begun = true
    WHERE slot = $1::text AND workflow = $2::text AND (begun OR due <= $3::float8)
    RETURNING args
)
SELECT (SELECT args FROM taken),
       (SELECT due FROM {debounces} WHERE slot = $1::text AND workflow = $2::text);

-- name: release_debounced
-- $1 slot, $2 workflow: the slot, once the workflow it names began (its arguments
-- recorded) or ended unbegun.
DELETE FROM {debounces} WHERE slot = $1::text AND workflow = $2::text
RETURNING slot;

-- name: debounced
SELECT workflow FROM {debounces} WHERE slot = $1::text;

-- name: queue_names
-- Queues with items or counters, sorted, at most $1: the queued items' queues by a skip
-- scan of the oldest index (one descent a queue), then those of claimed items and dead
-- letters, and the counters' queues.
WITH RECURSIVE queued(queue) AS (
    (SELECT queue FROM {work} WHERE state = 'queued' ORDER BY queue, available_at LIMIT 1)
    UNION ALL
    SELECT (SELECT w.queue FROM {work} w
            WHERE w.state = 'queued' AND w.queue > q.queue
            ORDER BY w.queue, w.available_at LIMIT 1)
    FROM queued q WHERE q.queue IS NOT NULL
)
SELECT queue FROM queued WHERE queue IS NOT NULL
UNION
SELECT DISTINCT queue FROM {work} WHERE state IN ('claimed', 'dead_lettered')
UNION
SELECT queue FROM {counters}
ORDER BY 1
LIMIT $1::integer;

-- name: purge_dead_letters
-- Up to $4 dead letters of $1 (of tenant $2 only, unless NULL; the one id $3, unless
-- NULL), oldest first, with the dedupe keys they keep. Answers how many were deleted.
WITH gone AS (
    DELETE FROM {work}
    WHERE seq IN (
        SELECT seq FROM {work}
        WHERE queue = $1::text AND state = 'dead_lettered'
          AND ($2::text IS NULL OR tenant = $2::text) AND ($3::text IS NULL OR id = $3::text)
        ORDER BY seq
        LIMIT $4::integer
    )
    RETURNING tenant, id, dedupe_key
),
keys AS (
    DELETE FROM {dedupe_keys} k
    USING gone g
    WHERE g.dedupe_key IS NOT NULL AND k.tenant = g.tenant AND k.queue = $1::text
      AND k.dedupe_key = g.dedupe_key AND k.id = g.id
)
SELECT count(*) FROM gone;

-- name: purge
-- The queued items of $1 (of tenant $2 only, unless NULL), with the kept-key rows their
-- enqueues wrote. A tenant left in the rotation with nothing queued is tidied by the next
-- claim that walks it. Answers how many were deleted.
WITH gone AS (
    DELETE FROM {work}
    WHERE queue = $1::text AND state = 'queued' AND ($2::text IS NULL OR tenant = $2::text)
    RETURNING tenant, id, dedupe_key
),
keys AS (
    DELETE FROM {dedupe_keys} k
    USING gone g
    WHERE g.dedupe_key IS NOT NULL AND k.tenant = g.tenant AND k.queue = $1::text
      AND k.dedupe_key = g.dedupe_key AND k.id = g.id AND k.expires_at IS NULL
)
SELECT count(*) FROM gone;
