-- Workflow records and claims. Leases run on the server's clock: now() for one-statement
-- calls, clock_timestamp() where a transaction may have run an effect for a while.

-- name: _fence
-- A pass's fence: a row-locking UPDATE of the claim row that renews liveness, matching only
-- the current token (it waits behind a claim in flight and re-reads the newest token).
UPDATE {workflow_claim}
SET alive_until = LEAST(now() + make_interval(secs => alive_for), held_until)
WHERE workflow = $1::text AND token = $2::bigint
RETURNING token

-- name: _recount
-- Under the fence: an admitted workflow whose running flag this write moves (to the value
-- `running` selects) moves its tenant's running count with it, in the same statement, on
-- the workflow's own shard of the counts.
flip AS (
    UPDATE {workflow_admitted} AS a SET running = r.running
    FROM running AS r
    WHERE a.workflow = $1::text AND a.running <> r.running AND EXISTS (SELECT 1 FROM fence)
    RETURNING a.tenant, a.running
),
moved AS (
    INSERT INTO {workflow_tenant_counts} AS c (tenant, shard, running, started)
    SELECT flip.tenant, {_shard}, CASE WHEN flip.running THEN 1 ELSE -1 END, 0 FROM flip
    ON CONFLICT (tenant, shard) DO UPDATE SET running = c.running + excluded.running
)

-- name: _shard
-- The shard of the tenant counts that workflow $1 moves.
hashtext($1::text) & 15

