"""`layout.survey` answers, in one look at a pass's keys, what the separate readings of
the records answer (the pass is built from it, so the two must never drift apart)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from durably.app import _layout as layout

# Keys of every family the records hold, and near misses of each.
KEYS = st.sampled_from(
    [
        layout.START,
        layout.RESULT,
        "durably:cancel#1",
        "durably:cancel#2",
        "durably:cancelled#1",
        "durably:cancelled#2",
        "durably:failed#1",
        "durably:failed#2",
        "durably:resume#1",
        "durably:resume#2",
        "durably:resumeX",
        "durably:now#1",
        "durably:sleep#1",
        "durably:child:kid#1",
        "durably:child:kid:retry#1",
        "durably:start:other#1",
        "durably:event:k#1",
        "inbox:0001",
        "pay#1",
        "pay#1:retry#1",
        "pay#2",
        "durably",
        "inbox",
        "é#1",
    ]
)


@settings(max_examples=300, derandomize=True)
@given(st.dictionaries(KEYS, st.sampled_from([None, 0, "x", {"v": 1}]), max_size=12))
def test_the_survey_agrees_with_each_reading(stored: dict[str, object]) -> None:
    generation, recorded, retries, ended, messages = layout.survey(stored)
    assert generation == layout.generation(stored)
    assert messages == sum(1 for key in stored if key.startswith("inbox:"))
    assert recorded == {key for key in stored if not layout.bookkeeping(key)}
    assert retries == any(layout.RETRY in key for key in stored)
    if not ended and layout.RESULT not in stored:
        assert layout.ending(stored) is None


def test_a_generation_ended_is_seen() -> None:
    failed = {layout.START: {}, "durably:failed#1": "boom"}
    assert layout.survey(failed)[3]
    assert layout.ending(failed) == {"e": "boom"}
    resumed = {**failed, "durably:resume#1": True}
    generation, _, _, ended, _ = layout.survey(resumed)
    assert generation == 2
    assert ended  # an earlier generation's end: `ending` looks and finds none for this one
    assert layout.ending(resumed) is None
