"""An App on the embedded default (a SQLite file) serves one body gathering 20,000 steps
while 500 handles wait on one-step workflows: every result arrives, each step runs once
(counted by the steps) and no pass fails on the way.

``DURABLY_FAN_OUT`` sets the width (default 20,000)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from durably import App
from tests.fan_out import fan_out_beside_waiters

WIDE = int(os.environ.get("DURABLY_FAN_OUT", "20000"))
WAITERS = 500

pytestmark = pytest.mark.timeout(300)


async def test_a_twenty_thousand_step_fan_out_beside_five_hundred_waiters_runs_each_once(
    tmp_path: Path,
) -> None:
    app = App(f"sqlite:///{tmp_path / 'wide.db'}")  # the default settings
    try:
        await fan_out_beside_waiters(app, wide=WIDE, waiters=WAITERS)
    finally:
        await app.close()
