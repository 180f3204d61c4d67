-- When each workflow may run next: one row per (namespace, workflow), and where each tenant
-- stands in the rotation ({workflow_tenants}). Visibility runs on the server's clock; a
-- sleeping entry's `due` is on the caller's clock. An entry is queued (ready, no hand-out
-- in flight: in its tenant's line), in flight (ready with a receipt) or sleeping. The order
-- is the fairness order of durably.stores.workflows.
--
-- No tenant is ever stranded (queued workflows, out of the rotation). Every write that
-- queues a workflow writes the entry and then updates its tenant's row (active, and its
-- `version` one up), in one transaction. Two writes clear `active`, each only with the
-- row locked (skipping it if a writer holds it):
--   - `take`, for the tenant it served, when the line looked empty as of its snapshot and
--     the locked row still has the version that snapshot read: a writer that committed
--     since would have moved it. One that locks later waits for the take's commit and
--     sets `active` again.
--   - `tidy`, for a tenant whose line a take found empty, in a statement of its own (a
--     snapshot taken after the lock): a writer that locked first has committed before
--     that snapshot, so the check sees its workflow; one that locks later sets `active`
--     again.
-- Entry rows are always locked before tenant rows, and tenant rows in tenant order, so
-- none of these waits can close a cycle.

-- name: _place
-- The tenant row of each workflow `queued` returns (tenant, visible_at, workflow): in the
-- rotation, its head the older of the one it had and the new one (a tenant never seen at
-- turn 0). Tenant rows are locked in tenant order.
placed AS (
    INSERT INTO {workflow_tenants} AS t
        (namespace, tenant, turn, head_at, head_workflow, active, version)
    SELECT DISTINCT ON (tenant) $1::text, tenant, 0, visible_at, workflow, true, 0
    FROM queued
    ORDER BY tenant, visible_at, workflow
    ON CONFLICT (namespace, tenant) DO UPDATE
    SET active = true, version = t.version + 1,
        head_at = CASE
            WHEN NOT t.active
              OR (excluded.head_at, excluded.head_workflow) < (t.head_at, t.head_workflow)
            THEN excluded.head_at ELSE t.head_at END,
        head_workflow = CASE
            WHEN NOT t.active
              OR (excluded.head_at, excluded.head_workflow) < (t.head_at, t.head_workflow)
            THEN excluded.head_workflow ELSE t.head_workflow END
)

-- name: make_ready
-- $1 namespace, $2 workflow, $3 its tenant (NULL: the one it has), $4 the default tenant
-- (a new entry named none), $5 the channel to notify, $6 its priority (NULL: the one it
-- has), $7 the default priority.
-- An entry already queued as asked (ready, unheld, visible, same tenant and priority) is
-- left as it is: it keeps its place in line, its tenant's row is already in the rotation
-- (the write that queued it put it there), and a workflow sent many messages does not
-- rewrite its row, and leave a dead index entry, on every one.
WITH queued AS (
    INSERT INTO {workflow_queue} AS q (namespace, workflow, tenant, state, visible_at, priority)
    VALUES ($1::text, $2::text, coalesce($3::text, $4::text), 'ready', now(),
            coalesce($6::smallint, $7::smallint))
    ON CONFLICT (namespace, workflow) DO UPDATE
        SET tenant = coalesce($3::text, q.tenant), state = 'ready', visible_at = now(),
            due = NULL, receipt = NULL, taken_at = NULL,
            priority = coalesce($6::smallint, q.priority)
        WHERE NOT (q.state = 'ready' AND q.receipt IS NULL AND q.visible_at <= now()
                   AND q.tenant = coalesce($3::text, q.tenant)
                   AND q.priority = coalesce($6::smallint, q.priority))
    RETURNING q.tenant, q.visible_at, q.workflow
),
{_place}
SELECT pg_notify($5::text, $1::text)::text;

