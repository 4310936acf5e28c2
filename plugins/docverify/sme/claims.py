"""Which review run has a packet open: one claim object per packet under ``sme_packets/claims/``.

Several ``sme_review`` runs may be active at once (one per night's Asset event, plus manual
runs), so that a review nobody answers for days never holds back the next night's reviews. A
run opens a review only for the packets it claims. A claim is created atomically (create-if-
absent), lasts the review's response timeout plus a margin, and is released when the review ends
(answered, timed out, or found already answered) so that a later run may open the packet again.
A released or expired claim is taken over by the next run that asks, atomically: the taker reads
the claim with its version and replaces it only if it still is that version
(:meth:`~docverify.storage.store.ArtifactStore.replace_if`: on gs:// one upload with
``ifGenerationMatch=<generation>``, locally a compare and rename under an exclusive ``flock``), so
of several runs taking over one expired claim exactly one wins (ADR 0005; the earlier
write-then-read-back let several win: 14 of 15 rounds of 6 processes). A release is the same
compare-and-swap, so it never overwrites a claim another run took over meanwhile. Each claim
carries a random ``claim_id``: no two claims are the same bytes, so a version is never reused.

Claims hold run ids and times only, never document text."""

from __future__ import annotations

import datetime as dt
import json
import uuid

from docverify.storage.store import ArtifactStore, dumps

CLAIMS_DIR = "sme_packets/claims"
MARGIN = dt.timedelta(hours=1)


def claim_rel(doc_id: str) -> str:
    return f"{CLAIMS_DIR}/{doc_id}.json"


def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(value: object) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(str(value), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def current_claim(store: ArtifactStore, doc_id: str) -> dict[str, object] | None:
    value = store.read_json_if_exists(claim_rel(doc_id))
    return value if isinstance(value, dict) else None


def is_free(claim: dict[str, object] | None, now: dt.datetime) -> bool:
    if claim is None or claim.get("released"):
        return True
    expires = _parse(claim.get("expires_at"))
    return expires is None or expires <= now  # an unreadable expiry never locks a packet for ever


def _versioned_claim(store: ArtifactStore, doc_id: str) -> tuple[dict[str, object] | None, str | None]:
    """The claim and its store version; (None, None) when there is none. An unreadable claim is
    (None, version): free, and replaced like any other."""
    got = store.read_versioned(claim_rel(doc_id))
    if got is None:
        return None, None
    data, version = got
    try:
        value = json.loads(data)
    except ValueError:
        return None, version
    return (value if isinstance(value, dict) else None), version


#: how often a claim or release re-reads after losing a race to a write that may have freed the
#: claim again (the answer is then read afresh; a lost takeover is final)
_ATTEMPTS = 5


def claim(store: ArtifactStore, doc_id: str, owner: str, lasts: dt.timedelta, *,
          now: dt.datetime | None = None, margin: dt.timedelta = MARGIN) -> bool:
    """Claim packet ``doc_id`` for ``owner`` (a run id, or ``user:<name>`` for the review
    workspace's lease) for ``lasts`` + ``margin``. True when the
    packet is this owner's to open (already claimed by the same owner counts: a task retry).
    Taking over a released or expired claim is a compare-and-swap on the claim's version: of
    several runs taking over the same claim exactly one gets True."""
    now = now or dt.datetime.now(dt.UTC)
    record = {"doc_id": doc_id, "owner": owner, "claimed_at": _iso(now), "expires_at": _iso(now + lasts + margin),
              "released": False, "claim_id": uuid.uuid4().hex}
    data = dumps(record)
    for _ in range(_ATTEMPTS):
        if store.write_bytes(claim_rel(doc_id), data, overwrite=False):
            return True
        held, version = _versioned_claim(store, doc_id)
        if version is None:  # deleted in between: create again
            continue
        if held is not None and held.get("owner") == owner and not held.get("released"):
            return True
        if not is_free(held, now):
            return False
        # take over a released or expired claim: only if nobody changed it since it was read
        return store.replace_if(claim_rel(doc_id), data, version)
    return False


def release(store: ArtifactStore, doc_id: str, owner: str, reason: str, *, now: dt.datetime | None = None) -> bool:
    """Release ``owner``'s claim (True when it was theirs); someone else's claim is left alone —
    also one taken over between the read and the write (compare-and-swap on its version)."""
    now = now or dt.datetime.now(dt.UTC)
    for _ in range(_ATTEMPTS):
        held, version = _versioned_claim(store, doc_id)
        if held is None or version is None or held.get("owner") != owner or held.get("released"):
            return False
        released = {**held, "released": True, "released_at": _iso(now), "reason": reason}
        if store.replace_if(claim_rel(doc_id), dumps(released), version):
            return True
    return False
