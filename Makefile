# The README's two commands: `make book` and `make test`. Both install into .venv if needed.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PROFILE ?= full
BENCH_ARGS ?=
STAMP := $(VENV)/.installed-stamp

.PHONY: install html book test unit notebooks browser nbval-reference bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -c "import torch, redlib, jupyter_book, papermill, nbval"
	touch $(STAMP)

install: $(STAMP)

## make html: the committed experiment pages as HTML, the reading pages executed from their results (a minute or two);
## nothing is trained
html: $(STAMP)
	$(PY) -m redlib book --no-execute

## make book [PROFILE=smoke]: execute every notebook with the profile and build the HTML book (strict)
book: $(STAMP)
	$(PY) -m redlib book --profile $(PROFILE)

## make test: unit tests, every notebook under the smoke profile checked by nbval, strict smoke book build, and the
## built smoke book checked page by page in headless Chromium (screenshots in _build/screenshots/)
test: $(STAMP) unit notebooks browser

unit: $(STAMP)
	$(PY) -m pytest -q tests --ignore=tests/browser --ignore=tests/smoke

# needs Debian's chromium and chromium-driver (.ci/run installs them); reads the smoke book `notebooks` built
browser: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests/browser

# nbval re-executes the committed smoke notebooks (tests/nbval/) and compares each cell marked
# NBVAL_CHECK_OUTPUT with the output committed there, decimal numbers masked; tests/smoke then compares the smoke
# run's numbers (results/smoke/) with the reference's (tests/nbval/results/) within a stated tolerance, and trains
# the smoke MNIST and robustness pages again on the kernel path this CPU does not take, to show that both pass
notebooks: $(STAMP)
	$(PY) -m redlib book --profile smoke
	$(PY) -m pytest -q -p no:cacheprovider --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg tests/nbval/*.ipynb
	$(PY) -m pytest -q -p no:cacheprovider tests/smoke

## make nbval-reference: after a change meant to move numbers, execute the smoke notebooks and commit them as nbval's reference
## (from an empty stage cache, as a fresh clone's `make test` runs them: stages cached under other conditions stay out);
## no compared output depends on the bench's file (the cost page's peak memory, read from it, is masked by the
## sanitizer and its verdict is "not comparable"), so a bench run never needs a new reference
nbval-reference: $(STAMP)
	cache=$$(mktemp -d) && REDLIB_CACHE=$$cache $(PY) -m redlib book --profile smoke && rm -rf $$cache
	mkdir -p tests/nbval && rm -f tests/nbval/*.ipynb tests/nbval/bench.sha256 && cp _build/smoke/book/*.ipynb tests/nbval/
	rm -rf tests/nbval/results && $(PY) -m redlib.book.numbers results/smoke tests/nbval/results

## make bench: speed and memory of the pipeline on this machine (long: it runs the full profile cold)
## make bench BENCH_ARGS="--notebooks task1_addition": re-time one page and update its entry
bench: $(STAMP)
	$(PY) -m redlib bench $(BENCH_ARGS)

clean:
	rm -rf _build cache results/smoke
