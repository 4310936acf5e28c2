"""Ids at the length limit (ADR 0033): a path component may have 255 bytes (``check_part``), and
the store derives names from an object's name — the lock file of a compare-and-swap, a withdrawn
copy. Every derived name is bounded (a hash, not the name), so whatever can be created can also be
claimed, released, answered and withdrawn; an id too long for its own object is a typed
refusal (``INPUT_UNSAFE_NAME``) before anything is written — never ``ENAMETOOLONG`` half-way.

The lengths: a claim ``sme_packets/claims/<key>.json`` holds keys up to 250 bytes, a packet
``sme_packet_<key>.json`` keys up to 239; a doc id of an accepted record ``<id>.json`` up to 250."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from docverify.sme.answer import ReviewAnswer, save_answer
from docverify.sme.claims import claim, current_claim, release
from docverify.sme.ground_truth import save_review
from docverify.sme.packets import build_packet, load_packet, write_packet
from docverify.stages.common import Batch
from docverify.stages.routes import withdraw
from docverify.storage.limits import InputError
from docverify.storage.paths import MAX_PART_BYTES, bounded_part
from docverify.storage.store import LOCK_PREFIX, ArtifactStore, lock_name

DS = "2026-11-20"
NOW = dt.datetime(2026, 11, 20, 8, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


def key_of(n_bytes: int, char: str = "x") -> str:
    """A review key of exactly ``n_bytes`` UTF-8 bytes: the night, ``char`` repeated (a 2-byte
    ``é`` too), ASCII padding, 10 hex digits — the shape of ``<night>_<doc_id>_<sha>``."""
    head, tail = f"{DS}_", "_0123456789"
    room = n_bytes - len(head) - len(tail)
    body = char * (room // len(char.encode()))
    body += "y" * (room - len(body.encode()))
    key = head + body + tail
    assert len(key.encode()) == n_bytes
    return key


def _files(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


@pytest.mark.parametrize("n", [1, 200, 234, 235, 250, MAX_PART_BYTES])
@pytest.mark.parametrize("char", ["x", "é", "名"])
def test_an_object_of_any_name_length_can_be_replaced_and_deleted(tmp_path, n, char):
    """The store's compare-and-swap on an object whose name has ``n`` bytes (255: the most a
    folder entry may have): write, replace_if, delete_if all work; the lock file's name has 53
    bytes whatever the object's (it had ``n`` + 21: ENAMETOOLONG past 234)."""
    name = (char * n)[: n // len(char.encode())]
    name += "z" * (n - len(name.encode()))
    store = ArtifactStore(tmp_path)
    rel = f"objects/{name}"
    assert store.write_bytes(rel, b"v1")
    data, version = store.read_versioned(rel)
    assert store.replace_if(rel, b"v2", version)
    assert not store.replace_if(rel, b"v3", version)  # a stale version still loses
    _, v2 = store.read_versioned(rel)
    assert store.delete_if(rel, v2) and store.read_versioned(rel) is None
    locks = [f for f in os.listdir(tmp_path / "objects") if f.startswith(LOCK_PREFIX)]
    assert locks == [lock_name(name)] and len(locks[0].encode()) == 53
    assert store.list("objects") == []  # the lock file is hidden from listings


def test_lock_names_of_different_objects_differ():
    names = ["a", "b", "x" * 255, "x" * 254 + "y", "é" * 127]
    assert len({lock_name(n) for n in names}) == len(names)


@pytest.mark.parametrize("char", ["x", "é"])
def test_a_claim_at_the_longest_key_is_claimed_released_and_taken_over(tmp_path, char):
    """Issue 33's case: a claim key of 250 bytes (its file name: 255) is claimed, released, claimed
    again by another run and released — no ENAMETOOLONG out of the release."""
    store = ArtifactStore(tmp_path)
    key = key_of(250, char)
    assert claim(store, key, "run-1", HOUR, now=NOW)
    assert not claim(store, key, "run-2", HOUR, now=NOW)  # held
    assert release(store, key, "run-1", "answered", now=NOW)
    assert current_claim(store, key)["released"] is True
    assert claim(store, key, "user:dr.a", HOUR, now=NOW)  # a released claim is taken over (compare-and-swap)
    assert release(store, key, "user:dr.a", "answered", now=NOW)


@pytest.mark.parametrize("n", [251, MAX_PART_BYTES])
def test_a_key_too_long_for_its_claim_is_a_typed_refusal_before_anything_is_written(tmp_path, n):
    store = ArtifactStore(tmp_path)
    key = key_of(n)
    for call in (lambda: claim(store, key, "run-1", HOUR, now=NOW), lambda: release(store, key, "run-1", "x")):
        with pytest.raises(InputError) as exc:
            call()
        assert exc.value.code == "INPUT_UNSAFE_NAME"
    assert _files(tmp_path) == []


def _packet(key: str):
    """A packet of a document that could not be processed (no classification to agree with)."""
    return build_packet(doc_id="d", pdf_path=f"incoming/{DS}/d.pdf", total_pages=1, bundle_path="", result=None,
                        error={"error": "CORRUPT", "message": "d.pdf could not be parsed"}, run_id="run1",
                        review_id=key)


@pytest.mark.parametrize("char", ["x", "é"])
def test_a_packet_at_the_longest_key_is_claimed_answered_twice_and_released(tmp_path, char):
    """A packet key of 239 bytes (its file: 255): written, rewritten pending by a re-run (a
    compare-and-swap), claimed, answered through the shared answer rules (Cannot classify), answered
    again (ground truth version 2), released."""
    store = ArtifactStore(tmp_path)
    key = key_of(239, char)
    assert write_packet(store, _packet(key))[1] == "written"
    changed = _packet(key).model_copy(update={"run_id": "run2", "error": {"error": "CORRUPT", "message": "again"}})
    assert write_packet(store, changed)[1] == "written"  # replace_if: the lock beside a 255-byte name
    assert claim(store, key, "user:dr.a", HOUR, now=NOW)
    record, _ = save_answer(store, key, ReviewAnswer(choice="Cannot classify", unclassifiable_reason="unreadable"),
                              reviewer="dr.a")
    assert record.ground_truth_source == "SME_UNCLASSIFIABLE" and (tmp_path / "ground_truth" / f"gt_{key}.json").exists()
    save_review(store, key, agrees=False, corrected_dominant_type="Clinical Note", reviewer="dr.b")
    assert (tmp_path / "ground_truth" / f"gt_{key}.v2.json").exists()
    packet = load_packet(store, key)
    assert packet.review_status == "reviewed" and packet.ground_truth_version == 2
    assert release(store, key, "user:dr.a", "answered", now=NOW)


def test_a_key_too_long_for_a_packet_is_a_typed_refusal_before_anything_is_written(tmp_path):
    store = ArtifactStore(tmp_path)
    key = key_of(MAX_PART_BYTES)
    with pytest.raises(InputError) as exc:
        write_packet(store, _packet(key))
    assert exc.value.code == "INPUT_UNSAFE_NAME"
    with pytest.raises(InputError):
        save_answer(store, key, ReviewAnswer(choice="Cannot classify", unclassifiable_reason="unreadable"),
                    reviewer="dr.a")
    assert _files(tmp_path) == []


def test_the_longest_packet_and_accepted_record_are_withdrawn_again_and_again(tmp_path):
    """Withdrawal (a re-run moving a stale output aside) of a packet with a 239-byte key and of an
    accepted record with a 250-byte doc id: the copy's name (``sme_packet_<key>.2.json``,
    ``accepted_<id>.json``) would pass 255 bytes; it keeps a cut key and a hash of it, the record
    inside names the key; the object itself is deleted (its compare-and-swap lock fits)."""
    b = Batch(store=ArtifactStore(tmp_path), ds=DS, run_id="rerun")
    rs = b.rs
    key = key_of(239)
    copies = []
    for _ in range(3):  # written, withdrawn; written again by a later run, withdrawn again …
        write_packet(rs, _packet(key))
        target = withdraw(b, rs.packet_rel(key), "sme_packet", key, "escalated again")
        assert target is not None and not (tmp_path / rs.packet_rel(key)).exists()
        copies.append(target)
    assert len(set(copies)) == 3 and all(len(c.rsplit("/", 1)[-1].encode()) <= MAX_PART_BYTES for c in copies)
    assert copies[0].endswith(f"/sme_packet_{key}.json")  # a name that fits is kept as it is
    records = [json.loads((tmp_path / c).read_text()) for c in copies]
    assert {r["doc_id"] for r in records} == {key} and all(r["record"]["review_id"] == key for r in records)
    doc_id = "d" * 250
    rs.write_json(rs.accepted_rel(doc_id), {"doc_id": doc_id})
    target = withdraw(b, rs.accepted_rel(doc_id), "accepted", doc_id, "its PDF is gone")
    assert target is not None and not (tmp_path / rs.accepted_rel(doc_id)).exists()
    assert json.loads((tmp_path / target).read_text())["doc_id"] == doc_id


def test_bounded_names_fit_keep_short_names_and_stay_distinct():
    assert bounded_part("sme_packet_k", ".json") == "sme_packet_k.json"
    long_a, long_b = "sme_packet_" + "x" * 255, "sme_packet_" + "x" * 254 + "y"
    for stem in (long_a, long_b, "accepted_" + "é" * 127):
        for suffix in (".json", ".2.json", ".17.json"):
            name = bounded_part(stem, suffix)
            assert len(name.encode()) <= MAX_PART_BYTES and name.endswith(suffix)
            name.encode("utf-8")  # never half a character
    assert bounded_part(long_a, ".json") != bounded_part(long_b, ".json")
