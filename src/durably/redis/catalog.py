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

_ENTER = scripts("workflow_catalog_enter")["workflow_catalog_enter"]
_DIGITS = 16


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

    def catalog_keys(self) -> list[str]:
        """The keys `workflow_index.lua` keeps beside the status index."""
        return [self._hash, self._all_counts]

    def line_key(self, line: Line) -> str:
        """The sorted set of ``line``."""
        if line.parent is not None:
            return f"{self._lines}p:{segment(line.parent)}"
        if line.tenant is not None and line.kind is not None:
            return f"{self._lines}tk:{segment(line.tenant)}{segment(line.kind)}"
        if line.tenant is not None and line.status is not None:
            return f"{self._lines}ts:{segment(line.tenant)}{line.status.value}"
        if line.kind is not None and line.status is not None:
            return f"{self._lines}ks:{segment(line.kind)}{line.status.value}"
        if line.tenant is not None:
            return f"{self._lines}t:{segment(line.tenant)}"
        if line.kind is not None:
            return f"{self._lines}k:{segment(line.kind)}"
        if line.status is not None:
            return f"{self._lines}s:{line.status.value}"
        return f"{self._lines}a"

    def _tenant_counts(self, tenant: str) -> str:
        return f"{self._all_counts}:{segment(tenant)}"

    def entering(
        self, workflow: str, entry: CatalogEntry, status: WorkflowStatus
    ) -> tuple[list[str], list[str]]:
        """The keys and arguments of the script that catalogues ``workflow``."""
        lines = [
            self.line_key(Line()),
            self.line_key(Line(tenant=entry.tenant)),
            self.line_key(Line(kind=entry.kind)),
            self.line_key(Line(tenant=entry.tenant, kind=entry.kind)),
        ]
        if entry.parent is not None:
            lines.append(self.line_key(Line(parent=entry.parent)))
        stored = {
            "t": entry.tenant,
            "k": entry.kind,
            "p": entry.parent,
            "c": entry.created_us,
            "m": member(entry.created_us, workflow),
            "l": lines,
            "sp": f"{self._lines}s:",
            "tsp": f"{self._lines}ts:{segment(entry.tenant)}",
            "ksp": f"{self._lines}ks:{segment(entry.kind)}",
            "ct": self._tenant_counts(entry.tenant),
        }
        keys = [self._hash, self._all_counts, self._tenant_counts(entry.tenant)]
        return keys, [workflow, json.dumps(stored), status.value, "", *lines]

    async def enter(self, workflow: str, entry: CatalogEntry, status: WorkflowStatus) -> None:
        """Catalogue ``workflow`` (reporting ``status``) unless it is."""
        keys, args = self.entering(workflow, entry, status)
        client = self._redis.client
        await self._redis.state(lambda: _ENTER(client, keys, args))

    async def enter_many(self, entries: list[tuple[str, CatalogEntry, WorkflowStatus]]) -> None:
        """`enter` each (workflow, entry, status), the scripts sent in one pipeline."""
        calls = [self.entering(workflow, entry, status) for workflow, entry, status in entries]
        client = self._redis.client

        async def send() -> list[Any]:
            async with client.pipeline(transaction=False) as pipe:
                for keys, args in calls:
                    pipe.execute_command("EVALSHA", _ENTER.sha, len(keys), *keys, *args)
                replies: list[Any] = await pipe.execute(raise_on_error=False)
                return replies

        replies = await self._redis.state(send)
        for (keys, args), reply in zip(calls, replies, strict=True):
            if isinstance(reply, NoScriptError):  # a server that lost its scripts: one by one
                await self._redis.state(functools.partial(_ENTER, client, keys, args))
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
    entry = CatalogEntry(str(stored["t"]), str(stored["k"]), int(stored["c"]), stored.get("p"))
    return Listed(workflow, entry, status_text(str(stored["s"]), workflow), info)


__all__ = ["RedisCatalog", "member"]
