"""The quick path of a fresh step (its first attempt awaited inline, a plain result read
back unchecked, plain arguments digested without building them) and the full path it
falls back to: both give what the full path always gave."""

from __future__ import annotations

import asyncio
import threading
import typing
from typing import Any

import pydantic
import pytest

import durably
from durably.app._values import Signature, Value, digest


class Point(pydantic.BaseModel):
    x: float
    y: float


async def plain(b: str, a: int, flag: bool, nothing: None, tags: dict[str, list[str]]) -> None:
    """Every parameter plain."""


async def mixed(n: int, ratio: float, point: Point, *, label: str = "none") -> None:
    """Parameters the adapters encode."""


PLAIN_CALLS: list[tuple[Any, ...]] = [
    ("x", 1, True, None, {}),
    ('q"é\n\\\u2028', -(10**30), False, None, {'k"é': ["x", "\t"], "a": []}),
    ("", 0, True, None, {"z": [], "a": ["\x00"]}),
]


def test_the_digest_of_plain_arguments_is_unchanged() -> None:
    # Frozen: the digest the generic path (canonical JSON of encode_args) gave before
    # the quick path existed; a stored record's marker must keep matching.
    assert digest({}) == "01e7b720ff566d53"
    signature = Signature(plain, "plain")
    assert signature.digest_args(("x", 1, True, None, {}), {}) == "b7675ee90123f600"


@pytest.mark.parametrize("args", PLAIN_CALLS)
def test_plain_arguments_digest_as_their_encoding_does(args: tuple[Any, ...]) -> None:
    signature = Signature(plain, "plain")
    assert signature.digest_args(args, {}) == digest(signature.encode_args(args, {}))


def test_arguments_off_the_quick_path_digest_as_their_encoding_does() -> None:
    signature = Signature(plain, "plain")
    by_name = {"b": "x", "a": 1, "flag": True, "nothing": None, "tags": {}}
    assert signature.digest_args((), by_name) == signature.digest_args(("x", 1, True, None, {}), {})
    # A bool for an int, a str subclass: the adapters decide, as before.
    odd: tuple[Any, ...] = (type("Name", (str,), {})("x"), True, True, None, {})
    assert signature.digest_args(odd, {}) == digest(signature.encode_args(odd, {}))
    typed = Signature(mixed, "mixed")
    args = (3, 0.5, Point(x=1, y=2))
    assert typed.digest_args(args, {"label": "l"}) == digest(
        typed.encode_args(args, {"label": "l"})
    )


async def test_a_first_attempt_that_fails_inline_goes_on_to_its_retries() -> None:
    app = durably.App("memory://", clock=durably.ManualClock())
    attempts: list[tuple[str, int]] = []

    @app.step(name="flaky", retry=durably.Retry(max_attempts=3, initial=0.0, maximum=0.0))
    async def flaky(n: int) -> int:
        info = durably.context()
        attempts.append((info.step, info.attempt))
        if info.attempt < 3:
            raise RuntimeError("not yet")
        return n

    @app.workflow
    async def body(ctx: durably.Context) -> int:
        return await flaky(7)

    assert flaky.direct
    async with app:
        handle = await body.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == 7
    assert attempts == [("flaky#1", 1), ("flaky#1", 2), ("flaky#1", 3)]


async def test_a_step_with_a_timeout_or_a_plain_def_takes_the_full_path() -> None:
    app = durably.App("memory://", clock=durably.ManualClock())
    threads: list[int] = []

    @app.step(timeout=0.05)
    async def slow(n: int) -> int:
        await asyncio.sleep(5)
        return n

    @app.step
    def blocking(n: int) -> int:
        threads.append(threading.get_ident())
        assert durably.context().attempt == 1
        return n + 1

    @app.workflow
    async def body(ctx: durably.Context) -> str:
        value = await blocking(1)
        try:
            await slow(1)
        except durably.StepFailedError as exc:
            return f"{value}:{exc.error_type}"
        return "not timed out"

    assert not slow.direct
    assert not blocking.direct
    async with app:
        handle = await body.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == "2:StepTimeoutError"
    assert threads
    assert threads[0] != threading.get_ident()


async def test_inside_an_inline_step_another_step_runs_plainly_and_context_describes_it() -> None:
    app = durably.App("memory://", clock=durably.ManualClock())
    seen: list[durably.StepContext] = []

    @app.step
    async def inner(n: int) -> int:
        return n * 10

    @app.step(name="outer")
    async def outer(n: int) -> int:
        seen.append(durably.context())
        return await inner(n)  # not recorded: a plain call inside a running step

    @app.workflow
    async def body(ctx: durably.Context) -> int:
        first = await outer(1)
        with pytest.raises(RuntimeError):
            durably.context()  # the body again, not the step
        return first + await outer(2)

    async with app:
        handle = await body.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == 30
        checkpointer = (await app.stores()).checkpointer
        stored = await checkpointer.load(handle.id)
    assert [key for key in stored if not key.startswith("durably:")] == ["outer#1", "outer#2"]
    assert [(info.workflow, info.step, info.attempt) for info in seen] == [
        (handle.id, "outer#1", 1),
        (handle.id, "outer#2", 1),
    ]


