"""Load airflow_settings.yaml (Astro CLI format) into the local Airflow with the Airflow CLI:
`airflow connections import`, `airflow variables import`, `airflow pools import`.

    python scripts/load_settings.py [airflow_settings.yaml]
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import tempfile

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]


def convert(settings: dict) -> dict[str, dict]:
    af = (settings or {}).get("airflow") or {}
    connections = {}
    for c in af.get("connections") or []:
        # Astro spells every field conn_<name>; the Airflow import format keeps only conn_type so
        conn = {k[len("conn_"):] if k.startswith("conn_") and k != "conn_type" else k: v
                for k, v in c.items() if k != "conn_id" and v is not None}
        if "extra" in conn and not isinstance(conn["extra"], str):
            conn["extra"] = json.dumps(conn["extra"])
        connections[c["conn_id"]] = conn
    pools = {p["pool_name"]: {"slots": int(p["pool_slot"]), "description": p.get("pool_description", ""),
                              "include_deferred": bool(p.get("include_deferred", False))}
             for p in af.get("pools") or []}
    variables = {v["variable_name"]: v["variable_value"] for v in af.get("variables") or []}
    return {"connections": connections, "pools": pools, "variables": variables}


def metadata_db_url() -> str:
    """The metadata DB's SQLAlchemy URL as Airflow reads it: the environment, else airflow.cfg's
    ``[database] sql_alchemy_conn``, else Airflow's default (``$AIRFLOW_HOME/airflow.db``)."""
    import configparser
    import os

    url = os.environ.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")
    home = pathlib.Path(os.environ.get("AIRFLOW_HOME") or pathlib.Path.home() / "airflow")
    if not url:
        cfg = configparser.ConfigParser(interpolation=None)
        cfg.read(home / "airflow.cfg")
        url = cfg.get("database", "sql_alchemy_conn", fallback="")
    return url or f"sqlite:///{home / 'airflow.db'}"


def secure_metadata_db() -> list[pathlib.Path]:
    """Make a SQLite metadata DB (and its -wal / -shm / -journal files) readable by its owner only
    (0600): it holds the connections (API keys, Fernet-encrypted), Variables and XComs. Run after
    `airflow db migrate` (which creates it with the umask's mode, 0644). Returns the files changed;
    none for a server database."""
    import os

    url = metadata_db_url()
    if not url.startswith("sqlite:"):
        return []
    db = pathlib.Path(url.split(":///", 1)[-1].split("?", 1)[0]) if ":///" in url else None
    if db is None or not db.exists():
        return []
    changed = []
    for f in (db, *(db.with_name(db.name + suffix) for suffix in ("-wal", "-shm", "-journal"))):
        if f.exists():
            os.chmod(f, 0o600)
            changed.append(f)
    return changed


def main(path: str) -> int:
    for f in secure_metadata_db():  # `make airflow-init` runs this right after `airflow db migrate`
        print(f"{f.name}: mode 0600")
    settings = yaml.safe_load(pathlib.Path(path).read_text(encoding="utf-8"))
    parts = convert(settings)
    with tempfile.TemporaryDirectory() as tmp:
        for kind, data in parts.items():
            if not data:
                print(f"{kind}: none in {path}")
                continue
            f = pathlib.Path(tmp) / f"{kind}.json"
            f.write_text(json.dumps(data, indent=2))
            cmd = ["airflow", kind, "import", str(f)]
            if kind == "connections":
                cmd += ["--overwrite"]
            elif kind == "variables":
                cmd += ["--action-on-existing-key", "overwrite"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                sys.stderr.write(f"`{' '.join(cmd[:3])}` failed:\n{proc.stdout}\n{proc.stderr}\n")
                return proc.returncode
            print(f"{kind}: imported {', '.join(sorted(data))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "airflow_settings.yaml")))
