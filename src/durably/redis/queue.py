"""`RedisWorkQueue`: per-tenant ready sets, a lease set and tenant rotation, in Lua.

The whole queue namespace shares one hash tag, because a claim reads several tenants'
ready sets in one script to take turns between them: a queue namespace lives in one slot
(shard by running several namespaces). Time is the injected `Clock`, passed into every
script as an argument; `QueuePolicy` decides every retry and the scripts only apply it.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
from collections.abc import Sequence
from typing import Any, Self

from redis.exceptions import NoScriptError

from durably.clock import Clock, SystemClock
from durably.errors import (
    DurablyError,
    InvalidInputError,
    LeaseLostError,
    QueueUnavailableError,
    WorkItemNotFoundError,
)
from durably.redis import keys
from durably.redis.connection import RedisConnection, number, text
from durably.redis.order import ready_member, reserve_members
from durably.redis.preflight import preflight
from durably.redis.retry import RetriesSpent
from durably.redis.scripts import scripts
from durably.redis.settings import RedisStoreSettings
from durably.stores.debounce import Begun, begin_call, debounce_call, release_call, slot_call
from durably.stores.throughput import SLOTS, Minute, rated, rated_queues
from durably.stores.work import (
    DEAD_PURGE_BATCH,
    DEFAULT_QUEUE,
    QUEUE_NAMES_MOST,
    DeadLetterPage,
    QueuePolicy,
    QueueStats,
    WorkItem,
    WorkPriority,
    WorkState,
    batch_items,
    batch_limit,
    checked_item,
    dead_letter_query,
    dead_letter_target,
    dedupe_window,
    failure_text,
    names_limit,
    payload_text,
    queued_copy,
    retry_instant,
    settle_keys,
    stored_item,
    tick_mark,
)
from durably.validation import identifier, non_negative

_LUA = (
    scripts(
        "queue_enqueue",
        "queue_tick",
        "queue_debounce",
        "queue_begin_debounced",
        "queue_release_debounced",
    )
    | scripts(
        "queue_dead_letters", "queue_purge_dead", prelude=("queue_lib.lua", "queue_dead_lib.lua")
    )
    | scripts("queue_stats", prelude="queue_lib.lua")
    | scripts(
        "queue_enqueue_full",
        "queue_enqueue_many",
        prelude=("queue_lib.lua", "queue_enqueue_lib.lua"),
    )
    | scripts("queue_claim", "queue_claim_many", prelude=("queue_lib.lua", "queue_claim_lib.lua"))
    | scripts(
        "queue_complete_claim",
        prelude=("queue_lib.lua", "queue_claim_lib.lua", "queue_settle_lib.lua"),
    )
    | scripts(
        "queue_heartbeat",
        "queue_complete",
        "queue_complete_many",
        "queue_fail",
        "queue_reap",
        "queue_adopt",
        "queue_purge",
        prelude=("queue_lib.lua", "queue_settle_lib.lua"),
    )
)
_ENQUEUE, _ENQUEUE_FULL = _LUA["queue_enqueue"], _LUA["queue_enqueue_full"]
_PRIORITIES = [str(int(p)) for p in sorted(WorkPriority, reverse=True)]
_PRIORITY_TEXT = {p: str(int(p)).encode() for p in WorkPriority}
_DEAD_LETTER_PAGE = 500
"""Dead letters one `queue_dead_letters.lua` call looks at (a few milliseconds of the
server's time at most); `dead_letters` calls it page after page."""
_LEASE_EXPIRED = "lease expired"
_ADOPTED = "adopted after restart"
_REAP_BATCH = 500
_PURGE_TENANTS = 16  # tenants one purge script clears
# The most items one script of `claim_many` takes and one script of `complete_many`
# finishes: a batch bigger than that goes as several scripts in the same write, so no
# script holds the server much longer than a millisecond.
_CLAIM_SCRIPT_MOST = 16
_COMPLETE_SCRIPT_MOST = 50


class _CallTokens:
    """A token per enqueue call, by which a retry of the call finds the item it wrote:
    a random prefix drawn per process (drawn again in a forked child) and a counter, so
    no two calls anywhere share one, without drawing random bytes per call."""

    def __init__(self) -> None:
        self._draw()
        os.register_at_fork(after_in_child=self._draw)

    def _draw(self) -> None:
        self._prefix = secrets.token_hex(6)
        self._count = itertools.count()

    def next(self) -> str:
        """A token no other call has."""
        return f"{self._prefix}{next(self._count):x}"


_call_token = _CallTokens().next


def _instant(value: bytes | str | None) -> float | None:
    return float(value) if value else None


def _dead_letter_place(after: str | None) -> tuple[str, str]:
    """The (score, ref) a `dead_letter_page` cursor (`dead_letter_cursor`) names, checked
    before any I/O: the first page's place when None."""
    if after is None:
        return ("", "")
    score, tab, ref = after.partition("\t")
    try:
        float(score)
    except ValueError:
        tab = ""
    if not tab or not ref:
        raise InvalidInputError("after is not a cursor this store made")
    return score, ref


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value


def _segments(value: bytes | str | None) -> tuple[str, ...]:
    """Parse ``<byte length>:<text>`` segments (lengths count UTF-8 bytes, as Lua does)."""
    if not value:
        return ()
    data = value.encode() if isinstance(value, str) else value
    out, at = [], 0
    while at < len(data):
        colon = data.index(b":", at)
        size = int(data[at:colon])
        out.append(data[colon + 1 : colon + 1 + size].decode())
        at = colon + 1 + size
    return tuple(out)


# Replies read back by `_item`, looked up instead of parsed (bytes replies; a client that
# decodes responses gets text, which takes the general path).
_STATES = {state.value.encode(): state for state in WorkState}
_PRIORITIES_READ = {str(int(p)).encode(): p for p in WorkPriority}
_EMPTY_PAYLOAD = b"{}"


def _item(fields: Any) -> WorkItem:
    """The item a script read back, by position (``read_item`` in queue_lib.lua; a field
    never written is None). Built without re-validation: every field was written by
    `enqueue` (validated then) or by the scripts, and this is the queue's hot path."""
    payload, state, priority, dedupe = fields[0], fields[2], fields[14], fields[11]
    return stored_item(
        {
            "id": _text(fields[13]),
            "tenant": _text(fields[12]),
            "queue": _text(fields[10]),
            "payload": {} if payload == _EMPTY_PAYLOAD else json.loads(payload),
            "priority": _PRIORITIES_READ.get(priority) or WorkPriority(int(priority)),
            "dedupe_key": _text(dedupe) if dedupe else None,
            "attempts": int(fields[1] or 0),  # unset until the first failure
            "state": _STATES.get(state) or WorkState(_text(state)),
            "worker": _text(fields[3]) or None,
            "enqueued_at": _instant(fields[4]),
            "available_at": _instant(fields[5] or fields[4]),  # unset: due at enqueue
            "lease_expires_at": _instant(fields[6]),
            "first_claimed_at": _instant(fields[7]),
            "claimed_at": _instant(fields[8]),
            "failures": _segments(fields[9]),
            "concurrency_key": _text(fields[16]) if fields[16] else None,
            "concurrency_limit": int(fields[17]) if fields[17] else None,
            "throttle_key": _text(fields[18]) if fields[18] else None,
            "throttle_seconds": float(fields[19]) if fields[19] else None,
            "throttle_burst": int(fields[20]) if fields[20] else None,
        }
    )


_WIDTH_TEXT = {2: b"2", 3: b"3", 11: b"11"}


def _width(item: WorkItem) -> int:
    """How many fields queue_enqueue_many.lua takes for ``item``: 2 for one due at once
    with nothing else, 3 for a delayed one, 11 for any other."""
    if (
        item.dedupe_key is not None
        or item.attempts
        or item.failures
        or item.concurrency_key is not None
        or item.throttle_key is not None
    ):
        return 11
    return 2 if item.available_at is None else 3


def _gates(item: WorkItem) -> tuple[str, ...]:
    """The flow gates' arguments of queue_enqueue_full.lua ('' for none)."""
    limit, seconds, burst = item.concurrency_limit, item.throttle_seconds, item.throttle_burst
    return (
        item.concurrency_key or "",
        "" if limit is None else str(limit),
        item.throttle_key or "",
        "" if seconds is None else number(seconds),
        "" if burst is None else str(burst),
    )


class RedisWorkQueue:
    """`WorkQueue` over Redis. ``open`` runs `preflight`; the constructor does not.

    Completed items stay readable for ``completed_retention_seconds`` (server time), then
    expire; dead letters stay until replaced by a new item with the same id.
    """

    def __init__(
        self,
        client: Any,
        *,
        clock: Clock | None = None,
        policy: QueuePolicy | None = None,
        settings: RedisStoreSettings | None = None,
        key_prefix: str | None = None,
        namespace: str | None = None,
        completed_retention_seconds: int = 86_400,
    ) -> None:
        self._clock = clock or SystemClock()
        self._redis = RedisConnection(
            client, settings, key_prefix, self._clock, namespace=namespace
        )
        self._policy = policy or QueuePolicy()
        self._prefix = keys.queue_prefix(self._redis.key_prefix)
        self._item_prefix = f"{self._prefix}item:"
        self._raw_prefix = self._prefix.encode()
        self._retention = str(int(completed_retention_seconds))

    async def close(self) -> None:
        """Nothing of its own to release (idempotent): the client is its owner's."""

    @classmethod
    async def open(
        cls,
        client: Any,
        *,
        clock: Clock | None = None,
        policy: QueuePolicy | None = None,
        settings: RedisStoreSettings,
        key_prefix: str | None = None,
        namespace: str | None = None,
    ) -> Self:
        """A queue over ``client`` once `preflight` accepted the server."""
        await preflight(client, durable=settings.durable)
        return cls(
            client,
            clock=clock,
            policy=policy,
            settings=settings,
            key_prefix=key_prefix,
            namespace=namespace,
        )

    @property
    def policy(self) -> QueuePolicy:
        """The retry and lease policy this queue applies."""
        return self._policy

    def _key(self, kind: str, queue: str) -> str:
        return f"{self._prefix}{kind}:{keys.segment(queue)}"

    async def _call(
        self, name: str, key_list: list[str], args: list[str], queue: str, operation: str
    ) -> Any:
        try:  # retried without per-call closures
            return await self._redis.retry.call(
                _LUA[name].run, self._redis.client, len(key_list), *key_list, self._prefix, *args
            )
        except RetriesSpent as spent:
            raise QueueUnavailableError(queue, operation, spent.detail) from None

    def _requeue_instants(self, *, now: float, retryable: bool, immediate: bool) -> list[str]:
        """When the policy requeues after attempt 1, 2, ...; the list ends at the dead letter."""
        if not retryable:
            return []
        instants: list[str] = []
        for before in range(self._policy.max_attempts):
            settled = self._policy.settle_failure(
                before, retryable=True, now=now, immediate=immediate
            )
            if settled.dead or settled.available_at is None:
                break
            instants.append(number(settled.available_at))
        return instants

    async def enqueue(self, item: WorkItem, *, dedupe_ttl: float | None = None) -> WorkItem:
        """Queue ``item`` (a future ``available_at`` delays it); a live item with the same
        id or (tenant, queue, dedupe_key) is returned unchanged instead, and so is a
        finished one whose key is kept (``dedupe_ttl``)."""
        checked_item(item)
        ttl = None if dedupe_ttl is None else dedupe_window(dedupe_ttl)
        tenant, item_id, queue, dedupe = item.tenant, item.id, item.queue, item.dedupe_key
        payload = payload_text(item.payload)
        # The ids travel (and are stored) beside the payload: all of it counts.
        raw_tenant, raw_id = tenant.encode(), item_id.encode()
        size = len(payload.encode()) + len(raw_tenant) + len(raw_id)
        now = self._clock.now()
        # Trailing arguments only when they say something: a delay, a dedupe key (and its
        # time to live), attempts and failures the item already carries (kept, as every
        # backing keeps them), flow gates. Only a delay leaves the item to the common script.
        delay = "" if item.available_at is None else number(item.available_at)
        extra: tuple[str, ...] = (delay,) if delay else ()
        script = _ENQUEUE
        gated = item.concurrency_key is not None or item.throttle_key is not None
        carried = bool(item.attempts or item.failures)
        if gated or carried or dedupe is not None:
            failures = "".join(map(keys.segment, item.failures)) if carried else ""
            size += len(failures.encode())
            extra = (
                delay,
                dedupe or "",
                str(item.attempts) if carried else "",
                failures,
                "" if ttl is None or dedupe is None else number(ttl),
                *(_gates(item) if gated else ()),
            )
            script = _ENQUEUE_FULL
        if size > self._redis.max_value_bytes:
            self._redis.check_bytes(size, lambda: f"work item {item_id!r}")
        # keys.item_key, from the bytes at hand (segment lengths count UTF-8 bytes).
        key = f"{self._item_prefix}{len(raw_tenant)}:{tenant}{len(raw_id)}:{item_id}"
        args = (
            1,
            key,
            self._raw_prefix,
            raw_tenant,
            ready_member(now, item_id),
            queue,
            payload,
            _PRIORITY_TEXT.get(item.priority) or str(int(item.priority)).encode(),
            number(now),
            _call_token(),  # a retry of this call finds its own item by it
            *extra,
        )
        retry, client = self._redis.retry, self._redis.client
        try:
            reply = await retry.call(script.run, client, *args)
            if reply == 0:  # the id holds an item: the script that handles every case
                reply = await retry.call(_ENQUEUE_FULL.run, client, *args)
        except RetriesSpent as spent:
            raise QueueUnavailableError(queue, "enqueue", spent.detail) from None
        if reply != 1:  # a live item holds the id or the dedupe key: it, unchanged
            return _item(reply)
        return queued_copy(item, now)

    async def enqueue_many(
        self, items: Sequence[WorkItem], *, dedupe_ttl: float | None = None
    ) -> list[WorkItem]:
        """`enqueue` of each of ``items`` in one script (atomic: nothing runs between them):
        per item, in order, what `enqueue` would have answered. Every item is checked
        before the script is sent."""
        checked, payloads = batch_items(items)
        ttl = None if dedupe_ttl is None else dedupe_window(dedupe_ttl)
        if not checked:
            return []
        now = self._clock.now()
        args: list[object] = [
            self._raw_prefix,
            number(now),
            "" if ttl is None else number(ttl),
            _call_token(),  # a retry of this call finds its own items by it
            reserve_members(now, len(checked)),
        ]
        extend = args.extend
        limit = self._redis.max_value_bytes >> 2
        run: tuple[object, ...] = ()
        count_at = 0
        for item, payload in zip(checked, payloads, strict=True):
            width = _width(item)
            head = (item.tenant, item.queue, item.priority, width)
            if head == run:
                args[count_at] += 1  # type: ignore[operator]
            else:  # a new run of items sharing tenant, queue, priority and width
                run = head
                extend(
                    (
                        item.tenant,
                        item.queue,
                        _PRIORITY_TEXT.get(item.priority) or str(int(item.priority)).encode(),
                        _WIDTH_TEXT[width],
                        1,
                    )
                )
                count_at = len(args) - 1
            if width == 11:
                failures = "".join(map(keys.segment, item.failures))
                self._check_size(item, payload, failures)
                extend(
                    (
                        item.id,
                        payload,
                        "" if item.available_at is None else number(item.available_at),
                        item.dedupe_key or "",
                        str(item.attempts) if item.attempts or item.failures else "",
                        failures,
                        *_gates(item),
                    )
                )
                continue
            # A character is at most 4 bytes: only a long item is encoded to be counted.
            if len(payload) + len(item.tenant) + len(item.id) > limit:
                self._check_size(item, payload, "")
            if width == 2:
                extend((item.id, payload))
            else:
                extend((item.id, payload, number(item.available_at)))  # type: ignore[arg-type]
        try:
            replies = await self._redis.retry.call(
                _LUA["queue_enqueue_many"].run,
                self._redis.client,
                1,
                self._key("rota", checked[0].queue),
                *args,
            )
        except RetriesSpent as spent:
            raise QueueUnavailableError(checked[0].queue, "enqueue", spent.detail) from None
        answers = [queued_copy(item, now) for item in checked]
        for at in range(0, len(replies), 2):
            answers[replies[at] - 1] = _item(replies[at + 1])
        return answers

    def _check_size(self, item: WorkItem, payload: str, failures: str) -> None:
        """Refuse ``item`` if what is stored of it (payload, ids, failures) is over
        ``max_value_bytes``, as `enqueue` does, before anything is sent."""
        size = len(payload.encode()) + len(item.tenant.encode()) + len(item.id.encode())
        self._redis.check_bytes(size + len(failures.encode()), f"work item {item.id!r}".__str__)

    async def claim(
        self, *, worker: str, queue: str = DEFAULT_QUEUE, lease_seconds: float | None = None
    ) -> WorkItem | None:
        """Atomically take one due item: tenants in rotation, then priority, then age."""
        identifier(worker, "worker")
        identifier(queue, "queue")
        lease = self._policy.lease_for(lease_seconds)
        now = self._clock.now()
        reply = await self._call(
            "queue_claim",
            [self._key("rota", queue)],
            [queue, worker, number(now), number(now + lease), *_PRIORITIES],
            queue,
            "claim",
        )
        return _item(reply) if reply else None

    async def claim_many(
        self,
        *,
        worker: str,
        queue: str = DEFAULT_QUEUE,
        lease_seconds: float | None = None,
        limit: int = 10,
    ) -> list[WorkItem]:
        """Up to ``limit`` claims, each as `claim` makes it (so each item is under its own
        lease, in the order that many single claims would take them); at most `BATCH_MOST`.
        The claims run in scripts of up to 16 sent in one write; a script stops early after
        a claim that promoted delayed tenants, so a batch may hold fewer items than were
        due (the next claim takes them)."""
        identifier(worker, "worker")
        identifier(queue, "queue")
        lease = self._policy.lease_for(lease_seconds)
        take = batch_limit(limit)
        now = self._clock.now()
        head = (self._key("rota", queue), self._prefix, queue, worker, number(now))
        expires = number(now + lease)
        calls = [
            (*head, expires, str(min(_CLAIM_SCRIPT_MOST, take - start)), *_PRIORITIES)
            for start in range(0, take, _CLAIM_SCRIPT_MOST)
        ]
        replies = await self._run_many("queue_claim_many", calls, queue, "claim")
        return [_item(fields) for reply in replies for fields in reply]

    async def _run_many(
        self, name: str, calls: list[tuple[str, ...]], queue: str, operation: str
    ) -> list[Any]:
        """Run script ``name`` once per call, all sent together (retried as one): each
        reply in order; a call the server's script cache missed is run again alone."""
        script, client = _LUA[name], self._redis.client

        async def attempt() -> list[Any]:
            return await script.run_many(client, calls)

        replies = await self._redis.retry.run(
            attempt, lambda detail: QueueUnavailableError(queue, operation, detail)
        )
        for n, (call, reply) in enumerate(zip(calls, replies, strict=True)):
            if isinstance(reply, NoScriptError):  # the cache was flushed: this one alone
                try:
                    replies[n] = await self._redis.retry.call(script.run, client, 1, *call)
                except RetriesSpent as spent:
                    raise QueueUnavailableError(queue, operation, spent.detail) from None
            elif isinstance(reply, Exception):
                raise reply
        return replies

    async def claim_waiting(
        self,
        *,
        worker: str,
        queue: str = DEFAULT_QUEUE,
        within: float,
        lease_seconds: float | None = None,
    ) -> WorkItem | None:
        """`claim`, after waiting up to ``within`` seconds (real time) for the queue's
        doorbell: the item enqueued meanwhile, claimed in the same round trip as the
        wake-up, or None when the wait ran out (or the bell rang for an item another worker
        took, and a claim as of now found nothing either).

        The wait and the claim go out together in one pipeline; Redis runs a connection's
        commands in order, so the claim (the same script, fencing and rotation as `claim`)
        runs as soon as the wait ends. It claims as of the later of its own clock reading
        and the instant the ring carries, so an item that came due while it waited is due
        to it. Items that come due by their delay ring no bell: claim again after a None.
        """
        identifier(worker, "worker")
        identifier(queue, "queue")
        non_negative(within, "within")
        if within == 0:  # BLMOVE's 0 would mean "forever"
            return await self.claim(worker=worker, queue=queue, lease_seconds=lease_seconds)
        lease = self._policy.lease_for(lease_seconds)
        bell = self._key("bell", queue)
        rung = f"{self._key('rung', queue)}{keys.segment(worker)}"
        key_list = [self._key("rota", queue), rung]
        script, client = _LUA["queue_claim"], self._redis.client
        rang = False  # whether the wait ended on a ring (not on ``within``)

        async def attempt() -> Any:
            now = self._clock.now()
            args = [self._prefix, queue, worker, number(now), number(now + lease), *_PRIORITIES]
            pipe = client.pipeline(transaction=False)
            pipe.blmove(bell, rung, within, "LEFT", "RIGHT")
            # By name: redis-py refuses `evalsha` in a cluster pipeline, though it routes a
            # script call by its keys, which share the doorbell's slot here.
            pipe.execute_command("EVALSHA", script.sha, len(key_list), *key_list, *args)
            replies = await pipe.execute(raise_on_error=False)
            if isinstance(replies[0], Exception):
                raise replies[0]
            nonlocal rang
            rang = replies[0] is not None
            if isinstance(replies[1], NoScriptError):  # the cache was flushed: claim now
                return await script(client, key_list, args)
            if isinstance(replies[1], Exception):
                raise replies[1]
            return replies[1]

        reply = await self._redis.retry.run(
            attempt, lambda detail: QueueUnavailableError(queue, "claim", detail)
        )
        if reply:
            return _item(reply)
        if rang:
            # Woken, but nothing due as of the ring: a waiter woken by an earlier ring took
            # that ring's item after this ring's was queued. Claim once more as of now.
            return await self.claim(worker=worker, queue=queue, lease_seconds=lease_seconds)
        return None

    def _settled(self, reply: Any, item_id: str, tenant: str, worker: str) -> WorkItem:
        outcome = text(reply[0])
        if outcome == "ok":
            return _item(reply[1])
        if outcome == "missing":
            raise WorkItemNotFoundError(item_id, tenant)
        holder = text(reply[1]) or None
        reason = {"taken": "taken", "expired": "expired", "capped": "capped"}[outcome]
        raise LeaseLostError(item_id, worker, holder, reason)  # type: ignore[arg-type]

    async def _held_call(
        self, name: str, item_id: str, tenant: str, worker: str, args: list[str]
    ) -> WorkItem:
        identifier(item_id, "item_id")
        identifier(tenant, "tenant")
        identifier(worker, "worker")
        ref = keys.item_ref(tenant, item_id)
        reply = await self._call(
            name,
            [self._item_prefix + ref],  # keys.item_key
            [ref, worker, *args],
            "?",
            name.removeprefix("queue_"),
        )
        return self._settled(reply, item_id, tenant, worker)

    async def heartbeat(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        """Extend the caller's lease by the policy's ``lease_seconds``, never past
        ``max_lease_seconds`` since the claim; `LeaseLostError` if not the holder."""
        now = self._clock.now()
        return await self._held_call(
            "queue_heartbeat",
            item_id,
            tenant,
            worker,
            [
                number(now),
                number(now + self._policy.lease_seconds),
                number(self._policy.max_lease_seconds),
            ],
        )

    async def complete(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        """Finish the item; fenced like `heartbeat`."""
        now = self._clock.now()
        return await self._held_call(
            "queue_complete", item_id, tenant, worker, [number(now), self._retention]
        )

    async def complete_many(
        self, items: Sequence[tuple[str, str]], *, worker: str
    ) -> list[WorkItem | DurablyError]:
        """`complete` for each ``(item_id, tenant)``, each fenced on its own lease, in
        scripts of up to 50 sent in one write: per item, in order, the completed item or the
        error `complete` would have raised for it (`LeaseLostError`,
        `WorkItemNotFoundError`)."""
        pairs = settle_keys(items, worker)
        if not pairs:
            return []
        head = (self._prefix, worker, number(self._clock.now()), self._retention)
        refs = [keys.item_ref(tenant, item_id) for item_id, tenant in pairs]
        calls = [
            (self._item_prefix + refs[at], *head, *refs[at : at + _COMPLETE_SCRIPT_MOST])
            for at in range(0, len(refs), _COMPLETE_SCRIPT_MOST)
        ]
        replies = await self._run_many("queue_complete_many", calls, "?", "complete")
        return self._completed(pairs, replies, worker)

    async def complete_and_claim(
        self,
        items: Sequence[tuple[str, str]],
        *,
        worker: str,
        queue: str = DEFAULT_QUEUE,
        limit: int,
        lease_seconds: float | None = None,
    ) -> tuple[list[WorkItem | DurablyError], list[WorkItem]]:
        """`complete_many` of ``items``, then `claim_many` of up to ``limit`` items of
        ``queue``: both answers. Up to 50 items and 16 claims run in one script, one round
        trip, the claims after the completions (so the worker never holds more items than
        before, even for a moment); a bigger call makes the two calls in turn. Everything is
        checked before any I/O. A call tried again after its reply was lost may have claimed
        items it never returned: they go back to the queue when their leases lapse."""
        pairs = settle_keys(items, worker)
        identifier(queue, "queue")
        lease = self._policy.lease_for(lease_seconds)
        take = batch_limit(limit)
        if len(pairs) > _COMPLETE_SCRIPT_MOST or take > _CLAIM_SCRIPT_MOST:
            done = await self.complete_many(pairs, worker=worker) if pairs else []
            taken = await self.claim_many(
                worker=worker, queue=queue, lease_seconds=lease_seconds, limit=take
            )
            return done, taken
        now = self._clock.now()
        refs = [keys.item_ref(tenant, item_id) for item_id, tenant in pairs]
        reply = await self._call(
            "queue_complete_claim",
            [self._key("rota", queue)],
            [
                queue,
                worker,
                number(now),
                number(now + lease),
                self._retention,
                str(take),
                str(len(refs)),
                *refs,
                *_PRIORITIES,
            ],
            queue,
            "complete and claim",
        )
        answers, claimed = reply
        return self._completed(pairs, [answers], worker), [_item(f) for f in claimed]

    def _completed(
        self, pairs: list[tuple[str, str]], replies: list[Any], worker: str
    ) -> list[WorkItem | DurablyError]:
        answers = [answer for reply in replies for answer in reply]
        results: list[WorkItem | DurablyError] = []
        for (item_id, tenant), answer in zip(pairs, answers, strict=True):
            try:
                results.append(self._settled(answer, item_id, tenant, worker))
            except (LeaseLostError, WorkItemNotFoundError) as lost:
                results.append(lost)
        return results

    async def fail(
        self,
        item_id: str,
        *,
        tenant: str,
        worker: str,
        error: str,
        retryable: bool = True,
        retry_at: float | None = None,
    ) -> WorkItem:
        """Record a failed attempt: requeue with backoff (at ``retry_at`` when given) or
        dead-letter, per the policy."""
        error = failure_text(error, retryable)
        at = retry_instant(retry_at)
        now = self._clock.now()
        if retryable and at is not None:  # queue_fail.lua requeues at it, whatever the count
            instants = ["at", number(at)]
        else:
            instants = self._requeue_instants(now=now, retryable=retryable, immediate=False)
        return await self._held_call(
            "queue_fail", item_id, tenant, worker, [number(now), error, *instants]
        )

    async def reap(self) -> list[WorkItem]:
        """Return every lapsed item to the queue (attempt counted); the items moved, as
        they now stand."""
        now = self._clock.now()
        instants = self._requeue_instants(now=now, retryable=True, immediate=False)
        reaped: list[WorkItem] = []
        while True:
            batch = await self._call(
                "queue_reap",
                [self._prefix + "queues"],
                [number(now), _LEASE_EXPIRED, str(_REAP_BATCH), *instants],
                "*",
                "reap",
            )
            reaped.extend(_item(fields) for fields in batch)
            if len(batch) < _REAP_BATCH:
                return reaped

    async def adopt(self, *, worker: str) -> list[WorkItem]:
        """Give back at once everything ``worker`` holds, lapsed or not; the items moved."""
        identifier(worker, "worker")
        now = self._clock.now()
        instants = self._requeue_instants(now=now, retryable=True, immediate=True)
        held = f"{self._prefix}held:{keys.segment(worker)}"
        moved = await self._call(
            "queue_adopt", [held], [number(now), _ADOPTED, *instants], "*", "adopt"
        )
        return [_item(fields) for fields in moved]

    async def purge(self, *, queue: str, tenant: str | None = None) -> int:
        """Delete every queued item of ``queue`` (of ``tenant`` only, when given), a few
        tenants a script; the number deleted."""
        identifier(queue, "queue")
        if tenant is not None:
            identifier(tenant, "tenant")
        deleted = 0
        while True:
            count, left = await self._call(
                "queue_purge",
                [self._prefix + "queues"],
                [queue, tenant or "", str(_PURGE_TENANTS), *_PRIORITIES],
                queue,
                "purge",
            )
            deleted += int(count)
            if not int(left):
                return deleted

    async def purge_dead_letters(
        self, *, queue: str, tenant: str | None = None, item_id: str | None = None
    ) -> int:
        """Delete dead letters of ``queue``: the one ``item_id`` of ``tenant``, every one of
        ``tenant`` (walking the tenant's dead letters of every queue), or every tenant's,
        with the dedupe keys they keep, `DEAD_PURGE_BATCH` looked at a script; the number
        deleted."""
        dead_letter_target(queue, tenant, item_id)
        if tenant is None:
            mode, key, ref = "all", f"{self._prefix}dead:{keys.segment(queue)}", ""
        elif item_id is None:
            mode, key, ref = "tenant", f"{self._prefix}dead-tenant:{keys.segment(tenant)}", ""
        else:
            mode, key, ref = "item", self._prefix + "queues", keys.item_ref(tenant, item_id)
        # The walk goes on after the last entry each window looked at (not from a rank),
        # so dead letters landing or leaving meanwhile never shift one that was there past it.
        deleted, after, after_ref = 0, "", ""
        while True:
            count, after, after_ref = await self._call(
                "queue_purge_dead",
                [key],
                [queue, mode, ref, after, after_ref, str(DEAD_PURGE_BATCH)],
                queue,
                "purge",
            )
            deleted += int(count)
            after, after_ref = _text(after), _text(after_ref)
            if not after:
                return deleted

    async def finished_per_minute(self, *, queues: Sequence[str]) -> dict[str, list[Minute]]:
        """Items of each of ``queues`` completed and dead-lettered in each of the last
        minutes, oldest first: each queue's ring hash, in one pipeline."""
        names = rated_queues(queues)
        now = self._clock.now()

        async def read() -> list[dict[Any, Any]]:
            pipe = self._redis.client.pipeline(transaction=False)
            for name in names:
                pipe.hgetall(f"{self._prefix}rate:{keys.segment(name)}")
            found: list[dict[Any, Any]] = await pipe.execute()
            return found

        try:
            rings = await self._redis.retry.call(read)
        except RetriesSpent as spent:
            raise QueueUnavailableError("*", "stats", spent.detail) from None
        rows: list[tuple[str, int, int, int]] = []
        for name, ring in zip(names, rings, strict=True):
            fields = {_text(k): int(v) for k, v in ring.items()}
            for slot in range(SLOTS):
                if f"{slot}:m" in fields:
                    rows.append(
                        (name, fields[f"{slot}:m"], fields[f"{slot}:c"], fields[f"{slot}:f"])
                    )
        return rated(rows, now)

    async def queue_names(self, *, limit: int = QUEUE_NAMES_MOST) -> list[str]:
        """The queues that ever held an item (the registry every enqueue adds to), sorted,
        at most ``limit``."""
        names_limit(limit)
        try:
            members = await self._redis.retry.call(
                self._redis.client.smembers, f"{self._prefix}queues"
            )
        except RetriesSpent as spent:
            raise QueueUnavailableError("*", "queue_names", spent.detail) from None
        return sorted(_text(member) for member in members)[:limit]

    async def dead_letters(
        self, *, tenant: str | None = None, limit: int = 50, queue: str | None = None
    ) -> list[WorkItem]:
        """Dead-lettered items of ``tenant`` (every tenant when None; optionally of one
        queue), oldest first."""
        return (await self.dead_letter_page(tenant=tenant, queue=queue, limit=limit)).items

    async def dead_letter_page(
        self,
        *,
        tenant: str | None = None,
        queue: str | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> DeadLetterPage:
        """A page of `dead_letters` after ``after``: the score and ref of the last item
        of the page before, as the sets order them."""
        cursor = _dead_letter_place(dead_letter_query(tenant, queue, limit, after))
        key = (
            f"{self._prefix}queues"
            if tenant is None
            else f"{self._prefix}dead-tenant:{keys.segment(tenant)}"
        )
        mode = "all" if tenant is None else "tenant"
        found: list[WorkItem] = []
        # A page a script, so no single script's work grows with the dead letters kept.
        while True:
            page = min(limit - len(found), _DEAD_LETTER_PAGE)
            reply = await self._call(
                "queue_dead_letters",
                [key],
                [str(page), queue or "", mode, *cursor, str(_DEAD_LETTER_PAGE)],
                queue or "*",
                "dead_letters",
            )
            found.extend(_item(flat) for flat in reply[2:])
            if not reply[0]:
                return DeadLetterPage(found, None)
            cursor = (_text(reply[0]), _text(reply[1]))
            if len(found) >= limit:
                return DeadLetterPage(found, "\t".join(cursor))

    async def last_tick(self, name: str) -> float | None:
        """Schedule ``name``'s last fired tick (None: no mark yet). Raises
        `InvalidInputError` before any I/O."""
        name = identifier(name, "schedule")
        try:
            kept = await self._redis.retry.call(
                self._redis.client.hget, self._prefix + "ticks", name
            )
        except RetriesSpent as spent:
            raise QueueUnavailableError("*", "last_tick", spent.detail) from None
        return None if kept is None else float(_text(kept))

    async def debounce(self, slot: str, workflow: str, args: str, due: float) -> str:
        """Join debounce ``slot``'s pending workflow, giving it ``args`` and pushing it to
        ``due``, or (none pending) make the slot name ``workflow``: the pending workflow's
        id, in one script. Raises `InvalidInputError` before any I/O."""
        slot, workflow, args, due = debounce_call(slot, workflow, args, due)
        reply = await self._call(
            "queue_debounce",
            [f"{self._prefix}debounce:{slot}"],
            [workflow, args, number(due)],
            "*",
            "debounce",
        )
        return text(reply)

    async def begin_debounced(self, slot: str, workflow: str, now: float) -> Begun:
        """Let ``workflow`` take debounce ``slot`` if it is due at ``now`` (see `Begun`)."""
        slot, workflow, now = begin_call(slot, workflow, now)
        args, due = await self._call(
            "queue_begin_debounced",
            [f"{self._prefix}debounce:{slot}"],
            [workflow, number(now)],
            "*",
            "begin_debounced",
        )
        if args is not None:
            return Begun(args=text(args))
        return Begun() if due is None else Begun(due=float(text(due)))

    async def release_debounced(self, slot: str, workflow: str) -> bool:
        """Delete debounce ``slot`` if it still names ``workflow`` (which began, or ended
        before it could): whether it did."""
        slot, workflow = release_call(slot, workflow)
        reply = await self._call(
            "queue_release_debounced",
            [f"{self._prefix}debounce:{slot}"],
            [workflow],
            "*",
            "release_debounced",
        )
        return bool(int(reply))

    async def debounced(self, slot: str) -> str | None:
        """The workflow debounce ``slot`` names, pending or begun (None: no slot)."""
        key = f"{self._prefix}debounce:{slot_call(slot)}"
        try:
            held = await self._redis.retry.call(self._redis.client.hget, key, "workflow")
        except RetriesSpent as spent:
            raise QueueUnavailableError("*", "debounced", spent.detail) from None
        return None if held is None else text(held)

    async def advance_tick(self, name: str, tick: float) -> tuple[bool, float | None]:
        """Move schedule ``name``'s last fired tick on to ``tick`` if it is later than the
        one kept, atomically across workers: whether this call moved it and, if it did,
        the tick kept before (None: this call took the first mark). Raises
        `InvalidInputError` before any I/O."""
        name, tick = tick_mark(name, tick)
        reply = await self._call(
            "queue_tick", [self._prefix + "ticks"], [name, number(tick)], "*", "advance_tick"
        )
        moved, previous = bool(reply[0]), reply[1]
        return moved, float(text(previous)) if moved and previous else None

    async def stats(self, *, queue: str = DEFAULT_QUEUE) -> QueueStats:
        """Depth (queued, due or delayed), claimed, dead-lettered, oldest due age, counters."""
        identifier(queue, "queue")
        now = self._clock.now()
        reply = await self._call(
            "queue_stats",
            [self._key("rota", queue)],
            [queue, number(now), *_PRIORITIES],
            queue,
            "stats",
        )
        oldest = text(reply[3])
        return QueueStats(
            depth=int(text(reply[0])),
            claimed=int(reply[1]),
            dead_lettered=int(reply[2]),
            oldest_age_seconds=now - float(oldest) if oldest else 0.0,
            reaped=int(text(reply[4])),
            duplicates_suppressed=int(text(reply[5])),
        )

    async def wait_for_work(self, queue: str = DEFAULT_QUEUE, within: float = 1.0) -> bool:
        """Block up to ``within`` seconds (real time) until an item may be due in ``queue``.

        An enqueue of a due item (or a requeue that is due at once) rings the queue's
        doorbell; True when it rang. A False is no promise the queue is empty: delayed
        items come due without ringing, so a worker still claims after each wait.
        """
        identifier(queue, "queue")
        non_negative(within, "within")
        bell = self._key("bell", queue)
        client = self._redis.client
        reply = await self._redis.retry.run(
            lambda: client.blpop([bell], timeout=within),
            lambda detail: QueueUnavailableError(queue, "wait_for_work", detail),
        )
        return reply is not None


__all__ = ["RedisWorkQueue"]
