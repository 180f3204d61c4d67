"""The user API's docstrings: a one-line summary, every parameter under ``Args:``, and the
errors a caller can meet under ``Raises:``, naming exception types that exist.

The API reference is generated from these docstrings (Google style), so a parameter added
without a word, or an error renamed in the code but not in the prose, shows up here.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator

import pytest

import durably.errors
from durably.app import (
    App,
    Context,
    Limits,
    Retry,
    Step,
    StepContext,
    Topic,
    Workflow,
    WorkflowHandle,
    WorkflowOptions,
    context,
)

USER_CLASSES: tuple[type, ...] = (
    App,
    Workflow,
    Step,
    Context,
    StepContext,
    WorkflowHandle,
    WorkflowOptions,
    Retry,
    Limits,
    Topic,
)
"""The classes of the user API: every public member of each is checked."""

CONSTRUCTED_BY_USERS: tuple[type, ...] = (App, Retry, Limits, Topic)
"""Classes a user constructs: their constructor's parameters are documented in the class
docstring (the API reference merges ``__init__`` into the class). The others are made by
the App, and their constructors are not the user's."""

ENGINE_SEAM = {
    "Workflow.prepare",
    "Workflow.launch",
    "Workflow.body",
    "Workflow.arguments",
    "Step.invoke",
}
"""Public names the App itself calls to drive the engine, not meant for users."""

SECTIONS = ("Args", "Arguments", "Attributes", "Raises", "Returns", "Yields", "Example")

REQUIRED_RAISES: dict[str, set[str]] = {
    "App.__init__": {"DsnError", "InvalidInputError"},
    "App.workflow": {"ConfigurationError", "InvalidInputError"},
    "App.step": {"ConfigurationError", "InvalidInputError"},
    "App.get_handle": {"InvalidInputError", "WorkflowNotFoundError"},
    "App.serve": {"ConfigurationError", "InvalidInputError"},
    "App.sweep": {"InvalidInputError"},
    "Workflow.start": {"InvalidInputError", "WorkflowConflictError"},
    "Workflow.run": {
        "ConfigurationError",
        "WorkflowConflictError",
        "WorkflowFailedError",
        "WorkflowCancelledError",
    },
    "Workflow.get_handle": {"WorkflowNotFoundError", "WorkflowConflictError"},
    "Step.keyed": {"InvalidInputError"},
    "Step.__call__": {"StepFailedError", "NondeterminismError"},
    "WorkflowHandle.result": {
        "WorkflowFailedError",
        "WorkflowCancelledError",
        "TimeoutError",
        "WorkflowNotFoundError",
    },
    "WorkflowHandle.status": {"WorkflowNotFoundError"},
    "WorkflowHandle.send": {
        "InvalidInputError",
        "WorkflowNotFoundError",
        "WorkflowFinishedError",
    },
    "WorkflowHandle.get_event": {"InvalidInputError", "WorkflowNotFoundError", "TimeoutError"},
    "WorkflowHandle.cancel": {"WorkflowNotFoundError"},
    "WorkflowHandle.resume": {"WorkflowNotFoundError"},
    "Context.sleep": {"InvalidInputError"},
    "Context.set_event": {"InvalidInputError"},
    "Context.recv": {"InvalidInputError"},
    "Context.child": {
        "ChildWorkflowFailedError",
        "InvalidInputError",
        "WorkflowConflictError",
        "WorkflowLimitError",
    },
    "Context.start_child": {"InvalidInputError", "WorkflowConflictError", "WorkflowLimitError"},
    "Limits.__init__": {"InvalidInputError"},
    "Topic.__init__": {"InvalidInputError", "ConfigurationError"},
    "Retry.__init__": {"InvalidInputError"},
    "context": {"RuntimeError"},
}
"""The errors each call can raise that its docstring must name (read from the code)."""


@dataclasses.dataclass(frozen=True)
class Documented:
    """One public callable of the user API: its name, docstring and parameter names."""

    name: str
    doc: str
    parameters: tuple[str, ...]
    """Its parameters beyond self, ``*args`` and ``**kwargs`` spelled so."""


def _parameters(fn: Callable[..., object]) -> tuple[str, ...]:
    names = []
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.name in ("self", "cls"):
            continue
        if parameter.kind is parameter.VAR_POSITIONAL:
            names.append(f"*{parameter.name}")
        elif parameter.kind is parameter.VAR_KEYWORD:
            names.append(f"**{parameter.name}")
        else:
            names.append(parameter.name)
    return tuple(names)


def _members(cls: type) -> Iterator[Documented]:
    """The public callables and properties ``cls`` defines, and its constructor if a user
    calls it."""
    if cls in CONSTRUCTED_BY_USERS:
        yield Documented(f"{cls.__name__}.__init__", cls.__doc__ or "", _parameters(cls))
    if cls is StepContext:  # a frozen record: its fields are its attributes
        fields = tuple(field.name for field in dataclasses.fields(cls))
        yield Documented("StepContext", cls.__doc__ or "", fields)
    for name, member in vars(cls).items():
        qualified = f"{cls.__name__}.{name}"
        if (name.startswith("_") and name != "__call__") or qualified in ENGINE_SEAM:
            continue
        if isinstance(member, property | functools.cached_property):
            yield Documented(qualified, member.__doc__ or "", ())
        elif inspect.isfunction(member):
            yield Documented(qualified, member.__doc__ or "", _parameters(member))


