"""Typed values: every annotation of a workflow, step or topic becomes a pydantic adapter at
decoration time, so arguments, results and messages are encoded to JSON before any I/O and
decoded to their declared types on every pass (the first one included)."""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import reprlib
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError
from pydantic_core.core_schema import CoreConfig

from durably.app._annotations import warn_of
from durably.app._formats import Converted, converted, prepared
from durably.app._formats import canonical as canonical_text
from durably.errors import ConfigurationError, IncompatibleRecordError, InvalidInputError
from durably.validation import INT_BOUND, INT_FLOOR, MAX_INT_DIGITS

Duration = float | int | timedelta
"""A duration: seconds as a number, or a `timedelta`."""


def seconds_of(value: object, name: str, *, zero: bool = False) -> float:
    """``value`` (a number of seconds or a `timedelta`) in seconds, if finite and positive
    (or zero, with ``zero``); `InvalidInputError` naming ``name`` otherwise."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:  # an int past any float
            raise InvalidInputError(f"{name} must be positive and finite, got a huge int") from None
    else:
        raise InvalidInputError(
            f"{name} must be seconds or a timedelta, got {type(value).__name__}"
        )
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero):
        least = "zero or more" if zero else "positive"
        raise InvalidInputError(f"{name} must be {least} and finite, got {value!r}")
    return seconds


@dataclass(frozen=True, slots=True)
class Value:
    """One annotated type and its pydantic adapter: ``encode`` gives JSON-ready data,
    ``decode`` the typed value back, in durably's value format (`durably.app._formats`)."""

    type_name: str
    adapter: TypeAdapter[Any]
    """Pydantic's own adapter of the type (format 1: what `formatted` changes aside)."""
    plain: Callable[[object], bool] | None = None
    """For an annotation built only of ``int``, ``str``, ``bool``, ``None``, ``list[...]``
    and ``dict[str, ...]``: whether a value is exactly of that shape, and so its own JSON
    (the adapter would give an equal value back); the adapter is skipped for it (the hot
    path of small steps)."""
    formatted: Converted | None = None
    """The validator and serializer of format 2 where it differs from pydantic's own (a
    ``bytes``, ``set`` or ``frozenset`` in the type); None: the adapter's."""
    loose: bool = False
    """Whether the type is ``Any`` (its values' bytes and sets are put in format 2 before
    pydantic renders them)."""

    @classmethod
    def of(cls, annotation: object, what: str) -> Value:
        """The adapter for ``annotation``; `ConfigurationError` naming ``what`` when
        pydantic cannot encode that type."""
        try:
            try:
                adapter: TypeAdapter[Any] = TypeAdapter(
                    annotation,  # type: ignore[arg-type]
                    config=_KEEP_NON_FINITE,
                )
                config: CoreConfig | None = _KEEP_NON_FINITE_CORE
            except PydanticUserError:  # a type with a config of its own (a model): its say
                adapter = TypeAdapter(annotation)  # type: ignore[arg-type]
                config = None
        except (PydanticSchemaGenerationError, PydanticUserError, TypeError, NameError) as exc:
            # Pydantic's first line says what; the rest is advice on its own API.
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise ConfigurationError(
                f"{what}: cannot encode annotation {annotation!r}: {reason}"
            ) from None
        name = getattr(annotation, "__name__", repr(annotation))
        return cls(
            name,
            adapter,
            _plain_check(annotation, 0),
            converted(adapter.core_schema, config),
            annotation is Any,
        )

    def encode(self, value: object) -> object:
        """``value`` checked against the type and rendered as JSON-ready data. Raises
        `ValidationError` (a `ValueError`), a `ValueError` for a NaN or infinite number
        (JSON has none: stored, it would come back as something else or not at all) or an
        int of more than `MAX_INT_DIGITS` digits (no reader could parse it), or pydantic's
        serialization error."""
        if self.plain is not None and self.plain(value):
            return value  # no float in a plain shape, and every int in bounds
        formatted = self.formatted
        if formatted is not None:
            data = formatted.dump(formatted.validate(value))
        else:
            adapter = self.adapter
            if self.loose:
                value = prepared(value)
            data = adapter.dump_python(adapter.validate_python(value), mode="json")
        flaw = _number_flaw(data)
        if flaw is not None:
            raise ValueError(flaw)
        return data

    def decode(self, data: object) -> Any:
        """The typed value of JSON-ready ``data`` (either format); a `ValueError`
        (pydantic's `ValidationError`, or another error a validator raised, as a
        `ValueError`) if it does not fit."""
        if self.plain is not None and self.plain(data):
            return data
        validate = (
            self.adapter.validate_python if self.formatted is None else self.formatted.validate
        )
        try:
            return validate(data)
        except ValidationError:
            raise
        except Exception as exc:  # a validator raising something else: still a misfit
            raise ValueError(f"{type(exc).__name__}: {exc}") from exc

    def encode_earlier(self, value: object) -> object:
        """``value`` as format 1 rendered it (pydantic's own JSON), for a record written
        before format 2; `ValueError` or pydantic's error where format 1 could not."""
        return self.adapter.dump_python(self.adapter.validate_python(value), mode="json")


