# Every target creates .venv when it is missing and installs the project into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs bench bench-peers fuzz clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[all]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/durably demo

test: $(STAMP)
	$(BIN)/pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python dev/layers.py

# The docs site, built strictly: a broken link or a docstring mkdocstrings cannot read fails.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The lockstep model tests (tests/model) with a large random budget; CI runs them small and
# derandomized. A failure prints a @reproduce_failure blob to replay it.
FUZZ_EXAMPLES ?= 300
FUZZ_STEPS ?= 60
fuzz: $(STAMP)
	DURABLY_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) DURABLY_FUZZ_STEPS=$(FUZZ_STEPS) \
		$(BIN)/pytest -q -p no:cacheprovider tests/model -o timeout=0

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# durably's Worker against PgQueuer, SAQ and arq, pinned in a virtual environment of its
# own so the peers never become durably's dependencies.
PEERS_VENV := .venv-peers
bench-peers:
	test -d $(PEERS_VENV) || $(PY) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install --quiet -r benchmarks/peers/requirements.txt -e '.[postgres,redis]'
	$(PEERS_VENV)/bin/python -m benchmarks.peers

clean:
	rm -rf $(VENV) $(PEERS_VENV) site durably-demo.db*
