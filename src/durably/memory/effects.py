"""`MemoryEffectKit`: the conformance suites' counters as `MemoryEffect` functions."""

from __future__ import annotations

from durably.memory.checkpointer import MemoryCheckpointer, MemoryEffect


class MemoryEffectKit:
    """Builds counter effects for `MemoryCheckpointer.transact`.

    A counter lives in the ``data`` dict of the checkpointer that committed it; `count`
    adds up every checkpointer handed to `watch` (a suite's factory makes fresh ones).
    """

    def __init__(self, *checkpointers: MemoryCheckpointer) -> None:
        self._watched: list[MemoryCheckpointer] = list(checkpointers)

    def watch(self, checkpointer: MemoryCheckpointer) -> MemoryCheckpointer:
        """Count the counters committed in ``checkpointer`` too; returns it."""
        self._watched.append(checkpointer)
        return checkpointer

    def bump(self, counter: str, value: object) -> MemoryEffect:
        """An effect that adds 1 to ``counter`` and returns ``value``."""

        def effect(data: dict[str, object]) -> object:
            data[counter] = _count(data, counter) + 1
            return value

        return effect

    def bump_then_fail(self, counter: str) -> MemoryEffect:
        """An effect that adds 1 to ``counter`` and then raises `RuntimeError`."""

        def effect(data: dict[str, object]) -> object:
            data[counter] = _count(data, counter) + 1
            raise RuntimeError(f"effect on {counter!r} failed after bumping it")

        return effect

    async def count(self, counter: str) -> int:
        """How many committed bumps ``counter`` has (0 if never bumped)."""
        return sum(_count(checkpointer.data, counter) for checkpointer in self._watched)


def _count(data: dict[str, object], counter: str) -> int:
    current = data.get(counter, 0)
    return current if isinstance(current, int) else 0


__all__ = ["MemoryEffectKit"]
