# Two commands on a fresh machine: `make book` and `make test`. Both set themselves up.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# every test run prints its slowest cells or tests, so a CI log says where the time goes
DURATIONS := --durations=25 --durations-min=5

.PHONY: setup lock test-fast fonts corpora language-models book catalogs serve lab lint test test-lib test-notebooks test-site pdf test-pdf bench clean

setup: $(STAMP)

# every package at the exact version and hash of requirements.lock (no .pyc for the packages'
# every file), then the book's own two packages, editable
$(STAMP): requirements.lock pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile --no-deps --require-hashes -r requirements.lock
	$(PY) -m pip install -q --no-compile --no-deps -e .
	@touch $(STAMP)

## make lock: after editing requirements.txt (the human-readable list, with each pin's
## reason), compile requirements.lock from it with uv: every package the book, the tests and
## their workarounds load, pinned exactly with its hashes. FIND_LINKS is where the build
## machines keep the CPU wheel of torch (pip.conf's find-links); the lock names it.
FIND_LINKS ?= /opt/wheels
lock:
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q $$(grep '^uv==' requirements.txt)
	$(VENV)/bin/uv pip compile requirements.txt --quiet --python $(PY) --generate-hashes \
		--find-links $(FIND_LINKS) --emit-find-links --no-emit-package transformer-lib \
		--custom-compile-command "make lock" -o requirements.lock

## make book: execute every chapter with nbval, side by side (pytest-xdist, a chapter per
## worker), into the jupyter-cache (booktools/execute.py, a pytest plugin), then build from
## it, side by side, the site into _build/html and the Chinese editions into
## _build/html/zh_CN and _build/html/zh_TW with the catalogs in locales/
## (booktools/editions.py; each build fails on any error or warning). Under make test,
## every exercise solution also runs after its chapter, in the chapter's kernel (SOLUTIONS=1).
# one torch thread per kernel, one kernel per core
NBVAL := OMP_NUM_THREADS=1 PYDEVD_DISABLE_FILE_VALIDATION=1 $(PY) -m pytest --nbval-lax \
	-n auto --dist loadfile -q -p no:cacheprovider $(DURATIONS)
book: $(STAMP) fonts corpora
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

# the language models' text (transformer_lib/demos/corpora.py): Debian's fortunes-zh (Tang
# poems, Song ci, classical prose) and fortunes (English), read from /usr/share/games/fortunes;
# installed like the font, never downloaded at run time nor committed
CORPORA := /usr/share/games/fortunes/tang300.u8 /usr/share/games/fortunes/literature
corpora:
	@ls $(CORPORA) >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing fortunes-zh and fortunes (the language models' corpora)"; \
			apt-get update -qq && apt-get install -y -qq fortunes-zh fortunes >/dev/null; \
		else \
			echo "the language models need Debian's fortunes-zh and fortunes: install them"; exit 1; \
		fi; }

## make language-models: train the two language models (deterministic, about 250 s of CPU
## each on one core, side by side; their logs hold the times) and write them with their logs
## to book/_static/live/
language-models: $(STAMP) corpora
	OMP_NUM_THREADS=1 $(PY) scripts/train_language_models.py

## make catalogs: after changing English text, refresh locales/zh_CN (changed entries turn fuzzy)
## and seed the new or changed entries of locales/zh_TW from it, fuzzy; tests/test_translations.py
## fails until both are translated and reviewed again
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

# the tests that need the built site (make book) or a browser: make test-site
SITE_TESTS := tests/test_site.py tests/test_site_files.py tests/test_live_widget.py \
	tests/test_live_js.py tests/test_live_pages.py

# -n auto: pytest-xdist, one worker per core; one torch thread per worker
test-lib: $(STAMP) corpora
	OMP_NUM_THREADS=1 $(PY) -m pytest tests -q -n auto $(DURATIONS) $(addprefix --ignore=,$(SITE_TESTS))

## make test-fast: the edit-test loop, about 2 minutes on this 2-core machine when it is idle
## (2m03s at a load of 1.6, about 150 s of CPU; longer while other jobs share the cores):
## lint, then the library's tests, the checkers' and the build machinery's own tests, without
## executing the book, building the site, or starting a browser, a notebook kernel or
## processes, nor any test over about 10 s (those are marked slow), nor reading a built book,
## which may be stale (marked built); make test runs them all
test-fast: $(STAMP) corpora lint
	OMP_NUM_THREADS=1 $(PY) -m pytest tests -q -n auto -p no:cacheprovider -m "not slow and not built" \
		$(addprefix --ignore=,$(SITE_TESTS))

## every notebook and its exercise solutions, without building the site (make test does this as
## part of the book); one chapter: .venv/bin/python -m pytest --nbval-lax --solutions book/03_softmax.ipynb
test-notebooks: $(STAMP) fonts corpora
	$(NBVAL) --solutions book/

## the site tests: the built site's files, the site in Chromium with no kernel and no network,
## and the live widget in JupyterLab;
## three pytest-xdist workers, as a worker spends much of its time waiting on its browser
test-site: $(STAMP)
	$(PY) -m pytest -q -n 3 -p no:cacheprovider $(DURATIONS) $(SITE_TESTS)

## make pdf: the printed book, one PDF per edition, from the built site (make book):
## _build/pdf/transformer-formula-by-formula.{en,zh_CN,zh_TW}.pdf. Chromium prints each
## chapter once and pypdf joins them (booktools/pdf.py); two editions side by side.
## Each is also copied into its edition's site (_build/html/pdf/, zh_CN/pdf/, zh_TW/pdf/).
## Not part of make test: 157 s for the three here, two side by side (210 s one at a time),
## at a load of about 2 on 2 cores; up to 287 s with other work running
pdf: $(STAMP) fonts
	@test -f _build/html/index.html || { echo "No site yet: run 'make book' first"; exit 1; }
	$(PY) -m booktools.pdf --jobs 2
	@# each edition's PDF in its site's pdf/ folder, where the sidebar's PDF link points
	for e in en zh_CN zh_TW; do d=_build/html$$([ $$e = en ] || echo /$$e)/pdf; \
		mkdir -p $$d && cp _build/pdf/transformer-formula-by-formula.$$e.pdf $$d/; done

## make test-pdf: the PDFs against the table of contents (tests/test_pdf.py; skips without them)
test-pdf: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests/test_pdf.py

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
