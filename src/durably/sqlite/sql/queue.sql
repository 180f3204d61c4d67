-- Work items. Each operation runs inside BEGIN IMMEDIATE; the policy (fairness, backoff,
-- dead letter) is decided in Python by durably.work and only applied here.

-- name: get_item
SELECT * FROM durably_work WHERE tenant = :tenant AND id = :id

-- name: live_by_dedupe_key
SELECT * FROM durably_work
WHERE tenant = :tenant AND queue = :queue AND dedupe_key = :dedupe_key
  AND state IN ('queued', 'claimed')

-- name: kept_by_dedupe_key
-- The finished item whose dedupe key is still kept.
SELECT item FROM durably_dedupe_keys
WHERE tenant = :tenant AND queue = :queue AND dedupe_key = :dedupe_key AND expires_at > :now

-- name: keep_dedupe_key
-- A new item's key, kept :ttl seconds after the item finishes (a kept row whose time is up
-- is replaced).
INSERT OR REPLACE INTO durably_dedupe_keys (tenant, queue, dedupe_key, id, ttl, expires_at, item)
VALUES (:tenant, :queue, :dedupe_key, :id, :ttl, NULL, NULL)

-- name: finish_dedupe_key
-- The item :id finished (:item): its key is kept from now for its time to live.
UPDATE durably_dedupe_keys SET expires_at = :now + ttl, item = :item
WHERE tenant = :tenant AND queue = :queue AND dedupe_key = :dedupe_key AND id = :id
  AND expires_at IS NULL

-- name: forget_dedupe_keys
-- Up to :limit kept keys whose time is up, found through the expiry index.
DELETE FROM durably_dedupe_keys
WHERE rowid IN (
    SELECT rowid FROM durably_dedupe_keys WHERE expires_at <= :now ORDER BY expires_at LIMIT :limit
)

-- name: delete_item
DELETE FROM durably_work WHERE seq = :seq

-- name: insert_item
INSERT INTO durably_work (
    tenant, id, queue, payload, priority, dedupe_key, attempts, state, worker,
    enqueued_at, available_at, lease_expires_at, first_claimed_at, claimed_at, failures,
    concurrency_key, concurrency_limit, throttle_key, throttle_seconds, throttle_burst
) VALUES (
    :tenant, :id, :queue, :payload, :priority, :dedupe_key, :attempts, 'queued', NULL,
    :enqueued_at, :available_at, NULL, NULL, NULL, :failures,
    :concurrency_key, :concurrency_limit, :throttle_key, :throttle_seconds, :throttle_burst
)
RETURNING *

-- name: place_tenant
-- ``tenant`` has a new queued item (:at, :seq): it becomes the tenant's oldest if older than
-- what the tenant had, and the tenant joins the rotation if it is due (durably_queue_tenants
-- in schema.sql). A tenant never seen starts at turn 0.
INSERT INTO durably_queue_tenants (queue, tenant, turn, head_at, head_seq, due)
VALUES (:queue, :tenant, 0, :at, :seq, :at <= :now)
ON CONFLICT (queue, tenant) DO UPDATE
SET head_at = excluded.head_at, head_seq = excluded.head_seq, due = due OR excluded.due
WHERE head_at IS NULL OR excluded.head_at < head_at
   OR (excluded.head_at = head_at AND excluded.head_seq < head_seq)

-- name: promote_due
-- Tenants whose oldest item has come due join the rotation (the waiting index: nothing is
-- read while none has).
UPDATE durably_queue_tenants SET due = 1
WHERE queue = :queue AND due = 0 AND head_at <= :now

-- name: next_tenant
-- Fairness step 1: the tenant in the rotation whose turn is lowest (never served = 0); ties
-- go to the tenant whose oldest item (availability, then enqueue order) is oldest, which a
-- tenant in the rotation has due. The first row of the rotation index.
-- Tenants in :passed (a JSON array) have due items that are all held by their flow
-- gates: this claim passes over them, and they keep their turn.
SELECT tenant FROM durably_queue_tenants
WHERE queue = :queue AND due = 1
  AND (:passed IS NULL OR tenant NOT IN (SELECT value FROM json_each(:passed)))
ORDER BY turn, head_at, head_seq
LIMIT 1

-- name: oldest_of_priority
-- The tenant's oldest queued item of one priority (one index seek); the oldest of these
-- over the priorities is the tenant's oldest.
SELECT available_at, seq FROM durably_work
WHERE queue = :queue AND tenant = :tenant AND state = 'queued' AND priority = :priority
ORDER BY available_at, seq
LIMIT 1

-- name: claim_next_of_tenant
-- Fairness step 3: within the tenant, priority, then availability, then enqueue order,
-- passing over items whose flow gates are shut (durably.stores.flow): a concurrency key
-- with as many claimed items as the item's limit, a throttle key whose arrival time is
-- further ahead than the item's tolerance.
UPDATE durably_work
SET state = 'claimed',
    worker = :worker,
    claimed_at = :now,
    first_claimed_at = COALESCE(first_claimed_at, :now),
    lease_expires_at = :lease_expires_at