def _user_api() -> list[Documented]:
    found = [Documented("context", context.__doc__ or "", _parameters(context))]
    for cls in USER_CLASSES:
        found.extend(_members(cls))
    return found


USER_API = _user_api()


def _sections(doc: str) -> dict[str, list[str]]:
    """The Google-style sections of ``doc``: each heading with the names its entries begin
    with (a parameter, an attribute, an exception type)."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in inspect.cleandoc(doc).splitlines():
        if line and not line[0].isspace():
            heading = line.removesuffix(":")
            current = found.setdefault(heading, []) if heading in SECTIONS else None
        elif current is not None and line.startswith("    ") and line[4:5] not in (" ", ""):
            current.append(line.strip().split(":", 1)[0])
    return found


def _ids(items: list[Documented]) -> list[str]:
    return [item.name for item in items]


def test_the_walk_reaches_every_call_the_user_api_promises() -> None:
    walked = {item.name for item in USER_API}
    promised = {
        "App.__init__",
        "App.workflow",
        "App.step",
        "App.get_handle",
        "App.serve",
        "App.sweep",
        "App.unserved",
        "App.run_until_idle",
        "App.stores",
        "App.close",
        "App.dsn",
        "App.tenant",
        "Workflow.start",
        "Workflow.run",
        "Workflow.get_handle",
        "Workflow.handle",
        "Step.keyed",
        "Step.__call__",
        "Context.now",
        "Context.uuid",
        "Context.sleep",
        "Context.step",
        "Context.transact",
        "Context.patched",
        "Context.set_event",
        "Context.recv",
        "Context.child",
        "Context.start_child",
        "Context.logger",
        "Context.id",
        "Context.replaying",
        "StepContext",
        "context",
        "WorkflowHandle.id",
        "WorkflowHandle.created",
        "WorkflowHandle.result",
        "WorkflowHandle.status",
        "WorkflowHandle.send",
        "WorkflowHandle.get_event",
        "WorkflowHandle.cancel",
        "WorkflowHandle.resume",
        "Retry.__init__",
        "Topic.__init__",
    }
    assert promised <= walked, sorted(promised - walked)
    assert set(REQUIRED_RAISES) <= walked, sorted(set(REQUIRED_RAISES) - walked)


@pytest.mark.parametrize("item", USER_API, ids=_ids(USER_API))
def test_every_user_call_opens_with_a_one_line_summary(item: Documented) -> None:
    assert item.doc.strip(), f"{item.name} has no docstring"
    lines = inspect.cleandoc(item.doc).splitlines()
    assert lines[0].rstrip().endswith((".", "?", "!")), f"{item.name}: {lines[0]!r}"
    assert len(lines) == 1 or not lines[1].strip(), (
        f"{item.name}: the summary runs onto a second line: {lines[:2]}"
    )


@pytest.mark.parametrize(
    "item", [i for i in USER_API if i.parameters], ids=_ids([i for i in USER_API if i.parameters])
)
def test_every_parameter_of_a_user_call_is_documented_under_args(item: Documented) -> None:
    sections = _sections(item.doc)
    heading = "Attributes" if item.name == "StepContext" else "Args"
    assert heading in sections, f"{item.name} has no {heading}: section"
    documented = sections[heading]
    assert sorted(documented) == sorted(item.parameters), (
        f"{item.name}: {heading} names {documented}, the signature {list(item.parameters)}"
    )


@pytest.mark.parametrize("name", sorted(REQUIRED_RAISES))
def test_the_errors_a_user_call_raises_are_named_under_raises(name: str) -> None:
    (item,) = [i for i in USER_API if i.name == name]
    raises = set(_sections(item.doc).get("Raises", []))
    missing = REQUIRED_RAISES[name] - raises
    assert not missing, f"{name}: Raises: names {sorted(raises)}, not {sorted(missing)}"


def _exception_named(name: str) -> type | None:
    found = getattr(durably.errors, name, None) or getattr(builtins, name, None)
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


@pytest.mark.parametrize(
    "item",
    [i for i in USER_API if "Raises" in _sections(i.doc)],
    ids=_ids([i for i in USER_API if "Raises" in _sections(i.doc)]),
)
def test_every_error_a_docstring_names_exists(item: Documented) -> None:
    named = _sections(item.doc)["Raises"]
    assert named, f"{item.name}: an empty Raises: section"
    unknown = [name for name in named if _exception_named(name) is None]
    assert not unknown, f"{item.name}: Raises: names no exception type: {unknown}"


def test_the_section_reader_sees_what_a_docstring_documents() -> None:
    doc = """Summary.

    Args:
        first: One.
            Continued, not an entry: it is indented further.
        *rest: The rest.

    Raises:
        InvalidInputError: When.
    """
    assert _sections(doc) == {"Args": ["first", "*rest"], "Raises": ["InvalidInputError"]}
    assert _sections("Summary.\n\nArgs are described in prose here.") == {}
