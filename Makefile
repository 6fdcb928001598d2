# Set-up and the everyday commands. `make demo` and `make test` install what they need.
PYTHON ?= python3
# PyTorch's pin: a CPU build where the index serves one (the project's build machines take
# it from local disk), else whatever build the index has. Another: make install TORCH=torch
# (docs/install.md)
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO := configs/tiny.toml

# An AVX2-only CPU as PyTorch, oneDNN and MKL see one, on any x86 CPU (docs/development.md):
# what runs under it is measured by scripts/cpu_emulation.py
AVX2_ONLY := ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2
# the tests whose paths depend on the CPU's instructions: precision, the step, its profile
CPU_TESTS := tests/test_step.py tests/test_mixed_precision.py tests/test_onednn.py

.PHONY: install browser demo test test-avx2 lint format cli-docs splitters clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check "$(TORCH)"
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[dev]"
	touch $(STAMP)

demo: install
	$(BIN)/translator prepare -c $(DEMO)
	$(BIN)/translator train -c $(DEMO) --overwrite
	$(BIN)/translator translate -c $(DEMO) "Hello." "I have to go to sleep." "Where is the station?"
	$(BIN)/translator eval -c $(DEMO)

# The page tests' browser (tests/test_page.py, scripts/load_test.py --mode page): the system's
# Chromium and a CJK font, installed with apt where it can be (as root). Without them the
# page tests skip and say why. Matplotlib's font list is made again to see the new font.
browser:
	@if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	        && { apt-get install -y -q chromium fonts-noto-cjk >/dev/null 2>&1 \
	             || { apt-get update -q >/dev/null 2>&1 \
	                  && apt-get install -y -q chromium fonts-noto-cjk >/dev/null 2>&1; }; }; then \
	        rm -rf "$${XDG_CACHE_HOME:-$$HOME/.cache}/matplotlib"; \
	    else \
	        echo "make: Chromium could not be installed (apt-get install chromium needs root): the page tests will skip"; \
	    fi; \
	fi

# one pytest-xdist worker per core; tests/conftest.py gives each worker its share of threads.
# Tests marked `inductor` (code generated and compiled for this CPU) run in test-avx2.
test: install browser
	$(BIN)/pytest -q -n auto --dist worksteal -m "not inductor"

# the CPU-dependent tests again (the inductor-compiled step among them), on this CPU made
# to behave as an AVX2-only one
test-avx2: install
	env $(AVX2_ONLY) $(BIN)/pytest -q -n auto --dist worksteal $(CPU_TESTS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# docs/cli.md, the command-line reference, written again from the CLI's help
# (translator/cli/reference.py); tests/test_cli_reference.py fails until it is
cli-docs: install
	$(BIN)/python -c 'import pathlib, translator.cli.reference as r; pathlib.Path("docs/cli.md").write_text(r.reference(), encoding="utf-8")'

# the sentence splitters document mode was chosen from, measured on WMT lines (docs/translating.md)
splitters: install
	$(BIN)/pip install --quiet --disable-pip-version-check pysbd sentence-splitter
	$(BIN)/python scripts/studies/splitters.py

clean:
	rm -rf $(VENV) runs data/prepared .pytest_cache .ruff_cache .import_linter_cache
