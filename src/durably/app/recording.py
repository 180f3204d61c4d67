"""How a step call is recorded in a workflow: its attempts and backoffs, the record's shape
(``{"a": digest, "v": value}`` or ``{"a": digest, "e": [type, message]}``) and its replay."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from durably.app import records
from durably.app.context import DURABLE_BACKOFF, Context, StepContext
from durably.app.values import digest
from durably.errors import NondeterminismError, StepFailedError, StepResultError

if TYPE_CHECKING:
    from durably.app.steps import Step


async def recorded_call(
    ctx: Context, step: Step[..., Any], key: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Run ``step`` once across every pass of ``ctx``'s workflow under ``key``: replayed
    from its record (checked against the arguments' digest), or attempted under its retry
    policy and recorded with its value or its error."""
    marker = digest(step.signature.encode_args(args, kwargs))
    ctx._unmet.discard(key)
    fresh = key not in ctx._records
    if fresh and ctx._cancels is not None and ctx._cancels.due(ctx.id):
        ctx._cancel_arrived = await ctx._cancels.arrived(ctx.id, ctx._cancel_key)
    if fresh and not ctx._cancel_delivered:
        ctx._deliver_cancel(key)
    failure: list[BaseException] = []

    async def effect() -> object:
        try:
            value = await _attempts(ctx, step, key, args, kwargs)
        except Exception as exc:
            failure.append(exc)
            return {"a": marker, "e": [type(exc).__name__, str(exc)]}
        try:
            encoded = step.signature.result.encode(value)
        except Exception as exc:
            error = StepResultError(f"step {key!r} returned a value it cannot encode: {exc}")
            failure.append(error)
            return {"a": marker, "e": ["StepResultError", str(error)]}
        return {"a": marker, "v": encoded}

    def parse(stored: object) -> Any:
        return _parse(ctx, step, key, marker, stored)

    try:
        return await ctx._run.step(key, effect, parse)
    except StepFailedError as exc:
        if failure:
            raise exc from failure[0]
        raise


async def _attempts(
    ctx: Context, step: Step[..., Any], key: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    # Attempts that ended in a durable backoff in earlier passes left their deadline.
    attempt = 1
    while records.retry_key(key, attempt) in ctx._records:
        attempt += 1
    if attempt > 1:
        waited = records.retry_key(key, attempt - 1)
        ctx._meet(waited)
        await ctx._run.sleep(waited, DURABLE_BACKOFF)  # the recorded deadline rules
    while True:
        info = StepContext(ctx.id, key, attempt, ctx.tenant, ctx.kind)
        try:
            return await step.invoke(args, kwargs, info)
        except Exception as exc:
            if not step.retry.retries(exc, attempt):
                raise
            delay = step.retry.backoff(attempt)
            ctx.logger.warning(
                "step %r attempt %d failed: %r; retrying in %.3fs", key, attempt, exc, delay
            )
            if delay > DURABLE_BACKOFF:
                # A long wait ends the pass and frees the worker; the workflow wakes for
                # the next attempt at the recorded deadline.
                waiting = records.retry_key(key, attempt)
                ctx._meet(waiting)
                await ctx._run.sleep(waiting, delay)
            elif delay > 0:
                await asyncio.sleep(delay)
            attempt += 1


def _parse(ctx: Context, step: Step[..., Any], key: str, marker: str, stored: object) -> Any:
    if not isinstance(stored, dict) or "a" not in stored:
        raise ctx._park(
            NondeterminismError(
                ctx.id, key, f"the record there was not written by step {step.name!r}"
            )
        )
    if stored["a"] != marker:
        raise ctx._park(
            NondeterminismError(
                ctx.id,
                key,
                f"step {step.name!r} was called with other arguments than the recorded "
                "call (the body changed, or concurrent calls need .keyed(key))",
            )
        )
    if "e" in stored:
        error_type, message = stored["e"]
        raise StepFailedError(ctx.id, key, str(error_type), str(message))
    return ctx._decode(step.signature.result, stored.get("v"), key)


__all__ = ["recorded_call"]
