"""Write the local Airflow home's airflow.cfg with the project's folders and no examples.

`make` exports the same settings as environment variables; this file makes them hold for
anyone who only sets AIRFLOW_HOME (the README's exports), e.g. to run `airflow dags test` or
`airflow backfill create` by hand. An existing file keeps its other sections and keys: only the
keys below are set (Airflow fills every missing key with its default). The secrets Airflow
writes into a config file it creates itself (the Fernet key for connections and the JWT secret
that the scheduler, api-server and task processes must share) are generated here when missing;
the file is readable by its owner only."""

from __future__ import annotations

import base64
import configparser
import os
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]

SETTINGS = {
    "core": {
        "dags_folder": str(REPO / "dags"),
        "plugins_folder": str(REPO / "plugins"),
        "load_examples": "False",
        "dags_are_paused_at_creation": "True",
    },
    # Lineage (ADR 0040, docs/lineage.md): the project's extractor gives its tasks their datasets
    # and facets; task source code never travels in an event.
    "openlineage": {
        "extractors": "docverify_airflow.lineage.extractor.DocverifyExtractor",
        "disable_source_code": "True",
        # emit from a thread of the task process, not a fork of it: a fork per event copied a task
        # process and re-imported the transport in each child (scripts/bench_night.py --lineage)
        "execute_in_thread": "True",
    },
}

#: Lineage defaults, kept when the file (or the deployment) says otherwise: events in the task logs
#: (the console transport) and the namespace of the project's jobs. A backend instead: e.g.
#: AIRFLOW__OPENLINEAGE__TRANSPORT='{"type": "http", "url": "http://marquez:5000"}' (docs/lineage.md).
LINEAGE_DEFAULTS = {
    "openlineage": {"transport": '{"type": "console"}', "namespace": "docverify"},
}

#: Memory (ADR 0017): set when the file does not say otherwise (a value already there is kept).
#: The LocalExecutor forks all ``parallelism`` workers when it starts (default 32, each a copy of
#: the scheduler); 8 task slots are plenty for one machine's nights (the llm pool has 4). Two DAG
#: files need one parsing process (default 2). scripts/bench_memory.py measures the difference.
LEAN_DEFAULTS = {
    "core": {"parallelism": "8"},
    "dag_processor": {"parsing_processes": "1"},
    "api": {"workers": "1"},  # the default, written so a copy of this file shows the choice
}


def write(path: pathlib.Path) -> None:
    cfg = configparser.ConfigParser(interpolation=None)
    if path.exists():
        cfg.read(path)
    for section, values in SETTINGS.items():
        if not cfg.has_section(section):
            cfg.add_section(section)
        for key, value in values.items():
            cfg.set(section, key, value)
    for section, values in (*LEAN_DEFAULTS.items(), *LINEAGE_DEFAULTS.items()):
        if not cfg.has_section(section):
            cfg.add_section(section)
        for key, value in values.items():
            if not cfg.get(section, key, fallback=""):
                cfg.set(section, key, value)
    secrets = {("core", "fernet_key"): lambda: base64.urlsafe_b64encode(os.urandom(32)).decode(),
               ("api_auth", "jwt_secret"): lambda: base64.b64encode(os.urandom(16)).decode()}
    for (section, key), make in secrets.items():
        if not cfg.has_section(section):
            cfg.add_section(section)
        if not cfg.get(section, key, fallback=""):
            cfg.set(section, key, make())
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        cfg.write(fh)
    os.chmod(path, 0o600)


if __name__ == "__main__":
    write(pathlib.Path(sys.argv[1]))
    print(f"wrote {sys.argv[1]}")
