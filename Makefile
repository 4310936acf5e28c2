# docverify — every target builds what it needs from nothing (python3 + the package index).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
STAMP := $(VENV)/.installed
export PYTHONPATH := $(CURDIR)/plugins:$(CURDIR)
# The local Airflow lives inside the repository (git-ignored); SQLite, no examples.
export AIRFLOW_HOME := $(CURDIR)/airflow_home
export AIRFLOW__CORE__DAGS_FOLDER := $(CURDIR)/dags
export AIRFLOW__CORE__PLUGINS_FOLDER := $(CURDIR)/plugins
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION := True
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
DS ?= $(shell date -u +%F)
DATA := $(CURDIR)/data
AIRFLOW_STAMP := $(AIRFLOW_HOME)/.initialised

.PHONY: venv test lint bench schemas samples examples lock clean airflow-init incoming run up

venv: $(STAMP)

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv==0.13.8
	$(UV) pip install --quiet --python $(PY) -r requirements.txt
	touch $(STAMP)

test: $(STAMP)  ## lint, then the whole suite (pytest exits non-zero when it collects nothing)
	$(VENV)/bin/ruff check plugins dags tests scripts
	$(PY) -m pytest -q

bench: $(STAMP)  ## the figures of the README: parse throughput, classifier accuracy, pipeline throughput, LLM path, jury/second opinion
	$(PY) scripts/bench_parse.py
	$(PY) scripts/bench_classifier.py
	$(PY) scripts/bench_pipeline.py
	$(PY) scripts/bench_llm.py
	$(PY) scripts/bench_jury.py

# ------------------------------------------------------------------ the nightly DAG, locally
$(AIRFLOW_STAMP): $(STAMP) airflow_settings.yaml
	mkdir -p $(AIRFLOW_HOME)
	airflow db migrate > $(AIRFLOW_HOME)/db_migrate.log 2>&1 || (tail -30 $(AIRFLOW_HOME)/db_migrate.log; exit 1)
	$(PY) scripts/load_settings.py airflow_settings.yaml
	touch $(AIRFLOW_STAMP)

airflow-init: $(AIRFLOW_STAMP)

incoming:  ## copy the sample batch into data/incoming/$(DS)/ (inputs are never modified by the DAG)
	mkdir -p $(DATA)/incoming/$(DS)
	cp include/samples/*.pdf include/samples/*.classification.json $(DATA)/incoming/$(DS)/

run: airflow-init incoming  ## the DAG on the sample batch, embedded default (no cloud, no LLM)
	airflow dags test clinical_doc_verification $(DS) > $(AIRFLOW_HOME)/last_run.log 2>&1 \
		|| (tail -60 $(AIRFLOW_HOME)/last_run.log; echo "the run failed: full log in $(AIRFLOW_HOME)/last_run.log"; exit 1)
	$(PY) scripts/show_report.py $(DATA) $(DS)

up: airflow-init  ## the Airflow UI at http://localhost:8080 (login: see airflow_home/simple_auth_manager_passwords.json.generated)
	airflow standalone

lint: $(STAMP)
	$(VENV)/bin/ruff check plugins dags tests scripts

schemas: $(STAMP)
	$(PY) scripts/generate_schemas.py

examples: $(STAMP)
	$(PY) scripts/make_examples.py

samples: $(STAMP)
	$(PY) scripts/make_samples.py

lock: $(STAMP)
	$(UV) pip compile -q requirements.in -o requirements.txt --python-version 3.11

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis $(AIRFLOW_HOME)
