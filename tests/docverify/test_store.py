"""The artifact store on a local root: atomic writes, atomic create-if-absent, one-request reads,
paths confined to the root, plain URIs (the gs:// side: tests/docverify_airflow/test_gcs_store.py)."""

from __future__ import annotations

import hashlib
import os
import pathlib
import threading

import pytest

from docverify.storage.limits import InputError
from docverify.storage.store import ArtifactStore, OutsideRootError, lock_name


def test_write_is_atomic_and_leaves_no_temporary_file(tmp_path):
    s = ArtifactStore(tmp_path)
    s.write_json("runs/d/x/result.json", {"a": 1})
    s.write_json("runs/d/x/result.json", {"a": 2})
    assert s.read_json("runs/d/x/result.json") == {"a": 2}
    assert sorted(p.name for p in (tmp_path / "runs" / "d" / "x").iterdir()) == ["result.json"]


def test_create_if_absent_keeps_the_first_writer_even_under_concurrency(tmp_path):
    s = ArtifactStore(tmp_path)
    wins: list[int] = []

    def writer(i: int) -> None:
        if s.write_json("ground_truth/gt_k.json", {"writer": i}, overwrite=False):
            wins.append(i)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and s.read_json("ground_truth/gt_k.json") == {"writer": wins[0]}


def test_a_missing_object_is_none_from_one_read(tmp_path):
    s = ArtifactStore(tmp_path)
    assert s.read_json_if_exists("runs/d/absent/result.json") is None
    s.write_text("a/b.txt", "x")
    assert s.read_bytes("a/b.txt") == b"x" and s.size("a/b.txt") == 1


@pytest.mark.parametrize("rel", ["../outside.json", "runs/../../x.json", "runs/a\x00b.json"])
def test_paths_outside_the_root_or_unsafe_are_refused(tmp_path, rel):
    with pytest.raises((InputError, OutsideRootError, ValueError)):
        ArtifactStore(tmp_path / "root").write_text(rel, "x")
    assert not (tmp_path / "outside.json").exists() and not (tmp_path / "x.json").exists()


def test_a_leading_slash_stays_under_the_root(tmp_path):
    before = pathlib.Path("/etc/hostname").read_bytes() if pathlib.Path("/etc/hostname").exists() else None
    ArtifactStore(tmp_path).write_text("/etc/hostname", "x")
    assert (tmp_path / "etc" / "hostname").read_text() == "x"
    if before is not None:
        assert pathlib.Path("/etc/hostname").read_bytes() == before


def test_a_link_out_of_the_root_is_never_followed(tmp_path):
    root = tmp_path / "root"
    (root / "incoming").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("s")
    os.symlink(tmp_path / "secret.txt", root / "incoming" / "a.pdf")
    with pytest.raises(OutsideRootError, match="symbolic link"):
        ArtifactStore(root).read_bytes("incoming/a.pdf")


def test_uris_are_plain_file_uris_and_listings_filter_by_suffix(tmp_path):
    s = ArtifactStore(tmp_path)
    s.write_json("sme_packets/sme_packet_a.json", {})
    s.write_text("sme_packets/sme_packet_a.html", "<p>")
    assert s.uri("sme_packets/sme_packet_a.json") == (tmp_path / "sme_packets" / "sme_packet_a.json").as_uri()
    assert s.list("sme_packets", ".json") == ["sme_packet_a.json"]
    assert s.sha256("sme_packets/sme_packet_a.html") == hashlib.sha256(b"<p>").hexdigest()


# --------------------------------------------------------------------------- file modes (PHI on a local root)

@pytest.fixture
def permissive_umask():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(p: pathlib.Path) -> int:
    return p.stat().st_mode & 0o777


def test_files_are_created_0600_and_folders_0700_under_a_permissive_umask(tmp_path, permissive_umask):
    """Bundles, results, packets, ground truth, accepted outputs, the cache: every file the store
    writes is 0600 and every folder it makes 0700, though the umask would allow 0644 / 0755."""
    root = tmp_path / "store"
    root.mkdir()
    s = ArtifactStore(root)
    rels = ["runs/2026-11-21/doc1/bundle.json", "runs/2026-11-21/doc1/result.json",
            "runs/2026-11-21/doc1/attempt_0/report.json", "sme_packets/sme_packet_r1.json",
            "ground_truth/gt_r1.json", "accepted/2026-11-21/doc1.json", "cache/llm/k.json",
            "reports/2026-11-21/batch_report.json"]
    for rel in rels:
        s.write_json(rel, {"text": "PHI"})
    s.write_json("ground_truth/gt_r2.json", {"x": 1}, overwrite=False)  # create-if-absent (os.link)
    s.write_json("runs/2026-11-21/doc1/result.json", {"text": "again"})  # a replacement keeps 0600
    for rel in [*rels, "ground_truth/gt_r2.json"]:
        assert _mode(root / rel) == 0o600, rel
    folders = {p for rel in rels for p in (root / rel).parents if p != root and root in p.parents}
    assert folders and all(_mode(d) == 0o700 for d in folders), {str(d): oct(_mode(d)) for d in folders}
    assert _mode(root) == 0o755  # an existing folder (the root) is left as it is