WHERE seq = (
    SELECT w.seq FROM durably_work w
    WHERE w.queue = :queue AND w.tenant = :tenant AND w.state = 'queued'
      AND w.available_at <= :now
      AND (w.concurrency_key IS NULL OR (
          SELECT COUNT(*) FROM durably_work r
          WHERE r.queue = w.queue AND r.concurrency_key = w.concurrency_key
            AND r.state = 'claimed') < w.concurrency_limit)
      AND (w.throttle_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM durably_queue_throttles t
          WHERE t.queue = w.queue AND t.key = w.throttle_key
            AND t.tat - (w.throttle_burst - 1) * w.throttle_seconds > :now))
    ORDER BY w.priority DESC, w.available_at, w.seq
    LIMIT 1
)
RETURNING *

-- name: has_due_of_tenant
-- Whether the tenant has a due item at all (a claim that took none: gated, or none due).
SELECT 1 FROM durably_work
WHERE queue = :queue AND tenant = :tenant AND state = 'queued' AND available_at <= :now
LIMIT 1

-- name: get_throttle
SELECT tat FROM durably_queue_throttles WHERE queue = :queue AND key = :key

-- name: set_throttle
INSERT INTO durably_queue_throttles (queue, key, tat) VALUES (:queue, :key, :tat)
ON CONFLICT (queue, key) DO UPDATE SET tat = excluded.tat

-- name: send_tenant_to_back
-- Fairness step 2: the served tenant's turn goes above every other turn of the queue (two
-- seeks of the rotation index), with its oldest item as it now stands: still in the
-- rotation if that is due, waiting if not, out of it (turn kept) if it has none.
UPDATE durably_queue_tenants
SET turn = 1 + MAX(
        COALESCE((SELECT MAX(turn) FROM durably_queue_tenants
                  WHERE queue = :queue AND due = 0), 0),
        COALESCE((SELECT MAX(turn) FROM durably_queue_tenants
                  WHERE queue = :queue AND due = 1), 0)),
    head_at = :head_at, head_seq = :head_seq,
    due = COALESCE(:head_at <= :now, 0)
WHERE queue = :queue AND tenant = :tenant

-- name: extend_lease
UPDATE durably_work SET lease_expires_at = :lease_expires_at
WHERE seq = :seq AND state = 'claimed' AND worker = :worker
RETURNING *

-- name: complete_item
UPDATE durably_work SET state = 'completed', lease_expires_at = NULL
WHERE seq = :seq AND state = 'claimed' AND worker = :worker
RETURNING *

-- name: settle_item
-- Applies a `Settlement`: requeue at :available_at, or dead-letter when :dead.
-- Fenced on the holder and lease that were seen, so a concurrent heartbeat is never undone.
UPDATE durably_work
SET state = CASE WHEN :dead THEN 'dead_lettered' ELSE 'queued' END,
    attempts = :attempts,
    available_at = CASE WHEN :dead THEN available_at ELSE :available_at END,
    worker = NULL,
    lease_expires_at = NULL,
    claimed_at = NULL,
    failures = :failures
WHERE seq = :seq AND state = 'claimed' AND worker = :worker
  AND lease_expires_at = :lease_expires_at
RETURNING *

-- name: lapsed_leases
SELECT * FROM durably_work
WHERE state = 'claimed' AND lease_expires_at <= :now
ORDER BY seq

-- name: held_by_worker
SELECT * FROM durably_work WHERE state = 'claimed' AND worker = :worker ORDER BY seq

-- name: count_duplicate
INSERT INTO durably_queue_counters (queue, duplicates_suppressed) VALUES (:queue, 1)
ON CONFLICT (queue) DO UPDATE SET duplicates_suppressed = duplicates_suppressed + 1

-- name: count_reaped
INSERT INTO durably_queue_counters (queue, reaped) VALUES (:queue, :count)
ON CONFLICT (queue) DO UPDATE SET reaped = reaped + excluded.reaped

-- name: dead_letters
SELECT * FROM durably_work
WHERE (:tenant IS NULL OR tenant = :tenant) AND state = 'dead_lettered'
    AND (:queue IS NULL OR queue = :queue)
ORDER BY seq
LIMIT :limit

-- name: dead_letter_page
-- One more than a page, after the cursor's place in enqueue order (:after, NULL: the first).
SELECT * FROM durably_work
WHERE (:tenant IS NULL OR tenant = :tenant) AND state = 'dead_lettered'
    AND (:queue IS NULL OR queue = :queue) AND (:after IS NULL OR seq > :after)
ORDER BY seq
LIMIT :limit + 1

