"""Claims on SME packets: one run at a time has a packet open; released or expired claims are
taken over; nobody else's claim is released."""

import datetime as dt
import threading

from docverify.sme_claims import claim, current_claim, is_free, release
from docverify.store import ArtifactStore

T0 = dt.datetime(2026, 11, 20, 2, 0, tzinfo=dt.UTC)
H = dt.timedelta(hours=72)


def test_claim_is_exclusive_until_released(tmp_path):
    store = ArtifactStore(tmp_path)
    assert claim(store, "doc", "run1", H, now=T0)
    assert claim(store, "doc", "run1", H, now=T0)  # the same run again (a task retry)
    assert not claim(store, "doc", "run2", H, now=T0 + dt.timedelta(hours=1))
    assert not release(store, "doc", "run2", "not mine")  # someone else's claim stays
    assert release(store, "doc", "run1", "answered")
    assert current_claim(store, "doc")["reason"] == "answered"
    assert claim(store, "doc", "run2", H, now=T0 + dt.timedelta(hours=2))
    assert current_claim(store, "doc")["owner"] == "run2"


def test_claim_expires_after_its_timeout_plus_margin(tmp_path):
    store = ArtifactStore(tmp_path)
    assert claim(store, "doc", "run1", H, now=T0)
    assert not claim(store, "doc", "run2", H, now=T0 + H)  # within the margin
    assert claim(store, "doc", "run2", H, now=T0 + H + dt.timedelta(hours=1, seconds=1))
    assert not release(store, "doc", "run1", "late")  # the first run lost it


def test_unreadable_expiry_never_locks_a_packet(tmp_path):
    store = ArtifactStore(tmp_path)
    store.write_json("sme_packets/claims/doc.json", {"owner": "x", "expires_at": "garbage"})
    assert is_free(current_claim(store, "doc"), T0)
    assert claim(store, "doc", "run2", H, now=T0)


def test_concurrent_claims_have_exactly_one_winner(tmp_path):
    store = ArtifactStore(tmp_path)
    wins: list[str] = []
    barrier = threading.Barrier(8)

    def go(i):
        barrier.wait()
        if claim(store, "doc", f"run{i}", H, now=T0):
            wins.append(f"run{i}")

    threads = [threading.Thread(target=go, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and current_claim(store, "doc")["owner"] == wins[0]
