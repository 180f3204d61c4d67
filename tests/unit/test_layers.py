"""The import-layer contract (dev/layers.py) holds, and catches what it is meant to catch."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

LAYERS = Path(__file__).resolve().parents[2] / "dev" / "layers.py"


def _layers() -> ModuleType:
    spec = importlib.util.spec_from_file_location("durably_dev_layers", LAYERS)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_import_of_the_package_points_down_its_layers() -> None:
    assert _layers().violations() == []


def test_a_backing_importing_the_engine_is_a_violation() -> None:
    layers = _layers()
    mine, _ = layers.layer("durably.sqlite.queue")
    theirs, _ = layers.layer("durably.engine.worker")
    assert theirs not in layers.ALLOWED[mine]


def test_the_engine_may_not_import_the_app() -> None:
    layers = _layers()
    assert "app" not in layers.ALLOWED["engine"]


def test_a_private_module_of_another_package_is_refused() -> None:
    layers = _layers()
    assert layers.private_of_another("durably.cli.workflows", "durably.app._layout")
    assert not layers.private_of_another("durably.app._app", "durably.app._layout")
    assert not layers.private_of_another("durably.app", "durably.app._layout")
