"""JSON text that ``jsonb`` gives back as written: a float stays a float.

``jsonb`` holds every number as ``numeric`` and prints ``1e+20`` as
``100000000000000000000``, which reads back an int. Only a float whose shortest text has a
positive exponent is affected, so callers re-render only text holding ``e+``.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any


def jsonb_text(value: Any) -> str:
    """``value`` as JSON whose every float ``jsonb`` keeps a float.

    ``jsonb`` holds a number as ``numeric`` and prints ``1e+20`` as
    ``100000000000000000000``, which reads back an int; written out with a fraction
    digit (``100000000000000000000.0``) it reads back the same float.
    """
    if isinstance(value, float):
        number = repr(value)
        return f"{Decimal(number):f}.0" if "e+" in number else number
    if isinstance(value, dict):
        items = (f"{json.dumps(k, ensure_ascii=False)}:{jsonb_text(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(jsonb_text(item) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)


__all__ = ["jsonb_text"]
