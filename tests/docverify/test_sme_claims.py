"""Claims on SME packets: one run at a time has a packet open; released or expired claims are
taken over; nobody else's claim is released."""

import datetime as dt
import threading

from docverify.sme.claims import claim, current_claim, is_free, release
from docverify.storage.store import ArtifactStore

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


# --------------------------------------------------------------------------- taking over an expired claim

EXPIRED_AT = T0 + H + dt.timedelta(hours=2)  # past the first claim's timeout plus margin
ROUNDS, RACERS = 15, 6


def _racer(root: str, i: int, barrier, results) -> None:
    """One process of the race: in every round, take over that round's expired claim."""
    store = ArtifactStore(root)
    for r in range(ROUNDS):
        barrier.wait()
        if claim(store, f"doc{r}", f"run{i}", H, now=EXPIRED_AT):
            results.put((r, f"run{i}"))
    results.put((-1, f"run{i}"))  # done


def race(root, store: ArtifactStore) -> dict[int, list[str]]:
    import multiprocessing as mp

    for r in range(ROUNDS):  # one expired claim per round
        assert claim(store, f"doc{r}", "old-run", H, now=T0)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(RACERS), ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(str(root), i, barrier, results)) for i in range(RACERS)]
    for p in procs:
        p.start()
    wins: dict[int, list[str]] = {r: [] for r in range(ROUNDS)}
    done = 0
    while done < RACERS:
        r, who = results.get(timeout=120)
        if r < 0:
            done += 1
        else:
            wins[r].append(who)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    return wins


def test_six_processes_taking_over_an_expired_claim_have_exactly_one_winner_per_round(tmp_path):
    """6 processes race to take over one expired claim, 15 rounds: exactly one winner each round,
    and the claim is the winner's (before the compare-and-swap, 14 of 15 rounds had several)."""
    store = ArtifactStore(tmp_path)
    wins = race(tmp_path, store)
    assert {r: len(w) for r, w in wins.items()} == dict.fromkeys(range(ROUNDS), 1)
    for r, (winner,) in wins.items():
        assert current_claim(store, f"doc{r}")["owner"] == winner


def test_a_release_never_overwrites_a_claim_taken_over_meanwhile(tmp_path, monkeypatch):
    """run1's claim expired; run1 reads it to release it, run2 takes it over before run1 writes: the
    release fails (compare-and-swap) and run2 keeps its claim."""
    from docverify.sme import claims as sme_claims

    store = ArtifactStore(tmp_path)
    assert claim(store, "doc", "run1", H, now=T0)
    real = sme_claims._versioned_claim

    def read_then_lose_the_race(st, doc_id):
        got = real(st, doc_id)
        monkeypatch.setattr(sme_claims, "_versioned_claim", real)
        assert claim(store, "doc", "run2", H, now=EXPIRED_AT)  # run2 takes over in between
        return got

    monkeypatch.setattr(sme_claims, "_versioned_claim", read_then_lose_the_race)
    assert not release(store, "doc", "run1", "late")
    assert current_claim(store, "doc")["owner"] == "run2" and not current_claim(store, "doc")["released"]


def test_replace_if_is_a_compare_and_swap_on_a_local_root(tmp_path):
    store = ArtifactStore(tmp_path)
    store.write_bytes("a/x.json", b"1")
    data, v1 = store.read_versioned("a/x.json")
    assert data == b"1" and store.replace_if("a/x.json", b"2", v1)
    assert not store.replace_if("a/x.json", b"3", v1)  # stale version: refused
    assert store.read_bytes("a/x.json") == b"2" and store.read_versioned("missing.json") is None
    assert store.list("a") == ["x.json"]  # the lock file is not listed
