"""Count the HTTP requests the sample night sends to a GCS emulator (ADR 0010's budget on gs://).

Runs the nightly stages in one process (``tests/batch_stages.run_stages``, shard size 5) and the
batch report on a ``gs://`` root served by ``tests/gcs_emulator.py``, twice (a first night, then
a re-run of the same date), counting every request the emulator answers. The checkout to measure
is the argument (so the same script measures another checkout, e.g. main, for a before/after)::

    .venv/bin/python scripts/count_gcs_requests.py [REPO]
"""

from __future__ import annotations

import os
import pathlib
import sys


def main() -> None:
    repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[1]).resolve()
    sys.path[:0] = [str(repo / "plugins"), str(repo)]
    os.chdir(repo)
    import tests.dags.airflow_env  # noqa: F401 - the private AIRFLOW_HOME before any Airflow import
    from tests.gcs_emulator import GcsEmulator, GcsTestRoot

    emulator = GcsEmulator().start()
    os.environ.update(emulator.env)
    from gcp_storage_emulator import server

    count = {"n": 0}
    for method in ("GET", "POST", "DELETE", "PUT", "PATCH"):
        original = getattr(server.RequestHandler, f"do_{method}")

        def counted(handler, _original=original):
            count["n"] += 1
            return _original(handler)

        setattr(server.RequestHandler, f"do_{method}", counted)
    from tests.batch_stages import run_stages

    from docverify.judging.judges import OfflineJudge
    from docverify.reporting import report
    from docverify.stages.common import Batch
    from docverify.storage.store import ArtifactStore

    store = ArtifactStore(GcsTestRoot(emulator, "count").path())
    docs = 0
    for f in sorted((repo / "include" / "samples").iterdir()):
        if f.suffix in (".pdf", ".json") and f.name != "expected_routes.json":
            store.write_bytes(f"incoming/2026-11-20/{f.name}", f.read_bytes())
            docs += f.suffix == ".pdf"
    b = Batch(store=store, ds="2026-11-20", run_id="count")
    try:
        for label in ("first night", "re-run"):
            start = count["n"]
            run_stages(b, OfflineJudge(), shard_size=5, workers=2)
            report.write(b)
            n = count["n"] - start
            print(f"{repo}: {label}: {n} GCS requests for {docs} documents ({n / docs:.2f} per document)")
    finally:
        emulator.stop()


if __name__ == "__main__":
    main()
