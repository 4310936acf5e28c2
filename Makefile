# docverify — every target builds what it needs from nothing (python3 + the package index).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
STAMP := $(VENV)/.installed
export PYTHONPATH := $(CURDIR)/plugins:$(CURDIR)

.PHONY: venv test lint bench schemas lock clean

venv: $(STAMP)

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv==0.13.8
	$(UV) pip install --quiet --python $(PY) -r requirements.txt
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check plugins dags tests scripts

schemas: $(STAMP)
	$(PY) scripts/generate_schemas.py

lock: $(STAMP)
	$(UV) pip compile -q requirements.in -o requirements.txt --python-version 3.11

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
