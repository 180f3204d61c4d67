"""Lua scripts kept in the ``lua/`` folder beside this module, loaded once, called by SHA.

A script missing from the server's cache (after ``SCRIPT FLUSH``, a restart or a
failover to a replica that never saw it) is sent whole once with EVAL, which caches it
again, so callers never see ``NOSCRIPT``.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from redis.exceptions import NoScriptError, ResponseError

from durably.redis.cluster import WaitingCluster
from durably.redis.wire import direct_pool, packed_call, packed_command, sent, sent_many

_HERE = Path(__file__).parent / "lua"
# The scripts that only read: no replica needs to acknowledge them (`ReplicaWait`).
_READS = frozenset(
    {
        "queue_stats.lua",
        "queue_dead_letters.lua",
        "state_get_run.lua",
        "state_list_runs.lua",
        "state_session_live.lua",
        "workflow_load.lua",
        "workflow_look.lua",
        "workflow_survey.lua",
    }
)
_READ_ONLY: set[bytes | str] = set()  # their SHAs (as sent) and sources

T = TypeVar("T")
Attempt = Callable[[Callable[[], Awaitable[T]]], Awaitable[T]]
"""Runs an operation with the caller's retries (`RedisConnection.state`)."""


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
        self._evalsha = b"$7\r\nEVALSHA\r\n$40\r\n" + self._sha + b"\r\n"
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
        arguments, flat (arguments already in bytes go out as they are).

        On a plain client the call is sent on a pooled connection directly: redis-py's
        ``execute_command`` adds its own retries (the stores retry, see `Retry`) and
        per-command bookkeeping that cost more client time than the round trip's own
        packing and parsing. The connection's own error handling is unchanged: a failed
        send or read drops the connection before the error surfaces. On a cluster the
        call goes to its slot's primary the same way (`WaitingCluster.routed`)."""
        pool = direct_pool(client)
        if pool is not None:
            try:
                packed = packed_call(self._evalsha, numkeys, keys_and_args)
                return await sent(pool, packed or ("EVALSHA", self._sha, numkeys, *keys_and_args))
            except NoScriptError:
                return await sent(pool, ("EVAL", self.source, numkeys, *keys_and_args))
        if type(client) is WaitingCluster:
            try:
                return await client.routed(
                    keys_and_args[0],
                    packed_call(self._evalsha, numkeys, keys_and_args),
                    "EVALSHA",
                    self.sha,
                    numkeys,
                    *keys_and_args,
                )
            except NoScriptError:
                return await client.execute_command("EVAL", self.source, numkeys, *keys_and_args)
        try:
            # The command name stays text: a cluster client routes EVALSHA by it.
            return await client.execute_command("EVALSHA", self._sha, numkeys, *keys_and_args)
        except NoScriptError:
            return await client.execute_command("EVAL", self.source, numkeys, *keys_and_args)

    async def run_many(
        self, client: Any, calls: Sequence[tuple[Any, ...]], numkeys: int = 1
    ) -> list[Any]:
        """Run the script once per entry of ``calls`` (each ``numkeys`` keys, then its
        arguments), all sent together: per call, in order, its reply or the
        `ResponseError` it answered (`NoScriptError` included: the caller runs that one
        alone). A failed send or read raises, as a pipeline's does.

        On a plain client the calls go out packed in one write on a pooled connection and
        their replies are read in turn, as `run` sends one; otherwise through a redis-py
        pipeline (the script by name: cluster pipelines refuse ``evalsha``)."""
        pool = direct_pool(client)
        if pool is not None:
            packed: list[bytes] = []
            for call in calls:
                command = packed_call(self._evalsha, numkeys, call)
                if command is None:
                    break  # an argument redis-py packs (or refuses): the pipeline below
                packed.append(command)
            else:
                return await sent_many(pool, b"".join(packed), len(packed))
        pipe = client.pipeline(transaction=False)
        for call in calls:
            pipe.execute_command("EVALSHA", self.sha, numkeys, *call)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies

    async def run_after(
        self, client: Any, before: tuple[str, ...], numkeys: int, *keys_and_args: Any
    ) -> Any:
        """`run`, after the plain command ``before`` (its reply dropped: the caller only
        needs it to land first). On a plain client both go out in one write, which the
        server runs in order and a cut connection delivers a prefix of, so the script
        never lands without the command; otherwise one round trip each, in order (on a
        cluster each to its own slot's primary: the two keys' slots differ)."""
        pool = direct_pool(client)
        packed = None if pool is None else packed_call(self._evalsha, numkeys, keys_and_args)
        first = packed_command(before)
        if packed is None or first is None:
            await command(client, *before)
            return await self.run(client, numkeys, *keys_and_args)
        _, reply = await sent_many(pool, first + packed, 2)
        if isinstance(reply, NoScriptError):
            return await sent(pool, ("EVAL", self.source, numkeys, *keys_and_args))
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    async def __call__(self, client: Any, keys: list[str], args: list[Any]) -> Any:
        """Run the script with ``keys`` (routing uses the first) and ``args``."""
        return await self.run(client, len(keys), *keys, *args)