-- name: stats
-- Sizes from the counters the triggers keep (schema.sql); the oldest due item from the
-- start of the due index.
SELECT
    (SELECT n FROM durably_queue_sizes WHERE queue = :queue AND state = 'queued'),
    (SELECT n FROM durably_queue_sizes WHERE queue = :queue AND state = 'claimed'),
    (SELECT n FROM durably_queue_sizes WHERE queue = :queue AND state = 'dead_lettered'),
    (SELECT MIN(available_at) FROM durably_work
        WHERE queue = :queue AND state = 'queued' AND available_at <= :now),
    (SELECT reaped FROM durably_queue_counters WHERE queue = :queue),
    (SELECT duplicates_suppressed FROM durably_queue_counters WHERE queue = :queue)

-- name: get_tick
SELECT tick FROM durably_schedule_ticks WHERE name = :name

-- name: set_tick
INSERT INTO durably_schedule_ticks (name, tick) VALUES (:name, :tick)
ON CONFLICT (name) DO UPDATE SET tick = excluded.tick

-- name: debounce
-- A start with debounce slot :slot: a pending workflow (not begun) takes :args and is due
-- at :due; none pending, the slot names :workflow. Returns the pending workflow's id.
INSERT INTO durably_debounces (slot, workflow, args, due) VALUES (:slot, :workflow, :args, :due)
ON CONFLICT (slot) DO UPDATE SET
    workflow = CASE WHEN begun THEN excluded.workflow ELSE workflow END,
    args = excluded.args, due = excluded.due, begun = 0
RETURNING workflow

-- name: begin_debounced
-- Workflow :workflow takes slot :slot if it is due at :now (or took it before): its
-- arguments. Nothing when it is not due or the slot names another workflow.
UPDATE durably_debounces SET begun = 1
WHERE slot = :slot AND workflow = :workflow AND (begun OR due <= :now)
RETURNING args

-- name: debounce_due
SELECT due FROM durably_debounces WHERE slot = :slot AND workflow = :workflow AND NOT begun

-- name: release_debounced
-- The slot, once the workflow it names began (its arguments recorded) or ended unbegun.
DELETE FROM durably_debounces WHERE slot = :slot AND workflow = :workflow

-- name: debounced
SELECT workflow FROM durably_debounces WHERE slot = :slot

-- name: queue_names
-- Queues with items (the sizes the triggers keep) or counters, sorted, at most :limit.
SELECT queue FROM durably_queue_sizes WHERE n > 0
UNION
SELECT queue FROM durably_queue_counters
ORDER BY 1
LIMIT :limit

-- name: purge
-- The queued items of :queue (of :tenant only, unless NULL). The triggers keep the sizes;
-- a tenant left in the rotation with nothing queued is put right by the next claim.
DELETE FROM durably_work
WHERE queue = :queue AND state = 'queued' AND (:tenant IS NULL OR tenant = :tenant)
RETURNING tenant, id

-- name: purge_dead_letters
-- Up to :limit dead letters of :queue (of :tenant only, unless NULL; the one :id, unless
-- NULL), oldest first. The triggers keep the sizes.
DELETE FROM durably_work
WHERE seq IN (
    SELECT seq FROM durably_work
    WHERE queue = :queue AND state = 'dead_lettered' AND (:tenant IS NULL OR tenant = :tenant)
      AND (:id IS NULL OR id = :id)
    ORDER BY seq
    LIMIT :limit
)
RETURNING tenant, id

-- name: forget_dead_key
-- A purged dead letter's dedupe key, kept since it finished or never finished.
DELETE FROM durably_dedupe_keys WHERE tenant = :tenant AND queue = :queue AND id = :id

-- name: forget_purged_key
-- A purged item's kept-key row, written at its enqueue (it never finished).
DELETE FROM durably_dedupe_keys WHERE tenant = :tenant AND queue = :queue AND id = :id
  AND expires_at IS NULL

-- name: count_finished
-- An item of :queue finished at :minute (completed, or dead-lettered when :failed): its
-- slot of the ring (schema.sql, durably_throughput) counts it.
INSERT INTO durably_throughput (what, name, slot, minute, completed, failed)
VALUES ('item', :queue, :slot, :minute, 1 - :failed, :failed)
ON CONFLICT (what, name, slot) DO UPDATE SET
    completed = excluded.completed + CASE WHEN durably_throughput.minute = excluded.minute
        THEN durably_throughput.completed ELSE 0 END,
    failed = excluded.failed + CASE WHEN durably_throughput.minute = excluded.minute
        THEN durably_throughput.failed ELSE 0 END,
    minute = excluded.minute
WHERE durably_throughput.minute <= excluded.minute

-- name: finished_per_minute
-- The ring's slots of the queues in :names (a JSON array) counting :first or later.
SELECT name, minute, completed, failed FROM durably_throughput
WHERE what = 'item' AND name IN (SELECT value FROM json_each(:names)) AND minute >= :first
