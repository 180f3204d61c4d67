"""Pools opened through a transaction pooler (PgBouncer's ``pool_mode = transaction``).

Such a pooler hands each transaction (each statement, outside one) whichever server
connection is free, so nothing may outlive a transaction: no startup ``options`` (it
refuses them), no session ``SET``, no session advisory lock, no prepared statement, no
LISTEN. durably's statements keep to that already (its advisory locks are transaction
locks); what differs is how a pool is opened, which `open_pool` records here per pool:

- connections carry no startup options (the server's own ``statement_timeout`` applies:
  set it on the database or role, which `verify` checks) and prepare nothing;
- the listening connection is opened from a direct DSN (``?listen=``) or, without one,
  there is none and waiters poll every ``poll_seconds``;
- `migrate` refuses: DDL and its lock belong on a direct connection.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from pydantic import SecretStr

from durably.errors import ConfigurationError


@dataclass(frozen=True)
class Pooled:
    """How a pool opened through a transaction pooler reaches the server for LISTEN."""

    listen: SecretStr | None
    """The direct DSN the listening connection opens (None: no listening, waiters poll)."""
    listen_kwargs: dict[str, Any] = field(default_factory=dict)
    """Connection keyword arguments for that DSN (its timeouts)."""


_POOLED: weakref.WeakKeyDictionary[Any, Pooled] = weakref.WeakKeyDictionary()
# Pools that cannot be weakly referenced (asyncpg's), by identity, the pool kept beside its
# record so that an id is never read for another pool; the oldest go past `_KEPT`.
_KEPT = 64
_POOLED_BY_ID: dict[int, tuple[Any, Pooled]] = {}


def mark_pooled(pool: Any, pooled: Pooled) -> None:
    """Record that ``pool`` reaches the server through a transaction pooler."""
    try:
        _POOLED[pool] = pooled
    except TypeError:
        _POOLED_BY_ID[id(pool)] = (pool, pooled)
        while len(_POOLED_BY_ID) > _KEPT:
            del _POOLED_BY_ID[next(iter(_POOLED_BY_ID))]


def pooled(pool: Any) -> Pooled | None:
    """How ``pool`` listens, when it is behind a transaction pooler; None otherwise."""
    try:
        return _POOLED.get(pool)
    except TypeError:
        kept = _POOLED_BY_ID.get(id(pool))
        return kept[1] if kept is not None and kept[0] is pool else None


def refuse_migrate(pool: Any) -> None:
    """`ConfigurationError` when ``pool`` is behind a transaction pooler."""
    if pooled(pool) is not None:
        raise ConfigurationError(
            "migrate does not run through a transaction pooler (?pooler=transaction): "
            "its DDL and lock belong on one server connection; run `durably migrate` with "
            "the server's own DSN (the direct address, without ?pooler=transaction)"
        )


__all__ = ["Pooled", "mark_pooled", "pooled", "refuse_migrate"]
