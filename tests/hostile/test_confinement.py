"""The safe path builder (docverify.storage.paths) as properties: over arbitrary names and ids nothing is
written or read outside the storage root — on a local root and on a gs:// root (the GCS
emulator) — every doc id is a safe, stable path component, and different names never share one."""

from __future__ import annotations

import contextlib
import os
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docverify.stages.common import Batch
from docverify.storage.limits import InputError
from docverify.storage.paths import check_part, doc_id_for, safe_id
from docverify.storage.store import ArtifactStore, OutsideRootError

DS = "2026-11-20"
#: names as an attacker writes them: separators, dots, control characters, unicode, long runs
NAMES = st.one_of(
    st.text(min_size=0, max_size=300),
    st.text(alphabet=st.sampled_from(list("./\\-_ a\x00\n\x7fé名")), min_size=0, max_size=40),
    st.sampled_from(["..", ".", "../../outside", "/etc/passwd", "a/../../b", "...pdf", "a\\..\\b", "-rf",
                     "x" * 300, "\u202eevil.pdf", "a.pdf", "a.PDF", "", "~", "%2e%2e"]),
)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _all_files(top: pathlib.Path) -> set[str]:
    return {os.path.join(d, f) for d, _, files in os.walk(top) for f in files}


@FAST
@given(name=NAMES)
def test_doc_ids_are_safe_stable_components(name):
    doc_id = doc_id_for(name)
    assert safe_id(doc_id) == doc_id == check_part(doc_id) == doc_id_for(name)
    assert doc_id not in (".", "..") and len(doc_id.encode()) <= 100


@FAST
@given(a=NAMES, b=NAMES)
def test_different_names_never_share_a_doc_id(a, b):
    base_a, base_b = a.rsplit("/", 1)[-1], b.rsplit("/", 1)[-1]
    if base_a != base_b:
        assert doc_id_for(a) != doc_id_for(b)


@FAST
@given(name=NAMES, doc=NAMES)
def test_local_root_nothing_outside(tmp_path_factory, name, doc):
    area = tmp_path_factory.mktemp("area")
    root = area / "root"
    root.mkdir()
    store = ArtifactStore(root)
    for rel in (f"runs/{DS}/{name}/bundle.json", f"incoming/{name}", name):
        try:
            store.write_bytes(rel, b"x")
            assert store.read_bytes(rel) == b"x"
        except InputError as exc:
            assert exc.code == "INPUT_UNSAFE_NAME"
        except (IsADirectoryError, NotADirectoryError):
            pass  # a name that is already a folder (or under a file) of this root: inside, refused by the OS
    for fn in (ArtifactStore.packet_rel, ArtifactStore.ground_truth_rel, lambda d: ArtifactStore.run_dir(DS, d)):
        with contextlib.suppress(InputError, IsADirectoryError, NotADirectoryError):
            store.write_bytes(fn(doc), b"y")
    outside = _all_files(area) - _all_files(root)
    assert outside == set()
    for f in _all_files(root):
        assert os.path.realpath(f).startswith(os.path.realpath(root) + os.sep)


@pytest.mark.parametrize("prefix", ["../../outside_batch", "incoming/../../x", "a/\x00/b", "..", "x/" + "y" * 300])
def test_unsafe_batch_prefix_is_a_typed_error(tmp_path, prefix):
    with pytest.raises(InputError) as exc:
        Batch(store=ArtifactStore(tmp_path), ds=DS, prefix=prefix)
    assert exc.value.code == "INPUT_UNSAFE_NAME"


@pytest.mark.parametrize("ds", ["../x", "2026/11/20", "", "a" * 100])
def test_unsafe_date_is_a_typed_error(tmp_path, ds):
    with pytest.raises(InputError):
        Batch(store=ArtifactStore(tmp_path), ds=ds)


def test_leading_slash_prefix_stays_under_the_root(tmp_path):
    b = Batch(store=ArtifactStore(tmp_path), ds=DS, prefix="/etc")
    assert b.incoming == "etc" and b.store.uri(b.incoming).startswith(tmp_path.resolve().as_uri())


def test_sme_review_of_a_traversing_doc_id_writes_nothing_outside(tmp_path):
    from docverify.sme.helper import SMEReviewHelper

    root = tmp_path / "root"
    root.mkdir()
    helper = SMEReviewHelper(root)
    with pytest.raises(InputError):
        helper.save_review("x/../../../outside", agrees=True, reviewer="r")
    assert _all_files(tmp_path) == set()


def test_a_symlinked_folder_inside_the_root_is_not_a_way_out(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.json").write_text("{}")
    os.symlink(outside, root / "runs")
    store = ArtifactStore(root)
    with pytest.raises(OutsideRootError):
        store.read_bytes("runs/secret.json")
    with pytest.raises(OutsideRootError):
        store.write_bytes("runs/new.json", b"x")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.json"]


# gcsfs sends ';' percent-encoded (%3B) and real GCS stores it, but gcp-storage-emulator does not
# find such an object again on download (checked by hand: 'a;b' written, GET → 404): names with ';'
# would fail on the emulator only, at random, so this property leaves them out on the emulator.
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAMES.filter(lambda n: ";" not in n))
def test_gcs_root_nothing_outside(gcs_root, name):
    store = ArtifactStore(gcs_root.path())
    before = set(gcs_root.emulator.object_names())
    for rel in (f"runs/{DS}/{name}/bundle.json", name):
        try:
            store.write_bytes(rel, b"x")
            assert store.read_bytes(rel) == b"x"
        except InputError as exc:
            assert exc.code == "INPUT_UNSAFE_NAME"
    prefix = gcs_root.prefix.strip("/") + "/"
    names = set(gcs_root.emulator.object_names()) - before
    assert all(n.startswith(prefix) for n in names), [n for n in names if not n.startswith(prefix)][:3]
    for n in names:
        parts = n[len(prefix):].split("/")
        assert ".." not in parts and "." not in parts and "" not in parts
