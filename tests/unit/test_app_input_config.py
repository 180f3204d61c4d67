"""What `durably.App`, its DSN and `durably.Retry` refuse when they are made, before any
I/O: input that used to be taken and then failed later (or quietly meant something else)."""

from __future__ import annotations

from datetime import timedelta

import pytest

import durably
from durably.app._app import DEFAULT_DSN, MAX_LEASE, MAX_RETENTION
from durably.errors import ConfigurationError, DsnError, InvalidInputError
from durably.stores.dsn import DSN_ENV, parse

PASSWORD = "s3cret-Pw"


# --- Redis DSNs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/notanint", "/11x", "/11/extra", "/-1", "/+1", "/ 1", "//", "/1.5", "/2147483648"]
)
def test_a_redis_dsn_whose_database_is_not_an_index_is_refused(path: str) -> None:
    dsn = f"redis://default:{PASSWORD}@127.0.0.1:6379{path}"
    with pytest.raises(DsnError, match="database") as caught:
        parse(dsn)
    assert PASSWORD not in str(caught.value)
    with pytest.raises(DsnError):
        durably.App(dsn)  # before any I/O: nothing listens on this port's database


@pytest.mark.parametrize("query", ["db=x", "db=-1", "db=1.5", "key_prefix=a&db=99999999999"])
def test_a_redis_dsn_whose_db_option_is_not_an_index_is_refused(query: str) -> None:
    with pytest.raises(DsnError, match="db=") as caught:
        parse(f"redis://:{PASSWORD}@127.0.0.1:6379/0?{query}")
    assert PASSWORD not in str(caught.value)


@pytest.mark.parametrize(
    "dsn",
    [
        "redis://127.0.0.1:6379/0",
        "redis://127.0.0.1:6379/15",
        "redis://127.0.0.1:6379",
        "redis://127.0.0.1:6379/",
        "redis://127.0.0.1:6379/3/",
        "redis://127.0.0.1/2147483647",
        "redis://127.0.0.1:6379/%31",
        "redis://127.0.0.1:6379/0?key_prefix=app&socket_timeout=5",
        "redis://127.0.0.1:6379?db=4",
        f"rediss://default:{PASSWORD}@cache.internal:6380/2",
    ],
)
def test_a_redis_dsn_naming_its_database_by_number_still_parses(dsn: str) -> None:
    assert parse(dsn).backing == "redis"
    durably.App(dsn)


# --- the App's DSN and options ----------------------------------------------------------


def test_an_explicitly_empty_dsn_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DSN_ENV, "memory://")
    with pytest.raises(DsnError):
        durably.App("")


def test_no_dsn_still_means_the_environment_then_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(DSN_ENV, raising=False)
    assert durably.App().dsn == DEFAULT_DSN
    monkeypatch.setenv(DSN_ENV, "")  # an empty variable is an unset one
    assert durably.App().dsn == DEFAULT_DSN
    monkeypatch.setenv(DSN_ENV, "memory://")
    assert durably.App().dsn == "memory://"


@pytest.mark.parametrize(
    "retention",
    [
        1e300,
        timedelta.max,
        pytest.param(10**400, id="10**400"),
        MAX_RETENTION + 1,
        timedelta(days=36600),
    ],
)
def test_a_retention_beyond_a_hundred_years_is_refused(retention: object) -> None:
    with pytest.raises(InvalidInputError, match="retention must be at most 100 years"):
        durably.App("memory://", retention=retention)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "lease", [1e300, pytest.param(10**400, id="10**400"), MAX_LEASE + 1, timedelta(days=1)]
)
def test_a_lease_beyond_one_hour_is_refused(lease: object) -> None:
    with pytest.raises(InvalidInputError, match="lease must be at most one hour"):
        durably.App("memory://", lease=lease)  # type: ignore[arg-type]


def test_retention_and_lease_up_to_their_bounds_are_taken() -> None:
    app = durably.App("memory://", retention=timedelta(days=365 * 100), lease=timedelta(hours=1))
    assert app.retention == 365 * 100 * 86400.0
    assert app.lease == MAX_LEASE
    assert durably.App("memory://", retention=MAX_RETENTION, lease=0.5).lease == 0.5


@pytest.mark.parametrize("clock", ["x", 1.0, object(), durably.ManualClock])
def test_a_clock_that_is_not_a_durably_clock_is_refused(clock: object) -> None:
    with pytest.raises(InvalidInputError, match="clock"):
        durably.App("memory://", clock=clock)  # type: ignore[arg-type]


