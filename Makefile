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
TODAY := $(shell date -u +%F)
DS ?= $(TODAY)
# `airflow dags test` starts the run at its logical date: today's run gets the current time as its
# logical date (ds stays today), so the UI shows the run's real duration instead of hours since 00:00
RUN_DATE = $(if $(filter $(DS),$(TODAY)),$(shell date -u +%FT%T+00:00),$(DS))
DATA := $(CURDIR)/data
AIRFLOW_STAMP := $(AIRFLOW_HOME)/.initialised

.PHONY: independent-reader not-up venv browser celery-deps ocr-deps test test-fast test-e2e screenshots lint typecheck bench hostile schemas samples examples lock clean airflow-init incoming run up

venv: $(STAMP)

$(STAMP): requirements.txt requirements-overrides.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv==0.13.8
	$(UV) pip install --quiet --python $(PY) -r requirements.txt --override requirements-overrides.txt
	touch $(STAMP)

# Debian's Chromium and its driver for the browser test (tests/e2e); installed once, as root or via sudo
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; else \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; \
	fi

# Debian's Tesseract, the default local OCR engine (ADR 0058); its English model ships in Debian's
# package. Installed once, as root or via sudo (sudo resets the environment: env passes the frontend).
# Where it cannot be installed the night still reads scans, with rapidocr-onnxruntime from the
# pinned requirements (slower; each parse worker warns once): a warning here, not a failure
ocr-deps:
	@if command -v tesseract >/dev/null; then :; else \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		if [ -n "$$SUDO" ] && ! command -v sudo >/dev/null; then \
			echo "make ocr-deps: tesseract-ocr is not installed and this user can install it neither as root nor via sudo;"; \
			echo "  scanned pages will be read with rapidocr-onnxruntime (slower). As root: apt-get install tesseract-ocr"; \
		else \
			$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr >/dev/null \
			|| echo "make ocr-deps: installing tesseract-ocr failed; scanned pages will be read with rapidocr-onnxruntime (slower)"; \
		fi; \
	fi

# Debian's Redis and PostgreSQL for the distributed-executor test (tests/e2e/test_celery_night.py,
# scripts/celery_stack.py); it starts its own instances on loopback, never the packages' services
celery-deps:
	@if command -v redis-server >/dev/null && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then :; else \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server postgresql >/dev/null; \
	fi

test: $(STAMP) browser celery-deps ocr-deps  ## lint, then the whole suite: everything but the real-stack tests on both cores, then the real Airflow stacks and browsers one at a time (pytest exits non-zero when it collects nothing)
	$(VENV)/bin/ruff check plugins dags tests scripts
	$(PY) scripts/check_layers.py
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -m "not e2e" -n 2 --dist load
	$(PY) -m pytest -q -m e2e

# an environment that sets PYTHONDONTWRITEBYTECODE (container images do) would make every process of
# the suites (each xdist worker, parse worker, CLI and Airflow subprocess) compile Airflow,
# pydantic-ai and the project from source again: the test targets keep Python's bytecode cache
test test-fast test-e2e: export PYTHONDONTWRITEBYTECODE :=
test-fast: $(STAMP)  ## the inner loop: everything but the slow tests (no scheduler, no browser), on both cores (pytest-xdist)
	$(VENV)/bin/ruff check plugins dags tests scripts
	$(PY) scripts/check_layers.py
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -m "not slow" -n 2 --dist load

test-e2e: $(STAMP) browser celery-deps  ## the operator's night: real Airflow components + headless Chromium (screenshots in build/e2e/); the Celery night
	$(PY) -m pytest -q tests/e2e

screenshots:  ## the README's screenshots from the last browser test
	cp build/e2e/03_trigger_form_defaults.png build/e2e/05_backfill_form.png build/e2e/07_task_log_lineage.png \
		build/e2e/09_packet_page.png build/e2e/10_review_answered.png \
		build/e2e/12_review_page.png build/e2e/13_refused_shown.png docs/images/