async def command(client: Any, *parts: Any) -> Any:
    """The reply to the plain command ``parts`` (its name, then its arguments), a command
    of one key (routing uses the first argument), sent as `Script.run` sends a script
    call: on a plain client on a pooled connection directly, on a cluster to its slot's
    primary, otherwise through redis-py, as it does for a client with a reply callback of
    its own for the command (none applies on the direct path: an ``HMGET`` is its list of
    values as the connection reads them)."""
    pool = direct_pool(client)
    if pool is not None and not dict.__contains__(client.response_callbacks, parts[0].upper()):
        return await sent(pool, packed_command(parts) or parts)
    if type(client) is WaitingCluster:
        return await client.routed(parts[1], packed_command(parts), *parts)
    return await client.execute_command(*parts)


async def commands_many(client: Any, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Each plain command of ``commands`` (its name, then its arguments), all sent
    together: per command, in order, its reply or the `ResponseError` it answered.

    On a plain client they go out packed in one write on a pooled connection and their
    replies are read in turn, as `Script.run_many` sends scripts (redis-py's pipeline
    spends tens of microseconds of client time a command on its own bookkeeping);
    otherwise through a redis-py pipeline."""
    pool = direct_pool(client)
    if pool is not None:
        packed: list[bytes] = []
        for command in commands:
            one = packed_command(command)
            if one is None:
                break  # an argument redis-py packs (or refuses): the pipeline below
            packed.append(one)
        else:
            return await sent_many(pool, b"".join(packed), len(packed)) if packed else []
    pipe = client.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)
    replies: list[Any] = await pipe.execute(raise_on_error=False)
    return replies


async def run_together(
    client: Any, calls: Sequence[tuple[Script, list[str], list[str]]], attempt: Attempt[Any]
) -> list[Any]:
    """Run ``calls`` (each a script, its keys, its arguments), whose order does not matter,
    in one round trip: the replies in order; an error reply raises.

    On a plain client they go out packed in one write on one connection, which ``attempt``
    (the caller's retries) runs as one operation: a cut connection leaves each unknown.
    Otherwise they run at once, each its own ``attempt`` (on a cluster each goes to its
    own slot's primary), so a call that failed is sent again alone."""
    pool = direct_pool(client)
    if pool is not None:
        packed = [packed_call(s._evalsha, len(k), (*k, *a)) for s, k, a in calls]
        if all(p is not None for p in packed):
            joined = b"".join(p for p in packed if p is not None)
            answered: list[Any] = await attempt(lambda: _answered(pool, calls, joined))
            return answered
    return list(
        await asyncio.gather(*(attempt(functools.partial(s, client, k, a)) for s, k, a in calls))
    )


async def _answered(
    pool: Any, calls: Sequence[tuple[Script, list[str], list[str]]], joined: bytes
) -> list[Any]:
    """The replies of ``calls``, packed as ``joined`` and sent on a connection of ``pool``:
    one missing from the server's cache is sent again whole, an error reply raised."""
    replies = await sent_many(pool, joined, len(calls))
    for n, ((script, keys, args), reply) in enumerate(zip(calls, replies, strict=True)):
        if isinstance(reply, NoScriptError):
            replies[n] = await sent(pool, ("EVAL", script.source, len(keys), *keys, *args))
        elif isinstance(reply, ResponseError):
            raise reply
    return replies


def scripts(*names: str, prelude: str | tuple[str, ...] | None = None) -> dict[str, Script]:
    """Load the named ``.lua`` files (without the suffix) at import time."""
    return {name: Script.load(f"{name}.lua", prelude) for name in names}


__all__ = ["Attempt", "Script", "commands_many", "read_only", "run_together", "scripts"]
