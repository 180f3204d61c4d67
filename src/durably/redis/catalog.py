"""The workflow catalog in Redis (`durably.stores.catalog.Cataloguing`): one sorted set per
line under the status index's tag, its members ``<created, 16 digits><key>`` at score 0,
so a line reads newest first by ZRANGE BYLEX REV from a mark; the entries in one hash and
the counts in hashes (every tenant's, and each tenant's).

As the status index, the catalog lives in its own slot: a status a pass reports moves the
workflow between status lines in a second step (`workflow_index.lua`), so a line may show
a status a moment old; the row's own status read with it is the workflow's.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from redis.exceptions import NoScriptError

from durably.redis.connection import RedisConnection, text
from durably.redis.keys import segment
from durably.redis.scripts import scripts
from durably.stores.catalog import CatalogEntry, Line, Listed, Mark, status_text
from durably.stores.status import WorkflowInfo, WorkflowStatus

_SCRIPTS = scripts(
    "workflow_catalog_enter", "workflow_catalog_enter_many", prelude="workflow_catalog_lib.lua"
)
_ENTER = _SCRIPTS["workflow_catalog_enter"]
_ENTER_MANY = _SCRIPTS["workflow_catalog_enter_many"]
_DIGITS = 16

ENTRIES_PER_SCRIPT = 100
"""The most workflows one batch script catalogues: a script holds the server for its whole
run, so a batch of a thousand goes as a few scripts of a millisecond or two."""


def member(created_us: int, workflow: str) -> str:
    """A workflow's member in its lines: sorts by creation time, then key."""
    return f"{created_us:0{_DIGITS}d}{workflow}"


