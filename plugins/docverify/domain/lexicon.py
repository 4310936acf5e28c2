"""The lexicon behind the offline judgments: weighted cues per document type.

Shared vocabulary: the offline classifier (:mod:`docverify.classify.offline`) and the verifiers'
offline judgments (V2's lexical support, V4's evidence strength) both read it, so it lives beside
them rather than inside the classifier.

The cues live in ``include/rules/lexicon.json`` (section headers, vocabulary, case-sensitive
acronyms and regex patterns, each with a weight) and the lab/vendor names in
``include/rules/vendors.json``. They are compiled once per process (module-level cache).

What a text is worth to each type
---------------------------------
:func:`analyse` finds every cue in a text and keeps only the hits that lie outside header/footer
lines (the ``snippet_exclude`` patterns: ``page N of M``, phone/fax numbers, ``MRN``, dates of
birth — the V3 trap patterns: such lines are never evidence, so they never count). A cue
contributes ``weight * sqrt(min(occurrences, 4))`` (repetition helps, with diminishing returns),
and a type's score is the sum of its cues divided by ``sqrt(max(1, characters / 1500))`` so that a
long page does not win on length alone. A text without any cue scores 0 everywhere; its best
type is then ``Other``.

Evidence candidates ("units")
-----------------------------
The text is cut into lines, long lines into sentence-like pieces of at most 200 characters, and
short pieces are joined with their neighbours until they reach 25 characters. A unit is a
*verbatim* slice ``text[start:end]`` of 25–200 characters that is not a header/footer line, not
a generic phrase ("see attached results"), and mostly made of words (OCR bar-code rubbish is
skipped). The offline classifier takes its evidence snippets from these units.

Public API: :func:`score_text`, :func:`best_type`, :func:`lexical_support`, :func:`find_vendors`,
:func:`analyse` (all hits and units of a text, used by the classifier).
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any

from docverify.domain.models import DOC_TYPES, DocType
from docverify.domain.resources import load_rule

LEXICON_RULE = "lexicon"
VENDORS_RULE = "vendors"
OTHER = DocType.OTHER.value

#: Evidence snippets are 25–200 characters long.
SNIPPET_MIN = 25
SNIPPET_MAX = 200
#: Characters of text that count as one "length unit" in the score normalisation.
LENGTH_UNIT = 1500
#: A cue's repetitions count up to this many times (then sqrt).
REPEAT_CAP = 4
#: :func:`lexical_support`: a label is supported when its score is at least SUPPORT_MIN and at
#: least SUPPORT_RATIO times the best type's score. "Other" is also supported when no type
#: reaches SUPPORT_MIN (no clinical vocabulary to speak of).
SUPPORT_MIN = 2.0
SUPPORT_RATIO = 0.5

_KIND_RANK = {"header": 0, "term": 1}
#: headers this short are matched case-sensitively (see :func:`_compile`)
SHORT_HEADER = 3
#: weight factor of a clinical cue on a form's option line (a checkbox, a blank to fill in):
#: "[ ] Discharge Summary  [ ] Radiology" on a release form lists record types, it is not one
FORM_LINE_FACTOR = 0.15
_FORM_LINE = re.compile(r"\[\s?[xX✓]?\s?\]|[☐☑☒□■]|_{3,}|\(\s?\)")


# --------------------------------------------------------------------------- compiled lexicon


@dataclass(frozen=True)
class Entry:
    """One cue of the lexicon."""

    index: int
    doc_type: str
    kind: str  # header | term | pattern
    label: str
    weight: float


@dataclass(frozen=True)
class Hit:
    """One occurrence of a cue: ``text == source[start:end]`` (whitespace-stripped)."""

    entry: Entry
    start: int
    end: int
    text: str
    #: a record-type word in a form's option line (a checkbox list) counts for little
    factor: float = 1.0

    @property
    def doc_type(self) -> str:
        return self.entry.doc_type

    @property
    def weight(self) -> float:
        return self.entry.weight * self.factor


@dataclass(frozen=True)
class _Candidate:
    """A header or term, tried where a text token equals one of its leading-token keys."""

    entry: Entry
    regex: re.Pattern[str]
    header: bool


@dataclass
class CompiledLexicon:
    version: str
    entries: list[Entry]
    #: lower-cased token -> per type, the headers/terms that may start there, most specific
    #: first (the longest term; a header before a term of the same length)
    index: dict[str, dict[str, list[_Candidate]]]
    #: per type: its patterns, each compiled alone (they may overlap terms)
    patterns: dict[str, list[tuple[Entry, re.Pattern[str]]]]
    #: the header/footer patterns, one alternation
    exclude: re.Pattern[str] | None
    generic: re.Pattern[str] | None
    #: lower-cased token -> the vendor names that may start there, longest first
    vendors: dict[str, list[tuple[str, re.Pattern[str]]]]


_TOKEN = re.compile(r"\w+")
#: a header is followed by ':' ';' ' - ' or the end of the line (what precedes it is checked by
#: :func:`_header_left_ok`)
_HEADER_TAIL = r"(?=[ \t]*(?:[:;]|-(?!\w)|$))"


def _phrase_regex(term: str) -> str:
    """A term as a regex: whole word, a space or hyphen matching any whitespace/hyphen or nothing."""
    tokens = [t for t in re.split(r"[ \-]+", term.strip()) if t]
    body = r"[\s\-]*".join(re.escape(t) for t in tokens)
    left = r"(?<!\w)" if (term[:1].isalnum() or term[:1] == "_") else ""
    right = r"(?!\w)" if (term[-1:].isalnum() or term[-1:] == "_") else ""
    return left + body + right


def _header_left_ok(text: str, pos: int) -> bool:
    """A header starts a line or follows punctuation, never a word ("PHYSICAL EXAMINATION:" is
    not an "EXAMINATION:" header)."""
    i = pos - 1
    while i >= 0 and text[i] != "\n" and text[i].isspace():
        i -= 1
    if i < 0 or text[i] == "\n":
        return True
    ch = text[i]
    return not (ch.isalnum() or ch == "_")


def _keys(term: str) -> list[str]:
    """Lower-cased tokens a text may show where the term starts: its first word, and the
    concatenations of its leading words (a term's separators may be missing in the text)."""
    words = [w.lower() for w in _TOKEN.findall(term)]
    return ["".join(words[:i]) for i in range(1, len(words) + 1)]


def _compile(lexicon: dict[str, Any], vendors: dict[str, Any]) -> CompiledLexicon:
    entries: list[Entry] = []
    index: dict[str, dict[str, list[tuple[tuple[int, int, int], _Candidate]]]] = {}
    patterns: dict[str, list[tuple[Entry, re.Pattern[str]]]] = {}
    types = lexicon["types"]
    missing = [t for t in DOC_TYPES if t not in types]
    if missing:
        raise ValueError(f"lexicon.json has no entries for {missing}")
    for doc_type in DOC_TYPES:
        spec = types[doc_type]
        for kind, key, ci in (("header", "headers", True), ("term", "terms", True),
                              ("term", "terms_cs", False)):
            for term, weight in spec.get(key, []):
                if not _TOKEN.match(term):
                    raise ValueError(f"lexicon term {term!r} must start with a letter or digit")
                entry = Entry(len(entries), doc_type, kind, term, float(weight))
                entries.append(entry)
                rx = _phrase_regex(term) + (_HEADER_TAIL if kind == "header" else "")
                # a header of at most SHORT_HEADER letters ("CC", "PE", "HX") counts only in capitals:
                # "cc:" in a memo is a copy list, not a chief complaint
                short = kind == "header" and len(term) <= SHORT_HEADER
                flags = re.MULTILINE | (re.IGNORECASE if ci and not short else 0)
                cand = _Candidate(entry, re.compile(rx, flags), kind == "header")
                order = (-len(term), _KIND_RANK[kind], entry.index)
                for k in _keys(term):
                    index.setdefault(k, {}).setdefault(doc_type, []).append((order, cand))
        patterns[doc_type] = []
        for label, regex, weight in spec.get("patterns", []):
            entry = Entry(len(entries), doc_type, "pattern", label, float(weight))
            entries.append(entry)
            patterns[doc_type].append((entry, re.compile(regex, re.IGNORECASE | re.MULTILINE)))
    sorted_index = {
        k: {t: [c for _, c in sorted(v, key=lambda oc: oc[0])] for t, v in by_type.items()}
        for k, by_type in index.items()
    }
    exclude_rx = lexicon.get("snippet_exclude", [])
    exclude = re.compile("|".join(f"(?:{p})" for p in exclude_rx), re.IGNORECASE) if exclude_rx else None
    generic_terms = lexicon.get("generic_phrases", [])
    generic = (
        re.compile("|".join(_phrase_regex(g) for g in sorted(generic_terms, key=len, reverse=True)),
                   re.IGNORECASE)
        if generic_terms else None
    )
    vendor_rx: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
    for name in sorted(vendors.get("vendors", []), key=len, reverse=True):
        name_rx = re.compile(_phrase_regex(name), re.IGNORECASE)
        for k in _keys(name):
            vendor_rx.setdefault(k, []).append((name, name_rx))
    return CompiledLexicon(
        version=str(lexicon.get("version", "")),
        entries=entries,
        index=sorted_index,
        patterns=patterns,
        exclude=exclude,
        generic=generic,
        vendors=vendor_rx,
    )


@functools.lru_cache(maxsize=1)
def get_lexicon() -> CompiledLexicon:
    """The compiled lexicon (compiled once per process)."""
    return _compile(load_rule(LEXICON_RULE), load_rule(VENDORS_RULE))


# --------------------------------------------------------------------------- units


@dataclass
class Unit:
    """An evidence candidate: the verbatim slice ``source[start:end]``."""

    start: int
    end: int
    text: str
    #: per type: the sum of the weights of the distinct cues inside the unit
    scores: dict[str, float] = field(default_factory=dict)


_SENTENCE_END = re.compile(r"[.;!?](?=[\s,])|,(?=\s*[A-Z][A-Z /&\-]{2,}:)")
_LEADING = " \t\r\f\v,;"
_WORD = re.compile(r"[^\W\d_]{2,}")


def _strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and (text[start].isspace() or text[start] in _LEADING):
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _atoms(text: str) -> list[tuple[int, int]]:
    """Lines, and pieces of at most SNIPPET_MAX characters of the longer lines."""
    atoms: list[tuple[int, int]] = []
    for m in re.finditer(r"[^\n]+", text):
        s, e = _strip_span(text, m.start(), m.end())
        while s < e:
            if e - s <= SNIPPET_MAX:
                atoms.append((s, e))
                break
            limit = s + SNIPPET_MAX
            cut = None
            for b in _SENTENCE_END.finditer(text, s + SNIPPET_MIN, limit):
                cut = b.end()
            if cut is None:
                ws = text.rfind(" ", s + SNIPPET_MIN, limit)
                cut = ws if ws > s else limit
            ps, pe = _strip_span(text, s, cut)
            if ps < pe:
                atoms.append((ps, pe))
            s, e = _strip_span(text, cut, e)
    return atoms


class _Filters:
    def __init__(self, lex: CompiledLexicon):
        self.lex = lex

    def excluded(self, s: str) -> bool:
        return self.lex.exclude is not None and self.lex.exclude.search(s) is not None

    def generic(self, s: str) -> bool:
        """Starts with a generic phrase ("See attached results for ...") or holds little else."""
        rx = self.lex.generic
        if rx is None or not rx.search(s):
            return False
        if rx.match(s.lstrip(" \t\r\n-*•.:;,(\"'")):
            return True
        rest = rx.sub(" ", s)
        return sum(map(str.isalpha, rest)) < 20

    def wordy(self, s: str) -> bool:
        visible = len(s) - sum(map(str.isspace, s))
        if visible <= 0:
            return False
        letters = sum(map(str.isalpha, s))
        return letters >= 0.5 * visible and len(_WORD.findall(s)) >= 3


def _units(text: str, atoms: list[tuple[int, int]], excluded_atoms: list[bool],
           flt: _Filters) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    n = len(atoms)

    def ok(span: tuple[int, int] | None) -> bool:
        if span is None:
            return False
        s, e = span
        if not (SNIPPET_MIN <= e - s <= SNIPPET_MAX):
            return False
        chunk = text[s:e]
        return not flt.excluded(chunk) and not flt.generic(chunk) and flt.wordy(chunk)

    for i, (s, e) in enumerate(atoms):
        if excluded_atoms[i]:
            continue
        if e - s >= SNIPPET_MIN:
            cand: tuple[int, int] | None = (s, e)
        else:
            j, end = i, e
            while end - s < SNIPPET_MIN and j + 1 < n and atoms[j + 1][1] - s <= SNIPPET_MAX:
                j += 1
                end = atoms[j][1]
            cand = (s, end) if end - s >= SNIPPET_MIN else None
            if not ok(cand):
                k, start = i, s
                while e - start < SNIPPET_MIN and k - 1 >= 0 and e - atoms[k - 1][0] <= SNIPPET_MAX:
                    k -= 1
                    start = atoms[k][0]
                cand = (start, e) if e - start >= SNIPPET_MIN else None
        if ok(cand) and cand not in seen:
            seen.add(cand)  # type: ignore[arg-type]
            spans.append(cand)  # type: ignore[arg-type]
    return spans


# --------------------------------------------------------------------------- analysis


@dataclass
class TextAnalysis:
    """Every counted cue of a text, its per-type scores and its evidence units."""

    text: str
    scores: dict[str, float]
    hits: dict[str, list[Hit]]
    units: list[Unit]

    @property
    def has_text(self) -> bool:
        return bool(self.text.strip())

    def matched_terms(self, doc_type: str, limit: int | None = None) -> list[str]:
        """Distinct cues of ``doc_type`` found, as they appear in the text (strongest first)."""
        ordered = sorted(self.hits.get(doc_type, []), key=lambda h: (-h.weight, h.start))
        out: list[str] = []
        seen: set[str] = set()
        for h in ordered:
            key = " ".join(h.text.casefold().split())
            if key and key not in seen:
                seen.add(key)
                out.append(h.text)
                if limit is not None and len(out) >= limit:
                    break
        return out


def _raw_hits(text: str, lex: CompiledLexicon) -> dict[str, list[Hit]]:
    """All cue occurrences per type. Within a type hits do not overlap: at each word the most
    specific cue that matches wins and the scan resumes after it (like ``re.finditer`` over an
    alternation, but indexed by the word, which is ~100x faster than a 300-way alternation)."""
    hits: dict[str, list[Hit]] = {t: [] for t in DOC_TYPES}
    next_free = dict.fromkeys(DOC_TYPES, 0)

    def add(doc_type: str, entry: Entry, s: int, e: int) -> None:
        s, e = _strip_span(text, s, e)
        if s < e:
            hits[doc_type].append(Hit(entry, s, e, text[s:e]))

    index = lex.index
    for tok in _TOKEN.finditer(text):
        by_type = index.get(tok.group().lower())
        if not by_type:
            continue
        pos = tok.start()
        for doc_type, cands in by_type.items():
            if pos < next_free[doc_type]:
                continue
            left_ok: bool | None = None
            for cand in cands:
                if cand.header:
                    if left_ok is None:
                        left_ok = _header_left_ok(text, pos)
                    if not left_ok:
                        continue
                m = cand.regex.match(text, pos)
                if m:
                    add(doc_type, cand.entry, m.start(), m.end())
                    next_free[doc_type] = m.end()
                    break
    for doc_type in DOC_TYPES:
        for entry, rx in lex.patterns[doc_type]:
            for m in rx.finditer(text):
                if m.end() > m.start():
                    add(doc_type, entry, m.start(), m.end())
        hits[doc_type].sort(key=lambda h: (h.start, h.end))
    return hits


def _score(hits: list[Hit], n_chars: int) -> float:
    counts: dict[int, int] = {}
    weights: dict[int, float] = {}
    for h in hits:
        counts[h.entry.index] = counts.get(h.entry.index, 0) + 1
        weights[h.entry.index] = max(weights.get(h.entry.index, 0.0), h.weight)
    raw = sum(weights[i] * math.sqrt(min(c, REPEAT_CAP)) for i, c in counts.items())
    return raw / math.sqrt(max(1.0, n_chars / LENGTH_UNIT))


def _on_form_line(h: Hit, atoms: list[tuple[int, int]], atom_starts: list[int], form_atoms: list[bool]) -> Hit:
    i = bisect.bisect_right(atom_starts, h.start) - 1
    if 0 <= i < len(atoms) and h.start < atoms[i][1] and form_atoms[i]:
        return Hit(h.entry, h.start, h.end, h.text, FORM_LINE_FACTOR)
    return h


def analyse(text: str) -> TextAnalysis:
    """Hits, scores and evidence units of one text (a page). Memoised by text (the last
    :data:`ANALYSIS_CACHE_SIZE` texts of the process): the classifier analyses each page, and V2
    and V4's offline judgments, on every attempt, ask again about the same texts (a one-page
    segment is its page's text). The result is shared: callers only read it."""
    return _analyse_cached(text or "")


#: Texts whose analysis is kept (a page of a few KB and its hits: a few MB at most).
ANALYSIS_CACHE_SIZE = 1024


@functools.lru_cache(maxsize=ANALYSIS_CACHE_SIZE)
def _analyse_cached(text: str) -> TextAnalysis:
    lex = get_lexicon()
    flt = _Filters(lex)
    atoms = _atoms(text)
    excluded = [flt.excluded(text[s:e]) for s, e in atoms]
    bad_starts = [s for (s, _), x in zip(atoms, excluded, strict=True) if x]
    bad_ends = [e for (_, e), x in zip(atoms, excluded, strict=True) if x]
    atom_starts = [s for s, _ in atoms]

    def counted(h: Hit) -> bool:
        # inside a kept atom (a hit in a header/footer line, or outside every atom, is dropped)
        i = bisect.bisect_right(atom_starts, h.start) - 1
        if i < 0 or h.start >= atoms[i][1]:
            return False
        if not bad_starts:
            return True
        j = bisect.bisect_right(bad_starts, h.start) - 1
        return not (j >= 0 and h.start < bad_ends[j])

    n_chars = len(text.strip())
    hits: dict[str, list[Hit]] = {}
    scores: dict[str, float] = {}
    raw = _raw_hits(text, lex)
    form_atoms = [bool(_FORM_LINE.search(text, s, e)) for s, e in atoms]
    if any(form_atoms):
        for doc_type in DOC_TYPES:
            if doc_type != OTHER:
                raw[doc_type] = [_on_form_line(h, atoms, atom_starts, form_atoms) for h in raw[doc_type]]
    for doc_type in DOC_TYPES:
        kept = [h for h in raw[doc_type] if counted(h)]
        hits[doc_type] = kept
        scores[doc_type] = round(_score(kept, n_chars), 6)

    starts = {t: [h.start for h in hits[t]] for t in DOC_TYPES}
    units: list[Unit] = []
    for s, e in _units(text, atoms, excluded, flt):
        unit = Unit(s, e, text[s:e])
        for doc_type in DOC_TYPES:
            hs = hits[doc_type]
            lo = bisect.bisect_left(starts[doc_type], s)
            distinct: dict[int, float] = {}
            for h in hs[lo:]:
                if h.start >= e:
                    break
                if h.end <= e:
                    distinct[h.entry.index] = h.weight
            if distinct:
                unit.scores[doc_type] = sum(distinct.values())
        units.append(unit)
    return TextAnalysis(text=text, scores=scores, hits=hits, units=units)


# --------------------------------------------------------------------------- public API


def score_text(text: str) -> dict[str, float]:
    """A length-normalised score per document type (all five; 0.0 when no cue is found)."""
    return dict(analyse(text).scores)


def _ranked(scores: dict[str, float]) -> list[str]:
    # highest score first; ties in DOC_TYPES order, except that "Other" wins an all-zero tie
    return sorted(DOC_TYPES, key=lambda t: (-scores[t], 0 if (t == OTHER and scores[t] == 0) else 1,
                                            DOC_TYPES.index(t)))


def best_type(text: str) -> tuple[str, float]:
    """``(doc_type, margin)``: the best-scoring type and its relative margin
    ``(best - second) / best`` in [0, 1] (``("Other", 0.0)`` when the text has no cue)."""
    return _best_of(analyse(text).scores)


def _best_of(scores: dict[str, float]) -> tuple[str, float]:
    ranked = _ranked(scores)
    s1, s2 = scores[ranked[0]], scores[ranked[1]]
    if s1 <= 0:
        return OTHER, 0.0
    return ranked[0], round((s1 - s2) / s1, 4)


@dataclass(frozen=True)
class Support:
    """Does a text support a label? (V2's offline judgment asks this of a segment's pages.)"""

    doc_type: str
    score: float
    #: the distinct cues of ``doc_type`` found, exactly as they appear in the text
    matched_terms: tuple[str, ...]
    supported: bool
    best_type: str
    best_score: float


def lexical_support(text: str, doc_type: str) -> Support:
    """Whether ``text`` supports ``doc_type`` as its PRIMARY label.

    Supported when the type's score is at least :data:`SUPPORT_MIN` and at least
    :data:`SUPPORT_RATIO` of the best type's score; "Other" is also supported when no type
    reaches :data:`SUPPORT_MIN` (a text without clinical vocabulary is "Other").
    """
    if doc_type not in DOC_TYPES:
        raise ValueError(f"unknown doc type {doc_type!r}; expected one of {DOC_TYPES}")
    analysis = analyse(text)
    scores = analysis.scores
    best, _ = _best_of(scores)
    score = scores[doc_type]
    best_score = scores[best]
    supported = score >= SUPPORT_MIN and score >= SUPPORT_RATIO * best_score
    if doc_type == OTHER and best_score < SUPPORT_MIN:
        supported = True
    return Support(
        doc_type=doc_type,
        score=score,
        matched_terms=tuple(analysis.matched_terms(doc_type)),
        supported=supported,
        best_type=best,
        best_score=best_score,
    )


def find_vendors(text: str) -> list[str]:
    """Lab/vendor names of ``vendors.json`` found in ``text`` (the list's spelling, in order of
    first appearance; where names overlap, e.g. "Caris Life Sciences" and "Caris", the longest)."""
    if not text:
        return []
    found: list[tuple[int, int, str]] = []
    index = get_lexicon().vendors
    for tok in _TOKEN.finditer(text):
        for name, rx in index.get(tok.group().lower(), ()):
            m = rx.match(text, tok.start())
            if m:
                found.append((m.start(), m.end(), name))
    # longest first; on the same span, the name spelled as in the text ("LabCorp" vs "Lab Corp")
    found.sort(key=lambda f: (-(f[1] - f[0]), f[0],
                              0 if text[f[0]:f[1]].lower() == f[2].lower() else 1, f[2]))
    taken: list[tuple[int, int, str]] = []
    for s, e, name in found:
        if all(e <= ts or s >= te for ts, te, _ in taken):
            taken.append((s, e, name))
    out: list[str] = []
    for _, _, name in sorted(taken):
        if name not in out:
            out.append(name)
    return out
