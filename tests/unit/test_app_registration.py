"""Registering with `durably.App`: every mistake is a `ConfigurationError` at decoration
time, before any store is opened."""

from __future__ import annotations

import pytest

import durably
from durably.errors import ConfigurationError, InvalidInputError


class Unencodable:
    """A class pydantic has no schema for."""


def app() -> durably.App:
    return durably.App("memory://")


def test_a_workflow_kind_registered_twice_is_refused() -> None:
    registry = app()

    @registry.workflow(name="same")
    async def one(ctx: durably.Context) -> None: ...

    with pytest.raises(ConfigurationError, match="registered twice"):

        @registry.workflow(name="same")
        async def two(ctx: durably.Context) -> None: ...


def test_a_step_name_registered_twice_is_refused() -> None:
    registry = app()

    @registry.step(name="fetch")
    async def one() -> int:
        return 1

    with pytest.raises(ConfigurationError, match="registered twice"):

        @registry.step(name="fetch")
        async def two() -> int:
            return 2


def test_a_default_kind_under_main_is_refused() -> None:
    async def body(ctx: durably.Context) -> None: ...

    body.__module__ = "__main__"
    with pytest.raises(ConfigurationError, match="__main__"):
        app().workflow(body)
    app().workflow(name="named")(body)  # an explicit name is fine


def test_the_default_kind_is_module_and_qualified_name() -> None:
    @app().workflow
    async def body(ctx: durably.Context) -> None: ...

    assert body.kind == f"{__name__}.{body.fn.__qualname__}"


@pytest.mark.parametrize("option", ["id", "tenant", "timeout"])
def test_a_parameter_named_like_a_start_option_is_refused(option: str) -> None:
    namespace: dict[str, object] = {"durably": durably}
    exec(
        f"async def body(ctx: durably.Context, {option}: str) -> None: ...",
        namespace,
    )
    with pytest.raises(ConfigurationError, match=option):
        app().workflow(name="colliding")(namespace["body"])  # type: ignore[arg-type]


def test_a_body_without_a_context_parameter_is_refused() -> None:
    async def nothing() -> None: ...

    async def wrong(ticket: str) -> None: ...

    with pytest.raises(ConfigurationError, match="Context"):
        app().workflow(name="nothing")(nothing)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="Context"):
        app().workflow(name="wrong")(wrong)  # type: ignore[arg-type]


def test_a_body_whose_first_parameter_is_unannotated_is_refused_in_one_line() -> None:
    async def forgot(ticket) -> str:  # type: ignore[no-untyped-def]
        return str(ticket)

    async def unannotated(ctx, ticket: str) -> str:  # type: ignore[no-untyped-def]
        return ticket

    for name, body in (("forgot", forgot), ("unannotated", unannotated)):
        with pytest.raises(ConfigurationError) as refused:
            app().workflow(name=name)(body)
        message = str(refused.value)
        assert "first parameter must be the durably.Context" in message
        assert "has no annotation" in message
        assert "\n" not in message


def test_a_step_that_takes_the_context_is_refused_in_one_line() -> None:
    async def summarise(ctx: durably.Context, text: str) -> str:
        return text

    with pytest.raises(ConfigurationError) as refused:
        app().step(name="summarise")(summarise)
    message = str(refused.value)
    assert message.startswith("step 'summarise': parameter 'ctx' is a durably.Context")
    assert "durably.context()" in message
    assert "\n" not in message


def test_an_unencodable_annotation_is_refused_in_one_line() -> None:
    async def step(thing: Unencodable) -> None: ...

    with pytest.raises(ConfigurationError) as refused:
        app().step(name="step")(step)
    assert "thing" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_missing_annotations_are_refused() -> None:
    async def untyped(ctx: durably.Context, ticket) -> None:  # type: ignore[no-untyped-def]
        ...

    async def no_return(ctx: durably.Context, ticket: str):  # type: ignore[no-untyped-def]
        ...

    with pytest.raises(ConfigurationError, match="ticket"):
        app().workflow(name="untyped")(untyped)
    with pytest.raises(ConfigurationError, match="return"):
        app().workflow(name="no-return")(no_return)
    with pytest.raises(ConfigurationError, match="annotation"):
        app().step(name="s")(lambda x: x)


def test_an_unencodable_annotation_is_refused() -> None:
    async def body(ctx: durably.Context, thing: Unencodable) -> None: ...

    async def step() -> Unencodable:
        return Unencodable()

    with pytest.raises(ConfigurationError, match="thing"):
        app().workflow(name="body")(body)
    with pytest.raises(ConfigurationError, match="return"):
        app().step(name="step")(step)


def test_star_arguments_are_refused() -> None:
    async def body(ctx: durably.Context, *rest: int) -> None: ...

    with pytest.raises(ConfigurationError, match=r"\*args"):
        app().workflow(name="star")(body)


def test_reserved_step_names_are_refused() -> None:
    async def step() -> int:
        return 1

    with pytest.raises(ConfigurationError, match="reserved"):
        app().step(name="durably:start")(step)


def test_app_options_are_checked_at_construction() -> None:
    with pytest.raises(InvalidInputError):
        durably.App("memory://", tenant="")
    with pytest.raises(InvalidInputError):
        durably.App("memory://", retention=-1)
    with pytest.raises(ValueError, match="scheme"):
        durably.App("nosuch://x")


async def test_a_step_outside_a_workflow_is_a_plain_call() -> None:
    registry = app()

    @registry.step
    async def double(n: int) -> int:
        return n * 2

    @registry.step
    def triple(n: int) -> int:
        return n * 3

    assert await double(2) == 4
    assert await triple(2) == 6
    with pytest.raises(RuntimeError):
        durably.context()


async def test_run_inside_a_body_is_refused_pointing_to_child() -> None:
    registry = durably.App("memory://", clock=durably.ManualClock())

    @registry.workflow
    async def inner(ctx: durably.Context) -> int:
        return 1

    @registry.workflow
    async def outer(ctx: durably.Context) -> int:
        return await inner.run()

    async with registry:
        handle = await outer.start()
        await registry.run_until_idle()
        with pytest.raises(durably.WorkflowFailedError, match=r"ctx\.child"):
            await handle.result(timeout=5)


def test_a_plain_def_workflow_body_is_refused() -> None:
    def body(ctx: durably.Context) -> int:
        return 1

    with pytest.raises(ConfigurationError, match="async def"):
        app().workflow(name="plain")(body)  # type: ignore[arg-type]
