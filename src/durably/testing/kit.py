"""What a backing hands the conformance suites besides its stores."""

from __future__ import annotations

from typing import Protocol, TypeVar

EffectT_co = TypeVar("EffectT_co", covariant=True)


class EffectKit(Protocol[EffectT_co]):
    """Builds effects for `Checkpointer.transact` in the backing's own effect type.

    Each effect touches a named counter that lives in the same datastore as the
    checkpointer, so the suites can see whether an effect ran and whether it committed.
    """

    def bump(self, counter: str, value: object) -> EffectT_co:
        """An effect that adds 1 to ``counter`` and returns ``value``."""
        ...

    def bump_then_fail(self, counter: str) -> EffectT_co:
        """An effect that adds 1 to ``counter`` and then raises `RuntimeError`."""
        ...

    async def count(self, counter: str) -> int:
        """How many committed bumps ``counter`` has (0 if never bumped)."""
        ...