-- name: take
-- $1 namespace, $2 lease seconds, $3 receipt, $4 how many tenants of the rotation to read,
-- $5 whether to look for lapsed hand-outs first.
-- Reads the first $4 tenants of the rotation (one descent of the rotation index, then one
-- probe of the lines index each) and takes, from the first whose line has a workflow no
-- concurrent take holds, that line's first by priority, then age (SKIP LOCKED: a held one is passed over). The
-- served tenant's turn goes to the back, and it leaves the rotation when its line is
-- empty; a row another statement is writing right now is skipped, not waited for (that
-- order is off by one turn, once, and a tidy checks the line).
-- Besides the hand-out, rows of chores for the caller: 'tidy' for each tenant read with an
-- empty line and for a served tenant whose line looks empty and whose row was skipped;
-- 'lapsed' (nothing
-- taken) when a hand-out's lease has lapsed and $5 is set, so that `return_lapsed` puts it
-- back in its line before the take; 'more' when nothing was taken though the rotation may
-- hold tenants beyond the $4 read.
WITH lapsed AS MATERIALIZED (
    SELECT $5::boolean AND EXISTS (
        SELECT 1 FROM {workflow_queue}
        WHERE namespace = $1::text AND receipt IS NOT NULL AND visible_at <= now()
    ) AS found
),
candidates AS MATERIALIZED (
    SELECT r.tenant, r.position, r.version,
           EXISTS (
               SELECT 1 FROM {workflow_queue} q
               WHERE q.namespace = $1::text AND q.tenant = r.tenant AND q.state = 'ready'
                 AND q.receipt IS NULL
           ) AS queued
    FROM (
        SELECT tenant, version,
               row_number() OVER (ORDER BY turn, head_at, head_workflow, tenant) AS position
        FROM (
            SELECT tenant, turn, head_at, head_workflow, version FROM {workflow_tenants}
            WHERE namespace = $1::text AND active AND NOT (SELECT found FROM lapsed)
            ORDER BY turn, head_at, head_workflow, tenant
            LIMIT $4::integer
        ) first
    ) r
),
picked AS (
    SELECT line.workflow, line.tenant
    FROM (SELECT tenant, position FROM candidates WHERE queued ORDER BY position OFFSET 0) c
    CROSS JOIN LATERAL (
        SELECT q.workflow, q.tenant FROM {workflow_queue} q
        WHERE q.namespace = $1::text AND q.tenant = c.tenant AND q.state = 'ready'
          AND q.receipt IS NULL
        ORDER BY q.priority DESC, q.visible_at, q.workflow
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) line
    LIMIT 1
),
taken AS (
    UPDATE {workflow_queue} q
    SET visible_at = now() + make_interval(secs => $2::float8), receipt = $3::text,
        taken_at = now()
    FROM picked
    WHERE q.namespace = $1::text AND q.workflow = picked.workflow
    RETURNING q.workflow, q.tenant
),
-- Whether the served tenant's line looked empty without the taken workflow, as of this
-- statement's snapshot.
emptied AS MATERIALIZED (
    SELECT picked.tenant, NOT EXISTS (
        SELECT 1 FROM {workflow_queue} q
        WHERE q.namespace = $1::text AND q.tenant = picked.tenant AND q.state = 'ready'
          AND q.receipt IS NULL AND q.workflow <> picked.workflow
    ) AS empty
    FROM picked
),
served AS (
    UPDATE {workflow_tenants} t
    SET turn = nextval('{workflow_turn_seq_text}'),
        active = NOT (emptied.empty AND t.version = seen.version)
    FROM (
        SELECT namespace, tenant FROM {workflow_tenants}
        WHERE namespace = $1::text AND tenant IN (SELECT tenant FROM taken)
        FOR UPDATE SKIP LOCKED
    ) free, emptied, candidates seen
    WHERE t.namespace = free.namespace AND t.tenant = free.tenant
      AND emptied.tenant = t.tenant AND seen.tenant = t.tenant
    RETURNING t.tenant
)
SELECT workflow, tenant, 'taken' FROM taken
UNION ALL
SELECT NULL, tenant, 'tidy' FROM candidates WHERE NOT queued
UNION ALL
-- The served tenant's row was being written: its line is left for a tidy to check.
SELECT NULL, tenant, 'tidy' FROM emptied WHERE empty AND NOT EXISTS (SELECT 1 FROM served)
UNION ALL
SELECT NULL, NULL, 'lapsed' FROM lapsed WHERE found
UNION ALL
SELECT NULL, NULL, 'more'
WHERE NOT EXISTS (SELECT 1 FROM picked)
  AND (SELECT count(*) FROM candidates) >= $4::integer;

-- name: return_lapsed
-- Hand-outs whose lease lapsed rejoin their tenants' lines, visible since the lapse (at
-- most $2, earliest first). $1 namespace, $2 how many.
WITH queued AS (
    UPDATE {workflow_queue} q SET receipt = NULL, taken_at = NULL
    FROM (
        SELECT namespace, workflow FROM {workflow_queue}
        WHERE namespace = $1::text AND receipt IS NOT NULL AND visible_at <= now()
        ORDER BY visible_at
        LIMIT $2::integer
        FOR UPDATE SKIP LOCKED
    ) lapsed
    WHERE q.namespace = lapsed.namespace AND q.workflow = lapsed.workflow
    RETURNING q.tenant, q.visible_at, q.workflow
),
{_place}
SELECT count(*) FROM queued;

-- name: tidy_lock
-- `tidy`'s first statement: the tenant's row, locked (see the top of this file); no row
-- when a writer holds it (its workflow keeps the tenant in the rotation: nothing to tidy).
SELECT 1 FROM {workflow_tenants} WHERE namespace = $1::text AND tenant = $2::text
FOR UPDATE SKIP LOCKED;

-- name: tidy
-- The tenant leaves the rotation if its line is empty, as of a snapshot taken after
-- `tidy_lock` (it keeps its turn).
UPDATE {workflow_tenants} t SET active = false
WHERE t.namespace = $1::text AND t.tenant = $2::text AND t.active
  AND NOT EXISTS (
      SELECT 1 FROM {workflow_queue} q
      WHERE q.namespace = $1::text AND q.tenant = $2::text AND q.state = 'ready'
        AND q.receipt IS NULL
  );

