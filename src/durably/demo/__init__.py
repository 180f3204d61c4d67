"""The ``durably demo``: agent runs of several tenants as durable workflows over an
embedded SQLite file, a worker process killed mid-run, and a second one finishing every
run without repeating a paid step. See `durably.demo.scenario` and ``docs/cli.md``."""
