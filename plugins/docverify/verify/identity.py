"""Patient identity consistency (ADR 0022; beyond the specification, switched by
``VerifyPolicy.patient_identity``): a segment is one patient's document, so two different
patient identifiers on its pages — two MRNs, two patient ids, or two different (name, date of
birth) pairs — are ``PATIENT_IDENTITY_CONFLICT`` (V2, MAJOR, not fixable: which page belongs to
which patient is a person's call).

The patterns are rule data (``include/rules/identity.json``, its ``_comment`` says what counts).
The issue never carries an identifier: its message says which pages carry which of the
different identifiers ("2 different medical record numbers: one on page 1, another on pages 3,
4"), and ``details`` hold, per identifier, a short keyed hash (HMAC-SHA256 keyed by the
document's sha256, truncated) — enough to tell within the document which pages share an
identifier, not a value to look up.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import hmac
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypedDict, TypeVar

from docverify.domain.codes import make_issue
from docverify.domain.models import ClassificationOutput, DocumentBundle, Issue, Segment
from docverify.domain.resources import load_rule
from docverify.verify.common import seg_loc

IMPLEMENTATION = "identity-rules-v1"
RULE = "identity"
_MONTHS = {m: i for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}


#: A date of birth as compared: (year, smaller of day/month, larger), or the digits of an unreadable one
DateKey = tuple[int, int, int] | str
#: A labelled patient name (its words) and the date of birth that follows it
NameDob = tuple[frozenset[str], DateKey]
_Ident = TypeVar("_Ident")


class _Family(TypedDict):
    title: str
    label: str


class _IdentityRules(TypedDict):
    """``include/rules/identity.json``."""

    identifier_families: dict[str, _Family]
    identifier_value: str
    min_identifier_digits: int
    excluded_context: str
    name_label: str
    name_stop_words: list[str]
    name_placeholder_words: list[str]
    name_honorifics: list[str]
    dob_label: str
    pair_window_chars: int


class IdentityConflict(TypedDict):
    """One kind of identifier with two or more identities in a segment (:func:`segment_conflicts`)."""

    kind: str
    title: str
    pages_by_identifier: list[list[int]]
    identifier_hashes: list[str]


@dataclass(frozen=True)
class _Rules:
    families: tuple[tuple[str, str, re.Pattern[str]], ...]  # (family, title, label + value)
    min_digits: int
    excluded: re.Pattern[str]
    name: re.Pattern[str]
    stop: frozenset[str]
    placeholders: frozenset[str]
    honorifics: frozenset[str]
    dob: re.Pattern[str]
    window: int


@functools.cache
def rules() -> _Rules:
    r: _IdentityRules = load_rule(RULE)
    value = r["identifier_value"]
    return _Rules(
        families=tuple((k, f["title"], re.compile(f"(?:{f['label']}){value}", re.IGNORECASE))
                       for k, f in r["identifier_families"].items()),
        min_digits=int(r["min_identifier_digits"]),
        excluded=re.compile(r["excluded_context"], re.IGNORECASE),
        name=re.compile(r["name_label"], re.IGNORECASE | re.MULTILINE),
        stop=frozenset(w.lower() for w in r["name_stop_words"]),
        placeholders=frozenset(w.lower() for w in r["name_placeholder_words"]),
        honorifics=frozenset(w.lower() for w in r["name_honorifics"]),
        dob=re.compile(r["dob_label"], re.IGNORECASE),
        window=int(r["pair_window_chars"]),
    )


# --------------------------------------------------------------------------- extraction


def _excluded(text: str, start: int, r: _Rules) -> bool:
    """A label preceded on its line by a relative, an insured person, a specimen…: not the patient's."""
    line_start = text.rfind("\n", max(0, start - 64), start) + 1  # the rule looks 24 characters back
    return r.excluded.search(text[max(line_start, start - 64):start]) is not None


def normalise_identifier(raw: str) -> str:
    """Digits only, leading zeros dropped: the same MRN written with letters, spaces, hyphens or
    leading zeros is one identifier."""
    return re.sub(r"\D", "", raw).lstrip("0")


