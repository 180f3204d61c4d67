"""Lua scripts kept in ``.lua`` files beside this module, loaded once, called by SHA.

A script missing from the server's cache (after ``SCRIPT FLUSH``, a restart or a
failover to a replica that never saw it) is sent whole once with EVAL, which caches it
again, so callers never see ``NOSCRIPT``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from redis.exceptions import NoScriptError

_HERE = Path(__file__).parent
# The scripts that only read: no replica needs to acknowledge them (`ReplicaWait`).
_READS = frozenset(
    {
        "queue_stats.lua",
        "queue_dead_letters.lua",
        "state_get_run.lua",
        "state_list_runs.lua",
        "state_session_live.lua",
        "workflow_load.lua",
    }
)
_READ_ONLY: set[bytes | str] = set()  # their SHAs (as sent) and sources


def read_only(script: bytes | str) -> bool:
    """Whether ``script`` (a SHA as `Script.run` sends it, or a source) only reads."""
    return script in _READ_ONLY


class Script:
    """One Lua script and its SHA1."""

    def __init__(self, source: str, name: str = "<inline>") -> None:
        self.name = name
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()
        self._sha = self.sha.encode()
        if name in _READS:
            _READ_ONLY.update((self._sha, source))

    @classmethod
    def load(cls, filename: str, prelude: str | tuple[str, ...] | None = None) -> Script:
        """The script in ``filename`` beside this module, after the shared functions of the
        ``prelude`` file(s) when given."""
        parts = (prelude,) if isinstance(prelude, str) else prelude or ()
        texts = [(_HERE / name).read_text(encoding="utf-8") for name in (*parts, filename)]
        return cls("\n".join(texts), filename)

    async def run(self, client: Any, numkeys: int, *keys_and_args: Any) -> Any:
        """Run the script with its ``numkeys`` keys (routing uses the first), then its
        arguments, flat: one `execute_command` (the hot paths skip redis-py's per-method
        layers; arguments already in bytes go out as they are)."""
        try:
            # The command name stays text: a cluster client routes EVALSHA by it.
            return await client.execute_command("EVALSHA", self._sha, numkeys, *keys_and_args)
        except NoScriptError:
            return await client.execute_command("EVAL", self.source, numkeys, *keys_and_args)

    async def __call__(self, client: Any, keys: list[str], args: list[Any]) -> Any:
        """Run the script with ``keys`` (routing uses the first) and ``args``."""
        return await self.run(client, len(keys), *keys, *args)


def scripts(*names: str, prelude: str | tuple[str, ...] | None = None) -> dict[str, Script]:
    """Load the named ``.lua`` files (without the suffix) at import time."""
    return {name: Script.load(f"{name}.lua", prelude) for name in names}


__all__ = ["Script", "read_only", "scripts"]
