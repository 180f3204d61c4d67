"""The run and work models, secret redaction and identifier/duration checks of the core."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from pydantic import JsonValue, ValidationError

from durably.errors import InvalidInputError
from durably.redaction import EMAIL_MASK, SECRET_MASK, scrub, scrub_text
from durably.stores.runs import (
    TERMINAL_STATES,
    RunRecord,
    RunState,
    SessionRecord,
    StateDelta,
    StateKey,
    StatePage,
    StateQuery,
    ToolCall,
    Usage,
    patched_run,
    stored_run,
)
from durably.stores.work import WorkItem, WorkPriority, WorkState
from durably.validation import finite, identifier, non_negative, positive, positive_int

# --- runs ---------------------------------------------------------------------------------


def test_exactly_the_six_finishing_states_are_terminal() -> None:
    assert {state.value for state in TERMINAL_STATES} == {
        "completed",
        "failed",
        "cancelled",
        "budget_exhausted",
        "max_iterations_exceeded",
        "loop_limit_exceeded",
    }
    assert not any(state.terminal for state in (RunState.PENDING, RunState.RUNNING))
    assert not RunState.SUSPENDED.terminal


def test_usage_adds_field_by_field() -> None:
    a = Usage(input_tokens=1, output_tokens=2, cached_tokens=3, cache_write_tokens=4)
    b = Usage(reasoning_tokens=5, requests=6, tool_calls=7, input_tokens=10)
    total = a + b
    assert total == Usage(
        input_tokens=11,
        output_tokens=2,
        cached_tokens=3,
        cache_write_tokens=4,
        reasoning_tokens=5,
        requests=6,
        tool_calls=7,
    )
    assert total.total_tokens == 13


def test_models_are_frozen_and_refuse_unknown_fields() -> None:
    run = RunRecord(run_id="r", tenant="t", agent_name="a")
    with pytest.raises(ValidationError):
        run.version = 3
    with pytest.raises(ValidationError):
        RunRecord(run_id="r", tenant="t", agent_name="a", colour="red")


def test_a_delta_refuses_negative_amounts() -> None:
    for field in ("cost_micros", "iterations", "messages_read"):
        with pytest.raises(ValidationError):
            StateDelta(**{field: -1})
    with pytest.raises(ValidationError):
        StateDelta(usage=Usage(input_tokens=-1))


def test_a_query_limit_stays_between_one_and_a_thousand() -> None:
    assert StateQuery(tenant="t").limit == 50
    for limit in (0, 1001):
        with pytest.raises(ValidationError):
            StateQuery(tenant="t", limit=limit)


def test_a_page_with_a_cursor_but_no_records_cannot_be_built() -> None:
    with pytest.raises(ValidationError):
        StatePage(records=(), cursor="next")
    assert StatePage(records=()).cursor is None


@pytest.mark.parametrize("bad", ["", "a\x00b", "a\ud800b"])
def test_empty_nul_and_lone_surrogate_ids_are_refused_by_every_model(bad: str) -> None:
    builders: list[Callable[[], object]] = [
        lambda: StateKey(tenant=bad, id="x"),
        lambda: StateKey(tenant="t", id=bad),
        lambda: RunRecord(run_id=bad, tenant="t", agent_name="a"),
        lambda: RunRecord(run_id="r", tenant="t", agent_name="a", session_id=bad),
        lambda: SessionRecord(session_id=bad, tenant="t"),
        lambda: StateQuery(tenant=bad),
        lambda: WorkItem(id=bad, tenant="t"),
        lambda: WorkItem(id="i", tenant="t", queue=bad),
        lambda: WorkItem(id="i", tenant="t", dedupe_key=bad),
    ]
    for build in builders:
        with pytest.raises(ValueError):
            build()


def test_awkward_ids_are_accepted_verbatim() -> None:
    for value in ("{4:acme}", "a:b", 'q"uote', "semi;colon", "100%", " spaced ", "🚀"):
        assert StateKey(tenant=value, id=value).id == value


def test_a_stored_run_keeps_tool_call_arguments_as_given() -> None:
    call = ToolCall(id="c", name="n", arguments={"key": "sk-live-abcdef123456", "to": "a@b.io"})
    run = RunRecord(run_id="r", tenant="t", agent_name="a", pending_tool_calls=(call,))
    stored = stored_run(run, version=4, updated_at=9.5)
    assert (stored.version, stored.updated_at) == (4, 9.5)
    assert stored.pending_tool_calls[0].arguments == call.arguments
    assert stored.masked_paths == ()
    assert not stored.masked("c")


def test_a_store_scrubber_masks_and_names_every_path_it_changed() -> None:
    call = ToolCall(
        id="c", name="n", arguments={"key": "sk-live-abcdef123456", "n": 2, "to": ["a@b.io", "x"]}
    )
    other = ToolCall(id="d", name="n", arguments={"page": "2"})
    run = RunRecord(run_id="r", tenant="t", agent_name="a", pending_tool_calls=(call, other))
    stored = stored_run(run, version=1, updated_at=1.0, scrubber=scrub)
    assert stored.pending_tool_calls[0].arguments == {
        "key": SECRET_MASK,
        "n": 2,
        "to": [EMAIL_MASK, "x"],
    }
    assert stored.masked_paths == (
        "pending_tool_calls['c'].arguments.key",
        "pending_tool_calls['c'].arguments.to[0]",
    )
    assert stored.masked("c")
    assert not stored.masked("d")
    # Stored again as read back, its masks stay; a call no longer pending drops its own.
    again = stored_run(stored, version=2, updated_at=2.0, scrubber=scrub)
    assert again.masked_paths == stored.masked_paths
    done = stored.model_copy(update={"pending_tool_calls": (other,)})
    assert stored_run(done, version=3, updated_at=3.0, scrubber=scrub).masked_paths == ()


def test_lists_are_accepted_where_a_record_says_tuple() -> None:
    run = RunRecord.model_validate(
        {
            "run_id": "r",
            "tenant": "t",
            "agent_name": "a",
            "pending_tool_calls": [{"id": "c", "name": "n", "arguments": {}}],
        }
    )
    assert isinstance(run.pending_tool_calls, tuple)
    assert SessionRecord(session_id="s", tenant="t", runs=["r1", "r2"]).runs == ("r1", "r2")


def test_a_scrubbed_copy_masks_for_display_and_leaves_the_record() -> None:
    call = ToolCall(id="c", name="n", arguments={"to": "bob@example.com"})
    run = RunRecord(run_id="r", tenant="t", agent_name="a", pending_tool_calls=(call,))
    assert run.scrubbed().pending_tool_calls[0].arguments == {"to": EMAIL_MASK}
    assert run.pending_tool_calls[0].arguments == {"to": "bob@example.com"}


def test_a_patched_run_adds_the_delta_and_bumps_the_version() -> None:
    run = RunRecord(
        run_id="r",
        tenant="t",
        agent_name="a",
        version=2,
        usage=Usage(input_tokens=1),
        cost_micros=5,
        iterations=1,
        message_cursor=4,
    )
    delta = StateDelta(usage=Usage(input_tokens=2), cost_micros=1, iterations=1, messages_read=3)
    merged = patched_run(run, delta, updated_at=7.0)
    assert (merged.version, merged.updated_at, merged.usage.input_tokens) == (3, 7.0, 3)
    assert (merged.cost_micros, merged.iterations, merged.message_cursor) == (6, 2, 7)


# --- work ---------------------------------------------------------------------------------


def test_a_work_item_accepts_a_plain_integer_priority_of_a_known_level() -> None:
    assert WorkItem(id="i", tenant="t", priority=30).priority is WorkPriority.HIGH  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        WorkItem(id="i", tenant="t", priority=25)  # type: ignore[arg-type]


def test_a_work_item_round_trips_through_json() -> None:
    item = WorkItem(
        id="i",
        tenant="t",
        payload={"k": "v"},
        priority=WorkPriority.URGENT,
        failures=("a", "b"),
        state=WorkState.CLAIMED,
        available_at=1.5,
    )
    assert WorkItem.model_validate_json(item.model_dump_json()) == item


def test_only_completed_and_dead_lettered_items_are_terminal() -> None:
    assert {state for state in WorkState if state.terminal} == {
        WorkState.COMPLETED,
        WorkState.DEAD_LETTERED,
    }


# --- redaction ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "secret",
    [
        "sk-live-4f9a8b7c6d5e4f3a2b1c",
        "sk-proj-abcdefghijklmnop",
        "sk-ant-api03-abcdefghijk",
        "rk_live_51Habcdefghij",
        "pk_test_abcdefghij",
        "Bearer eyJhbGciOiJIUzI1NiJ9.payload",
    ],
)
def test_api_keys_and_bearer_tokens_are_masked(secret: str) -> None:
    masked = scrub_text(f"use {secret} now")
    assert secret not in masked
    assert SECRET_MASK in masked


def test_email_addresses_are_redacted() -> None:
    assert scrub_text("mail ada.l+x@example.co.uk please") == f"mail {EMAIL_MASK} please"


def test_ordinary_text_is_left_alone() -> None:
    for text in ("skill-level", "task-force", "hello world", "price: 100%"):
        assert scrub_text(text) == text


def test_scrubbing_reaches_nested_strings_but_leaves_keys_and_other_values() -> None:
    value: JsonValue = {"a@b.io": [{"k": "sk-live-abcdefghijkl"}, 3, None, True, 1.5]}
    assert scrub(value) == {"a@b.io": [{"k": SECRET_MASK}, 3, None, True, 1.5]}


# --- validation ---------------------------------------------------------------------------


def test_identifier_returns_a_usable_id_and_names_a_bad_one() -> None:
    assert identifier("a:b", "item_id") == "a:b"
    with pytest.raises(InvalidInputError, match="item_id"):
        identifier("", "item_id")
    with pytest.raises(InvalidInputError, match="NUL"):
        identifier("a\x00", "item_id")
    with pytest.raises(InvalidInputError):
        identifier(7, "item_id")


def test_durations_must_be_finite_and_positive() -> None:
    assert positive(2, "lease") == 2.0
    for bad in (0, -1, math.nan, math.inf, True, "1"):
        with pytest.raises(InvalidInputError, match="lease"):
            positive(bad, "lease")  # type: ignore[arg-type]


def test_thresholds_may_be_zero_but_not_negative() -> None:
    assert non_negative(0, "idle") == 0.0
    for bad in (-0.1, math.nan, math.inf):
        with pytest.raises(InvalidInputError, match="idle"):
            non_negative(bad, "idle")


def test_deadlines_must_be_finite() -> None:
    assert finite(-5, "when") == -5.0
    for bad in (math.nan, -math.inf):
        with pytest.raises(InvalidInputError, match="when"):
            finite(bad, "when")


def test_positive_int_takes_counts_from_one_and_names_a_bad_one() -> None:
    assert positive_int(1, "limit") == 1
    for bad in (0, -3, True, 2.0, "5", None):
        with pytest.raises(InvalidInputError, match="limit"):
            positive_int(bad, "limit")
