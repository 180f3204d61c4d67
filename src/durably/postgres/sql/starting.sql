-- A workflow's first start in one statement (durably.stores.starting): its start record,
-- admitted under its tenant, its catalog entry, its run record and its wakeup. One
-- statement is one round trip and one commit; the same writes as a transaction would take
-- six round trips (measured slower than the four separate writes, two of them at once).

-- name: start_whole
-- $1 the scheduler's namespace, $2 the workflow, $3 the start record's key, $4 the record
-- (jsonb text), $5 the tenant, $6 the kind, $7 the parent (NULL: none), $8 created (µs),
-- $9 the status of an entry that reported none, $10 the run record as a row (json, as
-- state.sql's insert_runs takes them), $11 its write token, $12 the wakeup's channel, $13
-- its priority (NULL: the one an existing entry has, else $14, the default).
-- Each write hangs off the one before: the record written (a start already recorded
-- writes nothing more and answers 0), then the count and the catalog entry; the run
-- record unless the tenant has a run of its id (the caller settles that one and makes the
-- workflow ready itself: answers 1, 0); the wakeup with the run record (answers 1, 1). The
-- count's shard is the checkpointer's (hashtext(workflow) & 15); the wakeup's writes are
-- scheduler.sql's make_ready, its tenant row placed by the same fragment.
-- The run record hangs off the catalog entry, not only off the record: each row's
-- trigger moves its counts at the statement's end, in the order the rows were written, so
-- the catalog's counts are locked before the run totals, the order a status write takes
-- them in (checkpointer.sql's _follow). Taken the other way, a start and another
-- workflow's first status write deadlocked.
WITH written AS (
    INSERT INTO {workflow_checkpoint} (workflow, key, value)
    VALUES ($2::text, $3::text, $4::jsonb)
    ON CONFLICT (workflow, key) DO NOTHING
    RETURNING workflow
),
admitted AS (
    INSERT INTO {workflow_admitted} (workflow, tenant, running)
    SELECT workflow, $5::text, true FROM written
    ON CONFLICT (workflow) DO NOTHING
    RETURNING tenant
),
counted AS (
    INSERT INTO {workflow_tenant_counts} AS c (tenant, shard, running, started)
    SELECT tenant, hashtext($2::text) & 15, 1, 1 FROM admitted
    ON CONFLICT (tenant, shard) DO UPDATE SET running = c.running + 1, started = c.started + 1
),
entered AS (
    INSERT INTO {workflow_catalog} (workflow, tenant, kind, parent, created, status)
    SELECT $2::text, $5::text, $6::text, $7::text, $8::bigint,
           COALESCE((SELECT status FROM {workflow_status} WHERE workflow = $2::text), $9::text)
    FROM written
    ON CONFLICT (workflow) DO NOTHING
    RETURNING workflow
),
asked AS (
    SELECT a.* FROM entered, jsonb_to_record($10::jsonb) AS a({_run_fields})
    WHERE NOT EXISTS (
        SELECT 1 FROM {runs} AS r WHERE r.tenant = a.tenant AND r.run_id = a.run_id
    )
),
place AS (
    INSERT INTO {run_seq} AS counter (tenant, last)
    SELECT a.tenant, (SELECT coalesce(max(tenant_seq), 0) FROM {runs} WHERE tenant = a.tenant) + 1
    FROM asked AS a
    ON CONFLICT (tenant) DO UPDATE SET last = counter.last + 1
    RETURNING last
),
opened AS (
    INSERT INTO {runs} ({_run_columns})
    SELECT {_run_values}, $11::text, place.last
    FROM asked AS a, place
    ON CONFLICT DO NOTHING
    RETURNING run_id
),
queued AS (
    INSERT INTO {workflow_queue} AS q (namespace, workflow, tenant, state, visible_at, priority)
    SELECT $1::text, $2::text, $5::text, 'ready', now(), coalesce($13::smallint, $14::smallint)
    FROM opened
    ON CONFLICT (namespace, workflow) DO UPDATE
        SET tenant = excluded.tenant, state = 'ready', visible_at = now(),
            due = NULL, receipt = NULL, taken_at = NULL,
            priority = coalesce($13::smallint, q.priority)
        WHERE NOT (q.state = 'ready' AND q.receipt IS NULL AND q.visible_at <= now()
                   AND q.tenant = excluded.tenant
                   AND q.priority = coalesce($13::smallint, q.priority))
    RETURNING q.tenant, q.visible_at, q.workflow
),
{_place}
SELECT (SELECT count(*) FROM written), (SELECT count(*) FROM opened),
       CASE WHEN EXISTS (SELECT 1 FROM queued) THEN pg_notify($12::text, $1::text) END;
