"""`make bench-peers`: durably's Worker against PgQueuer, SAQ and arq on the same servers.

Runs in a virtual environment of its own (`.venv-peers`, pinned peers from
`benchmarks/peers/requirements.txt`), so the peers never enter durably's dependencies.
"""
