"""`LuaEffect`: what `RedisCheckpointer.transact` commits together with a record.

An effect is a Lua snippet run inside the record script, so the effect and the record
land in one atomic step. It sees its own ``KEYS`` and ``ARGV`` and a ``defer(command,
...)`` function; it must return its value as codec text (a string). Writes go through
``defer``: Redis never rolls a script back, so deferred writes are applied only once the
snippet returned, and a snippet that raises leaves nothing behind. Every key must share
the workflow's hash slot; ``local_keys`` names keys placed in that slot for you.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from durably.redis import keys
from durably.stores.codec import CheckpointCodec, JsonCodec


@dataclass(frozen=True, slots=True)
class LuaEffect:
    """A Lua snippet with its keys and args; see the module docstring for the contract.

    ``keys`` are full key names (each must hash to the workflow's slot); ``local_keys``
    are names the checkpointer turns into keys beside the workflow's own. The snippet's
    ``KEYS`` are ``keys`` followed by the resolved ``local_keys``.
    """

    source: str
    keys: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    local_keys: tuple[str, ...] = ()


def effect_key(ns: str, workflow: str, name: str) -> str:
    """The key a ``local_keys`` entry ``name`` resolves to for ``workflow``."""
    return f"{keys.workflow_prefix(ns, workflow)}effect:{keys.segment(name)}"


_BUMP = "defer('INCRBY', KEYS[1], 1)\nreturn ARGV[1]"
_BUMP_THEN_FAIL = "defer('INCRBY', KEYS[1], 1)\nerror('effect failed after bumping its counter')"


class RedisEffectKit:
    """The conformance suites' counters as `LuaEffect`s (an `EffectKit[LuaEffect]`).

    A counter lives beside the workflow that bumped it (its slot); `count` adds up that
    counter over every workflow of the namespace.
    """

    def __init__(self, client: Any, key_prefix: str, codec: CheckpointCodec | None = None) -> None:
        self._client = client
        self._key_prefix = keys.valid_key_prefix(key_prefix)
        self._codec = codec or JsonCodec()

    def bump(self, counter: str, value: object) -> LuaEffect:
        """An effect that adds 1 to ``counter`` and returns ``value``."""
        return LuaEffect(_BUMP, args=(self._codec.encode(value),), local_keys=(counter,))

    def bump_then_fail(self, counter: str) -> LuaEffect:
        """An effect that adds 1 to ``counter`` and then raises (a `RuntimeError`)."""
        return LuaEffect(_BUMP_THEN_FAIL, local_keys=(counter,))

    async def count(self, counter: str) -> int:
        """How many committed bumps ``counter`` has over every workflow (0 if none)."""
        pattern = re.sub(r"([*?\[\]\\])", r"\\\1", f"{self._key_prefix}:wf:") + "*"
        suffix = f":effect:{keys.segment(counter)}"
        pattern += re.sub(r"([*?\[\]\\])", r"\\\1", suffix)
        total = 0
        async for key in self._client.scan_iter(match=pattern, count=1000):
            value = await self._client.get(key)
            total += int(value or 0)
        return total


__all__ = ["LuaEffect", "RedisEffectKit", "effect_key"]