async def test_results_come_back_decoded_on_the_first_pass_plain_or_not() -> None:
    app = durably.App("memory://", clock=durably.ManualClock())

    @app.step(name="counts")
    async def counts(n: int) -> dict[str, int]:
        return {"n": n}

    @app.step(name="point")
    async def point(n: int) -> Point:
        return Point(x=n, y=n)

    @app.workflow
    async def body(ctx: durably.Context) -> str:
        plain_value = await counts(2)
        model = await point(3)
        assert isinstance(model, Point)
        return f"{plain_value['n']}:{model.x}"

    async with app:
        handle = await body.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == "2:3.0"
        stored = await (await app.stores()).checkpointer.load(handle.id)
    assert stored["counts#1"] == {
        # The digest, and the first place in the body's sequence of step calls.
        "a": Signature(counts.fn, "c").digest_args((2,), {}) + "@0",
        "v": {"n": 2},
    }
    assert stored["point#1"]["v"] == {"x": 3.0, "y": 3.0}  # type: ignore[index]


def _exactly(annotation: Any, value: object) -> bool:
    """What `Value.plain` must answer, written plainly: ``value`` has exactly the shape
    of ``annotation`` (exact scalar types, lists and str-keyed dicts all the way down)."""
    if annotation in (int, str, bool):
        return type(value) is annotation
    if annotation is None:
        return value is None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list:
        return type(value) is list and all(_exactly(args[0], item) for item in value)
    assert origin is dict
    return type(value) is dict and all(
        type(key) is str and _exactly(args[1], item) for key, item in value.items()
    )


PLAIN_SHAPES: list[Any] = [
    int,
    str,
    bool,
    None,
    list[int],
    list[None],
    list[list[str]],
    dict[str, int],
    dict[str, bool],
    dict[str, None],
    dict[str, list[int]],
    dict[str, dict[str, str]],
    list[dict[str, list[bool]]],
]
SAMPLES: list[object] = [
    0,
    -7,
    True,
    False,
    "x",
    "",
    None,
    1.5,
    [],
    [1, 2],
    [1, True],
    [None],
    ["a", "b"],
    [["a"], []],
    [["a", 1]],
    {},
    {"n": 1},
    {"n": True},
    {"n": None},
    {1: 1},
    {"n": [1, 2]},
    {"n": [1, "x"]},
    {"a": {"b": "c"}},
    {"a": {"b": 1}},
    [{"k": [True]}],
    [{"k": [1]}],
    (1, 2),
    type("Name", (str,), {})("x"),
]


@pytest.mark.parametrize("annotation", PLAIN_SHAPES, ids=repr)
def test_the_plain_check_accepts_exactly_the_plain_shape(annotation: Any) -> None:
    check = Value.of(annotation, "test").plain
    assert check is not None
    for sample in SAMPLES:
        assert check(sample) is _exactly(annotation, sample), sample


def test_annotations_beyond_the_plain_shapes_have_no_plain_check() -> None:
    for annotation in (float, Point, dict[int, int], list[float], dict[str, Point], Any):
        assert Value.of(annotation, "test").plain is None
    # Deeper than the check follows: the adapter decides.
    assert Value.of(list[list[list[list[list[int]]]]], "test").plain is None


async def scalars(a: int, b: str, c: bool, d: None) -> None:
    """Every parameter a scalar: digests are kept per argument tuple."""


def test_kept_digests_are_the_digests_of_their_arguments() -> None:
    signature = Signature(scalars, "scalars")
    calls: list[tuple[Any, ...]] = [
        (1, "x", True, None),
        (True, "x", True, None),  # a bool for the int: equal to (1, ...) as a key, not kept
        (1, "x", 1, None),
        (0, "", False, None),
        (False, "", False, None),
        (1, type("Name", (str,), {})("x"), True, None),
    ]
    for _ in range(2):  # the second round answers from what the first kept
        for call in calls:
            assert signature.digest_args(call, {}) == digest(signature.encode_args(call, {}))


def test_only_short_arguments_are_kept_and_only_so_many() -> None:
    from durably.app import _values as values

    signature = Signature(scalars, "scalars")
    long = "s" * (values._DIGESTS_TEXT + 1)
    signature.digest_args((1, long, True, None), {})
    assert not signature._digests  # a long argument (a document, a token) is not held
    for n in range(values._DIGESTS_MOST + 5):
        signature.digest_args((n, "x", True, None), {})
    assert 0 < len(signature._digests) <= values._DIGESTS_MOST


def test_a_keyed_copy_shares_the_steps_adapters() -> None:
    app = durably.App("memory://")

    @app.step
    async def fetch(n: int) -> dict[str, int]:
        return {"n": n}

    # Built per call in a fan-out loop: its adapters are the step's, not built again.
    copy = fetch.keyed("a")
    assert copy.signature is fetch.signature
    assert copy.name == fetch.name
    assert copy.retry is fetch.retry


async def test_a_step_called_without_await_is_warned_of_by_its_name_and_key() -> None:
    app = durably.App("memory://", clock=durably.ManualClock())
    ran: list[str] = []

    @app.step(name="summarise")
    async def summarise(text: str) -> str:
        ran.append(text)
        return text.upper()

    @app.workflow(name="forgets")
    async def forgets(ctx: durably.Context) -> str:
        summarise("lost")  # type: ignore[unused-coroutine]  # the mistake under test
        return await summarise("kept")

    handle = await forgets.start()
    with pytest.warns(RuntimeWarning, match=r"coroutine 'summarise#1' was never awaited"):
        await app.run_until_idle()
    assert await handle.result(timeout=5) == "KEPT"
    assert ran == ["kept"]  # as summarise#2: the call never awaited took #1
    with pytest.warns(RuntimeWarning, match=r"coroutine 'summarise' was never awaited"):
        summarise("outside a workflow")  # type: ignore[unused-coroutine]
