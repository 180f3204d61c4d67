"""Output for the CLI: aligned tables for people, JSON for scripts, progress on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, is_dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any, TextIO

from pydantic import BaseModel


def plain(value: object) -> Any:
    """``value`` as JSON-ready data (models, dataclasses, enums, datetimes)."""
    if isinstance(value, BaseModel):
        return plain(value.model_dump(mode="json"))
    if is_dataclass(value) and not isinstance(value, type):
        return plain(asdict(value))
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    return value


def emit_json(value: object, out: TextIO | None = None) -> None:
    """Print ``value`` as indented JSON."""
    stream = out or sys.stdout
    stream.write(json.dumps(plain(value), indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def printable(text: str) -> str:
    """``text`` safe to print to a terminal: control characters (ESC, BEL, CR, backspace,
    the C1 range...) and line breaks shown as escapes (``\\x1b``, ``\\n``), so a stored
    value cannot move the cursor, clear the screen, retitle the window or plant a link
    (``--json`` prints the exact value)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escaped(ch) for ch in text)


def _escaped(ch: str) -> str:
    code = ord(ch)
    if ch in "\n\r\t":
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch]
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def cell(value: object) -> str:
    """How one value reads in a table (control characters escaped: `printable`)."""
    return printable(_cell(value))


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    return str(value)


def table(
    rows: Sequence[Sequence[object]],
    headers: Sequence[str],
    *,
    right: Sequence[int] = (),
) -> str:
    """Rows under headers in aligned columns; columns in ``right`` are right-aligned."""
    texts = [[cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in texts:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], len(text))

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(widths[i]) if i in right else v.ljust(widths[i]) for i, v in enumerate(values)
        ]
        return "  ".join(parts).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out.extend(line(row) for row in texts)
    return "\n".join(out)


def when(epoch: float | None) -> str:
    """An epoch-seconds instant as UTC text."""
    if epoch is None:
        return "-"
    return cell(datetime.fromtimestamp(epoch, UTC))


def iso(epoch: object) -> object:
    """Epoch seconds as an ISO 8601 UTC time (``2026-05-09T07:35:25.123Z``); anything
    else, or a number no date has, as it is."""
    if not isinstance(epoch, int | float) or isinstance(epoch, bool):
        return epoch
    try:
        stamp = datetime.fromtimestamp(epoch, UTC)
    except (OverflowError, OSError, ValueError):
        return epoch
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def dollars(micros: int) -> str:
    """Integer millionths of a dollar as dollars."""
    return f"${micros / 1_000_000:.4f}"


class Progress:
    """A one-line progress counter on stderr, drawn only when stderr is a terminal."""

    def __init__(self, label: str, total: int | None = None, stream: TextIO | None = None) -> None:
        self._label = label
        self._total = total
        self._stream = stream or sys.stderr
        self._done = 0
        self._live = bool(getattr(self._stream, "isatty", lambda: False)())

    def advance(self, count: int = 1) -> None:
        """Count ``count`` more done and redraw."""
        self._done += count
        self._draw()

    def set(self, done: int, total: int | None = None) -> None:
        """Show ``done`` of ``total`` (the total may change)."""
        self._done = done
        if total is not None:
            self._total = total
        self._draw()

    def _draw(self) -> None:
        if not self._live:
            return
        total = f"/{self._total}" if self._total is not None else ""
        self._stream.write(f"\r{self._label}: {self._done}{total}")
        self._stream.flush()

    def finish(self) -> None:
        """End the line (if one was drawn)."""
        if self._live:
            self._stream.write("\n")
            self._stream.flush()


__all__ = [
    "Progress",
    "cell",
    "dollars",
    "emit_json",
    "iso",
    "plain",
    "printable",
    "table",
    "when",
]