def identifiers(text: str, r: _Rules | None = None) -> list[tuple[str, str]]:
    """(family, normalised identifier) of every labelled identifier in ``text``."""
    r = r or rules()
    out = []
    for family, _, rx in r.families:
        for m in rx.finditer(text):
            raw = m.group("value")
            if sum(c.isdigit() for c in raw) < r.min_digits or _excluded(text, m.start(), r):
                continue
            norm = normalise_identifier(raw)
            if norm:
                out.append((family, norm))
    return out


def _name(raw: str, r: _Rules) -> frozenset[str] | None:
    """The words of a labelled name (capitalised words up to the next label), or None when it is
    not a name (empty, lower-case narrative, a placeholder)."""
    words: list[str] = []
    for tok in re.split(r"[\s,;/|]+", raw.strip()):
        if not tok:
            continue
        if tok.endswith(":") or tok.lower().strip(".") in r.stop or tok.lower() in r.stop:
            break
        word = tok.strip(".'-")
        if not word or not re.fullmatch(r"[^\W\d_](?:[^\W\d_]|['\-.])*", word) or not word[0].isupper():
            break
        if word.lower().rstrip(".") in r.honorifics:
            continue
        words.append(word.lower().rstrip("."))
        if len(words) == 5:
            break
    names = frozenset(w for w in words if len(w) > 1)  # initials say little
    if not names or names & r.placeholders:
        return None
    return names


def normalise_date(raw: str) -> tuple[int, int, int] | str:
    """(year, smaller of day/month, larger of day/month) — the same date whether written day or
    month first — or the text's digits when it cannot be read as a date."""
    s = raw.strip().lower()
    nums = [int(x) for x in re.findall(r"\d+", s)]
    month = next((v for k, v in _MONTHS.items() if re.search(rf"\b{k}", s)), None)
    if month is not None and len(nums) == 2:  # "Dec 03, 1976" or "03-Dec-1976": the day comes first
        (d, y), m = nums, month
    elif len(nums) == 3 and nums[0] > 31:  # ISO 1976-12-03
        y, m, d = nums
    elif len(nums) == 3:  # 12/03/1976 or 03.12.1976 (day and month are compared as a set)
        m, d, y = nums
    else:
        return re.sub(r"\D", "", s)
    if y < 100:
        y += 1900 if y > 30 else 2000
    lo, hi = sorted((m, d))
    return (y, lo, hi)


def name_dob_pairs(text: str, r: _Rules | None = None) -> list[NameDob]:
    """(name words, date) of every labelled patient name followed, within the rule's window and
    before the next name label, by a date of birth not preceded on its line by a relative."""
    r = r or rules()
    names = [m for m in r.name.finditer(text) if not _excluded(text, m.start(), r)]
    dobs = [m for m in r.dob.finditer(text) if not _excluded(text, m.start(), r)]
    starts = [d.start() for d in dobs]
    out = []
    for k, m in enumerate(names):
        name = _name(m.group("name"), r)
        if name is None:
            continue
        limit = min(m.end() + r.window, names[k + 1].start() if k + 1 < len(names) else len(text))
        i = bisect.bisect_right(starts, m.start())  # the first date of birth after the name label
        if i < len(dobs) and starts[i] < limit:
            out.append((name, normalise_date(dobs[i].group("date"))))
    return out


def _same_person(a: NameDob, b: NameDob) -> bool:
    """Two (name, DOB) pairs are one person unless both the names (neither word set holds the
    other) and the dates differ: one differing part is more likely OCR or a missing middle name."""
    return a[0] <= b[0] or b[0] <= a[0] or a[1] == b[1]


# --------------------------------------------------------------------------- the check


#: At most this many different identities of one kind are told apart per segment (a bound on the
#: work a hostile page can cause; a conflict needs two).
MAX_IDENTITIES = 8


def _equal(a: str, b: str) -> bool:
    return a == b


