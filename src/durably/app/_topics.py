"""`Topic`: a typed message channel into workflows, shared by sender and receiver."""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

from durably.app._annotations import warn_of
from durably.app._layout import bounded
from durably.app._values import Value
from durably.errors import InvalidInputError

T = TypeVar("T", covariant=True)


class Topic(Generic[T]):
    """A named, typed message channel into workflows, shared by sender and receiver.

    ``handle.send(topic, value)`` sends and ``ctx.recv(topic)`` receives; a value is
    validated against ``type`` before any I/O. Messages are matched by name: two topics of
    one name are one channel.

    Args:
        name: The topic's name.
        type: The message type: any type pydantic encodes (a model, a dataclass, ``str``,
            ``dict[str, int]``...).

    Raises:
        InvalidInputError: A ``name`` that is empty, over 400 bytes or not storable text.
        ConfigurationError: A ``type`` pydantic cannot encode.

    A ``type`` whose values would not come back as sent (``Any``, a bare ``dict``) is
    warned of (`durably.errors.ValueTypeWarning`).
    """

    @overload
    def __init__(self: Topic[T], name: str, type: type[T]) -> None: ...

    @overload
    def __init__(self: Topic[Any], name: str, type: Any) -> None: ...

    def __init__(self, name: str, type: Any) -> None:
        self.name = bounded(name, "topic name")
        self.value = Value.of(type, f"topic {name!r}")
        warn_of(type, self.value.adapter.core_schema, f"topic {name!r}, its messages")

    def encode(self, value: object) -> object:
        """Return ``value`` checked against the topic's type, as JSON-ready data.

        Args:
            value: A message of this topic.

        Raises:
            InvalidInputError: ``value`` is not a valid message of this topic (the message
                names the topic).
        """
        try:
            return self.value.encode(value)
        except Exception as exc:
            raise InvalidInputError(
                f"topic {self.name!r}: not a valid {self.value.type_name}: {exc}"
            ) from None

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, {self.value.type_name})"


__all__ = ["Topic"]