def test_any_durably_clock_is_taken() -> None:
    manual = durably.ManualClock()
    assert durably.App("memory://", clock=manual).clock is manual
    assert isinstance(durably.App("memory://").clock, durably.SystemClock)


# --- Retry ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "non_retryable",
    [(5,), (ValueError, "KeyError"), (int,), (ValueError(),), [ValueError], ValueError],
)
def test_a_retry_whose_non_retryable_entries_are_not_exception_classes_is_refused(
    non_retryable: object,
) -> None:
    with pytest.raises(InvalidInputError, match="non_retryable"):
        durably.Retry(non_retryable=non_retryable)  # type: ignore[arg-type]


def test_a_retry_takes_exception_classes_as_non_retryable() -> None:
    retry = durably.Retry(max_attempts=3, non_retryable=(KeyError, KeyboardInterrupt))
    assert not retry.retries(KeyError("k"), 1)
    assert retry.retries(ValueError("v"), 1)


@pytest.mark.parametrize(
    "options",
    [
        {"initial": "1"},
        {"maximum": None},
        {"multiplier": float("inf")},
        {"maximum": float("inf")},
        {"jitter": float("nan")},
        {"initial": True},
    ],
)
def test_a_retry_with_a_field_that_is_not_a_finite_number_is_refused(
    options: dict[str, object],
) -> None:
    with pytest.raises(InvalidInputError, match="finite number"):
        durably.Retry(**options)  # type: ignore[arg-type]


def test_a_long_run_of_attempts_backs_off_at_most_maximum_without_overflowing() -> None:
    retry = durably.Retry(max_attempts=10**6, initial=1.0, maximum=60.0, jitter=0.0)
    assert retry.backoff(5000) == 60.0
    assert durably.Retry(initial=0.0, maximum=0.0, multiplier=10).backoff(5000) == 0.0


# --- reserved step names ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["inbox:abc", "inbox:", "durably:start", "durably:x"])
def test_a_step_named_in_a_reserved_key_space_is_refused_at_registration(name: str) -> None:
    app = durably.App("memory://")

    async def step() -> int:
        return 1

    with pytest.raises(ConfigurationError, match="reserved") as caught:
        app.step(name=name)(step)
    assert repr(name) in str(caught.value)


async def test_an_inline_step_key_in_the_inbox_key_space_is_refused_at_the_call() -> None:
    app = durably.App("memory://", clock=durably.ManualClock())

    @app.workflow(name="inline")
    async def inline(ctx: durably.Context) -> str:
        try:
            await ctx.step("inbox:00000000000000000001", lambda: "forged")
        except ConfigurationError as exc:
            return str(exc)
        return "taken"

    async with app:
        handle = await inline.start()
        await app.run_until_idle()
        assert "reserved" in await handle.result(timeout=5)


# --- handles ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(123, id="int"),
        "",
        "a\x00b",
        pytest.param("k" * 450, id="450B"),  # over the bound set_event keeps for its keys
        pytest.param("k" * 10**6, id="1MB"),
    ],
)
async def test_get_event_refuses_a_key_set_event_refuses_before_any_io(key: object) -> None:
    app = durably.App("redis://127.0.0.1:1/0")  # nothing listens: any I/O would fail else

    @app.workflow(name="publishes")
    async def publishes(ctx: durably.Context) -> None:
        await ctx.set_event("stage", "done")

    with pytest.raises(InvalidInputError, match="event key") as caught:
        await publishes.handle("wf-1").get_event(key, timeout=0.3)  # type: ignore[arg-type]
    assert len(str(caught.value)) < 200


# --- changing the DSN ---------------------------------------------------------------------


async def test_a_dsn_changed_before_the_stores_open_is_the_one_they_open(tmp_path: object) -> None:
    app = durably.App("memory://")
    app.dsn = f"sqlite:///{tmp_path}/moved.db"
    async with app:
        assert (await app.stores()).location.endswith("moved.db")


async def test_a_dsn_change_is_refused_once_the_stores_are_open() -> None:
    app = durably.App("memory://")
    async with app:
        with pytest.raises(ConfigurationError, match="close it"):
            app.dsn = "sqlite:///elsewhere.db"
        assert app.dsn == "memory://"


def test_a_malformed_dsn_change_is_refused_before_any_io() -> None:
    app = durably.App("memory://")
    with pytest.raises(DsnError):
        app.dsn = "nosuchscheme://x"
    assert app.dsn == "memory://"
