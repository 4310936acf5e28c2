"""Which review run has a packet open: one claim object per packet under ``sme_packets/claims/``.

Several ``sme_review`` runs may be active at once (one per night's Asset event, plus manual
runs), so that a review nobody answers for days never holds back the next night's reviews. A
run opens a review only for the packets it claims. A claim is created atomically (create-if-
absent), lasts the review's response timeout plus a margin, and is released when the review ends
(answered, timed out, or found already answered) so that a later run may open the packet again.
A released or expired claim is taken over by the next run that asks; after writing, the taker
reads the claim back and keeps the packet only if the claim is its own (two takers of one expired
claim cannot both keep it, the last writer wins and the other backs off).

Claims hold run ids and times only, never document text."""

from __future__ import annotations

import datetime as dt
from typing import Any

from docverify.store import ArtifactStore

CLAIMS_DIR = "sme_packets/claims"
MARGIN = dt.timedelta(hours=1)


def claim_rel(doc_id: str) -> str:
    return f"{CLAIMS_DIR}/{doc_id}.json"


def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(value: Any) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(str(value), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def current_claim(store: ArtifactStore, doc_id: str) -> dict[str, Any] | None:
    value = store.read_json_if_exists(claim_rel(doc_id))
    return value if isinstance(value, dict) else None


def is_free(claim: dict[str, Any] | None, now: dt.datetime) -> bool:
    if claim is None or claim.get("released"):
        return True
    expires = _parse(claim.get("expires_at"))
    return expires is None or expires <= now  # an unreadable expiry never locks a packet for ever


def claim(store: ArtifactStore, doc_id: str, owner: str, lasts: dt.timedelta, *,
          now: dt.datetime | None = None) -> bool:
    """Claim packet ``doc_id`` for ``owner`` (a run id) for ``lasts`` + margin. True when the
    packet is this owner's to open (already claimed by the same owner counts: a task retry)."""
    now = now or dt.datetime.now(dt.UTC)
    record = {"doc_id": doc_id, "owner": owner, "claimed_at": _iso(now), "expires_at": _iso(now + lasts + MARGIN),
              "released": False}
    if store.write_json(claim_rel(doc_id), record, overwrite=False):
        return True
    held = current_claim(store, doc_id)
    if held is not None and held.get("owner") == owner and not held.get("released"):
        return True
    if not is_free(held, now):
        return False
    store.write_json(claim_rel(doc_id), record)  # take over a released or expired claim
    back = current_claim(store, doc_id)
    return back is not None and back.get("owner") == owner and back.get("claimed_at") == record["claimed_at"]


def release(store: ArtifactStore, doc_id: str, owner: str, reason: str, *, now: dt.datetime | None = None) -> bool:
    """Release ``owner``'s claim (True when it was theirs); someone else's claim is left alone."""
    held = current_claim(store, doc_id)
    if held is None or held.get("owner") != owner or held.get("released"):
        return False
    now = now or dt.datetime.now(dt.UTC)
    store.write_json(claim_rel(doc_id), {**held, "released": True, "released_at": _iso(now), "reason": reason})
    return True