-- name: next_visible
-- Seconds until a workflow is visible: 0 while a tenant is in the rotation, else until
-- the first lease lapses (NULL: nothing ready at all).
SELECT CASE
    WHEN EXISTS (SELECT 1 FROM {workflow_tenants} WHERE namespace = $1::text AND active)
    THEN 0.0
    ELSE (SELECT extract(epoch FROM min(visible_at) - now())::float8 FROM {workflow_queue}
          WHERE namespace = $1::text AND receipt IS NOT NULL)
END;

-- name: done
DELETE FROM {workflow_queue}
WHERE namespace = $1::text AND workflow = $2::text AND receipt = $3::text;

-- name: wake_at
-- The delivery's own entry goes to sleep until $4; any other state means a wakeup arrived
-- meanwhile: a sleeping one may only be brought forward, a ready one is left alone.
UPDATE {workflow_queue}
SET state = CASE WHEN receipt = $3::text THEN 'sleeping' ELSE state END,
    due = CASE
        WHEN receipt = $3::text THEN $4::float8
        WHEN state = 'sleeping' THEN LEAST(due, $4::float8)
        ELSE due
    END,
    taken_at = CASE WHEN receipt = $3::text THEN NULL ELSE taken_at END,
    receipt = CASE WHEN receipt = $3::text THEN NULL ELSE receipt END
WHERE namespace = $1::text AND workflow = $2::text;

-- name: wake_due
WITH queued AS (
    UPDATE {workflow_queue}
    SET state = 'ready', visible_at = now(), due = NULL
    WHERE namespace = $1::text AND state = 'sleeping' AND due <= $2::float8
    RETURNING tenant, visible_at, workflow
),
{_place}
SELECT count(*), CASE WHEN count(*) > 0 THEN pg_notify($3::text, $1::text)::text END
FROM queued;

-- name: reclaim
WITH queued AS (
    UPDATE {workflow_queue}
    SET visible_at = now(), receipt = NULL, taken_at = NULL
    WHERE namespace = $1::text AND receipt IS NOT NULL
      AND taken_at <= now() - make_interval(secs => $2::float8)
    RETURNING tenant, visible_at, workflow
),
{_place}
-- One notification per row, folded into one by the server (same channel and payload).
SELECT workflow, pg_notify($3::text, $1::text)::text FROM queued;

-- name: reprioritize
-- $1 namespace, $2 workflow, $3 its priority from now on. Its visibility is kept, and a
-- tenant's head goes by age, not priority: the rotation needs no change.
UPDATE {workflow_queue} SET priority = $3::smallint
WHERE namespace = $1::text AND workflow = $2::text
RETURNING 1;

-- name: extend
UPDATE {workflow_queue}
SET visible_at = now() + make_interval(secs => $4::float8)
WHERE namespace = $1::text AND workflow = $2::text AND receipt = $3::text
RETURNING 1;

-- name: cancel
-- The tenant's row is left as it is: a take that finds its line empty tidies it.
DELETE FROM {workflow_queue} WHERE namespace = $1::text AND workflow = $2::text;

-- name: make_ready_many
-- make_ready of each workflow $2 (tenants $3 and priorities $6, each NULL: the one it
-- has), in one statement; of one workflow named twice the last stands. Entries are
-- written in workflow order, then their tenants' rows in tenant order (_place).
WITH asked AS (
    SELECT DISTINCT ON (a.workflow) a.workflow, a.tenant, a.priority
    FROM unnest($2::text[], $3::text[], $6::smallint[]) WITH ORDINALITY
        AS a(workflow, tenant, priority, n)
    ORDER BY a.workflow, a.n DESC
),
queued AS (
    INSERT INTO {workflow_queue} AS q (namespace, workflow, tenant, state, visible_at, priority)
    SELECT $1::text, a.workflow, coalesce(a.tenant, $4::text), 'ready', now(),
           coalesce(a.priority, $7::smallint)
    FROM asked AS a
    ORDER BY a.workflow COLLATE "C"
    ON CONFLICT (namespace, workflow) DO UPDATE
        SET tenant = coalesce(
                (SELECT a.tenant FROM asked AS a WHERE a.workflow = excluded.workflow), q.tenant
            ),
            state = 'ready', visible_at = now(), due = NULL, receipt = NULL, taken_at = NULL,
            priority = coalesce(
                (SELECT a.priority FROM asked AS a WHERE a.workflow = excluded.workflow),
                q.priority
            )
        -- As make_ready: an entry queued already as asked is left in its place.
        WHERE NOT (q.state = 'ready' AND q.receipt IS NULL AND q.visible_at <= now()
                   AND EXISTS (
                       SELECT 1 FROM asked AS a
                       WHERE a.workflow = excluded.workflow
                         AND q.tenant = coalesce(a.tenant, q.tenant)
                         AND q.priority = coalesce(a.priority, q.priority)))
    RETURNING q.tenant, q.visible_at, q.workflow
),
{_place}
SELECT pg_notify($5::text, $1::text)::text;

-- name: cancel_many
-- cancel of each workflow $2, in one statement.
DELETE FROM {workflow_queue} WHERE namespace = $1::text AND workflow = ANY($2::text[]);
