# Two commands on a fresh machine: `make book` and `make test`. Both set themselves up.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup fonts book catalogs serve lab lint test test-lib test-notebooks test-site bench clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile -r requirements.txt  # no .pyc for the packages' every file
	@touch $(STAMP)

## make book: execute every chapter with nbval, side by side (pytest-xdist, a chapter per
## worker), into the jupyter-cache (booktools/execute.py, a pytest plugin), then build from
## it, side by side, the site into _build/html and the Chinese editions into
## _build/html/zh_CN and _build/html/zh_TW with the catalogs in locales/
## (booktools/editions.py; each build fails on any error or warning). Under make test,
## every exercise solution also runs after its chapter, in the chapter's kernel (SOLUTIONS=1).
# one torch thread per kernel, one kernel per core
NBVAL := OMP_NUM_THREADS=1 PYDEVD_DISABLE_FILE_VALIDATION=1 $(PY) -m pytest --nbval-lax \
	-n auto --dist loadfile -q -p no:cacheprovider
book: $(STAMP) fonts
	rm -rf _build/html _build/jupyter_execute _build/.jupyter_cache _build/.doctrees
	$(NBVAL) $(if $(SOLUTIONS),--solutions) book/
	$(PY) -m booktools.editions build en zh_CN zh_TW
	@echo "Built. Open _build/html/index.html, or run 'make serve' and visit http://127.0.0.1:8000"

# the Chinese editions draw their figures' words in Noto Sans CJK (booktools/figures.py FONTS);
# grep reads all of fc-list's output: with -q it would stop at the first match, and
# fc-list's SIGPIPE would fail the pipe (pipefail) and start an install
fonts:
	@fc-list 2>/dev/null | grep -i "noto sans cjk" >/dev/null || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing fonts-noto-cjk (the Chinese editions' figures need it)"; \
			apt-get update -qq && apt-get install -y -qq fonts-noto-cjk >/dev/null; \
		else \
			echo "the Chinese editions' figures need a CJK font: install fonts-noto-cjk"; exit 1; \
		fi; }

## make catalogs: after changing English text, refresh locales/zh_CN (changed entries turn fuzzy
## and tests/test_translations.py fails until they are translated again)
catalogs: $(STAMP)
	$(PY) -m booktools.editions catalogs

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
	$(VENV)/bin/lint-imports --no-cache

## make test: lint, the book (every notebook executed once, each followed by its exercise
## solutions), the library tests and the browser tests
test: SOLUTIONS = 1
test: $(STAMP) lint book test-lib test-site

# -n auto: pytest-xdist, one worker per core; one torch thread per worker
test-lib: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest tests -q -n auto --ignore=tests/test_site.py --ignore=tests/test_live_widget.py --ignore=tests/test_live_js.py --ignore=tests/test_live_pages.py

## every notebook and its exercise solutions, without building the site (make test does this as
## part of the book); one chapter: .venv/bin/python -m pytest --nbval-lax --solutions book/03_softmax.ipynb
test-notebooks: $(STAMP) fonts
	$(NBVAL) --solutions book/

## the browser tests: the built site with no kernel and no network, and the live widget in JupyterLab;
## three pytest-xdist workers, as a worker spends much of its time waiting on its browser
test-site: $(STAMP)
	$(PY) -m pytest -q -n 3 -p no:cacheprovider tests/test_site.py tests/test_live_widget.py tests/test_live_js.py tests/test_live_pages.py

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
