"""`Topic`: a typed message channel into workflows, shared by sender and receiver."""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

from durably.app._layout import bounded
from durably.app._values import Value
from durably.errors import InvalidInputError

T = TypeVar("T", covariant=True)


class Topic(Generic[T]):
    """A named message type: ``handle.send(topic, value)`` sends, ``ctx.recv(topic)``
    receives. The value is validated against ``type`` before any I/O."""

    @overload
    def __init__(self: Topic[T], name: str, type: type[T]) -> None: ...

    @overload
    def __init__(self: Topic[Any], name: str, type: Any) -> None: ...

    def __init__(self, name: str, type: Any) -> None:
        self.name = bounded(name, "topic name")
        self.value = Value.of(type, f"topic {name!r}")

    def encode(self, value: object) -> object:
        """``value`` as JSON-ready data; `InvalidInputError` naming the topic if it is not
        a valid message of this topic."""
        try:
            return self.value.encode(value)
        except Exception as exc:
            raise InvalidInputError(
                f"topic {self.name!r}: not a valid {self.value.type_name}: {exc}"
            ) from None

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, {self.value.type_name})"


__all__ = ["Topic"]
