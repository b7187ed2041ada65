# Two commands do all set-up: `make run` (the whole system) and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
ARGS   ?=
PYTEST_ARGS ?=

.PHONY: run test lint format clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed-run: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q -e ".[dev]"
	touch $@ $(VENV)/.installed-run

run: $(VENV)/.installed-run
	scripts/system-packages
	$(PY) manage.py up $(ARGS)

test: $(VENV)/.installed-dev
	scripts/system-packages --test
	$(PY) -m ruff check --no-cache .
	$(PY) -m ruff format --no-cache --check .
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.installed-dev
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

clean:
	rm -rf $(VENV) var/staticfiles