bench: $(STAMP)  ## the figures of the README: parse throughput, classifier accuracy, pipeline throughput, LLM path, jury/second opinion
	$(PY) scripts/bench_parse.py
	$(PY) scripts/bench_classifier.py
	$(PY) scripts/bench_ocr.py
	$(PY) scripts/bench_pipeline.py
	$(PY) scripts/bench_llm.py
	$(PY) scripts/bench_jury.py
	$(PY) scripts/bench_verifiers.py
	$(PY) scripts/bench_end_to_end.py

# V2's independent reader (ADR 0038): retrain it on the tuning parts of ../shared/corpora and calibrate its
# thresholds; tests/docverify/test_independent_reader.py checks that the shipped artefact equals a retrain
independent-reader: $(STAMP)  ## retrain include/models/independent_reader.npz (deterministic)
	$(PY) scripts/train_independent_reader.py

hostile: $(STAMP)  ## the hostile night's figures of the README ("What can go wrong")
	$(PY) scripts/hostile_night.py

# ------------------------------------------------------------------ the nightly DAG, locally
$(AIRFLOW_STAMP): $(STAMP) airflow_settings.yaml scripts/write_airflow_cfg.py
	mkdir -p $(AIRFLOW_HOME)
	$(PY) scripts/write_airflow_cfg.py $(AIRFLOW_HOME)/airflow.cfg
	airflow db migrate > $(AIRFLOW_HOME)/db_migrate.log 2>&1 || (tail -30 $(AIRFLOW_HOME)/db_migrate.log; exit 1)
	$(PY) scripts/load_settings.py airflow_settings.yaml
	touch $(AIRFLOW_STAMP)

airflow-init: $(AIRFLOW_STAMP)

incoming:  ## copy the sample batch into data/incoming/$(DS)/ (inputs are never modified by the DAG)
	mkdir -p $(DATA)/incoming/$(DS)
	cp include/samples/*.pdf include/samples/*.classification.json $(DATA)/incoming/$(DS)/

# `make run` beside `make up` would share one metadata database: up's scheduler would take over the
# run's tasks and fail the night. Refuse, naming the way out (scripts/up.sh writes up.pid).
not-up:
	@if [ -f $(AIRFLOW_HOME)/up.pid ] && kill -0 "$$(cat $(AIRFLOW_HOME)/up.pid)" 2>/dev/null; then \
		echo "make run: \`make up\` is running (pid $$(cat $(AIRFLOW_HOME)/up.pid)) on this Airflow home; its scheduler would take over this run's tasks."; \
		echo "  Run the night from the UI instead (Dags → clinical_doc_verification → Trigger), or stop make up (Ctrl+C) and run make run again."; \
		exit 2; fi

run: not-up airflow-init ocr-deps incoming  ## the DAG on the sample batch, embedded default (no cloud, no LLM)
	airflow dags test clinical_doc_verification $(RUN_DATE) > $(AIRFLOW_HOME)/last_run.log 2>&1 \
		|| (tail -60 $(AIRFLOW_HOME)/last_run.log; echo "the run failed: full log in $(AIRFLOW_HOME)/last_run.log"; exit 1)
	$(PY) scripts/show_report.py $(DATA) $(DS)

up: export DOCVERIFY_DEADLINE_MINUTES ?= 240
up: airflow-init  ## the Airflow UI at http://127.0.0.1:8080, loopback only (login: airflow_home/simple_auth_manager_passwords.json.generated, mode 600)
	exec scripts/up.sh

lint: $(STAMP)  ## ruff, the layer contract of the core (ADR 0039: imports point down, no circle), then mypy
	$(VENV)/bin/ruff check plugins dags tests scripts
	$(PY) scripts/check_layers.py
	$(VENV)/bin/mypy

# mypy over plugins/ and dags/ ([tool.mypy] in pyproject.toml); incremental: .mypy_cache/ keeps a
# warm run to a few seconds
typecheck: $(STAMP)
	$(VENV)/bin/mypy

schemas: $(STAMP)
	$(PY) scripts/generate_schemas.py

examples: $(STAMP)
	$(PY) scripts/make_examples.py

samples: $(STAMP)
	$(PY) scripts/make_samples.py

lock: $(STAMP)
	$(UV) pip compile -q requirements.in -o requirements.txt --python-version 3.11 --override requirements-overrides.txt

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis $(AIRFLOW_HOME)
