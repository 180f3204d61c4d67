"""Flow control for work items: `Throttle` (a rate) and the two gates every backing
applies at claim time, a limit of running items per concurrency key and a rate per
throttle key.

Both gates are decided here and only applied by the stores (in SQL, in Lua, in Python):

- **Concurrency**: an item with ``concurrency_key`` may be claimed only while fewer than
  its ``concurrency_limit`` items of that key (in its queue, across tenants) are claimed.
- **Throttle**: a generic cell rate algorithm (GCRA) per ``throttle_key`` of a queue. The
  store keeps one instant per key, the key's theoretical arrival time ``tat``; an item is
  claimable when ``tat - tolerance <= now``, where ``tolerance = (burst - 1) * interval``,
  and its claim moves ``tat`` to ``max(tat, now) + interval``. A key the store has never
  seen starts with ``tat = now + tolerance``: no burst at first use, so the rate holds from
  the first claim; the tolerance lets a worker that polls late take the items it missed.

A gate never drops an item: a blocked item stays queued and is skipped by claims until its
gate opens, and claims pass over it to the next item (of its tenant, then of the next
tenant) without taking it first.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import timedelta

from durably.errors import InvalidInputError

_UNITS = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
}
_RATE = re.compile(r"\s*(\d+)\s*/\s*([a-z]+)\s*")
LIMIT_MOST = 1_000_000
"""The largest concurrency limit, throttle limit or burst accepted."""


def flow_limit(value: object, name: str) -> int:
    """``value`` if it is an int from 1 to `LIMIT_MOST`; raises `InvalidInputError`
    naming ``name`` (a limit of 0 would block its items for ever)."""
    if type(value) is not int or not 1 <= value <= LIMIT_MOST:
        raise InvalidInputError(f"{name} must be an int from 1 to {LIMIT_MOST:,}, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Throttle:
    """At most ``limit`` claims per ``per``, across every worker; excess items wait.

    Args:
        limit: How many items may start per ``per`` (1 to 1,000,000).
        per: The window, a positive `timedelta` (or seconds).
        burst: How many items may start at once after a quiet spell, or to catch up
            with a worker that polled late (default 1: evenly spaced starts).

    Raises:
        InvalidInputError: a limit or burst below 1, or a window that is not positive.
    """

    limit: int
    per: timedelta = timedelta(seconds=1)
    burst: int = 1

    def __post_init__(self) -> None:
        flow_limit(self.limit, "throttle limit")
        flow_limit(self.burst, "throttle burst")
        per = self.per
        if isinstance(per, (int, float)) and not isinstance(per, bool):
            per = timedelta(seconds=per) if math.isfinite(per) else timedelta(0)
            object.__setattr__(self, "per", per)
        if not isinstance(per, timedelta) or per <= timedelta(0):
            raise InvalidInputError(f"throttle per must be a positive timedelta, got {per!r}")

    @classmethod
    def parse(cls, rate: str, *, burst: int = 1) -> Throttle:
        """A `Throttle` from text such as ``"10/s"``, ``"100/minute"`` or ``"5/hours"``.

        Raises:
            InvalidInputError: text that is not ``N/unit`` with a unit of seconds,
                minutes, hours or days.
        """
        match = _RATE.fullmatch(rate) if isinstance(rate, str) else None
        unit = None if match is None else _unit(match.group(2))
        if match is None or unit is None:
            raise InvalidInputError(
                f"throttle must read like '10/s', '100/minute' or '5/hour', got {rate!r}"
            )
        return cls(int(match.group(1)), timedelta(seconds=unit), burst)

    @property
    def interval(self) -> float:
        """Seconds between two claims at the steady rate."""
        return self.per.total_seconds() / self.limit


def _unit(text: str) -> float | None:
    # A plural ("minutes", "secs") names its singular; "ms" is no unit here.
    if text in _UNITS:
        return _UNITS[text]
    return _UNITS.get(text[:-1]) if len(text) > 3 and text.endswith("s") else None


def throttle_tolerance(interval: float, burst: int) -> float:
    """How far ahead of now a key's ``tat`` may be while its items are still claimable."""
    return (burst - 1) * interval


def throttle_admits(tat: float | None, now: float, interval: float, burst: int) -> float | None:
    """The key's new ``tat`` if an item of it may be claimed at ``now``, else None (see
    the module's docstring; what every backing applies)."""
    tolerance = throttle_tolerance(interval, burst)
    current = now + tolerance if tat is None else tat
    if current - tolerance > now:
        return None
    return max(current, now) + interval


__all__ = [
    "LIMIT_MOST",
    "Throttle",
    "flow_limit",
    "throttle_admits",
    "throttle_tolerance",
]
