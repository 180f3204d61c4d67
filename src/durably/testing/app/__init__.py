"""`AppConformance`: what `durably.App` promises, on every backing.

Subclass it and provide ``app_factory``: ``(clock, **options) -> Awaitable[App]``, each call
an App (the options passed on to it) over one empty store shared by every call of the same
test (the subclass cleans up; set ``shares_stores = False`` where two Apps cannot share one,
as on memory). Workflows are registered inside each test, so their default kinds are unique
per test.
"""

from __future__ import annotations

from durably.testing.app.admission import AppAdmission
from durably.testing.app.basics import AppBasics
from durably.testing.app.bulk import AppBulk
from durably.testing.app.cancels import AppCancels
from durably.testing.app.concurrency import AppConcurrency
from durably.testing.app.continuing import AppContinueAsNew
from durably.testing.app.delays import AppDelays
from durably.testing.app.deploys import AppDeployCheck
from durably.testing.app.drift import AppDrift
from durably.testing.app.failures import AppFailures
from durably.testing.app.fairness import AppFairness
from durably.testing.app.fanout import AppFanOut
from durably.testing.app.fixtures import AppFactory
from durably.testing.app.gates import AppGates
from durably.testing.app.lifecycle import AppLifecycle
from durably.testing.app.messages import AppMessages
from durably.testing.app.priorities import AppPriorities, AppPriorityChanges
from durably.testing.app.races import AppRaces
from durably.testing.app.refusals import AppRefusals
from durably.testing.app.replay import AppReplay
from durably.testing.app.runs import AppRuns
from durably.testing.app.schedules import AppSchedules
from durably.testing.app.sleeps import AppSleeps
from durably.testing.app.tenants import AppTenants
from durably.testing.app.upgrade import AppUpgrade
from durably.testing.app.values import AppValues


class AppConformance(
    AppAdmission,
    AppBasics,
    AppBulk,
    AppDelays,
    AppDeployCheck,
    AppLifecycle,
    AppReplay,
    AppRefusals,
    AppSchedules,
    AppRaces,
    AppRuns,
    AppTenants,
    AppUpgrade,
    AppFanOut,
    AppValues,
    AppFailures,
    AppFairness,
    AppPriorities,
    AppPriorityChanges,
    AppGates,
    AppMessages,
    AppContinueAsNew,
    AppCancels,
    AppConcurrency,
    AppDrift,
    AppSleeps,
):
    """Every test here must pass for `durably.App` on every backing durably ships."""


__all__ = ["AppConformance", "AppFactory"]
