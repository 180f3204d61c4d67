"""``python -m durably``: the same command line as the ``durably`` console script."""

from __future__ import annotations

import sys

from durably.cli import main

if __name__ == "__main__":
    sys.exit(main())