_KEEP_NON_FINITE = ConfigDict(ser_json_inf_nan="constants")
"""Pydantic's default writes a NaN inside an ``Any`` as null, silently: kept as a number
here, the encode refuses it. A model's own config decides for its own fields."""
_KEEP_NON_FINITE_CORE = CoreConfig(ser_json_inf_nan="constants")
"""The same, for the validator and serializer of format 2."""


def _number_flaw(data: object) -> str | None:
    """Why JSON-ready ``data`` cannot be stored for one of its numbers (a NaN or infinite
    float, an int past `INT_BOUND`), or None (iteratively: pydantic bounds the depth of
    what it dumps, and no recursion limit is reached here)."""
    pending = [data]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is float:
            if not math.isfinite(item):  # type: ignore[arg-type]
                return "NaN and infinite numbers cannot be stored (JSON has no such value)"
        elif kind is int:
            if not INT_FLOOR < item < INT_BOUND:
                return _LONG_INT
        elif kind is dict:
            pending.extend(item.values())  # type: ignore[attr-defined]
        elif kind is list:
            pending.extend(item)  # type: ignore[arg-type]
    return None


_LONG_INT = (
    f"an int of more than {MAX_INT_DIGITS} digits cannot be stored (no reader would parse it)"
)


_PLAIN_DEPTH = 4
"""How deeply `_plain_check` follows ``list``/``dict`` annotations (deeper: the adapter)."""


def _plain_check(annotation: object, depth: int) -> Callable[[object], bool] | None:
    """A check that a value is exactly of ``annotation``'s plain JSON shape, or None when
    the annotation is not built of ``int``, ``str``, ``bool``, ``None``, ``list[X]`` and
    ``dict[str, X]`` alone (exact types: a subclass or a ``bool`` for an ``int`` takes
    the adapter, which decides as it always did).

    Containers are checked by plain loops: ``all()`` over a generator costs four times as
    much for a small dict, and a step's result goes through one on every call."""
    scalar = _scalar_type(annotation)
    if scalar is int:  # exactly an int, and one a reader can parse (else: the adapter)
        return lambda value: type(value) is int and INT_FLOOR < value < INT_BOUND
    if scalar is not None:
        exact = scalar
        return lambda value: type(value) is exact
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if depth >= _PLAIN_DEPTH:
        return None
    if origin is list and len(args) == 1:
        item = _plain_check(args[0], depth + 1)
        if item is None:
            return None
        check = item

        def items(value: object) -> bool:
            if type(value) is not list:
                return False
            for entry in value:  # noqa: SIM110 (see above)
                if not check(entry):
                    return False
            return True

        return items
    if origin is dict and len(args) == 2 and args[0] is str:
        entry = _plain_check(args[1], depth + 1)
        if entry is None:
            return None
        fits = entry

        def entries(value: object) -> bool:
            if type(value) is not dict:
                return False
            for key, item in value.items():  # noqa: SIM110 (see above)
                if type(key) is not str or not fits(item):
                    return False
            return True

        return entries
    return None


ANY = Value("Any", TypeAdapter(Any, config=_KEEP_NON_FINITE), loose=True)


def _scalar_type(annotation: object) -> type | None:
    """The exact type of a scalar annotation (``int``, ``str``, ``bool``, ``None``)."""
    for kind in (int, str, bool):
        if annotation is kind:
            return kind
    return type(None) if annotation is None or annotation is type(None) else None


@dataclass(frozen=True, slots=True)
class Parameter:
    """A parameter of a workflow or step: its name, kind and value adapter."""

    name: str
    kind: inspect._ParameterKind
    value: Value