class RedisCatalog:
    """The catalog of one key prefix; ``index`` is the status index's key prefix."""

    def __init__(
        self,
        redis: RedisConnection,
        index: str,
        statuses: Callable[[list[str]], Awaitable[list[WorkflowInfo | None]]],
    ) -> None:
        self._redis = redis
        self._hash = index + "catalog"
        self._all_counts = index + "counts"
        self._lines = index + "line:"
        self._statuses = statuses
        # A batch names a few tenants and kinds many times: their keys are built once.
        self._named: dict[tuple[str, str], tuple[list[str], str, str, str]] = {}

    def catalog_keys(self) -> list[str]:
        """The keys `workflow_index.lua` keeps beside the status index."""
        return [self._hash, self._all_counts]

    def line_key(self, line: Line) -> str:
        """The sorted set of ``line``."""
        status = None if line.status is None else line.status.value
        return self._line(line.tenant, line.kind, status, line.parent)

    def _line(
        self,
        tenant: str | None = None,
        kind: str | None = None,
        status: str | None = None,
        parent: str | None = None,
    ) -> str:
        """`line_key` of fields already checked (a status line's prefix for status '')."""
        if parent is not None:
            return f"{self._lines}p:{segment(parent)}"
        if tenant is not None and kind is not None:
            return f"{self._lines}tk:{segment(tenant)}{segment(kind)}"
        if tenant is not None and status is not None:
            return f"{self._lines}ts:{segment(tenant)}{status}"
        if kind is not None and status is not None:
            return f"{self._lines}ks:{segment(kind)}{status}"
        if tenant is not None:
            return f"{self._lines}t:{segment(tenant)}"
        if kind is not None:
            return f"{self._lines}k:{segment(kind)}"
        if status is not None:
            return f"{self._lines}s:{status}"
        return f"{self._lines}a"

    def _tenant_counts(self, tenant: str) -> str:
        return f"{self._all_counts}:{segment(tenant)}"

    def _stored(self, workflow: str, entry: CatalogEntry) -> str:
        """The catalog hash's entry of ``workflow`` (without its status), as JSON."""
        tenant, kind = entry.tenant, entry.kind
        named = self._named.get((tenant, kind))
        if named is None:
            if len(self._named) >= 4096:
                self._named.clear()
            lines = [
                self._line(),
                self._line(tenant),
                self._line(kind=kind),
                self._line(tenant, kind),
            ]
            named = (
                lines,
                self._line(tenant, status=""),
                self._line(kind=kind, status=""),
                self._tenant_counts(tenant),
            )
            self._named[(tenant, kind)] = named
        lines, tenant_statuses, kind_statuses, tenant_counts = named
        if entry.parent is not None:
            lines = [*lines, self._line(parent=entry.parent)]
        stored = {
            "t": tenant,
            "k": kind,
            "p": entry.parent,
            "c": entry.created_us,
            "m": member(entry.created_us, workflow),
            "l": lines,
            "sp": self._line(status=""),
            "tsp": tenant_statuses,
            "ksp": kind_statuses,
            "ct": tenant_counts,
        }
        return json.dumps(stored)

    async def enter(self, workflow: str, entry: CatalogEntry, status: WorkflowStatus) -> None:
        """Catalogue ``workflow`` (reporting ``status``) unless it is."""
        keys = [self._hash, self._all_counts, self._tenant_counts(entry.tenant)]
        args = [workflow, self._stored(workflow, entry), status.value]
        client = self._redis.client
        await self._redis.state(lambda: _ENTER(client, keys, args))

    async def enter_many(self, entries: list[tuple[str, CatalogEntry, WorkflowStatus]]) -> None:
        """`enter` each (workflow, entry, status): `ENTRIES_PER_SCRIPT` to a script, the
        scripts sent together (every key is in the catalog's slot)."""
        calls: list[tuple[str, ...]] = []
        for first in range(0, len(entries), ENTRIES_PER_SCRIPT):
            arguments = [self._hash, self._all_counts]
            for workflow, entry, status in entries[first : first + ENTRIES_PER_SCRIPT]:
                arguments += (workflow, self._stored(workflow, entry), status.value)
            calls.append(tuple(arguments))
        client = self._redis.client
        replies = await self._redis.state(lambda: _ENTER_MANY.run_many(client, calls))
        for sent, reply in zip(calls, replies, strict=True):
            if isinstance(reply, NoScriptError):  # a server that lost its scripts: sent whole
                await self._redis.state(functools.partial(_ENTER_MANY.run, client, 1, *sent))
            elif isinstance(reply, Exception):
                raise reply

    async def listed(
        self, line: Line, before: Mark | None, since_us: int, limit: int
    ) -> list[Listed]:
        """A slice of ``line``, newest first: one ZRANGE, then the entries and statuses."""
        client = self._redis.client
        top = "+" if before is None else "(" + member(*before)
        bottom = "[" + f"{since_us:0{_DIGITS}d}"
        names = await self._redis.state(
            functools.partial(
                client.zrevrangebylex, self.line_key(line), top, bottom, start=0, num=limit
            )
        )
        workflows = [text(name)[_DIGITS:] for name in names]
        if not workflows:
            return []
        entries = await self._redis.state(lambda: client.hmget(self._hash, workflows))
        infos = await self._statuses(workflows)
        rows = []
        for workflow, stored, info in zip(workflows, entries, infos, strict=True):
            if stored is None:
                continue  # taken out between the two reads
            rows.append(_listed(workflow, json.loads(text(stored)), info))
        return rows

    async def tally(self, tenant: str | None) -> dict[tuple[str, str], int]:
        """(kind, status text) counts of ``tenant`` (None: every tenant)."""
        key = self._all_counts if tenant is None else self._tenant_counts(tenant)
        client = self._redis.client
        fields = await self._redis.state(lambda: client.hgetall(key))
        counts: dict[tuple[str, str], int] = {}
        for field, count in fields.items():
            kind, status = json.loads(text(field))
            counts[(str(kind), str(status))] = int(count)
        return counts


def _listed(workflow: str, stored: dict[str, Any], info: WorkflowInfo | None) -> Listed:
    # The creation time as the entry's member holds it: the scripts that rewrite an entry
    # re-encode its numbers to 14 significant digits (cjson), which rounds ``c`` to a
    # tenth of a millisecond, while a line orders and a mark compares whole microseconds.
    member_us = str(stored.get("m", ""))[:_DIGITS]
    created = int(member_us) if member_us.isdigit() else int(stored["c"])
    entry = CatalogEntry(str(stored["t"]), str(stored["k"]), created, stored.get("p"))
    return Listed(workflow, entry, status_text(str(stored["s"]), workflow), info)


__all__ = ["RedisCatalog", "member"]
