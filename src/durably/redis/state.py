"""`RedisStateStore`: runs as a blob beside a small hash of version and counters.

The counters live in the hash so `patch_run` is HINCRBY and concurrent patches all land;
a patch bumps the version there, so a `put_run` based on an older read conflicts. Every
key of a tenant shares the tenant's hash tag, so each script touches one slot.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
from collections.abc import Sequence
from typing import Any, Self

from durably.clock import Clock, SystemClock
from durably.errors import (
    InvalidInputError,
    StateConflictError,
    StateInUseError,
    StateNotFoundError,
)
from durably.redis import keys
from durably.redis.connection import RedisConnection, number, pairs, text
from durably.redis.preflight import preflight
from durably.redis.scripts import scripts
from durably.redis.settings import RedisStoreSettings
from durably.stores.runs import (
    COUNTER_LIMIT,
    TERMINAL_STATES,
    USAGE_FIELDS,
    RunRecord,
    RunState,
    Scrubber,
    SessionRecord,
    StateDelta,
    StateKey,
    StatePage,
    StateQuery,
    Usage,
    checked_delta,
    create_batch,
    followed_workflow,
    listing_start,
    stored_run,
    stored_session,
)
from durably.stores.totals import TOTALS_COLUMNS, RunTotals, summed, totals_request
from durably.validation import identifier, listing_page

_LUA = scripts(
    "state_put_run",
    "state_get_run",
    "state_patch_run",
    "state_delete_run",
    "state_list_runs",
    "state_put_session",
    "state_delete_session",
    "state_delete_session_runs",
    "state_session_live",
    "state_count_runs",
    prelude="state_lib.lua",
)
_USAGE = tuple(f"usage.{name}" for name in USAGE_FIELDS)
_SCAN_BUDGET = 2000  # index entries one listing script examines before yielding the server
_DELETE_BATCH = 200  # runs one cascade script deletes before yielding the server (~2 ms)
_LIVE_BATCH = 200  # runs one look for live runs reads before yielding the server
_COUNT_BATCH = 200  # runs one script adds to the totals before yielding the server


def _counters(record: RunRecord) -> list[str]:
    values = [str(getattr(record.usage, name)) for name in USAGE_FIELDS]
    flat: list[str] = []
    for field, value in zip(_USAGE, values, strict=True):
        flat += [field, value]
    flat += ["cost_micros", str(record.cost_micros), "iterations", str(record.iterations)]
    return [*flat, "message_cursor", str(record.message_cursor)]


def _increments(delta: StateDelta) -> list[str]:
    flat: list[str] = []
    for field, name in zip(_USAGE, USAGE_FIELDS, strict=True):
        amount = getattr(delta.usage, name)
        if amount:
            flat += [field, str(amount)]
    for field, amount in (
        ("cost_micros", delta.cost_micros),
        ("iterations", delta.iterations),
        ("message_cursor", delta.messages_read),
    ):
        if amount:
            flat += [field, str(amount)]
    return flat


def _merged(blob: object, meta_flat: Any) -> RunRecord:
    """The blob with the hash's version, state, time and counters laid over it (the
    state of a run following a workflow moves in the hash alone)."""
    record = RunRecord.model_validate_json(text(blob))
    meta = pairs(meta_flat)
    usage = Usage(**{name: int(meta.get(f"usage.{name}", "0")) for name in USAGE_FIELDS})
    return record.model_copy(
        update={
            "state": RunState(meta.get("state", record.state)),
            "version": int(meta["version"]),
            "updated_at": float(meta["updated_at"]),
            "usage": usage,
            "cost_micros": int(meta.get("cost_micros", "0")),
            "iterations": int(meta.get("iterations", "0")),
            "message_cursor": int(meta.get("message_cursor", "0")),
        }
    )


class RedisStateStore:
    """`StateStore` over Redis. ``open`` runs `preflight`; the constructor does not."""

    def __init__(
        self,
        client: Any,
        *,
        clock: Clock | None = None,
        settings: RedisStoreSettings | None = None,
        key_prefix: str | None = None,
        namespace: str | None = None,
        scrub: Scrubber | None = None,
    ) -> None:
        self._clock = clock or SystemClock()
        self._scrub = scrub
        self._redis = RedisConnection(
            client, settings, key_prefix, self._clock, namespace=namespace
        )
        self._totals_counted = False  # whether runs stored before the totals are in them

    async def close(self) -> None:
        """Nothing of its own to release (idempotent): the client is its owner's."""

    @classmethod
    async def open(
        cls,
        client: Any,
        *,
        clock: Clock | None = None,
        settings: RedisStoreSettings,
        key_prefix: str | None = None,
        namespace: str | None = None,
    ) -> Self:
        """A store over ``client`` once `preflight` accepted the server."""
        await preflight(client, durable=settings.durable)
        return cls(
            client, clock=clock, settings=settings, key_prefix=key_prefix, namespace=namespace
        )

    @staticmethod
    def _checked(key: StateKey) -> StateKey:
        """``key`` if its parts are usable ids (a key built without validation is refused)."""
        identifier(key.tenant, "tenant")
        identifier(key.id, "id")
        return key

    def _prefix(self, tenant: str) -> str:
        return keys.state_prefix(self._redis.key_prefix, tenant)

    async def _call(self, name: str, key_list: list[str], args: list[Any]) -> Any:
        script = _LUA[name]
        client = self._redis.client
        return await self._redis.state(lambda: script(client, key_list, args))

    async def get_run(self, key: StateKey) -> RunRecord | None:
        """The run at ``key``, or None."""
        self._checked(key)
        ns = self._redis.key_prefix
        reply = await self._call(
            "state_get_run",
            [keys.run_key(ns, key.tenant, key.id), keys.run_meta_key(ns, key.tenant, key.id)],
            [],
        )
        return None if not reply else _merged(reply[0], reply[1])

    async def put_run(self, record: RunRecord) -> RunRecord:
        """Compare-and-set write; `StateConflictError` when the stored version differs."""
        stored = stored_run(
            record,
            version=record.version + 1,
            updated_at=self._clock.now(),
            max_bytes=self._redis.max_value_bytes,
            store="redis",
            scrubber=self._scrub,
        )
        blob = stored.model_dump_json()
        self._redis.check_size(blob, f"run {record.key}")
        ns, tenant = self._redis.key_prefix, record.tenant
        prefix = self._prefix(tenant)
        if record.version == 0:  # a first write: listed before it, so a crash loses none
            listing = keys.state_tenants_key(ns)
            await self._redis.state(lambda: self._redis.client.zadd(listing, {tenant: 0}))
        # A run following a workflow is found by its status writes from now on: the script
        # keeps the tenant's hash of them (`keys.followed_runs_key`).
        workflow = followed_workflow(stored)
        reply = await self._call(
            "state_put_run",
            [
                keys.run_key(ns, tenant, record.run_id),
                keys.run_meta_key(ns, tenant, record.run_id),
                prefix + "seq",
                prefix + "runs",
                prefix + "totals",
            ],
            [
                prefix,
                record.run_id,
                str(record.version),
                blob,
                stored.state.value,
                number(stored.updated_at),
                record.session_id or "",
                secrets.token_hex(8),  # tells a retry of this write from another writer's
                *_counters(stored),
                "follows",
                workflow or "",
            ],
        )
        if text(reply[0]) == "conflict":
            raise StateConflictError(record.key, record.version, int(text(reply[1])))
        return stored

    async def create_runs(self, records: Sequence[RunRecord]) -> list[bool]:
        """Store each record whose run does not exist yet, as `put_run` stores a first
        write: its tenant listed first (one write for the batch), then one script per run
        in its tenant's slot, sent together (each notes the workflow its run follows in
        the tenant's hash, as `put_run` does)."""
        now = self._clock.now()
        ns = self._redis.key_prefix
        listed: dict[str, int] = {}
        calls = []
        for record in create_batch(records):
            stored = stored_run(
                record,
                version=1,
                updated_at=now,
                max_bytes=self._redis.max_value_bytes,
                store="redis",
                scrubber=self._scrub,
            )
            blob = stored.model_dump_json()
            self._redis.check_size(blob, f"run {record.key}")
            tenant, prefix = record.tenant, self._prefix(record.tenant)
            listed[tenant] = 0
            workflow = followed_workflow(stored)
            calls.append(
                (
                    keys.run_key(ns, tenant, record.run_id),
                    keys.run_meta_key(ns, tenant, record.run_id),
                    prefix + "seq",
                    prefix + "runs",
                    prefix + "totals",
                    prefix,
                    record.run_id,
                    "0",
                    blob,
                    stored.state.value,
                    number(stored.updated_at),
                    record.session_id or "",
                    secrets.token_hex(8),
                    *_counters(stored),
                    "follows",
                    workflow or "",
                )
            )
        if not calls:
            return []
        client = self._redis.client
        listing = keys.state_tenants_key(ns)
        await self._redis.state(lambda: client.zadd(listing, listed))
        replies = await self._redis.run_many(_LUA["state_put_run"], calls, numkeys=5)
        return [text(reply[0]) == "ok" for reply in replies]

    async def patch_run(self, key: StateKey, delta: StateDelta) -> RunRecord:
        """Add ``delta`` server-side and bump the version; `StateNotFoundError` if absent,
        `InvalidInputError` (and nothing added) if a counter would pass `COUNTER_LIMIT`."""
        self._checked(key)
        checked_delta(delta)
        ns = self._redis.key_prefix
        reply = await self._call(
            "state_patch_run",
            [
                keys.run_key(ns, key.tenant, key.id),
                keys.run_meta_key(ns, key.tenant, key.id),
                self._prefix(key.tenant) + "totals",
            ],
            [number(self._clock.now()), *_increments(delta)],
        )
        if not reply:
            raise StateNotFoundError(key, "run")
        if text(reply[0]) == "overflow":
            raise InvalidInputError(
                f"patch of run {key}: {text(reply[1])} would pass {COUNTER_LIMIT}"
            )
        return _merged(reply[0], reply[1])

    async def delete_run(self, key: StateKey) -> bool:
        """Delete the run; False if there was none."""
        self._checked(key)
        ns, prefix = self._redis.key_prefix, self._prefix(key.tenant)
        reply = await self._call(
            "state_delete_run",
            [
                keys.run_key(ns, key.tenant, key.id),
                keys.run_meta_key(ns, key.tenant, key.id),
                prefix + "runs",
                prefix + "totals",
            ],
            [prefix, key.id],
        )
        return bool(reply)

    async def list_runs(self, query: StateQuery) -> StatePage:
        """One page of the tenant's runs in creation order (never short while more match)."""
        after = listing_start(query)
        prefix = self._prefix(query.tenant)
        found: list[tuple[int, RunRecord]] = []
        want = query.limit + 1  # one beyond the page tells whether a next page exists
        while len(found) < want:
            reply = await self._call(
                "state_list_runs",
                [prefix + "runs"],
                [
                    prefix,
                    str(after),
                    query.state.value if query.state else "",
                    "" if query.updated_before is None else number(query.updated_before),
                    str(want - len(found)),
                    str(_SCAN_BUDGET),
                ],
            )
            exhausted, after = int(reply[0]), int(float(text(reply[1])))
            for i in range(2, len(reply), 3):
                record = _merged(reply[i + 1], reply[i + 2])
                found.append((int(pairs(reply[i + 2])["seq"]), record))
            if exhausted:
                break
        page = found[: query.limit]
        more = len(found) > query.limit
        return StatePage(
            records=tuple(record for _, record in page),
            cursor=str(page[-1][0]) if more else None,
        )

    async def tenants(self, *, after: str | None = None, limit: int = 1000) -> list[str]:
        """Tenants with at least one run, in code point order (see `StateStore.tenants`):
        read from the set of tenants the first write of each run adds to, a page at a
        time, keeping those whose run index is not empty (a tenant whose runs were all
        deleted stays in the set)."""
        listing_page(after, limit)
        listing = keys.state_tenants_key(self._redis.key_prefix)
        await self._fill_tenants(listing)
        found: list[str] = []
        start = "-" if after is None else "(" + after
        while len(found) < limit:
            names, kept = await self._redis.state(
                functools.partial(self._tenants_page, listing, start, limit)
            )
            found += kept
            if len(names) < limit:
                break
            start = "(" + names[-1]
        return found[:limit]

    async def _tenants_page(
        self, listing: str, start: str, limit: int
    ) -> tuple[list[str], list[str]]:
        """Up to ``limit`` names of the set from ``start``, and those with runs."""
        client = self._redis.client
        names = [text(n) for n in await client.zrangebylex(listing, start, "+", start=0, num=limit)]
        counts = await asyncio.gather(*(client.zcard(self._prefix(n) + "runs") for n in names))
        return names, [name for name, count in zip(names, counts, strict=True) if count]

    async def _fill_tenants(self, listing: str) -> None:
        """Add the tenants of runs written before the set of tenants was kept, once per
        store: one scan of the keys, then a mark."""
        client = self._redis.client
        filled = keys.state_tenants_filled_key(self._redis.key_prefix)
        if await self._redis.state(lambda: client.exists(filled)):
            return
        found = await self._redis.state(self._scan_tenants)
        if found:
            await self._redis.state(lambda: client.zadd(listing, dict.fromkeys(found, 0)))
        await self._redis.state(lambda: client.set(filled, "1"))

    async def _scan_tenants(self) -> set[str]:
        head = f"{self._redis.key_prefix}:state:{{"
        return await keys.scan_tagged(self._redis.client, head, "}:runs")

    async def tenant_totals(
        self, tenants: Sequence[str] | None = None, *, after: str | None = None, limit: int = 100
    ) -> list[RunTotals]:
        """Run totals per tenant (see `StateStore.tenant_totals`): one hash per tenant, in
        its slot, kept by the scripts that write its runs."""
        named = totals_request(tenants, after, limit)
        await self._count_runs_before()
        if named is None:
            named = await self.tenants(after=after, limit=limit)
        client = self._redis.client
        hashes = await self._redis.state(
            lambda: asyncio.gather(*(client.hgetall(self._prefix(t) + "totals") for t in named))
        )
        rows: list[list[object]] = []
        for tenant, found in zip(named, hashes, strict=True):
            fields = {text(name): int(value) for name, value in found.items()}
            amounts: list[int] = [fields.get(name, 0) for name in _USAGE] + [
                fields.get("cost_micros", 0)
            ]
            for name, runs in fields.items():
                if name.startswith("runs:") and runs > 0:
                    rows.append([tenant, name[5:], runs, *amounts])
                    amounts = [0] * (len(TOTALS_COLUMNS) - 1)  # usage once per tenant
        return summed(rows)

    async def _count_runs_before(self) -> None:
        """Add the runs stored before the totals existed to them, once per store: every
        tenant's runs walked a batch per script (a run already counted is passed over, so
        writes meanwhile and a second walker count nothing twice), then a mark."""
        if self._totals_counted:
            return
        client = self._redis.client
        mark = keys.state_totals_counted_key(self._redis.key_prefix)
        if not await self._redis.state(lambda: client.exists(mark)):
            after: str | None = None
            while names := await self.tenants(after=after, limit=1000):
                for tenant in names:
                    prefix = self._prefix(tenant)
                    place: Any = "0"
                    while place:
                        place = await self._call(
                            "state_count_runs",
                            [prefix + "runs", prefix + "totals"],
                            [prefix, text(place), _COUNT_BATCH],
                        )
                after = names[-1]
            await self._redis.state(lambda: client.set(mark, "1"))
        self._totals_counted = True

    async def get_session(self, key: StateKey) -> SessionRecord | None:
        """The session at ``key``, or None."""
        self._checked(key)
        ns = self._redis.key_prefix
        client = self._redis.client
        session = keys.session_key(ns, key.tenant, key.id)
        blob = await self._redis.state(lambda: client.hget(session, "blob"))
        return None if blob is None else SessionRecord.model_validate_json(text(blob))

    async def put_session(self, record: SessionRecord) -> SessionRecord:
        """Compare-and-set write of a session; `StateConflictError` as `put_run`."""
        stored = stored_session(record, version=record.version + 1, updated_at=self._clock.now())
        blob = stored.model_dump_json()
        self._redis.check_size(blob, f"session {record.key}")
        session = keys.session_key(self._redis.key_prefix, record.tenant, record.session_id)
        token = secrets.token_hex(8)  # tells a retry of this write from another writer's
        reply = await self._call("state_put_session", [session], [str(record.version), blob, token])
        if text(reply[0]) == "conflict":
            raise StateConflictError(record.key, record.version, int(text(reply[1])))
        return stored

    async def delete_session(self, key: StateKey, *, cascade: bool = False) -> bool:
        """Delete a session; `StateInUseError` while a run of it is live, unless ``cascade``
        (which deletes its runs too). False if there was no session."""
        self._checked(key)
        ns, prefix = self._redis.key_prefix, self._prefix(key.tenant)
        deleting = keys.session_deleting_key(ns, key.tenant, key.id)
        session_keys = [
            keys.session_key(ns, key.tenant, key.id),
            keys.session_runs_key(ns, key.tenant, key.id),
            prefix + "runs",
            deleting,
            keys.session_mark_key(ns, key.tenant, key.id),
        ]
        drained = False
        while True:
            mark = "" if cascade else await self._refuse_while_live(key, session_keys)
            reply = await self._call(
                "state_delete_session", session_keys, ["1" if cascade else "0", mark]
            )
            outcome = text(reply[0])
            if outcome == "changed":
                continue
            if outcome == "absent":
                return drained
            if outcome == "deleted" and not cascade:
                return True
            # A cascade's runs go in batches, each script short (a retry after a crash
            # finds the batches left, 'pending', and finishes them first).
            left = 1
            while left:
                left = int(
                    await self._call(
                        "state_delete_session_runs",
                        [deleting, prefix + "runs", prefix + "totals"],
                        [prefix, key.id, _DELETE_BATCH],
                    )
                )
            if outcome == "deleted":
                return True
            drained = True

    async def _refuse_while_live(self, key: StateKey, session_keys: list[str]) -> str:
        """`StateInUseError` naming the session's live runs in creation order, if any;
        else the write mark the look began with. Bounded steps: one script never reads
        more than a batch of runs."""
        prefix = self._prefix(key.tenant)
        terminal = sorted(state.value for state in TERMINAL_STATES)
        live: list[tuple[int, str]] = []
        marks: list[str] = []
        cursor = "0"
        while True:
            reply = await self._call(
                "state_session_live",
                [session_keys[0], session_keys[1], session_keys[4]],
                [prefix, cursor, _LIVE_BATCH, *terminal],
            )
            if text(reply[0]) == "absent":
                return ""  # the delete answers for an absent session
            marks.append(text(reply[0]))
            cursor = text(reply[1])
            found = [text(item) for item in reply[2:]]
            live += [(int(seq), run) for run, seq in zip(found[::2], found[1::2], strict=True)]
            if cursor == "0":
                break
        if live:
            raise StateInUseError(key, tuple(run for _, run in sorted(set(live))))
        return marks[0]


__all__ = ["RedisStateStore"]
