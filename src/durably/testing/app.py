"""`AppConformance`: what `durably.App` promises (APP.md), on every backing.

Subclass it and provide ``app_factory``: ``Callable[[Clock], Awaitable[App]]``, each call an
App over one empty store shared by every call of the same test (the subclass cleans up;
set ``shares_stores = False`` where two Apps cannot share one, as on memory). Workflows
are registered inside each test, so their default kinds are unique per test.
"""

from __future__ import annotations

from durably.testing.app_basics import AppBasics
from durably.testing.app_fixtures import AppFactory
from durably.testing.app_lifecycle import AppLifecycle
from durably.testing.app_races import AppRaces
from durably.testing.app_refusals import AppRefusals
from durably.testing.app_replay import AppReplay


class AppConformance(AppBasics, AppLifecycle, AppReplay, AppRefusals, AppRaces):
    """Every test here must pass for `durably.App` on every backing durably ships."""


__all__ = ["AppConformance", "AppFactory"]
