"""Registration warns of annotations whose values would not come back as they were given,
naming the function, the parameter and the type, at the user's line."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any, Optional

import pytest
from pydantic import BaseModel, ConfigDict, JsonValue

from durably import App, Context, Topic
from durably.errors import DurablyWarning, ValueTypeWarning


@pytest.fixture
def app() -> App:
    return App("memory://")


@pytest.fixture
def caught() -> Iterator[list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as found:
        warnings.simplefilter("always")
        yield found


def messages(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, ValueTypeWarning)]


@pytest.mark.parametrize(
    ("annotation", "written"),
    [
        (dict, "type dict gives"),
        (list, "type list gives"),
        (Any, "type Any gives"),
        (object, "type object gives"),
        (list[Any], "type list[Any] holds Any"),
        (dict[str, Any], "type dict[str, Any] holds Any"),
        (list[dict], "holds dict"),  # type: ignore[type-arg]
        (Optional[set], "holds set"),  # noqa: UP045
        (tuple[int, ...] | list, "holds list"),
    ],
)
def test_a_step_parameter_without_a_type_is_warned_of_by_name(
    app: App, caught: list[warnings.WarningMessage], annotation: Any, written: str
) -> None:
    async def fetch(payload: int) -> None: ...

    fetch.__annotations__["payload"] = annotation
    app.step(name="fetch")(fetch)
    [message] = messages(caught)
    assert message.startswith("step 'fetch', parameter 'payload': ")
    assert written in message
    assert "plain JSON" in message


def test_a_workflow_result_and_a_topic_without_a_type_are_warned_of(
    app: App, caught: list[warnings.WarningMessage]
) -> None:
    @app.workflow(name="loose")
    async def loose(ctx: Context, n: int) -> dict:  # type: ignore[type-arg]
        return {}

    Topic("notes", list)
    assert [m.split(":")[0] for m in messages(caught)] == [
        "workflow 'loose', return value",
        "topic 'notes', its messages",
    ]


def test_the_warning_points_at_the_users_registration_and_can_be_filtered(
    app: App, caught: list[warnings.WarningMessage]
) -> None:
    @app.step(name="loose")
    async def loose(payload: dict) -> None: ...  # type: ignore[type-arg]

    [found] = [w for w in caught if issubclass(w.category, ValueTypeWarning)]
    assert found.filename == __file__
    assert issubclass(found.category, DurablyWarning)
    assert issubclass(found.category, UserWarning)
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=DurablyWarning)
        app.step(name="loose-again")(loose.fn)
    assert again == []


class Ticket(BaseModel):
    title: str
    tags: list[str] = []


class Base64Blob(BaseModel):
    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")
    data: bytes


@pytest.mark.parametrize(
    "annotation",
    [int, str, Ticket, dict[str, int], list[Ticket], JsonValue, bytes, set[str], Base64Blob],
)
def test_typed_annotations_are_not_warned_of(
    app: App, caught: list[warnings.WarningMessage], annotation: Any
) -> None:
    async def fetch(payload: int) -> None: ...

    fetch.__annotations__["payload"] = annotation
    app.step(name="fetch")(fetch)
    assert messages(caught) == []


class Scan(BaseModel):
    data: bytes
    labels: set[str]
    inner: list[Ticket]


def test_a_model_with_text_bytes_or_a_set_field_is_warned_of(
    app: App, caught: list[warnings.WarningMessage]
) -> None:
    @app.step(name="scan")
    async def scan(page: int) -> Scan:
        raise NotImplementedError

    found = messages(caught)
    assert len(found) == 2
    assert "field 'data' of Scan is bytes" in found[0]
    assert "ser_json_bytes='base64'" in found[0]
    assert "field 'labels' of Scan is a set" in found[1]
