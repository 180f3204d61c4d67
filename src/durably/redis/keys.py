"""Redis key names: length-prefixed segments and the hash tags that keep a unit in one slot.

A segment is ``<byte length>:<value>``, never escaped, so ``a:b`` and ``a`` followed by
``b:`` cannot build the same key; the length counts UTF-8 bytes, as Lua's ``#`` does.
State tags on the tenant, a queue and a scheduler on their whole namespace, a workflow on
its id. Each tag is the first ``{...}`` of the key, and a segment starts with a digit, so
an id containing braces still yields the same tag every time it is used.
"""

from __future__ import annotations

from typing import Any

from redis.crc import key_slot

from durably.errors import InvalidInputError
from durably.validation import identifier

DEFAULT_KEY_PREFIX = "durably"


def segment(value: str) -> str:
    """``value`` as a length-prefixed key segment."""
    return f"{len(value.encode())}:{value}"


def valid_key_prefix(value: str) -> str:
    """Return ``value`` if it can prefix keys: a non-empty id without braces."""
    identifier(value, "key_prefix")
    if "{" in value or "}" in value:
        raise InvalidInputError(f"key_prefix {value!r} must not contain braces (hash tags)")
    return value


def state_prefix(ns: str, tenant: str) -> str:
    """Every state key of ``tenant`` starts with this; the tenant is the hash tag."""
    return f"{ns}:state:{{{segment(tenant)}}}:"


def run_key(ns: str, tenant: str, run_id: str) -> str:
    """The run's blob (what a worker last wrote)."""
    return f"{state_prefix(ns, tenant)}run:{segment(run_id)}"


def run_meta_key(ns: str, tenant: str, run_id: str) -> str:
    """The run's version, counters, state and creation sequence (a hash)."""
    return f"{state_prefix(ns, tenant)}meta:{segment(run_id)}"


def session_key(ns: str, tenant: str, session_id: str) -> str:
    """The session's hash (version and blob)."""
    return f"{state_prefix(ns, tenant)}session:{segment(session_id)}"


def session_runs_key(ns: str, tenant: str, session_id: str) -> str:
    """The set of run ids whose ``session_id`` is this session."""
    return f"{state_prefix(ns, tenant)}session-runs:{segment(session_id)}"


def session_mark_key(ns: str, tenant: str, session_id: str) -> str:
    """The session's write mark: set by every ``put_run`` into it, from a tenant counter."""
    return f"{state_prefix(ns, tenant)}session-mark:{segment(session_id)}"


def session_deleting_key(ns: str, tenant: str, session_id: str) -> str:
    """The runs of this session a cascading ``delete_session`` is deleting, batch by batch."""
    return f"{state_prefix(ns, tenant)}session-deleting:{segment(session_id)}"


def state_tenants_key(ns: str) -> str:
    """Every tenant that ever stored a run, a sorted set of score 0 (so in code point order
    by ZRANGE BYLEX), added to before a run is first written; it has its own slot."""
    return f"{ns}:state-tenants"


def state_tenants_filled_key(ns: str) -> str:
    """Set once the tenants of runs written before `state_tenants_key` existed were added
    to it (by one scan)."""
    return f"{ns}:state-tenants-filled"


def state_totals_counted_key(ns: str) -> str:
    """Set once the runs stored before the run totals existed were added to them."""
    return f"{ns}:state-totals-counted"


def queue_prefix(ns: str) -> str:
    """Every queue key of the namespace starts with this; the namespace is the hash tag."""
    return f"{ns}:queue:{{{segment(ns)}}}:"


def item_ref(tenant: str, item_id: str) -> str:
    """How the queue scripts name an item: tenant and id segments."""
    return segment(tenant) + segment(item_id)


def item_key(ns: str, tenant: str, item_id: str) -> str:
    """A work item's hash."""
    return f"{queue_prefix(ns)}item:{item_ref(tenant, item_id)}"


def workflow_prefix(ns: str, workflow: str) -> str:
    """Every key of ``workflow`` starts with this; the workflow id is the hash tag."""
    return f"{ns}:wf:{{{segment(workflow)}}}:"


def changes_channel(ns: str) -> str:
    """The pub/sub channel the workflow scripts announce changes on: ``workflow_prefix``
    up to the hash tag, then ``changes`` (`workflow_lib.lua`'s ``announce`` builds it so)."""
    return f"{ns}:wf:changes"


def workflow_index_prefix(ns: str) -> str:
    """The status index (ordered by workflow id) lives under its own tag."""
    return f"{ns}:wf-index:{{{segment(ns)}}}:"


def followed_runs_key(ns: str, tenant: str) -> str:
    """The runs of ``tenant`` following a workflow (a hash: the workflow's engine key to the
    run id), kept by the runs' own writes in the tenant's slot, where a status write's
    step in that slot reads it (the scripts build it from `state_prefix`)."""
    return f"{state_prefix(ns, tenant)}following"


def tenant_counts_key(ns: str, tenant: str) -> str:
    """A tenant's admitted workflows, running and started (a hash); the tenant is the tag."""
    return f"{ns}:wf-counts:{{{segment(tenant)}}}"


def gate_prefix(ns: str, gate: str) -> str:
    """Every key of one workflow gate (`durably.stores.gates`); the gate is the tag."""
    return f"{ns}:wf-gate:{{{segment(gate)}}}:"


def throttle_key(ns: str, key: str) -> str:
    """A workflow throttle key's reserved instant (a string); the key is the tag."""
    return f"{ns}:wf-throttle:{{{segment(key)}}}"


def scheduler_prefix(ns: str, scheduler_namespace: str) -> str:
    """Every key of one scheduler namespace; the namespace is the hash tag."""
    return f"{ns}:sched:{{{segment(scheduler_namespace)}}}:"


def claim_key(ns: str, digest: str) -> str:
    """A claim-check blob's hash; its digest is the hash tag (blobs spread over slots)."""
    return f"{ns}:claim:{{{digest}}}"


def glob_escaped(text: str) -> str:
    """``text`` matching only itself in a SCAN pattern."""
    return "".join(f"\\{ch}" if ch in "*?[]\\" else ch for ch in text)


def claim_pattern(ns: str) -> str:
    """A SCAN pattern matching every claim-check blob of ``ns``."""
    return f"{glob_escaped(ns)}:claim:*"


def slot(key: str) -> int:
    """The cluster hash slot of ``key``."""
    return int(key_slot(key.encode()))


async def scan_tagged(client: Any, head: str, tail: str) -> set[str]:
    """The ids ``X`` of every key ``head + segment(X) + tail`` (``head`` ending in the hash
    tag's ``{``), found by SCAN over every primary: for operators' listings, not hot paths."""
    pattern = glob_escaped(head) + "*" + tail
    found: set[str] = set()
    async for key in client.scan_iter(match=pattern, count=1000):
        name = key.decode() if isinstance(key, bytes) else str(key)
        size, _, rest = name[len(head) :].partition(":")
        if size.isdigit():
            found.add(rest.encode()[: int(size)].decode())
    return found


__all__ = [
    "DEFAULT_KEY_PREFIX",
    "claim_key",
    "claim_pattern",
    "followed_runs_key",
    "gate_prefix",
    "glob_escaped",
    "item_key",
    "item_ref",
    "queue_prefix",
    "run_key",
    "run_meta_key",
    "scan_tagged",
    "scheduler_prefix",
    "segment",
    "session_key",
    "session_runs_key",
    "slot",
    "state_prefix",
    "throttle_key",
    "valid_key_prefix",
    "workflow_index_prefix",
    "workflow_prefix",
]
