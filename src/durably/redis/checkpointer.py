"""`RedisCheckpointer`: records, fenced claims and statuses, one Lua script per operation.

A workflow's keys share the workflow id's hash tag. Leases run on the server's ``TIME``;
claim tokens are a hybrid logical clock (``max(now_ms, previous + 1)``) kept in a token key
that outlives the claim hash, so a token never rewinds, not even after keys expire.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Self

from durably.errors import (
    Fenced,
    InvalidInputError,
    StatePersistenceError,
    WorkflowFinishedError,
)
from durably.redis import keys
from durably.redis.catalog import RedisCatalog
from durably.redis.changes import RedisChanges
from durably.redis.connection import RedisConnection, raw_pairs, text
from durably.redis.effects import LuaEffect, effect_key
from durably.redis.gates import RedisGates
from durably.redis.indexing import GRACE_SECONDS, StatusIndex, Step
from durably.redis.preflight import preflight
from durably.redis.retry import RetriesSpent
from durably.redis.scripts import Script, command, commands_many, scripts
from durably.redis.settings import RedisStoreSettings
from durably.stores.admission import Admit, TenantCaps, TenantCounts, admit_batch, refuse_over
from durably.stores.cancelling import (
    ENDED_HERE,
    CancelAsk,
    CancelOutcome,
    Looked,
    cancel_batch,
    look_batch,
)
from durably.stores.catalog import (
    CatalogEntry,
    Line,
    Listed,
    Mark,
    catalog_batch,
    line_read,
    status_text,
    tallied,
)
from durably.stores.changes import RecordSelector, every_record
from durably.stores.codec import (
    CheckpointCodec,
    JsonCodec,
    decoded,
    decoded_records,
    screened_encode,
)
from durably.stores.gates import Admission, GateCounts, WorkflowGate
from durably.stores.retention import FINISHED, sweep_arguments
from durably.stores.status import (
    WorkflowInfo,
    WorkflowStatus,
    checked_report,
    read_status,
    text_field,
)
from durably.stores.throughput import Minute, rated
from durably.stores.workflows import (
    INBOX_DIGITS,
    INBOX_PREFIX,
    Entry,
    Pass,
    Recorded,
    Written,
    inbox_key,
    kept_prefixes,
    message_keys,
    named_keys,
    new_priority,
    step_key,
    written_records,
)
from durably.validation import identifier, listing_page, non_negative, positive, positive_int

_LUA = scripts(
    "workflow_claim",
    "workflow_renew",
    "workflow_extend",
    "workflow_release",
    "workflow_supply",
    "workflow_append",
    "workflow_load",
    "workflow_discard",
    "workflow_set_status",
    "workflow_finish",
    "workflow_forget",
    "workflow_restart",
    "workflow_admit",
    "workflow_gate_status",
    "workflow_cancel",
    prelude="workflow_lib.lua",
)
_COUNTS = scripts("workflow_reserve", "workflow_count")
# Without the prelude: the hot path is written out flat in the script itself.
_RECORD = scripts("workflow_record")["workflow_record"]
_LOOK = scripts("workflow_look")["workflow_look"]
_SURVEY = scripts("workflow_survey")["workflow_survey"]
_SWEEP = scripts("workflow_sweep", prelude="workflow_lib.lua")["workflow_sweep"]
_SWEEP_BATCH = 200
_SWEEP_GRACE_MS = str(3_600_000)  # how long a swept token key outlives the clock passing it
_TRANSACT = Script.load("workflow_transact.lua", "workflow_lib.lua").source
_MARKER = "--@effect"
_STATUS_FIELDS = ["status", "attempts", "has_error", "error", "updated_at"]
_FINISHED = [status.value for status in FINISHED]
_ENDED_HERE = sorted(status.value for status in ENDED_HERE)
_CANCEL_PARTS = ("claim", "token", "records", "written", "seq", "status", "admitted")
_ADMIT_PARTS = ("records", "written", "seq", "token", "status", "admitted")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Wake = Callable[[str, str, bool, int | None], Awaitable[bool]]
"""Makes a workflow a gate admits ready: (workflow, tenant, only if not scheduled, priority
or None for the one it has); whether it did."""


def _us(seconds: float) -> str:
    return str(max(1, round(seconds * 1_000_000)))


def _utc(microseconds: str) -> datetime:
    return datetime.fromtimestamp(int(microseconds) / 1_000_000, tz=UTC)


def _landing(written: Any) -> tuple[int, str]:
    """A record's position and landing time (microseconds) from its ``written`` entry;
    ``(0, "0")`` for none, or one something else wrote (the record itself still reads)."""
    position, _, at = ("0:0" if written is None else text_field(written)).partition(":")
    if not (position.isdigit() and at.isdigit()):
        return 0, "0"
    return int(position), at


class RedisCheckpointer:
    """`Checkpointer[LuaEffect]` over Redis. ``open`` runs `preflight`; the constructor
    does not.

    ``ttl`` (seconds, optional) is re-armed on every write to a workflow's records: it
    sweeps finished workflows for free, and must exceed the longest a workflow waits
    (a sleeping workflow whose records expire resumes into an empty history).
    """

    def __init__(
        self,
        client: Any,
        *,
        codec: CheckpointCodec | None = None,
        settings: RedisStoreSettings | None = None,
        key_prefix: str | None = None,
        namespace: str | None = None,
        ttl: float | None = None,
    ) -> None:
        self._redis = RedisConnection(client, settings, key_prefix, namespace=namespace)
        self._codec: CheckpointCodec = codec or JsonCodec()
        self._screened = screened_encode(self._codec)
        self._ttl = "0" if ttl is None else str(round(positive(ttl, "ttl") * 1000))
        self._record_ttl = () if ttl is None else (self._ttl,)
        self._record_prefixes: dict[str, bytes] = {}
        self._index = keys.workflow_index_prefix(self._redis.key_prefix)
        self._catalog = RedisCatalog(self._redis, self._index, self._statuses)
        self._indexing = StatusIndex(self._redis, self._index, self._catalog, self._reported)
        self._transacts: OrderedDict[str, Script] = OrderedDict()
        self._changes = RedisChanges(client, keys.changes_channel(self._redis.key_prefix))
        self._announced: RecordSelector = every_record
        self._gates = RedisGates(self._redis, self._run)
        # How a workflow a gate admits is made ready for its kind (each RedisDurable
        # registers its scheduler's): unless it is scheduled already, with ``absent``.
        self._wakers: dict[str, Wake] = {}

    async def close(self) -> None:
        """Stop the feed of changes and its subscribed connection (idempotent); the client
        is its owner's."""
        await self._changes.stop()

    @property
    def changes(self) -> RedisChanges:
        """The feed of this server's writes (`durably.stores.changes`), subscribed on one
        connection of the client's pool once started."""
        return self._changes

    def announce_records(self, selected: RecordSelector) -> None:
        """Announce a record a pass writes only when ``selected`` takes its key."""
        self._announced = selected

    @classmethod
    async def open(
        cls,
        client: Any,
        *,
        settings: RedisStoreSettings,
        codec: CheckpointCodec | None = None,
        key_prefix: str | None = None,
        namespace: str | None = None,
        ttl: float | None = None,
    ) -> Self:
        """A checkpointer over ``client`` once `preflight` accepted the server."""
        await preflight(client, durable=settings.durable)
        return cls(
            client,
            codec=codec,
            settings=settings,
            key_prefix=key_prefix,
            namespace=namespace,
            ttl=ttl,
        )

    @property
    def codec(self) -> CheckpointCodec:
        """The codec values are stored with."""
        return self._codec

    @property
    def key_prefix(self) -> str:
        """The prefix of every key of this checkpointer."""
        return self._redis.key_prefix

    def effect_key(self, workflow: str, name: str) -> str:
        """A key in ``workflow``'s slot, for a `LuaEffect` of that workflow."""
        return effect_key(self._redis.key_prefix, identifier(workflow, "workflow"), name)

    # --- plumbing --------------------------------------------------------------------------

    def _keys(self, workflow: str, *names: str) -> list[str]:
        prefix = keys.workflow_prefix(self._redis.key_prefix, identifier(workflow, "workflow"))
        return [prefix + name for name in names]

    def _record_prefix(self, workflow: str) -> bytes:
        """The key prefix `record` sends, kept for the last few workflows (a pass records
        many steps of one workflow)."""
        found = self._record_prefixes.get(workflow)
        if found is None:
            ns = self._redis.key_prefix
            found = keys.workflow_prefix(ns, identifier(workflow, "workflow")).encode()
            if len(self._record_prefixes) >= 256:
                self._record_prefixes.clear()
            self._record_prefixes[workflow] = found
        return found

    async def _run(self, script: Script, key_list: list[str], args: list[str]) -> Any:
        client = self._redis.client
        return await self._redis.state(lambda: script(client, key_list, args))

    def _encode(self, value: object, what: str) -> str:
        encoded = self._screened(value)
        self._redis.check_size(encoded, what)
        return encoded

    def _recorded(
        self, workflow: str, key: str, stored: Any, inserted: Any, encoded: str
    ) -> Recorded[object]:
        value = decoded(self._codec, workflow, key, stored)
        return Recorded(value, bool(int(inserted)) or text(stored) == encoded)

    # --- reading ---------------------------------------------------------------------------

    async def _rows(self, workflow: str) -> list[tuple[int, Any, Any, str]]:
        """The workflow's records as ``(position, key, stored text, landing time)``, in
        first-recorded order; keys and texts as the client gives them (bytes, usually:
        decoded by the caller, which tells text something else wrote apart)."""
        reply = await self._run(
            _LUA["workflow_load"], self._keys(workflow, "records", "written"), []
        )
        values, written = raw_pairs(reply[0]), raw_pairs(reply[1])
        rows = []
        for key, encoded in values.items():
            position, at = _landing(written.get(key))
            rows.append((position, key, encoded, at))
        rows.sort(key=lambda row: row[0])
        return rows

    async def load(self, workflow: str) -> dict[str, object]:
        """Every record, decoded, in first-recorded order; ``{}`` for an unknown workflow."""
        rows = [(key, encoded) for _, key, encoded, _ in await self._rows(workflow)]
        return decoded_records(self._codec, workflow, rows)

    async def peek(self, workflow: str, keys: Collection[str]) -> dict[str, object]:
        """The records under ``keys`` that exist, decoded, in the order asked (one HMGET)."""
        (records,) = self._keys(workflow, "records")
        wanted = named_keys(keys)
        if not wanted:
            return {}
        client = self._redis.client
        values = await self._redis.state(lambda: client.hmget(records, wanted))
        rows = [
            (key, value) for key, value in zip(wanted, values, strict=True) if value is not None
        ]
        return decoded_records(self._codec, workflow, rows)

    async def look(
        self, workflow: str, keys: Collection[str]
    ) -> tuple[WorkflowInfo | None, dict[str, object]]:
        """The status and the records under ``keys`` that exist, in one script."""
        wanted = named_keys(keys)
        status, values = await self._run(
            _LOOK,
            self._keys(workflow, "status", "records"),
            [str(len(_STATUS_FIELDS)), *_STATUS_FIELDS, *wanted],
        )
        rows = [
            (key, value) for key, value in zip(wanted, values, strict=True) if value is not None
        ]
        return _info(workflow, status), decoded_records(self._codec, workflow, rows)

    async def look_many(
        self, workflows: Sequence[str], keys: Collection[str], prefixes: Collection[str] = ()
    ) -> list[Looked]:
        """Each workflow's status and its records under ``keys`` or ``prefixes``: one
        script per workflow, in its slot, the scripts sent together."""
        checked, wanted, starts = look_batch(workflows, keys, prefixes)
        head = (str(len(_STATUS_FIELDS)), *_STATUS_FIELDS, str(len(wanted)), *wanted, *starts)
        calls = [(*self._keys(workflow, "status", "records"), *head) for workflow in checked]
        replies = await self._redis.run_many(_SURVEY, calls, numkeys=2) if calls else []
        looked = []
        for workflow, (status, flat) in zip(checked, replies, strict=True):
            rows = list(zip(flat[::2], flat[1::2], strict=True))
            records = decoded_records(self._codec, workflow, rows)
            looked.append(Looked(_info(workflow, status), records))
        return looked

    async def history(self, workflow: str) -> dict[str, Written]:
        """Every record with the (aware, UTC) server time it landed, in first-recorded order."""
        rows = [(key, encoded, _utc(at)) for _, key, encoded, at in await self._rows(workflow)]
        return written_records(self._codec, workflow, rows)

    # --- claims ----------------------------------------------------------------------------

    async def claim(self, workflow: str, budget: float, alive: float) -> Pass | None:
        """Take the workflow if no live pass holds it; None if one does."""
        identifier(workflow, "workflow")
        positive(budget, "budget")
        positive(alive, "alive")
        reply = await self._run(
            _LUA["workflow_claim"],
            self._keys(workflow, "claim", "token"),
            [_us(budget), _us(alive), self._ttl],
        )
        return None if not reply else Pass(workflow, int(text(reply)))

    async def renew(self, holder: Pass, alive: float) -> bool:
        """Push the liveness window out (never past the budget); False if superseded or spent."""
        positive(alive, "alive")
        reply = await self._run(
            _LUA["workflow_renew"],
            self._keys(holder.workflow, "claim", "token"),
            [str(holder.token), _us(alive)],
        )
        return bool(reply)

    async def extend(self, holder: Pass, budget: float, alive: float) -> bool:
        """Grow the budget (never shrink it) and renew; False if superseded."""
        positive(budget, "budget")
        positive(alive, "alive")
        reply = await self._run(
            _LUA["workflow_extend"],
            self._keys(holder.workflow, "claim", "token"),
            [str(holder.token), _us(budget), _us(alive)],
        )
        return bool(reply)

    async def release(self, holder: Pass) -> None:
        """End ``holder``'s claim now without rewinding its token (no-op if superseded)."""
        await self._run(
            _LUA["workflow_release"],
            self._keys(holder.workflow, "claim", "token"),
            [str(holder.token)],
        )

    # --- writing ---------------------------------------------------------------------------

    async def record(self, holder: Pass, key: str, value: object) -> Recorded[object]:
        """Write ``key`` once (first writer wins); `Fenced` if ``holder`` was superseded."""
        step_key(key)
        encoded = self._screened(value)
        raw = encoded.encode()  # once: for the size check and as sent
        if len(raw) > self._redis.max_value_bytes:
            self._redis.check_bytes(len(raw), lambda: f"value of {key!r}")
        announced = b"1" if self._announced(key) else b"0"
        args = (1, self._record_prefix(holder.workflow), str(holder.token), key, raw, announced)
        try:
            reply = await self._redis.retry.call(
                _RECORD.run, self._redis.client, *args, *self._record_ttl
            )
        except RetriesSpent as spent:
            raise StatePersistenceError("redis", "unavailable", spent.detail) from None
        if reply == 1:  # inserted: the script does not echo the value back
            return Recorded(self._codec.decode(encoded), True)
        if reply == 0:
            raise Fenced(holder.workflow, holder.token)
        return self._recorded(holder.workflow, key, reply, 0, encoded)

    def _transact_script(self, source: str) -> Script:
        script = self._transacts.get(source)
        if script is None:
            script = Script(_TRANSACT.replace(_MARKER, source, 1), "workflow_transact.lua")
            self._transacts[source] = script
            if len(self._transacts) > 256:
                self._transacts.popitem(last=False)
        return script

    async def transact(self, holder: Pass, key: str, effect: LuaEffect) -> Recorded[object]:
        """Run ``effect`` and record its value in one script, exactly once across passes.

        A recorded key returns without running it; a superseded pass gets `Fenced` first;
        an effect that raises leaves neither effect nor record and raises `LuaEffectError`.
        Raises `InvalidInputError` when one of the effect's keys is in another slot.
        """
        step_key(key)
        if not isinstance(effect, LuaEffect):
            raise InvalidInputError(f"RedisCheckpointer.transact takes a LuaEffect, not {effect!r}")
        own = self._keys(holder.workflow, "claim", "token", "records", "written", "seq", "status")
        effect_keys = [
            *effect.keys,
            *(self.effect_key(holder.workflow, n) for n in effect.local_keys),
        ]
        home = keys.slot(own[0])
        for candidate in effect_keys:
            if keys.slot(candidate) != home:
                raise InvalidInputError(
                    f"LuaEffect key {candidate!r} hashes to slot {keys.slot(candidate)}, not the "
                    f"workflow's slot {home}: build it with effect_key() or local_keys"
                )
        reply = await self._run(
            self._transact_script(effect.source),
            [*own, *effect_keys],
            [str(holder.token), key, self._ttl, *effect.args],
        )
        outcome = text(reply[0])
        if outcome == "recorded":
            return Recorded(decoded(self._codec, holder.workflow, key, reply[1]), False)
        if outcome == "fenced":
            raise Fenced(holder.workflow, holder.token)
        if outcome == "failed":
            raise LuaEffectError(holder.workflow, key, text(reply[1]))
        return self._recorded(holder.workflow, key, reply[1], reply[2], text(reply[1]))

    async def supply(self, workflow: str, key: str, value: object) -> Recorded[object]:
        """First-writer-wins write from outside any pass; takes no claim."""
        step_key(key)
        encoded = self._encode(value, f"value of {key!r}")
        reply = await self._run(
            _LUA["workflow_supply"],
            self._keys(workflow, "records", "written", "seq", "token", "status"),
            [key, encoded, self._ttl],
        )
        return self._recorded(workflow, key, reply[0], reply[1], encoded)

    async def admit(
        self, workflow: str, key: str, value: object, *, tenant: str, caps: TenantCaps
    ) -> Recorded[object]:
        """`supply` the start record and count a first one under ``tenant``;
        `WorkflowLimitError` (writing nothing) past ``caps``.

        The counts live in the tenant's slot, the record in the workflow's. With caps, a
        count is reserved against them first (one script), then the record written and
        the workflow marked admitted (another); a start that finds its record already
        there gives its reservation back. A process killed between the two leaves its
        tenant one count higher than it holds (refusing sooner, never later). Without
        caps the record and the mark are written first and the count moved after (a
        kill between leaves it one lower).
        """
        return (await self._admit(workflow, key, value, tenant, caps, ""))[0]

    async def admit_many(self, admits: Sequence[Admit]) -> list[Recorded[object]]:
        """`admit` each start without caps: one script per workflow in its slot, sent
        together, then each tenant's counts moved once by the starts it admitted (a
        process killed between leaves them lower, as `admit` does)."""
        batch = admit_batch(admits)
        encoded = [self._encode(a.value, f"value of {a.key!r}") for a in batch]
        calls = [
            (*self._keys(a.workflow, *_ADMIT_PARTS), a.key, text, self._ttl, a.tenant, "")
            for a, text in zip(batch, encoded, strict=True)
        ]
        if not calls:
            return []
        replies = await self._redis.run_many(
            _LUA["workflow_admit"], calls, numkeys=len(_ADMIT_PARTS)
        )
        counted: dict[str, int] = {}
        for admit, reply in zip(batch, replies, strict=True):
            if int(reply[2]):
                counted[admit.tenant] = counted.get(admit.tenant, 0) + 1
        await self._recount_many({tenant: (n, n) for tenant, n in counted.items()})
        return [
            self._recorded(a.workflow, a.key, reply[0], reply[1], text)
            for a, reply, text in zip(batch, replies, encoded, strict=True)
        ]

    async def _admit(
        self, workflow: str, key: str, value: object, tenant: str, caps: TenantCaps, gate: str
    ) -> tuple[Recorded[object], bool]:
        """`admit`, naming ``gate`` ('' for none) in the admitted workflow's mark; the
        record and whether this call wrote it."""
        identifier(tenant, "tenant")
        step_key(key)
        encoded = self._encode(value, f"value of {key!r}")
        parts = ("records", "written", "seq", "token", "status", "admitted")
        if not caps.capped:  # nothing to check: write, then count what was admitted
            reply = await self._run(
                _LUA["workflow_admit"],
                self._keys(workflow, *parts),
                [key, encoded, self._ttl, tenant, gate],
            )
            counted = bool(int(reply[2]))
            if counted:
                await self._recount(tenant, 1, 1)
            return self._recorded(workflow, key, reply[0], reply[1], encoded), counted
        (records,) = self._keys(workflow, "records")
        client = self._redis.client
        if await self._redis.state(lambda: client.hexists(records, key)):
            return await self.supply(workflow, key, value), False
        counts = [keys.tenant_counts_key(self._redis.key_prefix, tenant)]
        caps_args = ["" if cap is None else str(cap) for cap in (caps.running, caps.started)]
        reserved, running, started = await self._run(_COUNTS["workflow_reserve"], counts, caps_args)
        if not int(reserved):
            counts_now = TenantCounts(int(running), int(started))
            refuse_over(caps, counts_now, tenant=tenant, workflow=workflow)
        counted = False
        try:
            reply = await self._run(
                _LUA["workflow_admit"],
                self._keys(workflow, *parts),
                [key, encoded, self._ttl, tenant, gate],
            )
            counted = bool(int(reply[2]))
        finally:
            if not counted:
                await self._recount(tenant, -1, -1)
        return self._recorded(workflow, key, reply[0], reply[1], encoded), counted

    async def admit_gated(
        self,
        workflow: str,
        key: str,
        value: object,
        *,
        tenant: str,
        caps: TenantCaps,
        gate: WorkflowGate,
    ) -> Admission:
        """`admit` through ``gate``: admitted while it has room, else queued (status
        QUEUED) in the gate's line.

        Steps, each in its slot: the record and its mark (naming the gate), then the
        gate's decision, then a queued workflow's QUEUED status. A process killed after
        the record leaves a workflow no gate knows and no worker sees, until a repeated
        start (which finds no status) takes it through the gate; one killed after the
        gate queued it leaves it without the QUEUED status, until the repair pass writes
        it or its gate admits it.
        """
        identifier(gate.name, "gate")
        recorded, wrote = await self._admit(workflow, key, value, tenant, caps, gate.name)
        if not wrote:
            info = await self.get_status(workflow)
            if info is not None:
                return Admission(recorded, info.status is WorkflowStatus.QUEUED)
            # Never run, or its start died before the gate's decision: the gate answers
            # as it stands, or decides now.
        queued, admitted = await self._gates.admit(workflow, tenant, gate, fresh=wrote)
        await self._promote(admitted)
        if queued:
            await self._gated_status(workflow, WorkflowStatus.QUEUED, over="", tenant=tenant)
        return Admission(recorded, queued)

    async def gate_counts(self, gate: str) -> GateCounts:
        """Gate ``gate``'s admitted and queued workflows."""
        return await self._gates.counts(identifier(gate, "gate"))

    async def rerank_queued(self, workflow: str, gate: str, priority: int) -> bool:
        """Give ``workflow``, queued in gate ``gate``'s line, ``priority``'s place there;
        False when it is not queued there."""
        identifier(workflow, "workflow")
        identifier(gate, "gate")
        return await self._gates.rerank(workflow, gate, new_priority(priority))

    async def throttle_start(self, key: str, now: float, interval: float, burst: int) -> float:
        """Reserve a start under throttle ``key``, in one script on its slot: the earliest
        it may begin."""
        return await self._gates.throttle(identifier(key, "key"), now, interval, burst)

    async def repair_gates(self, *, limit: int = 500) -> int:
        """Finish the steps of gate moves a killed process left undone, for about
        ``limit`` more gate marks (a rolling walk over every gate): the number repaired.

        A write that frees a slot is steps in several slots (see `RedisGates`); this
        reads each mark's workflow and brings the step it lacks: an ended (or deleted)
        workflow's gate move, a promoted workflow's PENDING status and wakeup, a queued
        one's QUEUED status. Each step is one the write itself brings, and takes effect
        once, so processes may repair at once, and beside the writes themselves.
        """
        positive_int(limit, "limit")
        marks = await self._gates.walk(limit)
        if not marks:
            return 0
        admitted = [self._keys(mark.workflow, "admitted")[0] for mark in marks]
        fields = await self._pipelined(
            [(key, ["tenant", "running", "gate", "moves"]) for key in admitted]
        )
        statuses = await self._statuses([mark.workflow for mark in marks])
        repaired = 0
        for mark, (tenant, running, gate, moves), info in zip(marks, fields, statuses, strict=True):
            status = None if info is None else info.status
            if tenant is None or text(gate or "") != mark.gate:  # deleted: its move was lost
                done = await self._regate(mark.gate, mark.workflow, -1, 0, forget=True)
            elif text(running) == "0" and mark.state != "free":  # ended: its move was lost
                done = await self._regate(mark.gate, mark.workflow, -1, moves, forget=False)
            elif mark.state == "held" and status in (WorkflowStatus.QUEUED, WorkflowStatus.PENDING):
                # Admitted from the line: its PENDING status and wakeup may be lost.
                pending = await self._gated_status(
                    mark.workflow, WorkflowStatus.PENDING, over="queued", tenant=text(tenant)
                )
                woken = await self._wake(mark.namespace, mark.workflow, text(tenant), absent=True)
                done = pending or woken
            elif mark.state == "queued" and status is None:  # its QUEUED status was lost
                done = await self._gated_status(
                    mark.workflow, WorkflowStatus.QUEUED, over="", tenant=text(tenant)
                )
            else:
                done = False
            repaired += done
        return repaired

    def _wake_in(self, namespace: str, wake: Wake) -> None:
        """Make the workflows gates admit for kind ``namespace`` ready through ``wake``."""
        self._wakers[namespace] = wake

    async def _wake(
        self,
        namespace: str,
        workflow: str,
        tenant: str,
        *,
        absent: bool,
        priority: int | None = None,
    ) -> bool:
        """Make ``workflow`` ready for kind ``namespace`` at ``priority`` (with ``absent``,
        only if it is not scheduled already); whether it was. False for a kind no
        RedisDurable here serves (its own processes wake it)."""
        wake = self._wakers.get(namespace)
        return wake is not None and await wake(workflow, tenant, absent, priority)

    async def _gated_status(
        self, workflow: str, status: WorkflowStatus, *, over: str, tenant: str
    ) -> bool:
        """Write the status of a workflow of ``tenant`` its gate queued or admitted over no
        status or ``over`` only: whether it was written."""
        (status_key,) = self._keys(workflow, "status")
        intent, written = await self._indexing.written(
            workflow, _LUA["workflow_gate_status"], [status_key], [status.value, over, self._ttl]
        )
        if not int(written):
            await self._indexing.forget(intent)
            return False
        await self._indexing.step(workflow, status, text(written), (intent,), tenant=tenant)
        return True

    async def _regate(
        self, gate: object, workflow: str, moved: int, number: Any, *, forget: bool
    ) -> bool:
        """The second step of a write that moved gated ``workflow`` (``moved``: -1 ended,
        1 runs again) for the ``number``-th time: its gate frees or takes a slot, and the
        workflows it admits from its line are made PENDING and ready. Whether the gate
        took the move (not taken before)."""
        name = text(gate)
        if not name or not (moved or forget):
            return False
        taken, admitted = await self._gates.move(
            name, workflow, finished=moved <= 0, forget=forget, number=int(number or 0)
        )
        await self._promote(admitted)
        return taken

    async def _promote(self, admitted: list[tuple[str, str, str, int]]) -> None:
        """The steps after a gate admitted ``admitted`` from its line (workflow, tenant,
        namespace, priority): each one's PENDING status, then its wakeup."""
        for promoted, tenant, namespace, priority in admitted:
            await self._gated_status(promoted, WorkflowStatus.PENDING, over="queued", tenant=tenant)
            await self._wake(namespace, promoted, tenant, absent=False, priority=priority)

    async def tenant_counts(self, tenant: str) -> TenantCounts:
        """``tenant``'s admitted workflows, running and started."""
        identifier(tenant, "tenant")
        counts = keys.tenant_counts_key(self._redis.key_prefix, tenant)
        client = self._redis.client
        running, started = await self._redis.state(
            lambda: client.hmget(counts, ["running", "started"])
        )
        return TenantCounts(int(running or 0), int(started or 0))

    async def _recount(self, tenant: str, running: int, started: int) -> None:
        """Move ``tenant``'s counts by ``running`` and ``started`` (an admission's second
        step, or one given back; a status write moves them in its tenant step)."""
        counts = [keys.tenant_counts_key(self._redis.key_prefix, tenant)]
        await self._run(_COUNTS["workflow_count"], counts, [str(running), str(started)])

    async def _recount_many(self, moves: dict[str, tuple[int, int]]) -> None:
        """`_recount` of each tenant by its (running, started) moves, the scripts sent
        together."""
        calls = [
            (keys.tenant_counts_key(self._redis.key_prefix, tenant), str(running), str(started))
            for tenant, (running, started) in moves.items()
            if running or started
        ]
        if calls:
            await self._redis.run_many(_COUNTS["workflow_count"], calls)

    async def cancel_many(self, asks: Sequence[CancelAsk]) -> list[CancelOutcome]:
        """Cancel each workflow of ``asks`` (`durably.stores.cancelling`).

        Steps, as a status write's: the intents of every workflow's status write (one
        write), one script per workflow in its slot (sent together), then for those
        ended their tenants' counts, the status index and catalog, and their gates.
        """
        batch = cancel_batch(asks)
        if not batch:
            return []
        cancelled = WorkflowStatus.CANCELLED.value
        calls = []
        for ask in batch:
            marker = self._encode(ask.value, f"value of {ask.marker!r}")
            reason = self._encode(ask.reason, f"value of {ask.ended!r}")
            calls.append(
                (
                    *self._keys(ask.workflow, *_CANCEL_PARTS),
                    ask.marker,
                    marker,
                    ask.ended,
                    reason,
                    ask.superseded,
                    ask.reason,
                    cancelled,
                    self._ttl,
                    str(len(_ENDED_HERE)),
                    *_ENDED_HERE,
                    *_FINISHED,
                )
            )
        intents = await self._indexing.intend([ask.workflow for ask in batch])
        replies = await self._redis.run_many(
            _LUA["workflow_cancel"], calls, numkeys=len(_CANCEL_PARTS)
        )
        outcomes: list[CancelOutcome] = []
        unneeded: list[str] = []
        steps: list[Step] = []
        gated: list[tuple[Any, str, Any]] = []
        for ask, intent, reply in zip(batch, intents, replies, strict=True):
            what, seen = text(reply[0]), text(reply[1])
            status = status_text(seen, ask.workflow) if seen else None
            if what != "ended":
                unneeded.append(intent)
                first = what == "open" and int(reply[2]) == 1
                held = what == "open" and int(reply[3]) == 1
                outcomes.append(CancelOutcome(ask.workflow, status, first, False, held))
                continue
            outcomes.append(CancelOutcome(ask.workflow, status, int(reply[2]) == 1, True))
            tenant, running, gate, number = reply[5:9]
            steps.append(
                Step(
                    ask.workflow,
                    WorkflowStatus.CANCELLED,
                    text(reply[4]),
                    (intent,),
                    tenant=text(tenant),
                    running=int(running),
                )
            )
            if text(gate):
                gated.append((gate, ask.workflow, number))
        if unneeded:
            await self._indexing.forget(*unneeded)
        await self._indexing.step_many(steps)
        for gate, workflow, number in gated:
            await self._regate(gate, workflow, -1, number, forget=False)
        return outcomes

    async def append(self, workflow: str, value: object, *, unless_finished: bool = False) -> Entry:
        """Add a message under a store-named ``inbox:`` key that sorts in append order;
        with ``unless_finished``, `WorkflowFinishedError` for a finished workflow (the
        status is read by the same script)."""
        encoded = self._encode(value, "message")
        reply = await self._run(
            _LUA["workflow_append"],
            self._keys(workflow, "records", "written", "seq", "token", "status"),
            [
                encoded,
                INBOX_PREFIX,
                str(INBOX_DIGITS),
                self._ttl,
                *(_FINISHED if unless_finished else ()),
            ],
        )
        if text(reply[0]) == "finished":
            raise WorkflowFinishedError(
                f"workflow {workflow!r} is {text(reply[1])}: it takes no messages"
            )
        key = inbox_key(int(text(reply[0])))
        assert key == text(reply[1]), "the script and inbox_key disagree on the key"
        return Entry(key, self._codec.decode(encoded))

    async def forget(self, holder: Pass, keys: Collection[str]) -> int:
        """Delete the messages under ``keys`` for ``holder`` in one script; the number
        deleted. `Fenced` if ``holder`` was superseded."""
        doomed = message_keys(keys)
        reply = await self._run(
            _LUA["workflow_forget"],
            self._keys(holder.workflow, "claim", "token", "records", "written"),
            [str(holder.token), self._ttl, *doomed],
        )
        if int(reply) < 0:
            raise Fenced(holder.workflow, holder.token)
        return int(reply)

    async def restart(
        self,
        holder: Pass,
        key: str,
        value: object,
        *,
        keep: Collection[str] = (INBOX_PREFIX,),
    ) -> int:
        """Delete every record not under a ``keep`` prefix, write ``key`` afresh and
        report PENDING, in one script; `Fenced` (changing nothing) if superseded. The
        status index is kept in a second step, as for `set_status`."""
        step_key(key)
        prefixes = kept_prefixes(keep)
        encoded = self._encode(value, f"value of {key!r}")
        intent, reply = await self._indexing.written(
            holder.workflow,
            _LUA["workflow_restart"],
            self._keys(
                holder.workflow, "claim", "token", "records", "written", "seq", "status", "admitted"
            ),
            [str(holder.token), key, encoded, WorkflowStatus.PENDING.value, self._ttl, *prefixes],
        )
        if int(reply[0]) < 0:
            await self._indexing.forget(intent)
            raise Fenced(holder.workflow, holder.token)
        await self._indexing.step(
            holder.workflow,
            WorkflowStatus.PENDING,
            text(reply[3]),
            (intent,),
            tenant=text(reply[1]),
            running=int(reply[2]),
        )
        return int(reply[0])

    async def discard(self, workflow: str) -> int:
        """Delete every record and the status and fence the current holder; the count."""
        intent, reply = await self._indexing.written(
            workflow,
            _LUA["workflow_discard"],
            self._keys(workflow, "claim", "token", "records", "written", "status", "admitted"),
            [self._ttl],
        )
        count, tenant, running, gate, number = reply
        await self._indexing.step(
            workflow, None, "", (intent,), tenant=text(tenant), running=-int(running), started=-1
        )
        await self._regate(gate, workflow, -1, number, forget=True)
        return int(count)

    async def sweep(
        self,
        *,
        finished_before: datetime,
        limit: int = 1000,
        on_swept: Callable[[str], Awaitable[None]] | None = None,
    ) -> int:
        """Delete up to ``limit`` finished workflows older than ``finished_before`` whose
        claim is not live (records, status, claim), one script each on the workflow's slot;
        the number swept. The oldest go first, as on every backing: the status index is
        read in batches and only the ``limit`` oldest candidates are kept.

        The token key stays, fenced past every pass, until the server clock has passed it
        by an hour; a later claim's hybrid logical clock then still outranks it.
        """
        sweep_arguments(finished_before, limit)
        cutoff = str((finished_before - _EPOCH) // timedelta(microseconds=1))
        args = [cutoff, _SWEEP_GRACE_MS, *(status.value for status in FINISHED)]
        swept = 0
        held: set[str] = set()  # taken by a live pass since it was read: not chosen again
        while swept < limit:
            chosen, more = await self._oldest_finished(finished_before, limit - swept, held)
            for first in range(0, len(chosen), _SWEEP_BATCH):
                chunk = chosen[first : first + _SWEEP_BATCH]
                gone = await self._redis.bounded(self._sweep_one(n, args) for n in chunk)
                for name, went in zip(chunk, gone, strict=True):
                    if not went:
                        held.add(name)
                    else:
                        swept += 1
                        if on_swept is not None:
                            await on_swept(name)
            if not more:
                break
        return swept

    async def _oldest_finished(
        self, finished_before: datetime, wanted: int, held: set[str]
    ) -> tuple[list[str], bool]:
        """Up to ``wanted`` finished workflows last updated before ``finished_before`` and
        not ``held``, oldest first (ties by id), and whether more were left out."""
        client = self._redis.client
        found: dict[str, datetime] = {}
        more = False
        for status in FINISHED:
            index, start = self._index + f"status:{status.value}", "-"
            while True:
                batch = await self._redis.state(
                    functools.partial(
                        client.zrangebylex, index, start, "+", start=0, num=_SWEEP_BATCH
                    )
                )
                if not batch:
                    break
                names = [text(name) for name in batch]
                start = "(" + names[-1]
                for info in await self._statuses(names):
                    if (
                        info is not None
                        and info.status in FINISHED
                        and info.updated_at < finished_before
                        and info.workflow not in held
                    ):
                        found[info.workflow] = info.updated_at
                if len(found) > wanted:
                    more = True
                    kept = sorted((at, workflow) for workflow, at in found.items())[:wanted]
                    found = {workflow: at for at, workflow in kept}
        return [w for _, w in sorted((at, w) for w, at in found.items())], more

    async def _sweep_one(self, workflow: str, args: list[str]) -> bool:
        keys_ = self._keys(
            workflow, "claim", "token", "records", "written", "seq", "status", "admitted"
        )
        intent, reply = await self._indexing.written(workflow, _SWEEP, keys_, args)
        if not int(reply[0]):
            await self._indexing.forget(intent)
            return False
        tenant = text(reply[1])
        await self._indexing.step(
            workflow, None, "", (intent,), tenant=tenant, running=-int(reply[2]), started=-1
        )
        await self._regate(reply[3], workflow, -1, reply[4], forget=True)
        return True

    # --- status ----------------------------------------------------------------------------

    async def set_status(
        self,
        holder: Pass,
        status: WorkflowStatus,
        *,
        attempts: int = 0,
        error: str | None = None,
    ) -> WorkflowInfo:
        """Report the workflow's status; `Fenced` if ``holder`` was superseded."""
        status, error = checked_report(status, attempts, error)
        return await self._report(
            "workflow_set_status",
            ("claim", "token", "status", "admitted"),
            (),
            holder,
            status,
            attempts,
            error,
        )

    async def finish(
        self,
        holder: Pass,
        key: str,
        value: object,
        *,
        attempts: int = 0,
        error: str | None = None,
    ) -> WorkflowInfo:
        """`record` ``key`` and report COMPLETED in one script; `Fenced` (writing neither)
        if ``holder`` was superseded. The status index is kept in a second step, as for
        `set_status`."""
        step_key(key)
        encoded = self._encode(value, f"value of {key!r}")
        status, error = checked_report(WorkflowStatus.COMPLETED, attempts, error)
        return await self._report(
            "workflow_finish",
            ("claim", "token", "records", "written", "seq", "status", "admitted"),
            (key, encoded),
            holder,
            status,
            attempts,
            error,
        )

    async def _report(
        self,
        script: str,
        parts: tuple[str, ...],
        written: tuple[str, ...],
        holder: Pass,
        status: WorkflowStatus,
        attempts: int,
        error: str | None,
    ) -> WorkflowInfo:
        """Run a status-reporting ``script`` over the workflow's ``parts`` (the token,
        then ``written``, then the report), then keep the status index; `Fenced` if
        ``holder`` was superseded."""
        intent, reply = await self._indexing.written(
            holder.workflow,
            _LUA[script],
            self._keys(holder.workflow, *parts),
            [
                str(holder.token),
                *written,
                status.value,
                str(attempts),
                "0" if error is None else "1",
                error or "",
                self._ttl,
                "0" if status.finished else "1",
            ],
        )
        if text(reply[0]) == "fenced":
            await self._indexing.forget(intent)
            raise Fenced(holder.workflow, holder.token)
        await self._indexing.step(
            holder.workflow,
            status,
            text(reply[1]),
            (intent,),
            tenant=text(reply[2]),
            running=int(reply[3]),
        )
        await self._regate(reply[4], holder.workflow, int(reply[3]), reply[5], forget=False)
        return WorkflowInfo(holder.workflow, status, attempts, error, _utc(text(reply[1])))

    async def get_status(self, workflow: str) -> WorkflowInfo | None:
        """The last reported status, or None (never reported, or discarded)."""
        (status_key,) = self._keys(workflow, "status")
        client = self._redis.client
        reply = await self._redis.state(
            lambda: command(client, "HMGET", status_key, *_STATUS_FIELDS)
        )
        return _info(workflow, reply)

    async def _statuses(self, workflows: list[str]) -> list[WorkflowInfo | None]:
        """`get_status` of each workflow in one pipeline: one connection (one per node on
        a cluster), however many workflows."""
        status_keys = [self._keys(workflow, "status")[0] for workflow in workflows]
        replies = await self._pipelined([(key, _STATUS_FIELDS) for key in status_keys])
        return [_info(w, reply) for w, reply in zip(workflows, replies, strict=True)]

    async def _reported(self, workflows: list[str]) -> list[tuple[str, str, bool, str]]:
        """Each workflow's status and its time as stored ('' for none), whether it has
        records and the tenant it was admitted under ('' for none), in one pipeline (for
        `StatusIndex.repair`)."""
        client = self._redis.client

        async def read() -> list[Any]:
            async with client.pipeline(transaction=False) as pipe:
                for workflow in workflows:
                    status_key, records, admitted = self._keys(
                        workflow, "status", "records", "admitted"
                    )
                    pipe.hmget(status_key, ["status", "updated_at"])
                    pipe.exists(records)
                    pipe.hget(admitted, "tenant")
                replies: list[Any] = await pipe.execute()
                return replies

        replies = await self._redis.state(read)
        return [
            (text(status or ""), text(at or ""), bool(int(exists)), text(tenant or ""))
            for (status, at), exists, tenant in zip(
                replies[::3], replies[1::3], replies[2::3], strict=True
            )
        ]

    async def _pipelined(self, reads: list[tuple[str, list[str]]]) -> list[Any]:
        """HMGET of each (hash, fields), sent together, the replies in order."""
        client = self._redis.client
        commands = [("HMGET", key, *fields) for key, fields in reads]
        replies = await self._redis.state(lambda: commands_many(client, commands))
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies

    async def list_status(
        self, *, status: WorkflowStatus | None = None, limit: int = 50, after: str | None = None
    ) -> list[WorkflowInfo]:
        """Statuses ordered by workflow id (code points), those after ``after``."""
        if after is not None:
            identifier(after, "after")
        positive_int(limit, "limit")
        wanted = WorkflowStatus(status) if status is not None else None
        index = self._index + ("all" if wanted is None else f"status:{wanted.value}")
        client = self._redis.client
        found: list[WorkflowInfo] = []
        start = "-" if after is None else "(" + after
        while len(found) < limit:
            batch = await self._redis.state(
                functools.partial(client.zrangebylex, index, start, "+", start=0, num=limit * 2)
            )
            if not batch:
                break
            names = [text(name) for name in batch]
            for info in await self._statuses(names):
                if info is not None and (wanted is None or info.status is wanted):
                    found.append(info)
                    if len(found) == limit:
                        break
            start = "(" + names[-1]
        return found

    async def workflows(self, *, after: str | None = None, limit: int = 1000) -> list[str]:
        """Workflows with records or a status, in code point order (see
        `Checkpointer.workflows`): records are found by scanning keys (every primary of a
        cluster), statuses from their index."""
        listing_page(after, limit)
        found = await self._redis.state(self._scan_workflows)
        return sorted(w for w in found if after is None or w > after)[:limit]

    async def _scan_workflows(self) -> set[str]:
        head = f"{self._redis.key_prefix}:wf:{{"
        found = await keys.scan_tagged(self._redis.client, head, "}:records")
        found.update(text(n) for n in await self._redis.client.zrange(self._index + "all", 0, -1))
        return found

    # --- the catalog -----------------------------------------------------------------------

    async def catalog(self, workflow: str, entry: CatalogEntry) -> None:
        """Enter ``workflow`` in the catalog (an entry already there is kept), under the
        status it reported (pending if none)."""
        identifier(workflow, "workflow")
        info = await self.get_status(workflow)
        await self._catalog.enter(
            workflow, entry, WorkflowStatus.PENDING if info is None else info.status
        )

    async def catalog_many(self, entries: Sequence[tuple[str, CatalogEntry]]) -> None:
        """Enter each (workflow, entry) in the catalog (an entry already there is kept),
        under the status each reported: their statuses read in one pipeline, the entries
        written in another."""
        batch = catalog_batch(entries)
        if batch:
            infos = await self._statuses([workflow for workflow, _ in batch])
            await self._catalog.enter_many(
                [
                    (workflow, entry, WorkflowStatus.PENDING if info is None else info.status)
                    for (workflow, entry), info in zip(batch, infos, strict=True)
                ]
            )

    async def listed(
        self, line: Line, *, before: Mark | None = None, since_us: int = 0, limit: int = 100
    ) -> list[Listed]:
        """Up to ``limit`` workflows of ``line`` before ``before``, newest first: one
        sorted-set range."""
        line_read(line, since_us, limit)
        return await self._catalog.listed(line, before, since_us, limit)

    async def finished_per_minute(self) -> dict[str, list[Minute]]:
        """Catalogued workflows of each kind completed and failed in each of the last
        minutes, oldest first, by the server's clock (the one statuses are timed by): the
        ring the status index's step keeps, one hash."""
        client, ring = self._redis.client, self._index + "rate"

        async def read() -> tuple[Any, Any]:
            return await client.time(), await client.hgetall(ring)

        clock, found = await self._redis.state(read)
        fields = {text(k): int(v) for k, v in found.items()}
        rows = [
            (name[2:].split("|", 1)[1], minute, fields["c" + name[1:]], fields["f" + name[1:]])
            for name, minute in fields.items()
            if name.startswith("m|")
        ]
        return rated(rows, float(clock[0]) + float(clock[1]) / 1_000_000)

    async def repair_catalog(self, *, limit: int = 500, grace: float = GRACE_SECONDS) -> int:
        """Bring the status index's and catalog's step of up to ``limit`` status writes a
        killed process left undone (their intent older than ``grace`` seconds), from each
        workflow's status as it stands: the number of workflows stepped.

        Reads the intents left over, never the index or the workflows, so a round costs
        what was lost, whatever the store holds; safe beside the writes and other repairs.
        """
        positive_int(limit, "limit")
        return await self._indexing.repair(limit=limit, grace=non_negative(grace, "grace"))

    async def tally(self, tenant: str | None = None) -> dict[tuple[str, WorkflowStatus], int]:
        """How many catalogued workflows each (kind, status) pair has."""
        if tenant is not None:
            identifier(tenant, "tenant")
        return tallied(await self._catalog.tally(tenant))


def _info(workflow: str, reply: list[Any]) -> WorkflowInfo | None:
    """A status read as ``_STATUS_FIELDS``; None where none was reported."""
    if reply[0] is None:
        return None

    def read() -> WorkflowInfo:
        status, attempts, has_error, error, updated_at = (text_field(v) for v in reply)
        return WorkflowInfo(
            workflow,
            WorkflowStatus(status),
            int(attempts),
            error if has_error == "1" else None,
            _utc(updated_at),
        )

    return read_status(workflow, read)


class LuaEffectError(RuntimeError):
    """A `LuaEffect` raised; nothing it deferred was written and no record was made."""

    def __init__(self, workflow: str, key: str, detail: str) -> None:
        self.workflow = workflow
        self.key = key
        super().__init__(f"LuaEffect of step {key!r} in workflow {workflow!r} failed: {detail}")


__all__ = ["LuaEffectError", "RedisCheckpointer"]
