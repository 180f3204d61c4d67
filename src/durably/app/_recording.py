"""How a step call is recorded in a workflow: its attempts and backoffs, the record's shape
(``{"a": marker, "v": value}`` or ``{"a": marker, "e": [type, message]}``, the marker being
the arguments' digest, then ``@`` and the call's position in the body's sequence for a
call the body's own task made, `_drift`) and its replay."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from durably.app import _layout as layout
from durably.app._context import DURABLE_BACKOFF, Context, bind, unbind
from durably.app._watch import StepWatch, replayed
from durably.engine.tasks import cancel_requested
from durably.errors import (
    NondeterminismError,
    StatePersistenceError,
    StepFailedError,
    StepResultError,
    StrayCancellationError,
)
from durably.otel.api import tracing_on
from durably.redaction import mend_text

if TYPE_CHECKING:
    from durably.app._steps import Step


async def recorded_call(
    ctx: Context,
    step: Step[..., Any],
    key: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    position: int | None,
    guarded: bool = False,
) -> Any:
    """Run ``step`` once across every pass of ``ctx``'s workflow under ``key``: replayed
    from its record (checked against the arguments' digest and the call's ``position``
    in the body's sequence, `_drift`), or attempted under its retry policy and recorded
    with its value or its error.

    Written out over `Execution.reserve` and `Execution.commit` rather than `Execution.step` with an
    effect: a step call is the App's hot path, and the first attempt runs inline."""
    recorded = ctx._records
    run = ctx._run
    task = None
    if key not in recorded:
        task = asyncio.current_task()
        if not guarded and task is not ctx._task:
            # A fresh step in a branch of the body runs in a task of its own: a sibling's
            # failure or a task group's abort, cancelling the branch, must not cut an
            # effect that began (a later pass would pay it again).
            return await run.guard(recorded_call(ctx, step, key, args, kwargs, position, True))
    marker = step.signature.digest_args(args, kwargs)
    if position is not None:
        marker = f"{marker}{layout.PLACE}{position}"
    ctx._unmet.discard(key)
    if key not in recorded:
        ctx._room(key)
        if ctx._cancels is not None and ctx._cancels.due(ctx._key):
            ctx._cancel_arrived = await ctx._cancels.arrived(ctx._key, ctx._cancel_key)
        if position is not None and ctx._unmet:
            drifted = ctx._drifted(key, position)
            if drifted is not None:
                raise ctx._park(drifted)
        ctx._deliver_cancel(key)
    if run.reserve(key, task):
        stored = recorded[key]
        if type(stored) is dict and stored.get("a") != marker:
            # Written before the value format changed (bytes, sets): its digest then.
            earlier = step.signature.earlier_digest(args, kwargs)
            if earlier is not None and earlier == stored.get("a"):
                marker = earlier
        if tracing_on():
            return replayed(
                ctx, step.name, key, lambda: _parse(ctx, step, key, marker, stored, position)
            )
        return _parse(ctx, step, key, marker, stored, position)
    if not StepWatch.wanted():
        return await _perform(ctx, step, key, args, kwargs, position, marker, None)
    watch = StepWatch(ctx, step.name, key)
    try:
        value = await _perform(ctx, step, key, args, kwargs, position, marker, watch)
    except BaseException as exc:
        watch.end(exc)
        raise
    watch.end(None)
    return value


async def _perform(
    ctx: Context,
    step: Step[..., Any],
    key: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    position: int | None,
    marker: str,
    watch: StepWatch | None,
) -> Any:
    """Attempt ``step`` under its retry policy and record its value or its error."""
    run = ctx._run
    recorded = ctx._records
    tries = [1]
    failure: Exception | None = None
    own = False  # whether the record holds the value itself, plain (`Value.plain`)
    try:
        if step.direct and (not ctx._retries_recorded or layout.retry_key(key, 1) not in recorded):
            # The common case, inline: a first attempt that is a plain await.
            first: Exception | None = None
            token = bind((ctx, key, 1))
            try:
                value = await step.fn(*args, **kwargs)
            except Exception as exc:
                first = exc
            except asyncio.CancelledError:
                if cancel_requested():
                    raise
                first = StrayCancellationError(f"step {key!r}")
            finally:
                unbind(token)
            if first is not None:
                value = await _attempts(ctx, step, key, args, kwargs, first, tries)
        else:
            value = await _attempts(ctx, step, key, args, kwargs, None, tries)
    except Exception as exc:
        failure = exc
        # Kept as any failure text is: bounded, secrets masked (`mend_text`).
        record: dict[str, object] = {
            "a": marker,
            "e": [type(exc).__name__, mend_text(str(exc), "error")],
        }
    except BaseException:
        # Cut, or its retries wait in a durable sleep: the pass waits for it no more.
        run.abandon(key)
        raise
    else:
        plain = step.signature.result.plain
        if plain is not None and plain(value):
            record = {"a": marker, "v": value}
            own = True
        else:
            try:
                record = {"a": marker, "v": step.signature.result.encode(value)}
            except Exception as exc:
                failure = StepResultError(f"step {key!r} returned a value it cannot encode: {exc}")
                record = {"a": marker, "e": ["StepResultError", str(failure)]}
    if watch is not None:
        watch.performed(tries[0], failure)
    try:
        stored = await run.commit(key, record)
    except StatePersistenceError as exc:
        if exc.reason != "too_large":
            raise
        raise StepResultError(
            f"step {key!r} of workflow {ctx.id!r} returned a value too large to record: "
            f"{exc.detail}"
        ) from None
    if own and stored == record:
        # This pass's own plain record: its JSON round trip is equal and of the same
        # types (`Value.plain`), so reading it back needs no checks.
        return stored["v"]
    try:
        return _parse(ctx, step, key, marker, stored, position)
    except StepFailedError as exc:
        if failure is not None:
            raise exc from failure
        raise


async def _attempts(
    ctx: Context,
    step: Step[..., Any],
    key: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    failed: Exception | None,
    tries: list[int],
) -> Any:
    """The step's attempts under its retry policy: from the first, or (``failed``) on from
    a first attempt that already ran and raised ``failed``; the attempt reached is kept
    in ``tries``."""
    attempt = 1
    if failed is None:
        # Attempts that ended in a durable backoff in earlier passes left their deadline.
        while layout.retry_key(key, attempt) in ctx._records:
            attempt += 1
        if attempt > 1:
            waited = layout.retry_key(key, attempt - 1)
            ctx._meet(waited)
            await ctx._run.sleep(waited, DURABLE_BACKOFF)  # the recorded deadline rules
    while True:
        tries[0] = attempt
        if failed is None:
            try:
                return await step.invoke(args, kwargs, (ctx, key, attempt))
            except Exception as exc:
                failed = exc
        if not step.retry.retries(failed, attempt):
            raise failed
        delay = step.retry.backoff(attempt)
        ctx.logger.warning(
            "step %r attempt %d failed: %s; retrying in %.3fs",
            key,
            attempt,
            mend_text(repr(failed), "error"),
            delay,
        )
        failed = None
        if delay > DURABLE_BACKOFF:
            # A long wait ends the pass and frees the worker; the workflow wakes for the
            # next attempt at the recorded deadline.
            waiting = layout.retry_key(key, attempt)
            ctx._meet(waiting)
            await ctx._run.sleep(waiting, delay)
        elif delay > 0:
            await asyncio.sleep(delay)
        attempt += 1


def _parse(
    ctx: Context,
    step: Step[..., Any],
    key: str,
    marker: str,
    stored: object,
    position: int | None,
) -> Any:
    if not isinstance(stored, dict) or "a" not in stored:
        raise ctx._park(
            NondeterminismError(
                ctx.id, key, f"the record there was not written by step {step.name!r}"
            )
        )
    recorded = stored["a"]
    if recorded != marker:
        digest, _, place = str(recorded).partition(layout.PLACE)
        if digest != marker.partition(layout.PLACE)[0]:
            raise ctx._park(
                NondeterminismError(
                    ctx.id,
                    key,
                    f"step {step.name!r} was called with other arguments than the recorded "
                    "call (the body changed, or concurrent calls need .keyed(key))",
                )
            )
        if place and position is not None:
            # Recorded at another place in the body's sequence: drifted if another step
            # the body has not reached yet was recorded at this one (a reorder, a removal).
            drifted = ctx._drifted(key, position)
            if drifted is not None:
                raise ctx._park(drifted)
    if "e" in stored:
        error_type, message = stored["e"]
        raise StepFailedError(ctx.id, key, str(error_type), str(message))
    return ctx._decode(step.signature.result, stored.get("v"), key)


__all__ = ["recorded_call"]