-- name: _follow
-- Under the fence: the catalog entry, if the workflow has one, takes the status this write
-- reports (`told`), and the catalog's counts move with it on the workflow's shard, out of
-- the old status and into the new, for its tenant and for tenant '' (every tenant's),
-- taken in the order every writer of those rows takes them (the tenant's rows before
-- every tenant's, statuses in order), so two moves crossing each other's statuses never
-- wait on each other in a cycle. The entry is locked as it is read, so a move that waited
-- reads the status it leaves. The run
-- record following the workflow in its tenant (its metadata names it) takes the run state
-- `told` carries unless it holds it: a new version, the record's own time kept (the run
-- totals move with it, by the runs' trigger). The catalog's tenant is compared in the
-- runs' own collation, so the index of followed runs is probed on both its columns (in
-- the catalog's "C" it could match only the key, and every status write scanned the
-- whole index for it).
caught AS (
    SELECT c.workflow, c.tenant, c.kind, c.status AS was, told.status AS now
    FROM {workflow_catalog} AS c, told
    WHERE c.workflow = $1::text AND c.status <> told.status AND EXISTS (SELECT 1 FROM fence)
    FOR UPDATE OF c
),
followed AS (
    UPDATE {workflow_catalog} AS c SET status = caught.now
    FROM caught WHERE c.workflow = caught.workflow
),
recounted AS (
    INSERT INTO {workflow_counts} AS k (tenant, kind, status, shard, n)
    SELECT v.tenant, caught.kind, v.status, hashtext($1::text) & 15, v.n
    FROM caught, LATERAL (
        VALUES (caught.tenant, caught.was, -1), ('', caught.was, -1),
               (caught.tenant, caught.now, 1), ('', caught.now, 1)
    ) AS v(tenant, status, n)
    ORDER BY v.tenant DESC, v.status
    ON CONFLICT (tenant, kind, status, shard) DO UPDATE SET n = k.n + excluded.n
),
ran AS (
    UPDATE {runs} AS r
    SET state = told.state, version = r.version + 1,
        body = jsonb_set(r.body, ARRAY['state'], to_jsonb(told.state))
    FROM told
    WHERE r.tenant = (SELECT tenant COLLATE "default" FROM caught)
      AND r.body -> 'metadata' ->> 'durably_workflow' = $1::text
      AND r.state <> told.state
)

-- name: _inbox_lock
-- The lock on a workflow's inbox, held to the commit: appends take it, and so does a report
-- that ends the workflow.
pg_advisory_xact_lock(hashtext('{workflow_checkpoint_text}'), hashtext($1::text))

-- name: _record_of
-- The record of workflow $1 under `k.key`, if any, as a lateral subquery: one probe of the
-- primary key (LIMIT 1 keeps the planner from folding it into a join it might plan as a
-- scan of the workflow's whole range).
(
    SELECT ctid, value FROM {workflow_checkpoint}
    WHERE workflow = $1::text AND key = k.key
    LIMIT 1
) c

-- name: load
SELECT key, value::text, written_at
FROM {workflow_checkpoint}
WHERE workflow = $1::text
ORDER BY seq;

-- name: claim
-- The DO UPDATE's WHERE is the "is it free" check: a live claim fails it and RETURNING
-- yields nothing. Two first-ever claims serialize on the primary key. Tokens come from the
-- global sequence, drawn under the row lock on update, so they increase per workflow and a
-- claim row the retention sweep deleted cannot rewind them.
INSERT INTO {workflow_claim} AS held (workflow, token, held_until, alive_until, alive_for)
VALUES (
    $1::text, nextval('{workflow_seq_text}'),
    now() + make_interval(secs => $2::float8),
    LEAST(now() + make_interval(secs => $3::float8), now() + make_interval(secs => $2::float8)),
    $3::float8
)
ON CONFLICT (workflow) DO UPDATE
    SET token = nextval('{workflow_seq_text}'),
        held_until = now() + make_interval(secs => $2::float8),
        alive_until = LEAST(now() + make_interval(secs => $3::float8),
                            now() + make_interval(secs => $2::float8)),
        alive_for = $3::float8
    WHERE held.alive_until <= now()
RETURNING token;

-- name: renew
UPDATE {workflow_claim}
SET alive_until = LEAST(now() + make_interval(secs => $3::float8), held_until)
WHERE workflow = $1::text AND token = $2::bigint AND held_until > now()
RETURNING token;

-- name: extend
UPDATE {workflow_claim}
SET held_until = GREATEST(held_until, now() + make_interval(secs => $3::float8)),
    alive_until = LEAST(now() + make_interval(secs => $4::float8),
                        GREATEST(held_until, now() + make_interval(secs => $3::float8)))
WHERE workflow = $1::text AND token = $2::bigint
RETURNING token;

-- name: release
UPDATE {workflow_claim}
SET held_until = now(), alive_until = now()
WHERE workflow = $1::text AND token = $2::bigint;

-- name: record
-- The fence is a row-locking UPDATE on the claim row: it waits behind a claim in flight,
-- re-reads the newest token, and renews liveness only for the current pass. One row
-- written (the command status; no RETURNING to read) means fenced, renewed and written;
-- none means fenced out or already recorded, which record_counted then tells apart (the
-- common case pays for no counting). A write is announced on the changes channel ($5;
-- '' for a record not announced): NOTIFY is delivered on commit, with the write. A
-- transaction that notifies holds a lock every notifying commit shares through its
-- commit's flush, so a record nobody waits for is not announced.
WITH fence AS ({_fence}), written AS (
    INSERT INTO {workflow_checkpoint} (workflow, key, value)
    SELECT $1::text, $3::text, $4::jsonb FROM fence
    ON CONFLICT (workflow, key) DO NOTHING
    RETURNING 1
)
SELECT CASE WHEN $5::text <> '' THEN pg_notify($5::text, 'r' || $1::text) END FROM written;

-- name: record_counted
-- record, answering (fenced?, written?): for the case record could not tell, and for
-- transact. Stamped with clock_timestamp(), because transact's transaction may have
-- started long ago (the effect ran inside it); alone in its statement it is now().
-- A write is announced on the changes channel ($5; '' for a record not announced).
WITH fence AS (
    UPDATE {workflow_claim}
    SET alive_until = LEAST(clock_timestamp() + make_interval(secs => alive_for), held_until)
    WHERE workflow = $1::text AND token = $2::bigint
    RETURNING token
),
written AS (
    INSERT INTO {workflow_checkpoint} (workflow, key, value)
    SELECT $1::text, $3::text, $4::jsonb FROM fence
    ON CONFLICT (workflow, key) DO NOTHING
    RETURNING 1
),
told AS (
    SELECT CASE WHEN $5::text <> '' THEN pg_notify($5::text, 'r' || $1::text) END FROM written
)
SELECT (SELECT count(*) FROM fence), (SELECT count(*) FROM told);

-- name: stored
-- The value under a key, whether it equals a candidate, and whether this very transaction
-- wrote it (an effect writing its own step row). Equal means the same canonical jsonb text
-- (key order aside, numbers as written), not jsonb equality, which holds 1 and 1.0 equal
-- where every other backing compares the codec's text.
SELECT value::text, value::text = $3::jsonb::text, xmin = pg_current_xact_id()::xid
FROM {workflow_checkpoint}
WHERE workflow = $1::text AND key = $2::text;

-- name: peek
-- transact's first look, without a lock: the current token and any recorded value.
SELECT (SELECT token FROM {workflow_claim} WHERE workflow = $1::text),
       (SELECT value::text FROM {workflow_checkpoint} WHERE workflow = $1::text AND key = $2::text);

-- name: supply
-- One row back when written (announced on the changes channel, $4), none when not.
WITH written AS (
    INSERT INTO {workflow_checkpoint} (workflow, key, value)
    VALUES ($1::text, $2::text, $3::jsonb)
    ON CONFLICT (workflow, key) DO NOTHING
    RETURNING 1
)
SELECT pg_notify($4::text, 'r' || $1::text) FROM written;

-- name: append
-- One nextval spent twice, as the inbox key and the position, so the two orders agree.
-- It is taken under a lock on the workflow's inbox held to the commit, so appends to one
-- workflow commit in number order: a message never becomes visible below one a pass has
-- already read past (`receive` takes what lies after the last message it returned).
WITH turn AS (
    SELECT {_inbox_lock}
), n AS (SELECT nextval('{workflow_seq_text}') AS position FROM turn),
written AS (
    INSERT INTO {workflow_checkpoint} (workflow, key, value, seq)
    SELECT $1::text, $2::text || lpad(n.position::text, $3::integer, '0'), $4::jsonb,
           n.position
    FROM n
    RETURNING key
)
-- Announced on the changes channel ($5).
SELECT key, pg_notify($5::text, 'r' || $1::text) FROM written;

-- name: discard_records
WITH gone AS (DELETE FROM {workflow_checkpoint} WHERE workflow = $1::text RETURNING 1)
SELECT count(*) FROM gone;

-- name: discard_status
-- The status and the catalog entry go together, announced on the changes channel ($2).
WITH catalogued AS (DELETE FROM {workflow_catalog} WHERE workflow = $1::text),
gone AS (DELETE FROM {workflow_status} WHERE workflow = $1::text)
SELECT pg_notify($2::text, 'e' || $1::text);

-- name: discard_fence
UPDATE {workflow_claim}
SET token = nextval('{workflow_seq_text}'), held_until = now(), alive_until = now()
WHERE workflow = $1::text;

-- name: set_status
-- A report that ends the workflow ($6) first takes the inbox lock `append` takes, so an
-- append unless_finished either commits before the end or sees it (append_unless_finished).
-- Unless its caller moves the workflow's gate in the same transaction ($8), a workflow
-- with a gate mark is left alone (no row back, as when fenced): its caller then reports
-- again in a transaction that moves the gate too.
WITH turn AS (
    SELECT CASE WHEN $6::boolean THEN {_inbox_lock}::text END
), fence AS (
    SELECT token FROM {workflow_claim}
    WHERE workflow = $1::text AND token = $2::bigint AND EXISTS (SELECT 1 FROM turn)
      AND ($8::boolean OR NOT EXISTS (SELECT 1 FROM {workflow_gated} WHERE workflow = $1::text))
    FOR UPDATE
),
running AS (SELECT NOT $6::boolean AS running),
{_recount},
told AS (SELECT $3::text AS status, $9::text AS state),
{_follow},
reported AS (
    INSERT INTO {workflow_status} AS s (workflow, status, attempts, last_error, updated_at)
    SELECT $1::text, $3::text, $4::integer, $5::text, now() FROM fence
    ON CONFLICT (workflow) DO UPDATE
        SET status = excluded.status, attempts = excluded.attempts,
            last_error = excluded.last_error, updated_at = excluded.updated_at
    RETURNING updated_at
)
-- A report that ends the workflow is announced on the changes channel ($7).
SELECT updated_at, CASE WHEN $6::boolean THEN pg_notify($7::text, 'e' || $1::text) END
FROM reported;

-- name: finish
-- record and set_status(COMPLETED) in one statement: the fence is record's row-locking
-- UPDATE of the claim row (renewing liveness), and both writes hang off it, so a superseded
-- pass writes neither (no row back). The record is first-writer-wins; the status replaces.
-- It ends the workflow, so it takes the inbox lock first, as set_status does for an end.
-- A gated workflow is left alone unless $9, as by set_status.
WITH turn AS (
    SELECT {_inbox_lock}
), fence AS (
    UPDATE {workflow_claim}
    SET alive_until = LEAST(now() + make_interval(secs => alive_for), held_until)
    WHERE workflow = $1::text AND token = $2::bigint AND EXISTS (SELECT 1 FROM turn)
      AND ($9::boolean OR NOT EXISTS (SELECT 1 FROM {workflow_gated} WHERE workflow = $1::text))
    RETURNING token
),
written AS (
    INSERT INTO {workflow_checkpoint} (workflow, key, value)
    SELECT $1::text, $3::text, $4::jsonb FROM fence
    ON CONFLICT (workflow, key) DO NOTHING
),
running AS (SELECT false AS running),
{_recount},
told AS (SELECT $5::text AS status, $10::text AS state),
{_follow},
reported AS (
    INSERT INTO {workflow_status} AS s (workflow, status, attempts, last_error, updated_at)
    SELECT $1::text, $5::text, $6::integer, $7::text, now() FROM fence
    ON CONFLICT (workflow) DO UPDATE
        SET status = excluded.status, attempts = excluded.attempts,
            last_error = excluded.last_error, updated_at = excluded.updated_at
    RETURNING updated_at
)
-- Announced on the changes channel ($8).
SELECT updated_at, pg_notify($8::text, 'e' || $1::text) FROM reported;

-- name: get_status
SELECT workflow, status, attempts, last_error, updated_at
FROM {workflow_status}
WHERE workflow = $1::text;

-- name: workflows
SELECT workflow COLLATE "C" AS workflow FROM {workflow_checkpoint}
WHERE ($1::text IS NULL OR workflow COLLATE "C" > $1::text COLLATE "C")
UNION
SELECT workflow COLLATE "C" FROM {workflow_status}
WHERE ($1::text IS NULL OR workflow COLLATE "C" > $1::text COLLATE "C")
ORDER BY 1
LIMIT $2::integer;

-- name: list_status
SELECT workflow, status, attempts, last_error, updated_at
FROM {workflow_status}
WHERE ($1::text IS NULL OR status = $1::text)
  AND ($2::text IS NULL OR workflow > $2::text COLLATE "C")
ORDER BY workflow COLLATE "C"
LIMIT $3::integer;

-- name: peek_records
-- One index probe per key asked for, whatever the workflow holds. (`key = ANY(...)` lets
-- the planner scan the workflow's whole range instead when its statistics take the
-- workflow for a small one, which one with a long inbox never is.)
SELECT k.key, c.value::text
FROM unnest($2::text[]) AS k(key)
CROSS JOIN LATERAL {_record_of}

-- name: look
-- The status (the row whose first column is true, if any) and the records under the keys
-- $2, in one statement: one snapshot.
SELECT true, workflow, status, attempts, last_error, updated_at, NULL::text, NULL::text
FROM {workflow_status}
WHERE workflow = $1::text
UNION ALL
SELECT false, NULL::text, NULL::text, NULL::integer, NULL::text, NULL::timestamptz, k.key,
       c.value::text
FROM unnest($2::text[]) AS k(key)
CROSS JOIN LATERAL {_record_of};

-- name: inbox_turn
-- The lock on a workflow's inbox (as append takes it), held to the commit: taken in a
-- statement of its own before append_unless_finished, whose snapshot then holds every
-- end reported before (an ending report takes the lock too).
SELECT {_inbox_lock};

-- name: append_unless_finished
-- append, unless the status is one of the finished ones ($5), after inbox_turn.
-- Answers (key, NULL) when written, (NULL, status) when refused (nothing written).
WITH ended AS (
    SELECT status FROM {workflow_status}
    WHERE workflow = $1::text AND status = ANY($5::text[])
), n AS (
    SELECT nextval('{workflow_seq_text}') AS position WHERE NOT EXISTS (SELECT 1 FROM ended)
), written AS (
    INSERT INTO {workflow_checkpoint} (workflow, key, value, seq)
    SELECT $1::text, $2::text || lpad(n.position::text, $3::integer, '0'), $4::jsonb,
           n.position
    FROM n
    RETURNING key
),
told AS (SELECT pg_notify($6::text, 'r' || $1::text) FROM written)
-- The third column announces the message on the changes channel ($6).
SELECT (SELECT key FROM written), (SELECT status FROM ended), (SELECT count(*) FROM told);

-- name: forget
-- Fenced as record is (a row-locking UPDATE of the claim row, renewing liveness); the
-- delete hangs off it, so a superseded pass deletes nothing. Answers (fenced?, deleted).
WITH fence AS ({_fence}),
gone AS (
    -- The rows found by one index probe per key (as peek_records finds them), deleted by
    -- their row address and checked again.
    DELETE FROM {workflow_checkpoint}
    WHERE ctid = ANY(ARRAY(
        SELECT c.ctid FROM unnest($3::text[]) AS k(key)
        CROSS JOIN LATERAL {_record_of}
    ))
      AND workflow = $1::text AND key = ANY($3::text[]) AND EXISTS (SELECT 1 FROM fence)
    RETURNING 1
)
SELECT (SELECT count(*) FROM fence), (SELECT count(*) FROM gone);

-- name: restart
-- Under record's fence: every record but the rewritten one and those under a kept prefix
-- is deleted, the rewritten one replaced (a fresh position and time), the status set
-- PENDING. The rewritten key is left out of the delete, so no row is touched twice.
-- Answers (fenced?, deleted).
WITH fence AS ({_fence}),
gone AS (
    DELETE FROM {workflow_checkpoint} AS c
    WHERE c.workflow = $1::text AND c.key <> $3::text AND EXISTS (SELECT 1 FROM fence)
      AND NOT EXISTS (
          SELECT 1 FROM unnest($5::text[]) AS kept(prefix)
          WHERE left(c.key, length(kept.prefix)) = kept.prefix
      )
    RETURNING 1
),
written AS (
    INSERT INTO {workflow_checkpoint} (workflow, key, value)
    SELECT $1::text, $3::text, $4::jsonb FROM fence
    ON CONFLICT (workflow, key) DO UPDATE
        SET value = excluded.value, seq = excluded.seq, written_at = excluded.written_at
),
reported AS (
    INSERT INTO {workflow_status} AS s (workflow, status, attempts, last_error, updated_at)
    SELECT $1::text, $6::text, 0, NULL, now() FROM fence
    ON CONFLICT (workflow) DO UPDATE
        SET status = excluded.status, attempts = excluded.attempts,
            last_error = excluded.last_error, updated_at = excluded.updated_at
),
running AS (SELECT true AS running),
{_recount},
told AS (SELECT $6::text AS status, $7::text AS state),
{_follow}
SELECT (SELECT count(*) FROM fence), (SELECT count(*) FROM gone);

-- name: lock_counts
-- The tenant's shard 0 locked to the commit: capped admissions of one tenant take turns.
-- The counts are read after it (tenant_counts), in a statement that sees the last turn's.
INSERT INTO {workflow_tenant_counts} AS c (tenant, shard, running, started)
VALUES ($1::text, 0, 0, 0)
ON CONFLICT (tenant, shard) DO UPDATE SET tenant = c.tenant;

-- name: admit
-- Count a workflow whose start record this transaction wrote (once: a row there is kept).
WITH admitted AS (
    INSERT INTO {workflow_admitted} (workflow, tenant, running) VALUES ($1::text, $2::text, true)
    ON CONFLICT (workflow) DO NOTHING
    RETURNING tenant
)
{_count_admitted};

-- name: _count_admitted
INSERT INTO {workflow_tenant_counts} AS c (tenant, shard, running, started)
SELECT tenant, {_shard}, 1, 1 FROM admitted
ON CONFLICT (tenant, shard) DO UPDATE SET running = c.running + 1, started = c.started + 1

-- name: tenant_counts
-- No row for a tenant never counted.
SELECT sum(running)::bigint, sum(started)::bigint FROM {workflow_tenant_counts}
WHERE tenant = $1::text
HAVING count(*) > 0;

-- name: discard_admitted
-- A discarded workflow is no longer counted (inside discard's transaction).
WITH gone AS (
    DELETE FROM {workflow_admitted} WHERE workflow = $1::text RETURNING tenant, running
)
INSERT INTO {workflow_tenant_counts} AS c (tenant, shard, running, started)
SELECT tenant, {_shard}, CASE WHEN running THEN -1 ELSE 0 END, -1 FROM gone
ON CONFLICT (tenant, shard) DO UPDATE
    SET running = c.running + excluded.running, started = c.started + excluded.started;

-- name: admit_uncapped
-- `supply` of a start record that counts a first one under its tenant, in one statement
-- (no cap to check, so no lock is held past it). Answers whether the record was written.
WITH written AS (
    INSERT INTO {workflow_checkpoint} (workflow, key, value)
    VALUES ($1::text, $2::text, $3::jsonb)
    ON CONFLICT (workflow, key) DO NOTHING
    RETURNING workflow
),
admitted AS (
    INSERT INTO {workflow_admitted} (workflow, tenant, running)
    SELECT workflow, $4::text, true FROM written
    ON CONFLICT (workflow) DO NOTHING
    RETURNING tenant
),
counted AS ({_count_admitted})
SELECT count(*) FROM written;

-- name: look_many
-- For each workflow of $1: its status (the rows whose first column is true) and its
-- records under the keys $2 or starting with a prefix of $3, in one statement: one
-- snapshot.
WITH asked AS (SELECT DISTINCT a.workflow FROM unnest($1::text[]) AS a(workflow))
SELECT true, s.workflow, s.status, s.attempts, s.last_error, s.updated_at, NULL::text,
       NULL::text
FROM {workflow_status} AS s JOIN asked ON s.workflow = asked.workflow
UNION ALL
SELECT false, c.workflow, NULL::text, NULL::integer, NULL::text, NULL::timestamptz, c.key,
       c.value::text
FROM {workflow_checkpoint} AS c JOIN asked ON c.workflow = asked.workflow
WHERE c.key = ANY($2::text[])
   OR EXISTS (
       SELECT 1 FROM unnest($3::text[]) AS p(prefix)
       WHERE left(c.key, length(p.prefix)) = p.prefix
   );

-- name: admit_many
-- admit_uncapped of each start (the workflows $1, keys $2, records $3 as text, tenants
-- $4), in one statement: the workflows whose record it wrote. Each tenant's shard of the
-- counts moves once, by the workflows it admitted there, in (tenant, shard) order.
WITH asked AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
        AS a(workflow, key, value, tenant)
),
written AS (
    INSERT INTO {workflow_checkpoint} (workflow, key, value)
    SELECT workflow, key, value::jsonb FROM asked ORDER BY workflow
    ON CONFLICT (workflow, key) DO NOTHING
    RETURNING workflow
),
admitted AS (
    INSERT INTO {workflow_admitted} (workflow, tenant, running)
    SELECT asked.workflow, asked.tenant, true
    FROM asked JOIN written ON written.workflow = asked.workflow
    ORDER BY asked.workflow
    ON CONFLICT (workflow) DO NOTHING
    RETURNING workflow, tenant
),
counted AS (
    INSERT INTO {workflow_tenant_counts} AS c (tenant, shard, running, started)
    SELECT tenant, hashtext(workflow) & 15, count(*), count(*) FROM admitted
    GROUP BY 1, 2
    ORDER BY 1, 2
    ON CONFLICT (tenant, shard) DO UPDATE
        SET running = c.running + excluded.running, started = c.started + excluded.started
)
SELECT workflow FROM written;

-- name: cancel_lock
-- First in a batched cancel's transaction: each workflow's inbox lock (as an ending
-- report takes it, _inbox_lock) and its claim row, in workflow order. A pass reporting
-- meanwhile waits at its first lock, holding none of the rows shared by every workflow
-- (the counts) that the batch's ends then take, so none waits on the other in a cycle.
WITH asked AS MATERIALIZED (
    SELECT DISTINCT a.workflow FROM unnest($1::text[]) AS a(workflow)
),
inboxes AS MATERIALIZED (
    SELECT pg_advisory_xact_lock(hashtext('{workflow_checkpoint_text}'), hashtext(workflow))
    FROM (SELECT workflow FROM asked ORDER BY workflow COLLATE "C") AS ordered
)
SELECT count(*) FROM (
    SELECT c.workflow FROM {workflow_claim} AS c
    WHERE c.workflow IN (SELECT workflow FROM asked) AND (SELECT count(*) FROM inboxes) >= 0
    ORDER BY c.workflow COLLATE "C"
    FOR UPDATE OF c
) AS held;

-- name: cancel_read
-- Under cancel_lock, in a snapshot taken after it: each workflow's status row (NULLs for
-- none), whether a live claim holds it, and whether its superseding key ($2) is recorded.
SELECT a.workflow, s.status, s.attempts, s.last_error, s.updated_at,
       EXISTS (
           SELECT 1 FROM {workflow_claim} AS c
           WHERE c.workflow = a.workflow AND c.alive_until > now()
       ),
       EXISTS (
           SELECT 1 FROM {workflow_checkpoint} AS k
           WHERE k.workflow = a.workflow AND k.key = a.superseded
       )
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS a(workflow, superseded, n)
LEFT JOIN {workflow_status} AS s ON s.workflow = a.workflow
ORDER BY a.n;

-- name: cancel_mark
-- Each workflow's cancel marker (keys $2, values $3 as text), first writer wins, each
-- write announced on the changes channel ($4): the workflows whose marker it wrote.
WITH written AS (
    INSERT INTO {workflow_checkpoint} (workflow, key, value)
    SELECT workflow, key, value::jsonb
    FROM unnest($1::text[], $2::text[], $3::text[]) AS a(workflow, key, value)
    ORDER BY workflow
    ON CONFLICT (workflow, key) DO NOTHING
    RETURNING workflow
)
SELECT workflow, pg_notify($4::text, 'r' || workflow) FROM written;

-- name: cancel_end_many
-- Under cancel_lock, the end of each workflow $1 no pass runs (ungated: a gated one is
-- ended by cancel_end, its gate moved with it), in one statement: its claim taken and
-- released at once (a lapsed pass fenced out, as a claim fences it), its end record ($2,
-- value $4) written (first writer wins), its status $5 reported with its attempts ($3)
-- and error $7, as set_status reports an end: the running counts (_recount), the catalog
-- entry, its counts and the followed run record (_follow, state $6) moved the same way,
-- each shared row once, in the order single writers take them. Ends are announced on the
-- changes channel ($8); answers the workflows ended.
WITH asked AS (
    SELECT a.workflow, a.ended, a.attempts
    FROM unnest($1::text[], $2::text[], $3::integer[]) AS a(workflow, ended, attempts)
    WHERE NOT EXISTS (SELECT 1 FROM {workflow_gated} AS g WHERE g.workflow = a.workflow)
),
fence AS (
    INSERT INTO {workflow_claim} AS held (workflow, token, held_until, alive_until, alive_for)
    SELECT workflow, nextval('{workflow_seq_text}'), now(), now(), 1
    FROM asked
    ORDER BY workflow COLLATE "C"
    ON CONFLICT (workflow) DO UPDATE
        SET token = nextval('{workflow_seq_text}'), held_until = now(), alive_until = now()
        WHERE held.alive_until <= now()
    RETURNING workflow
),
written AS (
    INSERT INTO {workflow_checkpoint} (workflow, key, value)
    SELECT asked.workflow, asked.ended, $4::jsonb
    FROM asked JOIN fence ON fence.workflow = asked.workflow
    ON CONFLICT (workflow, key) DO NOTHING
),
flip AS (
    UPDATE {workflow_admitted} AS a SET running = false
    FROM fence WHERE a.workflow = fence.workflow AND a.running
    RETURNING a.tenant, a.workflow
),
moved AS (
    INSERT INTO {workflow_tenant_counts} AS c (tenant, shard, running, started)
    SELECT tenant, hashtext(workflow) & 15, -count(*), 0 FROM flip
    GROUP BY 1, 2
    ORDER BY 1, 2
    ON CONFLICT (tenant, shard) DO UPDATE SET running = c.running + excluded.running
),
caught AS (
    SELECT c.workflow, c.tenant, c.kind, c.status AS was
    FROM {workflow_catalog} AS c JOIN fence ON fence.workflow = c.workflow
    WHERE c.status <> $5::text
    FOR UPDATE OF c
),
followed AS (
    UPDATE {workflow_catalog} AS c SET status = $5::text
    FROM caught WHERE c.workflow = caught.workflow
),
recounted AS (
    INSERT INTO {workflow_counts} AS k (tenant, kind, status, shard, n)
    SELECT v.tenant, caught.kind, v.status, hashtext(caught.workflow) & 15, sum(v.n)
    FROM caught, LATERAL (
        VALUES (caught.tenant, caught.was, -1), ('', caught.was, -1),
               (caught.tenant, $5::text, 1), ('', $5::text, 1)
    ) AS v(tenant, status, n)
    GROUP BY 1, 2, 3, 4
    ORDER BY 1 DESC, 2, 3, 4
    ON CONFLICT (tenant, kind, status, shard) DO UPDATE SET n = k.n + excluded.n
),
ran AS (
    UPDATE {runs} AS r
    SET state = $6::text, version = r.version + 1,
        body = jsonb_set(r.body, ARRAY['state'], to_jsonb($6::text))
    FROM caught
    WHERE r.tenant = caught.tenant COLLATE "default"
      AND r.body -> 'metadata' ->> 'durably_workflow' = caught.workflow COLLATE "default"
      AND r.state <> $6::text
),
reported AS (
    INSERT INTO {workflow_status} AS s (workflow, status, attempts, last_error, updated_at)
    SELECT asked.workflow, $5::text, asked.attempts, $7::text, now()
    FROM asked JOIN fence ON fence.workflow = asked.workflow
    ORDER BY asked.workflow COLLATE "C"
    ON CONFLICT (workflow) DO UPDATE
        SET status = excluded.status, attempts = excluded.attempts,
            last_error = excluded.last_error, updated_at = excluded.updated_at
    RETURNING workflow
)
SELECT workflow, pg_notify($8::text, 'e' || workflow) FROM reported;

-- name: cancel_end
-- Under cancel_lock, the end of a gated workflow ($1) no pass runs: its claim taken and
-- released at once (a lapsed pass fenced out, as a claim fences it), its end record $2
-- written with $3 (first writer wins), and status $4 reported with attempts $5 and error
-- $6 as set_status reports an end, announced on the changes channel ($7). A gated
-- workflow is left alone unless $8 (no row back), as by set_status. $9: the run state.
WITH free AS (
    SELECT 1 AS ok
    WHERE $8::boolean OR NOT EXISTS (SELECT 1 FROM {workflow_gated} WHERE workflow = $1::text)
),
fence AS (
    INSERT INTO {workflow_claim} AS held (workflow, token, held_until, alive_until, alive_for)
    SELECT $1::text, nextval('{workflow_seq_text}'), now(), now(), 1 FROM free
    ON CONFLICT (workflow) DO UPDATE
        SET token = nextval('{workflow_seq_text}'), held_until = now(), alive_until = now()
        WHERE held.alive_until <= now()
    RETURNING token
),
written AS (
    INSERT INTO {workflow_checkpoint} (workflow, key, value)
    SELECT $1::text, $2::text, $3::jsonb FROM fence
    ON CONFLICT (workflow, key) DO NOTHING
),
running AS (SELECT false AS running),
{_recount},
told AS (SELECT $4::text AS status, $9::text AS state),
{_follow},
reported AS (
    INSERT INTO {workflow_status} AS s (workflow, status, attempts, last_error, updated_at)
    SELECT $1::text, $4::text, $5::integer, $6::text, now() FROM fence
    ON CONFLICT (workflow) DO UPDATE
        SET status = excluded.status, attempts = excluded.attempts,
            last_error = excluded.last_error, updated_at = excluded.updated_at
    RETURNING updated_at
)
SELECT pg_notify($7::text, 'e' || $1::text) FROM reported;
