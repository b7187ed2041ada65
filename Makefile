# Two commands do all set-up: `make run` (the whole system) and `make test`. Both install the exact
# versions in requirements.lock / requirements-dev.lock; `make lock` rewrites those from pyproject.toml.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
ARGS   ?=
PYTEST_ARGS ?=

.PHONY: run test deploy-check lint lock clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed-run: requirements.lock pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q -r requirements.lock
	$(PY) -m pip install -q --no-deps -e .
	touch $@

$(VENV)/.installed-dev: requirements-dev.lock pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q -r requirements-dev.lock
	$(PY) -m pip install -q --no-deps -e .
	touch $@ $(VENV)/.installed-run

run: $(VENV)/.installed-run
	scripts/system-packages
	$(PY) manage.py up $(ARGS)

test: $(VENV)/.installed-dev
	scripts/system-packages --test
	$(PY) -m ruff check --no-cache .
	$(PY) -m ruff format --no-cache --check .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m mypy
	$(PY) -m pytest $(PYTEST_ARGS)

# The image built, the compose stack run on real papers and compared with the same conversions here, then
# removed (deploy/check.py; docs/deploy.md). Installs and starts a Docker engine where none answers.
deploy-check: $(VENV)/.installed-run
	scripts/system-packages
	$(PY) deploy/check.py $(ARGS)

lint: $(VENV)/.installed-dev
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

lock: | $(VENV)/bin/python
	$(PY) scripts/lock

clean:
	rm -rf $(VENV) var/staticfiles
