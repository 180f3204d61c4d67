"""The claim-check policy's own checks, and `ClaimCheckedDurable` over the memory stores."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from durably.claimcheck import ClaimCheckedDurable, ClaimCheckPolicy
from durably.errors import InvalidInputError
from durably.memory import MemoryCheckpointer, MemoryClaimCheckStore, MemoryDurable
from durably.memory.scheduler import MemoryScheduler


@pytest.mark.parametrize(
    ("field", "value"), [("threshold", 0), ("threshold", 1.5), ("head", -1), ("ttl", 0)]
)
def test_a_policy_with_a_bad_setting_is_refused(field: str, value: object) -> None:
    with pytest.raises(InvalidInputError, match=field):
        ClaimCheckPolicy(MemoryClaimCheckStore(), **{field: value})  # type: ignore[arg-type]


async def test_values_arriving_and_delivered_from_outside_travel_as_handles() -> None:
    claims = MemoryClaimCheckStore()
    inner = MemoryDurable(MemoryCheckpointer(), MemoryScheduler())
    durable = ClaimCheckedDurable(inner, ClaimCheckPolicy(claims, threshold=100))
    big = "a" * 1000
    assert (await durable.arrive("wf", "approval", big)).value == big
    entry = await durable.deliver("wf", {"message": big})
    assert entry.value == {"message": big}
    assert await claims.held() == 2
    stored = await inner.checkpointer.load("wf")
    assert all(isinstance(value, dict) and "durably:claim" in value for value in stored.values())
    assert await durable.checkpointer.load("wf") == {"approval": big, entry.key: {"message": big}}
    assert (await durable.arrive("wf", "approval", "other")).value == big  # first writer won


def test_the_claim_check_policy_example_of_the_large_values_guide_runs_as_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "large-values.md").read_text()
    section = text.split("## Applying a policy to the engine's stores", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    exec(compile(match.group(1), "docs/large-values.md", "exec"), {"__name__": "guide"})
    assert capsys.readouterr().out.splitlines() == [
        "Completed(value=5000000)",
        "['bytes', 'durably:claim', 'head']",
    ]