class Signature:
    """A function's parameters (after a leading context, if ``skip`` is 1) and result, each
    with its adapter, read from its annotations at decoration time."""

    def __init__(self, fn: Callable[..., Any], what: str, *, skip: int = 0) -> None:
        self.what = what
        try:
            hints = typing.get_type_hints(fn)
        except Exception as exc:
            raise ConfigurationError(f"{what}: cannot resolve its annotations: {exc}") from None
        self._signature = inspect.signature(fn)
        parameters = list(self._signature.parameters.values())
        self.leading = parameters[:skip]
        self.parameters: list[Parameter] = []
        for parameter in parameters[skip:]:
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise ConfigurationError(
                    f"{what}: *args and **kwargs are not supported (parameter {parameter.name!r})"
                )
            if parameter.name not in hints:
                raise ConfigurationError(
                    f"{what}: parameter {parameter.name!r} has no annotation (values are "
                    "encoded from annotations)"
                )
            named = f"{what}, parameter {parameter.name!r}"
            value = Value.of(hints[parameter.name], named)
            warn_of(hints[parameter.name], value.adapter.core_schema, named)
            self.parameters.append(Parameter(parameter.name, parameter.kind, value))
        if "return" not in hints:
            raise ConfigurationError(f"{what}: the return annotation is missing (-> T or -> None)")
        self.result = Value.of(hints["return"], f"{what}, return value")
        warn_of(hints["return"], self.result.adapter.core_schema, f"{what}, return value")
        self.hints = hints
        """The function's resolved annotations, by parameter name (and ``return``)."""
        self._bindable = self._signature.replace(parameters=parameters[skip:])
        self._positional = all(
            p.kind is not inspect.Parameter.KEYWORD_ONLY for p in self.parameters
        )
        # Every parameter plain (see `Value.plain`): a positional call of plain values is
        # its own encoding, checked without the adapters, and its canonical JSON (what
        # `digest_args` digests) is written out in the order of the sorted names.
        self._plain: list[tuple[str, Callable[[object], bool]]] | None = None
        self._canonical: list[tuple[int, str, Callable[[object], bool]]] | None = None
        # Every parameter a scalar (int, str, bool, None): a call whose arguments are of
        # exactly those types is a hashable key for the digest it had before.
        exact = [_scalar_type(hints[p.name]) for p in self.parameters]
        self._scalars: tuple[type, ...] | None = (
            tuple(kind for kind in exact if kind is not None)
            if self._positional and None not in exact
            else None
        )
        self._digests: dict[tuple[Any, ...], str] = {}
        if self._positional:
            checks = [(p.name, p.value.plain) for p in self.parameters]
            plain = [(name, check) for name, check in checks if check is not None]
            if len(plain) == len(checks):
                self._plain = plain
                self._canonical = sorted(
                    (
                        (index, f"{json.encoder.encode_basestring(name)}:", check)
                        for index, (name, check) in enumerate(plain)
                    ),
                    key=lambda entry: plain[entry[0]][0],
                )

    @property
    def names(self) -> list[str]:
        """The parameter names, in order."""
        return [p.name for p in self.parameters]

    def encode_args(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, object]:
        """The call's arguments by name, defaults applied, each encoded; `InvalidInputError`
        naming the function and parameter for a call that does not fit."""
        if self._plain is not None and not kwargs and len(args) == len(self._plain):
            plain = self._plain
            fast = {
                name: value
                for (name, check), value in zip(plain, args, strict=True)
                if check(value)
            }
            if len(fast) == len(args):
                return fast
        if not kwargs and len(args) == len(self.parameters) and self._positional:
            arguments: Mapping[str, Any] = {
                parameter.name: value
                for parameter, value in zip(self.parameters, args, strict=True)
            }  # the common call, without inspect's binding
        else:
            try:
                bound = self._bindable.bind(*args, **kwargs)
            except TypeError as exc:
                raise InvalidInputError(f"{self.what}: {exc}") from None
            bound.apply_defaults()
            arguments = bound.arguments
        encoded: dict[str, object] = {}
        for parameter in self.parameters:
            try:
                encoded[parameter.name] = parameter.value.encode(arguments[parameter.name])
            except (ValueError, TypeError) as exc:
                raise InvalidInputError(
                    f"{self.what}, argument {parameter.name!r}: cannot encode as "
                    f"{parameter.value.type_name}: {exc}"
                ) from None
            except Exception as exc:  # pydantic's serialization errors
                raise InvalidInputError(
                    f"{self.what}, argument {parameter.name!r}: {type(exc).__name__}: {exc}"
                ) from None
        return encoded

    def digest_args(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
        """`digest` of `encode_args`' output (`InvalidInputError` likewise); for a positional
        call of plain values, without building it, and for short scalar arguments seen
        before, as it was then (a step is called with the same few small arguments over and
        over, and the hash costs more than the rest of the digest together)."""
        if kwargs:
            return digest(self.encode_args(args, kwargs))
        scalars = self._scalars
        if scalars is not None and tuple(map(type, args)) == scalars:
            known = self._digests.get(args)
            if known is not None:
                return known
        text = self._plain_text(args)
        if text is None:
            return digest(self.encode_args(args, kwargs))
        made = _blake(text)
        if scalars is not None and len(text) <= _DIGESTS_TEXT:
            if len(self._digests) >= _DIGESTS_MOST:
                self._digests.clear()
            self._digests[args] = made
        return made

    def earlier_digest(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str | None:
        """`digest_args` as format 1 made it, for a record written before format 2: None
        when the formats agree on these parameters' types, or format 1 cannot encode the
        call (it would have failed then)."""
        if all(p.value.formatted is None for p in self.parameters):
            return None
        try:
            bound = self._bindable.bind(*args, **kwargs)
            bound.apply_defaults()
            return digest(
                {p.name: p.value.encode_earlier(bound.arguments[p.name]) for p in self.parameters}
            )
        except Exception:  # format 1 could not encode it: no record of it can exist
            return None

    def _plain_text(self, args: tuple[Any, ...]) -> str | None:
        """The canonical JSON of a positional call of plain values (what `digest` hashes),
        written out in the order of the sorted names; None for any other call."""
        canonical = self._canonical
        if canonical is None or len(args) != len(canonical):
            return None
        parts = []
        for index, prefix, check in canonical:
            value = args[index]
            if not check(value):
                return None
            parts.append(prefix + _RENDER.get(type(value), canonical_text)(value))
        return f"{{{','.join(parts)}}}"

    def decode_args(self, encoded: Mapping[str, object]) -> tuple[list[Any], dict[str, Any]]:
        """Positional and keyword arguments decoded from `encode_args`'s output. Raises
        `ValidationError` (or `KeyError` for a missing one) when a stored value no longer
        fits its annotation."""
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        for parameter in self.parameters:
            value = parameter.value.decode(encoded[parameter.name])
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY:
                keywords[parameter.name] = value
            else:
                positional.append(value)
        return positional, keywords


# The canonical JSON of a plain scalar, as the encoder writes it (others: the encoder).
_RENDER: dict[type, Callable[[Any], str]] = {
    int: int.__repr__,
    str: json.encoder.encode_basestring,
    bool: lambda value: "true" if value else "false",
    type(None): lambda value: "null",
}


def digest(encoded: object) -> str:
    """A short, stable digest of JSON-ready data (a step's arguments): a 64-bit BLAKE2b of
    its canonical JSON, as 16 hex digits (no character a JSON string escapes, so a step
    record stays on the stores' cheap path)."""
    return _blake(canonical_text(encoded))


_DIGESTS_MOST = 1024
"""The most argument tuples one step keeps the digest of (then it starts afresh)."""
_DIGESTS_TEXT = 128
"""The longest canonical text whose arguments are kept with their digest."""


def _blake(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def decoded_record(workflow: str, where: str, value: Value, data: object) -> Any:
    """``data`` (read from ``where`` in ``workflow``'s records) decoded as ``value``;
    `IncompatibleRecordError` when it no longer fits (a changed model, say, or a record
    something else wrote) rather than pydantic's own error."""
    try:
        return value.decode(data)
    except (ValueError, RecursionError) as exc:
        raise IncompatibleRecordError(
            workflow, where, value.type_name, stored_text(data), str(exc)
        ) from None


def stored_text(value: object) -> str:
    """A recorded value as JSON text, for error messages."""
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return _SHORT_REPR.repr(value)


_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel = 4  # a value nested past what JSON rendering takes, shown shallowly


__all__ = [
    "ANY",
    "Duration",
    "Parameter",
    "Signature",
    "ValidationError",
    "Value",
    "decoded_record",
    "digest",
    "seconds_of",
    "stored_text",
]
