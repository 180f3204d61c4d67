"""How tenants scope workflow ids: the engine's key of a workflow ``(tenant, id)``.

The engine and the stores key a workflow by one string. The App maps a tenant and a
workflow id to that key injectively, so the same id under two tenants names two workflows
while every backing stays tenant-agnostic:

- tenant ``"default"``: the id itself (the key every workflow had before tenants scoped
  ids, so default-tenant workflows stored earlier need nothing);
- any other tenant: ``durably:t<N>:<tenant>:<id>``, ``<N>`` the tenant's length in
  characters, so no tenant and id can be read another way.

User ids may not start with ``durably:`` (the prefix of these keys), so no key of one form
can be mistaken for one of the other. Workflows a store kept from before (a tenant other
than the default one under the bare id, its tenant in its start record) are found under
that key as long as the store may hold any (`older_layout`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from durably.app import _layout as layout
from durably.errors import InvalidInputError
from durably.stores.workflows import DEFAULT_TENANT, Checkpointer
from durably.validation import MAX_ID_BYTES, identifier

# DEFAULT_TENANT (the schedulers' default tenant too): the tenant whose workflows are keyed
# by their bare id.
RESERVED = "durably:"
"""The prefix of the keys the App makes itself; no user id starts with it."""
_SCOPED = "durably:t"
MARKER = "durably:tenancy"
"""The key of the record saying a store holds no workflow of the older layout."""
_SETTLED = "durably:scoped"
_DERIVED = re.compile(r"/(?:child|start):.*#[0-9]", re.DOTALL)
"""What the ids derived for a body's children and starts look like
(``{parent}/child:{kind}#{n}``, ``{parent}/start:{kind}#{n}``)."""


def workflow_key(tenant: str, id: str) -> str:
    """The engine's key of workflow ``id`` of ``tenant`` (both valid identifiers).

    `InvalidInputError` before any I/O when the pair does not fit in `MAX_ID_BYTES`.
    """
    head = key_prefix(tenant)
    key = id if head is None else f"{head}{id}"
    if len(key) > MAX_ID_BYTES >> 2 and len(key.encode()) > MAX_ID_BYTES:
        room = MAX_ID_BYTES if head is None else MAX_ID_BYTES - len(head.encode())
        raise InvalidInputError(
            f"workflow id {id[:40]!r}… is too long: in tenant {tenant[:40]!r} an id takes "
            f"at most {room} bytes of UTF-8"
        )
    return key


def scope(key: str, start: Mapping[str, object] | None) -> tuple[str, str]:
    """The tenant and user id of the workflow keyed ``key``.

    Read from the key, or for a bare key, the tenant its start record ``start`` names (the
    default tenant without one).
    """
    scoped = scoped_key(key)
    if scoped is not None:
        return scoped
    tenant = start.get("tenant") if start is not None else None
    return (tenant if isinstance(tenant, str) else DEFAULT_TENANT), key


def _decoded(key: str) -> tuple[str, str] | None:
    head, colon, rest = key[len(_SCOPED) :].partition(":")
    if not colon or not head.isdigit() or not head.isascii():
        return None
    size = int(head)
    tenant, id = rest[:size], rest[size + 1 :]
    if not tenant or len(tenant) != size or rest[size : size + 1] != ":" or not id:
        return None
    return tenant, id


def tenant_of(tenant: object, default: str) -> str:
    """``tenant`` checked (`InvalidInputError`), or ``default`` for None."""
    return default if tenant is None else identifier(tenant, "tenant")


def looked_up(id: object) -> str:
    """``id`` if a workflow may be looked up by it, else `InvalidInputError`.

    An identifier that does not start like the keys the App makes itself.
    """
    text = identifier(id, "id")
    if text.startswith(RESERVED):
        raise InvalidInputError(f"workflow ids starting with {RESERVED!r} are reserved")
    return text


def new_id(id: object) -> str:
    """``id`` if a user may start a workflow under it, else `InvalidInputError`.

    `looked_up`, and not of the form durably derives for a body's children and starts
    (``…/child:KIND#N``, ``…/start:KIND#N``), which only the App gives out.
    """
    text = looked_up(id)
    if _DERIVED.search(text) is not None:
        raise InvalidInputError(
            f"workflow id {text[:80]!r} has the form durably derives for the workflows a "
            "body starts ('…/child:KIND#N', '…/start:KIND#N'): choose another"
        )
    return text


def belongs(stored: Mapping[str, object], tenant: str) -> bool:
    """Whether records ``stored`` are of a workflow the App started for ``tenant``."""
    start = stored.get(layout.START)
    return isinstance(start, dict) and start.get("tenant", DEFAULT_TENANT) == tenant


async def locate(
    checkpointer: Checkpointer[Any], tenant: str, id: str, *, older: bool
) -> tuple[str, dict[str, object]] | None:
    """The key and records of workflow ``id`` of ``tenant``, or None.

    Found under its key, or (``older``: the store may hold workflows of the layout before
    tenant scopes) under the bare id with a start record naming ``tenant``.
    """
    key = workflow_key(tenant, id)
    stored = await checkpointer.load(key)
    if belongs(stored, tenant):
        return key, stored
    if older and key != id:
        stored = await checkpointer.load(id)
        if belongs(stored, tenant):
            return id, stored
    return None


async def older_layout(checkpointer: Checkpointer[Any], *, settle: bool) -> bool:
    """Whether the store may hold workflows of other tenants under their bare ids.

    Releases before tenant scopes wrote them so. False once a `MARKER` says the store holds
    none. A store with no workflow at all gets the marker when ``settle``, so a store that
    starts out scoped never pays for looking up the earlier layout.
    """
    if _SETTLED in await checkpointer.load(MARKER):
        return False
    # A status is found from an index; listing every workflow may scan the whole store
    # (Redis), so it is asked only of a store with no status at all.
    if await checkpointer.list_status(limit=1) or await checkpointer.workflows(limit=1):
        return True
    if settle:
        await settle_layout(checkpointer)
    return False


async def settle_layout(checkpointer: Checkpointer[Any]) -> None:
    """Record in the store that it holds no workflow of the layout before tenant scopes."""
    await checkpointer.supply(MARKER, _SETTLED, True)


async def earlier_workflows(
    checkpointer: Checkpointer[Any], *, limit: int = 20
) -> list[tuple[str, str]]:
    """Up to ``limit`` workflows of other tenants than the default one under bare ids.

    As tenant and id: what releases before tenant scopes left, which Apps look up under
    bare ids while the store has no `MARKER`. Reads the records of every workflow under a
    bare id: an operator's command, not a hot path.
    """
    found: list[tuple[str, str]] = []
    after: str | None = None
    while len(found) < limit:
        keys = await checkpointer.workflows(after=after, limit=1000)
        for key in keys:
            if key == MARKER or scoped_key(key) is not None:
                continue
            start = (await checkpointer.load(key)).get(layout.START)
            if isinstance(start, dict):
                tenant = scope(key, start)[0]
                if tenant != DEFAULT_TENANT:
                    found.append((tenant, key))
                    if len(found) == limit:
                        break
        if len(keys) < 1000:
            break
        after = keys[-1]
    return found


def workflow_scope(key: str, stored: Mapping[str, object]) -> tuple[str | None, str] | None:
    """How an operator sees the workflow the store keeps under ``key``: tenant and id.

    ``stored`` (its records) is read only for a bare key. The tenant is None for a workflow
    not started through an App (no start record); the whole is None for the `MARKER`.
    """
    if key == MARKER:
        return None
    scoped = scoped_key(key)
    if scoped is not None:
        return scoped
    start = stored.get(layout.START)
    return (scope(key, start)[0] if isinstance(start, dict) else None), key


def scoped_key(key: str) -> tuple[str, str] | None:
    """The tenant and id a key of a tenant other than the default one holds.

    None for a bare key (whose tenant its start record names: `workflow_scope`).
    """
    return _decoded(key) if key.startswith(_SCOPED) else None


def key_prefix(tenant: str) -> str | None:
    """What every key of a workflow of ``tenant`` starts with (they sort together).

    None for the default tenant, whose keys are the bare ids.
    """
    return None if tenant == DEFAULT_TENANT else f"{_SCOPED}{len(tenant)}:{tenant}:"


async def workflow_at(checkpointer: Checkpointer[Any], tenant: str, id: str) -> str | None:
    """The key of workflow ``id`` of ``tenant`` for an operator's command, or None.

    As `locate` finds it, or, in the default tenant, a workflow not started through an App
    (records or a status under the bare id, no start record). `InvalidInputError` before
    any I/O for a bad tenant or id.
    """
    tenant = identifier(tenant, "tenant")
    id = looked_up(id)
    workflow_key(tenant, id)
    older = await older_layout(checkpointer, settle=False)
    found = await locate(checkpointer, tenant, id, older=older)
    if found is not None:
        return found[0]
    if tenant == DEFAULT_TENANT:
        stored = await checkpointer.load(id)
        if (stored and layout.START not in stored) or (
            not stored and await checkpointer.get_status(id) is not None
        ):
            return id
    return None


__all__ = [
    "DEFAULT_TENANT",
    "MARKER",
    "RESERVED",
    "belongs",
    "earlier_workflows",
    "key_prefix",
    "locate",
    "looked_up",
    "new_id",
    "older_layout",
    "scope",
    "scoped_key",
    "settle_layout",
    "tenant_of",
    "workflow_at",
    "workflow_key",
    "workflow_scope",
]
