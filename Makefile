# The two commands of the README. Each creates (or reuses) ./.venv and installs what it needs.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-16)
BIN := $(VENV)/bin

.PHONY: demo test lint bench clean browser

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -e '.[dev]'
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

demo: $(STAMP)
	$(BIN)/eventloom --data-dir .eventloom-demo demo

# The web view's tests drive Debian's chromium; a machine without it gets it from Debian's packages.
browser:
	@command -v chromium >/dev/null || { echo "installing Debian's chromium for the web view's tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

test: $(STAMP) browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/append.py

clean:
	rm -rf $(VENV) .eventloom-demo .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
