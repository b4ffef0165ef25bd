# Two commands on a fresh machine: `make book` and `make test`. Both set themselves up.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NOTEBOOKS := $(sort $(wildcard book/*.ipynb))

.PHONY: setup book catalogs serve lab lint test test-lib test-notebooks test-site bench clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	@touch $(STAMP)

## make book: execute every notebook and build the site into _build/html (fails on any error or
## warning), then the Chinese editions into _build/html/zh_CN and _build/html/zh_TW from the
## same executed notebooks (tools/editions.py) and the catalogs in locales/
book: $(STAMP)
	rm -rf _build/html _build/jupyter_execute _build/.jupyter_cache
	$(VENV)/bin/jupyter-book build . -W -n --keep-going --path-output .
	$(PY) tools/editions.py build zh_CN zh_TW
	@echo "Built. Open _build/html/index.html, or run 'make serve' and visit http://127.0.0.1:8000"

## make catalogs: after changing English text, refresh locales/zh_CN (changed entries turn fuzzy
## and tests/test_translations.py fails until they are translated again)
catalogs: $(STAMP)
	$(PY) tools/editions.py catalogs

## make serve: serve the built site on 127.0.0.1:8000
serve:
	@test -d _build/html || { echo "No site yet: run 'make book' first"; exit 1; }
	$(PY) -m http.server 8000 --bind 127.0.0.1 --directory _build/html

## make lab: open the notebooks in JupyterLab
lab: $(STAMP)
	$(VENV)/bin/jupyter lab book/

## make lint: formatting, lint rules and the layering of the modules (the first part of
## make test). Fix with `.venv/bin/ruff format .` and `.venv/bin/ruff check --fix .`;
## the layers are the import-linter contract in pyproject.toml (see ARCHITECTURE.md).
lint: $(STAMP)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	PYTHONPATH=$(CURDIR) $(VENV)/bin/lint-imports --no-cache

## make test: lint, the library tests, nbval over every notebook, and the browser tests
test: $(STAMP) lint book test-lib test-notebooks test-site

test-lib: $(STAMP)
	$(PY) -m pytest tests -q --ignore=tests/test_site.py --ignore=tests/test_live_widget.py

test-notebooks: $(STAMP)
	$(PY) -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider $(NOTEBOOKS)

## the browser tests: the built site with no kernel and no network, and the live widget in JupyterLab
test-site: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests/test_site.py tests/test_live_widget.py

## make bench: every benchmarks/*.py (files starting with _ are helpers): speed and
## memory ratios, not part of make test. Runs them all, then fails if any missed its target.
bench: $(STAMP)
	@missed=""; \
	for b in benchmarks/[!_]*.py; do \
		echo "== $$b"; PYTHONPATH=$(CURDIR) $(PY) $$b || missed="$$missed $$b"; \
	done; \
	if [ -n "$$missed" ]; then echo "missed their targets:$$missed"; exit 1; fi

clean:
	rm -rf _build
