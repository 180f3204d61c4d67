"""How the App notices a body that no longer matches its records.

A body changed under an in-flight workflow without ``ctx.patched`` calls a step where an
earlier pass recorded another, or ends without reading some of its records.

Every step call the body's own task makes takes the next position in the body's sequence,
kept in the step's record after its arguments' digest (``"a": "<digest>@<position>"``).
That sequence is the same on every pass of an unchanged body; calls made inside branches
(tasks the body starts) take none, since their order may change from pass to pass, and
nor do calls with an explicit key (``step.keyed(key)``), which are found by their key. A
pass that calls a step at a position where an earlier pass recorded another step, one
this pass has not read, has drifted: a step was replaced, inserted, removed or reordered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from durably.app import _layout as layout
from durably.errors import NondeterminismError

UNREAD_NAMED = 10
"""How many unread records the warning of a finished workflow names."""


class Placement:
    """The positions earlier passes recorded for the body's own step calls.

    Read from the records the first time a pass needs them (a pass that never drifts
    never reads them).
    """

    def __init__(self, records: Mapping[str, object]) -> None:
        self._records = records
        self._index: dict[int, str] | None = None

    def drift(
        self, workflow: str, key: str, position: int, unmet: set[str]
    ) -> NondeterminismError | None:
        """The error for step ``key`` called at ``position``, if it drifted.

        It drifted if an earlier pass recorded another step at ``position`` that this
        pass has not read (``unmet``); None otherwise.
        """
        index = self._index
        if index is None:
            index = self._index = _positions(self._records)
        other = index.get(position)
        if other is None or other == key or other not in unmet:
            return None
        return NondeterminismError(
            workflow,
            key,
            f"the body now calls it as its step call #{position + 1}, where an earlier "
            f"pass recorded step {other!r}: a step was replaced, inserted, removed or "
            "reordered under this in-flight workflow (guard such a change with "
            "ctx.patched, or deploy the body the workflow started on)",
            recorded=other,
        )


def _positions(records: Mapping[str, object]) -> dict[int, str]:
    """Which step key each recorded position holds.

    The App's step records are dicts whose marker ``"a"`` is the arguments' digest, with
    ``@`` and the position for a call the body's own task made.
    """
    found: dict[int, str] = {}
    for key, value in records.items():
        if key.startswith((layout.PREFIX, "inbox:")) or not isinstance(value, dict):
            continue
        marker = value.get("a")
        if isinstance(marker, str):
            place = marker.partition(layout.PLACE)[2]
            if place.isdigit():
                found[int(place)] = key
    return found


def unread(unmet: Iterable[str]) -> list[str]:
    """The records a body that ended never read, sorted.

    Every unmet key but the retry deadlines of a step it did read (a recorded step
    replays without its attempts).
    """
    keys = set(unmet)
    return sorted(
        key for key in keys if layout.RETRY not in key or key.split(layout.RETRY, 1)[0] in keys
    )


def unread_warning(workflow: str, keys: list[str]) -> str:
    """The warning for a finished workflow that left ``keys`` unread (some named)."""
    named = ", ".join(repr(key) for key in keys[:UNREAD_NAMED])
    more = f" and {len(keys) - UNREAD_NAMED} more" if len(keys) > UNREAD_NAMED else ""
    return (
        f"workflow {workflow!r} ended without reading {len(keys)} of its records: "
        f"{named}{more} (steps removed from the body, or skipped by changed code, "
        "under an in-flight workflow?)"
    )


__all__ = ["UNREAD_NAMED", "Placement", "unread", "unread_warning"]
