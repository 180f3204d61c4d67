-- When each workflow may run next: one row per (namespace, workflow). Visibility runs on
-- the server's clock; a sleeping entry's `due` is on the caller's clock.

-- name: make_ready
INSERT INTO {workflow_queue} AS q (namespace, workflow, state, visible_at)
VALUES ($1::text, $2::text, 'ready', now())
ON CONFLICT (namespace, workflow) DO UPDATE
    SET state = 'ready', visible_at = now(), due = NULL, receipt = NULL, taken_at = NULL
RETURNING pg_notify($3::text, $1::text)::text;

-- name: take
WITH picked AS (
    SELECT namespace, workflow
    FROM {workflow_queue}
    WHERE namespace = $1::text AND state = 'ready' AND visible_at <= now()
    ORDER BY visible_at, workflow
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE {workflow_queue} q
SET visible_at = now() + make_interval(secs => $2::float8), receipt = $3::text,
    taken_at = now()
FROM picked
WHERE q.namespace = picked.namespace AND q.workflow = picked.workflow
  AND q.state = 'ready' AND q.visible_at <= now()
RETURNING q.workflow;

-- name: next_visible
SELECT extract(epoch FROM min(visible_at) - now())::float8
FROM {workflow_queue}
WHERE namespace = $1::text AND state = 'ready';

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
WITH woken AS (
    UPDATE {workflow_queue}
    SET state = 'ready', visible_at = now(), due = NULL
    WHERE namespace = $1::text AND state = 'sleeping' AND due <= $2::float8
    RETURNING 1
)
SELECT count(*), CASE WHEN count(*) > 0 THEN pg_notify($3::text, $1::text)::text END
FROM woken;

-- name: reclaim
WITH returned AS (
    UPDATE {workflow_queue}
    SET visible_at = now(), receipt = NULL, taken_at = NULL
    WHERE namespace = $1::text AND receipt IS NOT NULL
      AND taken_at <= now() - make_interval(secs => $2::float8)
    RETURNING workflow
)
-- One notification per row, folded into one by the server (same channel and payload).
SELECT workflow, pg_notify($3::text, $1::text)::text FROM returned;

-- name: extend
UPDATE {workflow_queue}
SET visible_at = now() + make_interval(secs => $4::float8)
WHERE namespace = $1::text AND workflow = $2::text AND receipt = $3::text
RETURNING 1;

-- name: cancel
DELETE FROM {workflow_queue} WHERE namespace = $1::text AND workflow = $2::text;
