"""Counting the Python lines a piece of work runs: a cost check that a busy machine cannot
skew (a scan over every entry shows as lines per entry; work done in C does not count)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any


@contextlib.contextmanager
def lines_run() -> Iterator[list[int]]:
    """Count the lines run inside the block: the count is ``[0]`` of what it yields."""
    count = [0]

    def trace(frame: FrameType, event: str, arg: Any) -> Callable[..., Any]:
        if event == "line":
            count[0] += 1
        return trace

    sys.settrace(trace)
    try:
        yield count
    finally:
        sys.settrace(None)
