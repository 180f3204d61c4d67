"""Run every benchmark section present, one after another, and print their tables.

A section whose server is unreachable prints why and the rest still run. Figures are only
comparable within one run: the machine is shared, so compare the ratios each section prints.
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback

SECTIONS = (
    "sqlite",
    "postgres",
    "redis",
    "app",
    "tasks",
    "waiters",
    "messages",
    "scale",
    "pooling",
    "handouts",
    "otel",
    "operating",
    "bulk",
    "flow",
    "dashboard",
)


def main(argv: list[str]) -> int:
    """Run the named sections (all by default); non-zero if a section crashed."""
    chosen = argv or list(SECTIONS)
    failed = 0
    for name in chosen:
        print(f"\n== {name} ==", flush=True)
        started = time.perf_counter()
        try:
            module = importlib.import_module(f"benchmarks.{name}")
        except ImportError as exc:
            print(f"(section {name} not available: {exc})")
            continue
        try:
            module.main()
        except Exception:  # one broken section must not hide the others' figures
            traceback.print_exc()
            failed += 1
        print(f"({name}: {time.perf_counter() - started:.1f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