def test_compare_and_swap_writes_are_0600_too(tmp_path, permissive_umask):
    s = ArtifactStore(tmp_path)
    s.write_json("sme_packets/claims/d.json", {"owner": "a"})
    _, version = s.read_versioned("sme_packets/claims/d.json")
    assert s.replace_if("sme_packets/claims/d.json", b'{"owner": "b"}', version)
    claims = tmp_path / "sme_packets" / "claims"
    assert {p.name: _mode(p) for p in claims.iterdir()} == {"d.json": 0o600, lock_name("d.json"): 0o600}
    assert _mode(claims) == 0o700


def test_delete_if_deletes_only_the_version_read(tmp_path):
    """ADR 0030: a conditional delete (a packet's withdrawal) refuses an object that changed or
    went since it was read, and deletes it when it is still that version."""
    s = ArtifactStore(tmp_path)
    rel = "sme_packets/sme_packet_r1.json"
    s.write_json(rel, {"review_status": "pending"})
    _, v1 = s.read_versioned(rel)
    assert s.replace_if(rel, b'{"review_status": "reviewed"}\n', v1)  # the SME's answer
    assert not s.delete_if(rel, v1) and s.read_json(rel) == {"review_status": "reviewed"}
    _, v2 = s.read_versioned(rel)
    assert s.delete_if(rel, v2) and s.read_versioned(rel) is None
    assert not s.delete_if(rel, v2)  # gone: False, no error
    assert s.list("sme_packets") == []  # the lock file is hidden from listings
    with pytest.raises(InputError):
        s.delete_if("", v2)


def test_delete_if_waits_for_a_compare_and_swap_in_progress(tmp_path, monkeypatch):
    """The delete and a concurrent replace_if of the same version are serialised by the lock:
    exactly one of them wins, whichever starts first."""
    import docverify.storage.store as store_mod

    s = ArtifactStore(tmp_path)
    rel = "sme_packets/sme_packet_r1.json"
    s.write_json(rel, {"review_status": "pending"})
    _, v1 = s.read_versioned(rel)
    real_replace, entered = os.replace, threading.Event()

    def slow_replace(src, dst):  # a slow store: the swap holds the lock for a while
        entered.set()
        threading.Event().wait(0.3)
        real_replace(src, dst)

    monkeypatch.setattr(store_mod.os, "replace", slow_replace)
    results: dict[str, bool] = {}
    t = threading.Thread(target=lambda: results.setdefault("replace", s.replace_if(rel, b'{"r": 1}\n', v1)))
    t.start()
    assert entered.wait(5)
    results["delete"] = s.delete_if(rel, v1)
    t.join()
    assert results == {"replace": True, "delete": False} and s.read_bytes(rel) == b'{"r": 1}\n'


def test_the_metadata_db_is_made_owner_only(tmp_path, monkeypatch, permissive_umask):
    """scripts/load_settings.py (run by `make airflow-init` after `airflow db migrate`) makes the
    SQLite metadata DB (connections' secrets, XComs) and its journal files 0600."""
    import importlib.util

    repo = pathlib.Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("load_settings", repo / "scripts" / "load_settings.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    home = tmp_path / "airflow_home"
    home.mkdir()
    for name in ("airflow.db", "airflow.db-wal"):
        (home / name).write_bytes(b"")
        os.chmod(home / name, 0o644)
    monkeypatch.setenv("AIRFLOW_HOME", str(home))
    monkeypatch.delenv("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", raising=False)
    assert mod.secure_metadata_db() == [home / "airflow.db", home / "airflow.db-wal"]
    assert _mode(home / "airflow.db") == _mode(home / "airflow.db-wal") == 0o600
    other = tmp_path / "elsewhere.db"
    other.write_bytes(b"")
    monkeypatch.setenv("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{other}")
    assert mod.secure_metadata_db() == [other] and _mode(other) == 0o600
    monkeypatch.setenv("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "postgresql://u@h/db")
    assert mod.secure_metadata_db() == []  # a server database: nothing local to protect
