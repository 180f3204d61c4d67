"""The ``durably demo``: runs of pydantic-ai agents made durable with `DurableAgent`, for
several tenants, over an embedded SQLite file; a worker process killed mid-run, and a
second one finishing every run without repeating a paid model request. Needs the
``pydantic-ai`` extra. See `durably.demo.scenario` and ``docs/cli.md``."""
