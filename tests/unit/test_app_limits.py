"""The App's `Limits`: refused when malformed, before any I/O, and what their error says."""

from __future__ import annotations

import pytest

import durably
from durably import App, Limits, WorkflowLimitError
from durably.app._limits import check_start
from durably.errors import DurablyError, InvalidInputError


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "10", None, 10**10])
@pytest.mark.parametrize("field", ["children", "depth"])
def test_a_limit_that_is_not_a_positive_bounded_int_is_refused_by_name(
    field: str, bad: object
) -> None:
    with pytest.raises(InvalidInputError, match=rf"Limits\.{field}"):
        Limits(**{field: bad})  # type: ignore[arg-type]


def test_an_app_takes_limits_and_refuses_anything_else() -> None:
    assert App("memory://").limits == Limits(children=10_000, depth=100)
    assert App("memory://", limits=Limits(depth=3)).limits.depth == 3
    with pytest.raises(InvalidInputError, match=r"durably\.Limits"):
        App("memory://", limits={"depth": 3})  # type: ignore[arg-type]


def test_a_start_within_the_limits_passes_and_one_past_either_is_refused_by_name() -> None:
    limits = Limits(children=2, depth=3)
    check_start(limits, tenant="t", workflow="w", started=2, depth=3)
    with pytest.raises(WorkflowLimitError) as children:
        check_start(limits, tenant="acme", workflow="w", started=3, depth=1)
    assert (children.value.tenant, children.value.limit) == ("acme", "children")
    assert (children.value.maximum, children.value.count) == (2, 3)
    with pytest.raises(WorkflowLimitError) as depth:
        check_start(limits, tenant="acme", workflow="w", started=1, depth=4)
    assert (depth.value.limit, depth.value.maximum, depth.value.count) == ("depth", 3, 4)
    assert "acme" in str(depth.value)


def test_the_limit_error_is_a_durably_error_that_retrying_cannot_fix() -> None:
    error = WorkflowLimitError("t", "w", "depth", 3, 4)
    assert isinstance(error, DurablyError)
    assert not error.retryable
    assert durably.WorkflowLimitError is WorkflowLimitError