def _groups(found: dict[int, list[_Ident]], same: Callable[[_Ident, _Ident], bool]) -> list[tuple[_Ident, list[int]]]:
    """Identifiers by page → groups of one identity: (representative, pages), in page order (at
    most :data:`MAX_IDENTITIES` groups; an identifier matching none of them then is not placed)."""
    groups: list[tuple[_Ident, list[int]]] = []
    for page in sorted(found):
        for ident in dict.fromkeys(found[page]):
            for rep, pages in groups:
                if same(rep, ident):
                    if page not in pages:
                        pages.append(page)
                    break
            else:
                if len(groups) < MAX_IDENTITIES:
                    groups.append((ident, [page]))
    return groups


def _pages(pages: list[int]) -> str:
    return f"page {pages[0]}" if len(pages) == 1 else "pages " + ", ".join(map(str, pages))


def _hash(key: str, value: object) -> str:
    return hmac.new(key.encode(), repr(value).encode(), hashlib.sha256).hexdigest()[:12]


def segment_conflicts(bundle: DocumentBundle, seg: Segment) -> list[IdentityConflict]:
    """The identity conflicts of one segment: per kind (an identifier family, or ``name_dob``)
    with two or more different identities, their pages and keyed hashes (no value)."""
    r = rules()
    lo, hi = min(seg.page_start, seg.page_end), max(seg.page_start, seg.page_end)
    pages = [p for p in bundle.pages if lo <= p.page_num <= hi]
    key = bundle.sha256 or bundle.doc_id
    found: dict[str, dict[int, list[str]]] = {}  # identifiers: family → page → values
    pairs: dict[int, list[NameDob]] = {}  # (name, date of birth) pairs by page
    for p in pages:
        for family, ident in identifiers(p.text, r):
            found.setdefault(family, {}).setdefault(p.page_num, []).append(ident)
        for pair in name_dob_pairs(p.text, r):
            pairs.setdefault(p.page_num, []).append(pair)
    titles = {f: t for f, t, _ in r.families} | {"name_dob": "(name, date of birth) pairs"}
    out: list[IdentityConflict] = []
    for kind in [f for f, _, _ in r.families] + ["name_dob"]:
        groups: Sequence[tuple[object, list[int]]]  # (representative, pages) of each identity
        if kind == "name_dob":
            if not pairs:
                continue
            people = _groups(pairs, _same_person)
            groups = people
        elif kind in found:
            values = _groups(found[kind], _equal)
            groups = values
        else:
            continue
        if len(groups) > 1:
            out.append({"kind": kind, "title": titles[kind], "pages_by_identifier": [g[1] for g in groups],
                        "identifier_hashes": [_hash(key, g[0]) for g in groups]})
    return out


def check(bundle: DocumentBundle, cls: ClassificationOutput) -> list[Issue]:
    """``PATIENT_IDENTITY_CONFLICT`` for every segment whose pages carry two different patient
    identifiers (see the module docstring)."""
    issues: list[Issue] = []
    for seg in cls.segments:
        conflicts = segment_conflicts(bundle, seg)
        if not conflicts:
            continue
        parts = []
        for c in conflicts:
            where = [_pages(p) for p in c["pages_by_identifier"]]
            parts.append(f"{len(where)} different {c['title']} (one on {where[0]}, "
                         + ", ".join(f"another on {w}" for w in where[1:]) + ")")
        pages = sorted({p for c in conflicts for g in c["pages_by_identifier"] for p in g})
        issues.append(make_issue(
            "PATIENT_IDENTITY_CONFLICT",
            f"Segment {seg.segment_index} carries more than one patient's identifiers: {'; '.join(parts)}",
            agent="V2",
            location=seg_loc(seg),
            suggested_fix="Check which pages belong to which patient: split the document (or the segment), or "
                          "correct the identifier that was misread",
            details={"segment_index": seg.segment_index, "pages": pages, "implementation": IMPLEMENTATION,
                     "conflicts": [{k: c[k] for k in ("kind", "pages_by_identifier", "identifier_hashes")}
                                   for c in conflicts]},
        ))
    return issues
