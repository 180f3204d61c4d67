"""The App's `Limits`: refused when malformed, before any I/O, and what their error says."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import durably
from durably import App, Limits, WorkflowLimitError
from durably.app._limits import check_start
from durably.errors import ConfigurationError, DurablyError, InvalidInputError
from durably.stores.admission import TenantCaps, TenantCounts, admit_workflow, refuse_over
from durably.stores.workflows import Recorded


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


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "10", 10**10])
@pytest.mark.parametrize("field", ["running_per_tenant", "started_per_tenant"])
def test_a_tenant_cap_that_is_not_none_or_a_positive_bounded_int_is_refused_by_name(
    field: str, bad: object
) -> None:
    with pytest.raises(InvalidInputError, match=rf"Limits\.{field}.*or None"):
        Limits(**{field: bad})  # type: ignore[arg-type]


def test_tenant_caps_default_to_none_and_reach_the_store_as_tenant_caps() -> None:
    assert Limits().tenant_caps == TenantCaps()
    assert not Limits().tenant_caps.capped
    caps = Limits(running_per_tenant=5, started_per_tenant=50).tenant_caps
    assert (caps.running, caps.started, caps.capped) == (5, 50, True)


def test_a_count_at_a_cap_is_refused_naming_the_cap_and_the_count_it_would_make() -> None:
    caps = TenantCaps(running=2, started=3)
    refuse_over(caps, TenantCounts(running=1, started=2), tenant="acme", workflow="w")
    with pytest.raises(WorkflowLimitError) as running:
        refuse_over(caps, TenantCounts(running=2, started=2), tenant="acme", workflow="w")
    assert (running.value.limit, running.value.maximum, running.value.count) == (
        "running_per_tenant",
        2,
        3,
    )
    assert "3 workflows unfinished, over the limit of 2" in str(running.value)
    with pytest.raises(WorkflowLimitError) as started:
        refuse_over(caps, TenantCounts(running=0, started=3), tenant="acme", workflow="w")
    assert started.value.limit == "started_per_tenant"
    assert "held in the store" in str(started.value)


def test_a_checkpointer_that_cannot_count_takes_starts_but_refuses_caps() -> None:
    class Plain:
        async def supply(self, workflow: str, key: str, value: object) -> Recorded[object]:
            return Recorded(value, True)

    plain: Any = Plain()
    recorded = asyncio.run(admit_workflow(plain, "w", "k", 1, tenant="t"))
    assert recorded == Recorded(1, True)
    with pytest.raises(ConfigurationError, match="per-tenant limits"):
        asyncio.run(admit_workflow(plain, "w", "k", 1, tenant="t", caps=TenantCaps(running=1)))
