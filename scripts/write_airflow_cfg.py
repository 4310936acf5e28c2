"""Write the local Airflow home's airflow.cfg with the project's folders and no examples.

`make` exports the same settings as environment variables; this file makes them hold for
anyone who only sets AIRFLOW_HOME (the README's exports), e.g. to run `airflow dags test` or
`airflow backfill create` by hand. An existing file keeps its other sections and keys: only the
keys below are set (Airflow fills every missing key with its default)."""

from __future__ import annotations

import configparser
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
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        cfg.write(fh)


if __name__ == "__main__":
    write(pathlib.Path(sys.argv[1]))
    print(f"wrote {sys.argv[1]}")
