"""Fragments of a night's clinical text, to scan what Airflow shows for them (ADR 0036): every
page's text of every document the night read, the classifier's evidence snippets and reasoning,
the issues' messages and page-text windows of every SME packet. A fragment is three words or more
and at least MIN characters of one line; the five type names are the forms' vocabulary, not the
document's text."""

from __future__ import annotations

import json
import pathlib
import re

from docverify.domain.models import DOC_TYPES

MIN = 14


def norm(text: str) -> str:
    """Backslash escapes removed and whitespace collapsed, lower case (how a reader sees it)."""
    return " ".join(str(text).replace("\\", "").split()).lower()


def fragments(text: str) -> set[str]:
    out = set()
    for line in re.split(r"[\n.;]", str(text or "")):
        words = line.split()
        for i in range(len(words)):
            frag = ""
            for n, w in enumerate(words[i:], start=1):
                frag = f"{frag} {w}".strip()
                if len(frag) >= MIN and n >= 3:
                    out.add(norm(frag))
                    break
    return {f for f in out if not any(f in t.lower() for t in DOC_TYPES)}


def packet_phi(packet: dict) -> set[str]:
    """The clinical text a packet (as stored, JSON) carries."""
    out: set[str] = set()
    cls = packet.get("primary_classification") if isinstance(packet.get("primary_classification"), dict) else {}
    for seg in cls.get("segments") or []:
        out |= fragments(seg.get("reasoning") or "")
        for c in seg.get("classifications") or []:
            for ev in c.get("top_evidence") or []:
                out |= fragments(ev.get("snippet") or "")
    for s in packet.get("issues_summary") or []:
        out |= fragments(s.get("message") or "")
        ctx = s.get("context") or {}
        for para in [*(ctx.get("before") or []), ctx.get("match") or "", *(ctx.get("after") or [])]:
            out |= fragments(para)
    return out


def night_phi(root: pathlib.Path) -> set[str]:
    """Every fragment of clinical text under a storage root: the bundles' pages and the packets."""
    out: set[str] = set()
    for bundle in root.glob("runs/*/*/bundle.json"):
        for page in json.loads(bundle.read_text()).get("pages") or []:
            out |= fragments(page.get("text") or "")
    for packet in root.glob("sme_packets/sme_packet_*.json"):
        out |= packet_phi(json.loads(packet.read_text()))
    return out


def leaks(shown: str, phi: set[str]) -> list[str]:
    """The fragments of ``phi`` found in ``shown`` (normalised the same way)."""
    text = norm(shown)
    return sorted(f for f in phi if f in text)
