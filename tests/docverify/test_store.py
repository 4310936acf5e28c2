"""The artifact store on a local root: atomic writes, atomic create-if-absent, one-request reads,
paths confined to the root, plain URIs (the gs:// side: tests/docverify_airflow/test_gcs_store.py)."""

from __future__ import annotations

import hashlib
import os
import pathlib
import threading

import pytest

from docverify.limits import InputError
from docverify.store import ArtifactStore, OutsideRootError


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
