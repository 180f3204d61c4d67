-- durably's PostgreSQL schema, version 7. Apply it with durably.postgres.migrate() or your
-- own migration tool; durably never alters a table on its own.

-- name: schema
CREATE TABLE IF NOT EXISTS {schema_version} (
    version integer NOT NULL
);

CREATE TABLE IF NOT EXISTS {runs} (
    tenant text NOT NULL,
    run_id text NOT NULL,
    seq bigserial NOT NULL,
    version bigint NOT NULL,
    state text NOT NULL,
    session_id text,
    updated_at double precision NOT NULL,
    input_tokens bigint NOT NULL DEFAULT 0,
    output_tokens bigint NOT NULL DEFAULT 0,
    cached_tokens bigint NOT NULL DEFAULT 0,
    cache_write_tokens bigint NOT NULL DEFAULT 0,
    reasoning_tokens bigint NOT NULL DEFAULT 0,
    requests bigint NOT NULL DEFAULT 0,
    tool_calls bigint NOT NULL DEFAULT 0,
    cost_micros bigint NOT NULL DEFAULT 0,
    iterations bigint NOT NULL DEFAULT 0,
    message_cursor bigint NOT NULL DEFAULT 0,
    body jsonb NOT NULL,
    write_token text,
    PRIMARY KEY (tenant, run_id)
);
-- Added after the first layout: a version-1 database made before it gains the column here.
-- Each put_run's own token, so a retry whose first attempt committed (its answer lost with
-- the connection) finds its write instead of reporting a conflict.
ALTER TABLE {runs} ADD COLUMN IF NOT EXISTS write_token text;
CREATE UNIQUE INDEX IF NOT EXISTS {runs_name}_by_seq ON {runs} (tenant, seq);
-- Added after the first layout: a run's place among its tenant's runs, the listing order
-- and the cursor, so that a cursor tells a tenant nothing about other tenants' runs. Runs
-- stored before it take `seq`, which orders each tenant's runs alike.
ALTER TABLE {runs} ADD COLUMN IF NOT EXISTS tenant_seq bigint;
UPDATE {runs} SET tenant_seq = seq WHERE tenant_seq IS NULL;
CREATE UNIQUE INDEX IF NOT EXISTS {runs_name}_by_tenant_seq ON {runs} (tenant, tenant_seq);
-- The last place handed out per tenant: kept when runs are deleted, so a place is never
-- handed out twice and a cursor never skips a run created after it.
CREATE TABLE IF NOT EXISTS {run_seq} (
    tenant text PRIMARY KEY,
    last bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS {runs_name}_by_session ON {runs} (tenant, session_id)
    WHERE session_id IS NOT NULL;
-- Added in version 7: the run record following a workflow (an App's, whose metadata names
-- the workflow's key), found by each status write of that workflow, which stores the run's
-- state in the same statement (checkpointer.sql's _follow).
CREATE INDEX IF NOT EXISTS {runs_name}_following
    ON {runs} (tenant, (body -> 'metadata' ->> 'durably_workflow'))
    WHERE body -> 'metadata' ->> 'durably_workflow' IS NOT NULL;

CREATE TABLE IF NOT EXISTS {sessions} (
    tenant text NOT NULL,
    session_id text NOT NULL,
    version bigint NOT NULL,
    updated_at double precision NOT NULL,
    body jsonb NOT NULL,
    write_token text,
    PRIMARY KEY (tenant, session_id)
);
ALTER TABLE {sessions} ADD COLUMN IF NOT EXISTS write_token text;

-- Rewritten on every claim, heartbeat and settle: vacuum it far more often than the default.
-- Its text keys compare byte for byte (COLLATE "C"): code-point order, as every backing
-- orders ids, and no locale rules in the indexes every enqueue and claim walks.
CREATE TABLE IF NOT EXISTS {work} (
    tenant text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    queue text COLLATE "C" NOT NULL,
    seq bigserial NOT NULL,
    payload jsonb NOT NULL,
    priority integer NOT NULL,
    dedupe_key text COLLATE "C",
    attempts integer NOT NULL DEFAULT 0,
    state text NOT NULL,
    worker text COLLATE "C",
    enqueued_at double precision NOT NULL,
    available_at double precision NOT NULL,
    lease_expires_at double precision,
    first_claimed_at double precision,
    claimed_at double precision,
    failures jsonb NOT NULL DEFAULT '[]',
    PRIMARY KEY (tenant, id)
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE UNIQUE INDEX IF NOT EXISTS {work_name}_live_dedupe ON {work} (tenant, queue, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND state IN ('queued', 'claimed');
CREATE INDEX IF NOT EXISTS {work_name}_due ON {work}
    (queue, tenant, priority DESC, available_at, seq) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS {work_name}_age ON {work} (queue, tenant, available_at, seq)
    WHERE state = 'queued';
-- A queue's due items oldest first, across tenants: stats' oldest age and next_due read
-- its first entry rather than every tenant's.
CREATE INDEX IF NOT EXISTS {work_name}_oldest ON {work} (queue, available_at)
    WHERE state = 'queued';
-- Every claimed item, by lease expiry: reap reads the lapsed ones, and adopt (rare: a
-- restarted worker) filters a worker's own out of these few rows rather than have every
-- claim write a second index entry.
CREATE INDEX IF NOT EXISTS {work_name}_leased ON {work} (lease_expires_at)
    WHERE state = 'claimed';
CREATE INDEX IF NOT EXISTS {work_name}_dead ON {work} (tenant, seq)
    WHERE state = 'dead_lettered';

-- The turn a tenant was last served at, written when it leaves the rotation (below) and
-- read when it comes back. A tenant without a row has never been served (turn 0).
CREATE TABLE IF NOT EXISTS {turns} (
    queue text COLLATE "C" NOT NULL,
    tenant text COLLATE "C" NOT NULL,
    turn bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, tenant)
);
CREATE SEQUENCE IF NOT EXISTS {turn_seq};

-- Added in version 3: the rotation. A row per (queue, tenant) that may have a due item, in
-- claim order: its turn (0 = never served), then, for never-served tenants, its oldest
-- item's availability and enqueue order. The row's existence is the flag: an enqueue or
-- requeue inserts it when missing (ON CONFLICT DO NOTHING: no write and no row lock when it
-- is there); a claim moves the served tenant's turn to the back; only `tidy` deletes it,
-- when the tenant has nothing due (queue.sql says why no tenant is ever stranded).
CREATE TABLE IF NOT EXISTS {rota} (
    queue text COLLATE "C" NOT NULL,
    tenant text COLLATE "C" NOT NULL,
    turn bigint NOT NULL,
    available_at double precision NOT NULL,
    seq bigint NOT NULL,
    PRIMARY KEY (queue, tenant)
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE INDEX IF NOT EXISTS {rota_name}_order ON {rota} (queue, turn, available_at, seq, tenant);
-- Tenants whose queued items are all delayed, by when the first comes due: a claim finding
-- one due promotes it into the rotation.
CREATE TABLE IF NOT EXISTS {waiting} (
    queue text COLLATE "C" NOT NULL,
    tenant text COLLATE "C" NOT NULL,
    due double precision NOT NULL,
    PRIMARY KEY (queue, tenant)
);
CREATE INDEX IF NOT EXISTS {waiting_name}_due ON {waiting} (queue, due);
-- A version-2 database's tenants with queued items join the rotation (a delayed tenant is
-- moved to `waiting` by the first claim that walks it).
INSERT INTO {rota} (queue, tenant, turn, available_at, seq)
SELECT DISTINCT ON (w.queue, w.tenant) w.queue, w.tenant,
       coalesce((SELECT t.turn FROM {turns} t WHERE t.queue = w.queue AND t.tenant = w.tenant), 0),
       w.available_at, w.seq
FROM {work} w
WHERE w.state = 'queued' AND EXISTS (SELECT 1 FROM {schema_version} WHERE version < 3)
ORDER BY w.queue, w.tenant, w.available_at, w.seq
ON CONFLICT DO NOTHING;

-- Added in version 5: flow gates (durably.stores.flow). An item's gates, empty for none.
ALTER TABLE {work}
    ADD COLUMN IF NOT EXISTS concurrency_key text COLLATE "C",
    ADD COLUMN IF NOT EXISTS concurrency_limit integer,
    ADD COLUMN IF NOT EXISTS throttle_key text COLLATE "C",
    ADD COLUMN IF NOT EXISTS throttle_seconds double precision,
    ADD COLUMN IF NOT EXISTS throttle_burst integer;
-- How many items of each concurrency key of a queue are claimed (kept by the claim,
-- complete and settle statements), and the limit its first claim carried (each claim
-- checks against the limit of the item it takes).
CREATE TABLE IF NOT EXISTS {gates} (
    queue text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    running integer NOT NULL,
    room integer NOT NULL,
    PRIMARY KEY (queue, key)
);
-- Each throttle key's theoretical arrival time (the GCRA of durably.stores.flow), with the
-- interval and tolerance its last claim carried.
CREATE TABLE IF NOT EXISTS {throttles} (
    queue text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    tat double precision NOT NULL,
    step double precision NOT NULL,
    tolerance double precision NOT NULL,
    PRIMARY KEY (queue, key)
);

-- Added in version 5: each cron schedule's last fired tick (durably.engine.schedules).
CREATE TABLE IF NOT EXISTS {schedule_ticks} (
    name text COLLATE "C" PRIMARY KEY,
    tick double precision NOT NULL,
    previous double precision
);

-- Added in version 6: each debounce slot's workflow, last arguments and due time
-- (durably.stores.debounce). `begun`: the workflow took the slot; the next start replaces it.
CREATE TABLE IF NOT EXISTS {debounces} (
    slot text COLLATE "C" PRIMARY KEY,
    workflow text NOT NULL,
    args text NOT NULL,
    due double precision NOT NULL,
    begun boolean NOT NULL DEFAULT false
);

CREATE TABLE IF NOT EXISTS {counters} (
    queue text PRIMARY KEY,
    reaped bigint NOT NULL DEFAULT 0,
    duplicates_suppressed bigint NOT NULL DEFAULT 0
);

-- One row per enqueue that wrote an item, for a while: its token lets a retry of that call
-- (its answer lost with the connection) find it even after the item completed and was
-- deleted. `reap` forgets rows older than a few minutes, through the BRIN index (rows are
-- written in time order, and the index costs next to nothing to keep).
CREATE TABLE IF NOT EXISTS {enqueues} (
    token text COLLATE "C" PRIMARY KEY,
    tenant text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    written_at double precision NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.01);
CREATE INDEX IF NOT EXISTS {enqueues_name}_written ON {enqueues} USING brin (written_at);

-- Added in version 5: dedupe keys enqueued with a time to live. The row is written with
-- the item; when the item completes or is dead-lettered, `expires_at` is set and `item`
-- holds it finished (a JSON array of its row): until then an enqueue of the key is
-- answered with it. `reap` forgets expired rows through the expiry index, a batch a time.
CREATE TABLE IF NOT EXISTS {dedupe_keys} (
    tenant text COLLATE "C" NOT NULL,
    queue text COLLATE "C" NOT NULL,
    dedupe_key text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    ttl double precision NOT NULL,
    expires_at double precision,
    item jsonb,
    PRIMARY KEY (tenant, queue, dedupe_key)
);
CREATE INDEX IF NOT EXISTS {dedupe_keys_name}_expiry ON {dedupe_keys} (expires_at)
    WHERE expires_at IS NOT NULL;

CREATE SEQUENCE IF NOT EXISTS {workflow_seq};

CREATE TABLE IF NOT EXISTS {workflow_checkpoint} (
    workflow text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    value jsonb NOT NULL,
    seq bigint NOT NULL DEFAULT nextval('{workflow_seq_text}'),
    written_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (workflow, key)
);
-- No index on (workflow, seq): load reads a workflow's rows by the primary key and sorts
-- them, and every step's insert would pay for a second index entry.

CREATE TABLE IF NOT EXISTS {workflow_claim} (
    workflow text COLLATE "C" PRIMARY KEY,
    token bigint NOT NULL,
    held_until timestamptz NOT NULL,
    alive_until timestamptz NOT NULL,
    alive_for double precision NOT NULL
);

-- Scheduler entries: queued (ready, no hand-out in flight: in its tenant's line), in flight
-- (ready with a receipt: invisible until visible_at) or sleeping (due on the caller's
-- clock). Version 4 added `tenant` (earlier entries are the default tenant's), a line per
-- tenant and the hand-outs in flight by when their lease lapses (`migrate` drops the one
-- index of every ready entry that version 3 kept, {workflow_queue_name}_ready).
CREATE TABLE IF NOT EXISTS {workflow_queue} (
    namespace text COLLATE "C" NOT NULL,
    workflow text COLLATE "C" NOT NULL,
    state text NOT NULL,
    visible_at timestamptz NOT NULL,
    due double precision,
    receipt text,
    taken_at timestamptz,
    PRIMARY KEY (namespace, workflow)
);
ALTER TABLE {workflow_queue} ADD COLUMN IF NOT EXISTS tenant text COLLATE "C" NOT NULL
    DEFAULT 'default';
CREATE INDEX IF NOT EXISTS {workflow_queue_name}_lines ON {workflow_queue}
    (namespace, tenant, visible_at, workflow) WHERE state = 'ready' AND receipt IS NULL;
-- Version 7: a `WorkPriority` value per entry (earlier entries NORMAL), and each line in
-- the order its tenant gives it out (highest priority, then visible longest), what a take
-- seeks; the lines index above keeps each line's oldest.
ALTER TABLE {workflow_queue} ADD COLUMN IF NOT EXISTS priority smallint NOT NULL DEFAULT 20;
CREATE INDEX IF NOT EXISTS {workflow_queue_name}_ranks ON {workflow_queue}
    (namespace, tenant, priority DESC, visible_at, workflow)
    WHERE state = 'ready' AND receipt IS NULL;
CREATE INDEX IF NOT EXISTS {workflow_queue_name}_in_flight ON {workflow_queue}
    (namespace, visible_at) WHERE receipt IS NOT NULL;
CREATE INDEX IF NOT EXISTS {workflow_queue_name}_sleeping ON {workflow_queue}
    (namespace, due) WHERE state = 'sleeping';

-- Added in version 4: where each tenant of a scheduler namespace stands in the rotation:
-- its turn (0 = never served; a hand-out sends the tenant to the back), the head of its
-- line when it joined (the tie-break among never-served tenants), whether it is in the
-- rotation (active: it may have a queued workflow) and how often a workflow was queued
-- for it (version). Queuing a workflow sets `active` and moves `version`; a take or a
-- tidy clears `active` only with the row locked (scheduler.sql says why no tenant is
-- ever stranded).
CREATE TABLE IF NOT EXISTS {workflow_tenants} (
    namespace text COLLATE "C" NOT NULL,
    tenant text COLLATE "C" NOT NULL,
    turn bigint NOT NULL,
    head_at timestamptz NOT NULL,
    head_workflow text COLLATE "C" NOT NULL,
    active boolean NOT NULL,
    version bigint NOT NULL,
    PRIMARY KEY (namespace, tenant)
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE INDEX IF NOT EXISTS {workflow_tenants_name}_rotation ON {workflow_tenants}
    (namespace, turn, head_at, head_workflow, tenant) WHERE active;
CREATE SEQUENCE IF NOT EXISTS {workflow_turn_seq};
-- A version-3 database's queued entries join the rotation, never served.
INSERT INTO {workflow_tenants} (namespace, tenant, turn, head_at, head_workflow, active, version)
SELECT DISTINCT ON (q.namespace, q.tenant) q.namespace, q.tenant, 0, q.visible_at, q.workflow,
       true, 0
FROM {workflow_queue} q
WHERE q.state = 'ready' AND q.receipt IS NULL
  AND EXISTS (SELECT 1 FROM {schema_version} WHERE version < 4)
ORDER BY q.namespace, q.tenant, q.visible_at, q.workflow
ON CONFLICT DO NOTHING;

CREATE TABLE IF NOT EXISTS {workflow_status} (
    workflow text COLLATE "C" PRIMARY KEY,
    status text NOT NULL,
    attempts integer NOT NULL,
    last_error text,
    updated_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS {workflow_status_name}_by_status ON {workflow_status}
    (status, workflow);
-- The retention sweep reads finished statuses oldest first.
CREATE INDEX IF NOT EXISTS {workflow_status_name}_by_age ON {workflow_status}
    (status, updated_at);

-- Admission (version 5, durably.stores.admission): each workflow counted under its tenant
-- (running while unfinished) and the counts per tenant, kept by the same statements as the
-- start record, the status writes, discards and the sweep. Workflows a database held
-- before version 5 are not counted. Version 6 spreads a tenant's counts over 16 shards
-- (a workflow moves shard hashtext(workflow) & 15; a tenant's count is the sum), so the
-- ends of one tenant's concurrent passes do not queue on one row held to each commit;
-- capped starts still take turns on shard 0. A version-5 row becomes shard 0.
CREATE TABLE IF NOT EXISTS {workflow_admitted} (
    workflow text COLLATE "C" PRIMARY KEY,
    tenant text COLLATE "C" NOT NULL,
    running boolean NOT NULL
);
CREATE TABLE IF NOT EXISTS {workflow_tenant_counts} (
    tenant text COLLATE "C" NOT NULL,
    shard smallint NOT NULL DEFAULT 0,
    running bigint NOT NULL,
    started bigint NOT NULL,
    PRIMARY KEY (tenant, shard)
);
ALTER TABLE {workflow_tenant_counts} ADD COLUMN IF NOT EXISTS shard smallint NOT NULL
    DEFAULT 0;
DO $$
DECLARE
    single text;
BEGIN
    SELECT conname INTO single FROM pg_constraint
    WHERE conrelid = '{workflow_tenant_counts_text}'::regclass AND contype = 'p'
      AND cardinality(conkey) = 1;
    IF single IS NOT NULL THEN
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I, ADD PRIMARY KEY (tenant, shard)',
                       '{workflow_tenant_counts_text}', single);
    END IF;
END
$$;

-- Workflow gates (version 6, durably.stores.gates): each gated workflow's place (state
-- 'queued' in its gate's line, 'held' holding a slot, 'free' finished), each gate's limit
-- and admitted count (its row locked by every write that moves it: a gate's writes take
-- turns), each tenant's last turn through a gate, and each throttle key's reserved
-- instant. A gate's line is its queued rows in seq order.
CREATE TABLE IF NOT EXISTS {workflow_gated} (
    workflow text COLLATE "C" PRIMARY KEY,
    gate text COLLATE "C" NOT NULL,
    tenant text COLLATE "C" NOT NULL,
    namespace text COLLATE "C" NOT NULL,
    state text NOT NULL,
    seq bigserial
);
CREATE INDEX IF NOT EXISTS {workflow_gated_name}_line ON {workflow_gated} (gate, tenant, seq)
    WHERE state = 'queued';
-- Version 7: a queued workflow's `WorkPriority` value (earlier marks NORMAL); its
-- tenant's line is by priority, then seq.
ALTER TABLE {workflow_gated} ADD COLUMN IF NOT EXISTS priority smallint NOT NULL DEFAULT 20;
CREATE TABLE IF NOT EXISTS {workflow_gates} (
    gate text COLLATE "C" PRIMARY KEY,
    max_admitted bigint NOT NULL,
    admitted bigint NOT NULL,
    served bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS {workflow_gate_turns} (
    gate text COLLATE "C" NOT NULL,
    tenant text COLLATE "C" NOT NULL,
    turn bigint NOT NULL,
    PRIMARY KEY (gate, tenant)
);
CREATE TABLE IF NOT EXISTS {workflow_throttles} (
    key text COLLATE "C" PRIMARY KEY,
    tat double precision
);

-- The workflow catalog (version 5): every workflow an App started, with its tenant, kind,
-- parent key, creation time (microseconds) and current status; each operator listing reads
-- one index below newest first. Every status write moves `status` and the counts in its
-- own statement, and a trigger counts entries and removals; the counts are spread over 16
-- shards per kind and status (8 before version 6) so concurrent passes of one kind do not
-- queue on one row; tenant '' (no tenant's name) counts every tenant's together.
CREATE TABLE IF NOT EXISTS {workflow_catalog} (
    workflow text COLLATE "C" PRIMARY KEY,
    tenant text COLLATE "C" NOT NULL,
    kind text COLLATE "C" NOT NULL,
    parent text COLLATE "C",
    created bigint NOT NULL,
    status text NOT NULL
);
CREATE INDEX IF NOT EXISTS {workflow_catalog_name}_all ON {workflow_catalog}
    (created, workflow);
CREATE INDEX IF NOT EXISTS {workflow_catalog_name}_by_tenant ON {workflow_catalog}
    (tenant, created, workflow);
CREATE INDEX IF NOT EXISTS {workflow_catalog_name}_by_kind ON {workflow_catalog}
    (kind, created, workflow);
CREATE INDEX IF NOT EXISTS {workflow_catalog_name}_by_status ON {workflow_catalog}
    (status, created, workflow);
CREATE INDEX IF NOT EXISTS {workflow_catalog_name}_by_parent ON {workflow_catalog}
    (parent, created, workflow) WHERE parent IS NOT NULL;
CREATE INDEX IF NOT EXISTS {workflow_catalog_name}_by_tk ON {workflow_catalog}
    (tenant, kind, created, workflow);
CREATE INDEX IF NOT EXISTS {workflow_catalog_name}_by_ts ON {workflow_catalog}
    (tenant, status, created, workflow);
-- Added in version 7: a kind's workflows in one status, so that filter reads its own line.
CREATE INDEX IF NOT EXISTS {workflow_catalog_name}_by_ks ON {workflow_catalog}
    (kind, status, created, workflow);

CREATE TABLE IF NOT EXISTS {workflow_counts} (
    tenant text COLLATE "C" NOT NULL,
    kind text COLLATE "C" NOT NULL,
    status text NOT NULL,
    shard smallint NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (tenant, kind, status, shard)
);

CREATE OR REPLACE FUNCTION {workflow_catalog_count}() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Upserts both ways: a row counted on a shard of version 5 (& 7) leaves from its
    -- shard of version 6, which may not have a row yet (the sums stay exact).
    IF TG_OP = 'DELETE' THEN
        INSERT INTO {workflow_counts} AS c (tenant, kind, status, shard, n)
        VALUES (OLD.tenant, OLD.kind, OLD.status, hashtext(OLD.workflow) & 15, -1),
               ('', OLD.kind, OLD.status, hashtext(OLD.workflow) & 15, -1)
        ON CONFLICT (tenant, kind, status, shard) DO UPDATE SET n = c.n - 1;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO {workflow_counts} AS c (tenant, kind, status, shard, n)
        VALUES (NEW.tenant, NEW.kind, NEW.status, hashtext(NEW.workflow) & 15, 1),
               ('', NEW.kind, NEW.status, hashtext(NEW.workflow) & 15, 1)
        ON CONFLICT (tenant, kind, status, shard) DO UPDATE SET n = c.n + 1;
    END IF;
    RETURN NULL;
END
$$;
-- Entries and removals only: a status write moves the entry and its counts itself, in
-- the same statement (checkpointer.sql's _follow); version 5 did it by two more triggers.
CREATE OR REPLACE TRIGGER {workflow_catalog_name}_counted
    AFTER INSERT OR DELETE ON {workflow_catalog}
    FOR EACH ROW
    EXECUTE FUNCTION {workflow_catalog_count}();
DROP TRIGGER IF EXISTS {workflow_status_name}_catalogued ON {workflow_status};
DROP FUNCTION IF EXISTS {workflow_catalog_follow}();

-- Items and workflows finished per minute (durably.stores.throughput, version 6): a ring of
-- 16 slots per queue (what = 'item') or workflow kind ('workflow'), each slot spread over
-- 64 shards so concurrent writers of one name rarely queue on one row. A slot counts a minute
-- (since the epoch); a write for a later minute starts it afresh, one for an earlier
-- minute than it holds is dropped. The statements that finish items count them
-- (queue.sql, _rated); the trigger below counts catalogued workflows reaching completed
-- or failed, by the status's own time.
CREATE TABLE IF NOT EXISTS {throughput} (
    what text NOT NULL,
    name text COLLATE "C" NOT NULL,
    slot smallint NOT NULL,
    shard smallint NOT NULL,
    minute bigint NOT NULL,
    completed bigint NOT NULL,
    failed bigint NOT NULL,
    PRIMARY KEY (what, name, slot, shard)
);

CREATE OR REPLACE FUNCTION {throughput_count}() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    at bigint := floor(extract(epoch FROM NEW.updated_at) / 60);
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status THEN
        RETURN NULL;
    END IF;
    INSERT INTO {throughput} AS t (what, name, slot, shard, minute, completed, failed)
    SELECT 'workflow', c.kind, at % 16, hashtext(NEW.workflow) & 63, at,
           (NEW.status = 'completed')::integer, (NEW.status = 'failed')::integer
    FROM {workflow_catalog} c
    WHERE c.workflow = NEW.workflow
    ON CONFLICT (what, name, slot, shard) DO UPDATE SET
        completed = excluded.completed
            + CASE WHEN t.minute = excluded.minute THEN t.completed ELSE 0 END,
        failed = excluded.failed + CASE WHEN t.minute = excluded.minute THEN t.failed ELSE 0 END,
        minute = excluded.minute
    WHERE t.minute <= excluded.minute;
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER {workflow_status_name}_rated
    AFTER INSERT OR UPDATE OF status ON {workflow_status}
    FOR EACH ROW WHEN (NEW.status IN ('completed', 'failed'))
    EXECUTE FUNCTION {throughput_count}();

-- Run totals per tenant (durably.stores.totals, version 6): how many runs of each state, and
-- their usage and cost added up, spread over 8 shards per tenant and state (by run id, so a
-- run's rows stay in one shard) so concurrent patches of one tenant's runs do not queue on
-- one row until commit; numeric, so no sum of valid runs overflows. The trigger keeps them with every run write, in its transaction.
-- Runs stored before the table existed are counted once, when it is created: the trigger
-- exists first, so the count waits for writers in flight and none is counted twice.
CREATE TABLE IF NOT EXISTS {run_totals} (
    tenant text COLLATE "C" NOT NULL,
    state text NOT NULL,
    shard smallint NOT NULL,
    runs numeric NOT NULL,
    input_tokens numeric NOT NULL,
    output_tokens numeric NOT NULL,
    cached_tokens numeric NOT NULL,
    cache_write_tokens numeric NOT NULL,
    reasoning_tokens numeric NOT NULL,
    requests numeric NOT NULL,
    tool_calls numeric NOT NULL,
    cost_micros numeric NOT NULL,
    PRIMARY KEY (tenant, state, shard)
);

CREATE OR REPLACE FUNCTION {run_totals_count}() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.state = NEW.state THEN  -- a patch: one row moves by the change
        UPDATE {run_totals} SET
            input_tokens = input_tokens + NEW.input_tokens - OLD.input_tokens,
            output_tokens = output_tokens + NEW.output_tokens - OLD.output_tokens,
            cached_tokens = cached_tokens + NEW.cached_tokens - OLD.cached_tokens,
            cache_write_tokens = cache_write_tokens + NEW.cache_write_tokens
                - OLD.cache_write_tokens,
            reasoning_tokens = reasoning_tokens + NEW.reasoning_tokens - OLD.reasoning_tokens,
            requests = requests + NEW.requests - OLD.requests,
            tool_calls = tool_calls + NEW.tool_calls - OLD.tool_calls,
            cost_micros = cost_micros + NEW.cost_micros - OLD.cost_micros
        WHERE tenant = NEW.tenant AND state = NEW.state AND shard = hashtext(NEW.run_id) & 7;
        RETURN NULL;
    END IF;
    -- An insert adds the run, a delete takes it out, a state change (a status write moves
    -- App runs on the hot path) does both in one statement. The rows are taken in state
    -- order, so two runs of one shard crossing each other's states (running to suspended
    -- and back) never lock the two rows in opposite orders. OLD or NEW is NULL where the
    -- operation has none.
    INSERT INTO {run_totals} AS t (
        tenant, state, shard, runs, input_tokens, output_tokens, cached_tokens,
        cache_write_tokens, reasoning_tokens, requests, tool_calls, cost_micros
    )
    SELECT v.tenant, v.state, hashtext(v.run_id) & 7, v.sign, v.sign * v.input_tokens,
           v.sign * v.output_tokens, v.sign * v.cached_tokens, v.sign * v.cache_write_tokens,
           v.sign * v.reasoning_tokens, v.sign * v.requests, v.sign * v.tool_calls,
           v.sign * v.cost_micros
    FROM (VALUES
        (OLD.tenant, OLD.run_id, OLD.state, -1, OLD.input_tokens, OLD.output_tokens,
         OLD.cached_tokens, OLD.cache_write_tokens, OLD.reasoning_tokens, OLD.requests,
         OLD.tool_calls, OLD.cost_micros),
        (NEW.tenant, NEW.run_id, NEW.state, 1, NEW.input_tokens, NEW.output_tokens,
         NEW.cached_tokens, NEW.cache_write_tokens, NEW.reasoning_tokens, NEW.requests,
         NEW.tool_calls, NEW.cost_micros)
    ) AS v(tenant, run_id, state, sign, input_tokens, output_tokens, cached_tokens,
           cache_write_tokens, reasoning_tokens, requests, tool_calls, cost_micros)
    WHERE v.state IS NOT NULL
    ORDER BY v.state
    ON CONFLICT (tenant, state, shard) DO UPDATE SET runs = t.runs + excluded.runs,
        input_tokens = t.input_tokens + excluded.input_tokens,
        output_tokens = t.output_tokens + excluded.output_tokens,
        cached_tokens = t.cached_tokens + excluded.cached_tokens,
        cache_write_tokens = t.cache_write_tokens + excluded.cache_write_tokens,
        reasoning_tokens = t.reasoning_tokens + excluded.reasoning_tokens,
        requests = t.requests + excluded.requests,
        tool_calls = t.tool_calls + excluded.tool_calls,
        cost_micros = t.cost_micros + excluded.cost_micros;
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER {runs_name}_totalled
    AFTER INSERT OR DELETE OR UPDATE ON {runs}
    FOR EACH ROW
    EXECUTE FUNCTION {run_totals_count}();

INSERT INTO {run_totals} (
    tenant, state, shard, runs, input_tokens, output_tokens, cached_tokens,
    cache_write_tokens, reasoning_tokens, requests, tool_calls, cost_micros
)
SELECT tenant, state, hashtext(run_id) & 7, count(*), sum(input_tokens), sum(output_tokens),
       sum(cached_tokens), sum(cache_write_tokens), sum(reasoning_tokens), sum(requests),
       sum(tool_calls), sum(cost_micros)
FROM {runs}
WHERE NOT EXISTS (SELECT 1 FROM {run_totals})
GROUP BY tenant, state, hashtext(run_id) & 7;

-- Claim-check blobs, one per distinct content: `digest` is the SHA-256 of `data`,
-- `expires_at` the store's clock time it lapses at ('Infinity': never).
CREATE TABLE IF NOT EXISTS {claim_check} (
    digest text COLLATE "C" PRIMARY KEY,
    data bytea NOT NULL,
    expires_at double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS {claim_check_name}_by_expiry ON {claim_check} (expires_at);

INSERT INTO {schema_version} (version)
SELECT 7 WHERE NOT EXISTS (SELECT 1 FROM {schema_version});
-- Version 2 prefixed the workflow tables with durably_ (`migrate` renames a version-1
-- database's tables before this script runs; applied by hand, rename them first).
-- Version 3 added the rotation ({rota}, {waiting}); version 4 the workflow rotation
-- ({workflow_tenants}); version 5 the per-tenant counts ({workflow_admitted},
-- {workflow_tenant_counts}), the kept dedupe keys ({dedupe_keys}), the workflow catalog
-- ({workflow_catalog}), the flow gates ({gates}, {throttles}) and the schedules' ticks
-- ({schedule_ticks}); version 6 the debounce slots ({debounces}), the workflow gates
-- ({workflow_gated}, {workflow_gates}, {workflow_gate_turns}, {workflow_throttles}), the
-- throughput ring ({throughput}) and its trigger, the run totals ({run_totals}) and theirs,
-- and the shards of the per-tenant counts (and drops the status table's catalog trigger:
-- the status statements move the entry); version 7 the index of the run records that
-- follow a workflow (`migrate` moves those stored before to their workflow's state) and
-- the catalog's (kind, status) index.
UPDATE {schema_version} SET version = 7 WHERE version < 7;

-- name: schema_version
SELECT version FROM {schema_version};

-- name: statement_timeout
SELECT current_setting('statement_timeout');

-- name: durability
-- What a commit waits for, as this connection sees it (a role's or database's own
-- ALTER ... SET included), and whether the server flushes at all.
SELECT current_setting('synchronous_commit'), current_setting('fsync');

-- name: migrate_lock
SELECT pg_advisory_xact_lock(hashtext('durably.migrate'));

-- name: create_schema
CREATE SCHEMA IF NOT EXISTS {schema};
