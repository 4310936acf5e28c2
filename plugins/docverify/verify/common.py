"""Helpers shared by the verifiers: text normalisation and fuzzy look-ups, locations."""

from __future__ import annotations

import bisect
import functools
import math
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein, Opcodes

from docverify.domain.models import (
    ClassificationOutput,
    DocumentBundle,
    Segment,
    TypeClassification,
    strongest_levels,
)

#: V3's judgment phase reads only the start of the document (spec slide 5).
V3_CONTEXT_CHARS = 4000

_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"), "-")
_QUOTES = {ord("\u2018"): "'", ord("\u2019"): "'", ord("\u201c"): '"', ord("\u201d"): '"'}
_WS = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Case-, width- and whitespace-insensitive form used for every text comparison
    (NFKC, casefold, unified dashes and quotes, soft hyphens removed, runs of whitespace → one
    space)."""
    text = unicodedata.normalize("NFKC", text).replace("\u00ad", "")
    text = text.translate(_DASHES).translate(_QUOTES).casefold()
    return _WS.sub(" ", text).strip()


@functools.lru_cache(maxsize=4096)
def _norm_cached(text: str) -> str:
    return normalise(text)


def contains(haystack: str, needle: str, *, threshold: float = 90.0, fuzzy_min_chars: int = 12,
             critical: CriticalTokens | None = None, ocr: bool = False) -> bool:
    """Is ``needle`` in ``haystack`` after normalisation, tolerating OCR noise?

    Exact substring first; then, for needles of at least ``fuzzy_min_chars`` characters,
    rapidfuzz's ``partial_ratio`` (best-aligned window) must reach ``threshold``. Short needles
    must match exactly: a fuzzy match of three letters means nothing. With ``critical`` (V4's
    faithfulness rules), a fuzzy match must also be faithful: see :func:`find_text`.
    """
    return find_text(haystack, needle, threshold=threshold, fuzzy_min_chars=fuzzy_min_chars,
                     critical=critical, ocr=ocr).found


#: How a near match differs in critical tokens: category → {"snippet": [...], "page": [...]}
Differences = dict[str, dict[str, list[str]]]


@dataclass(frozen=True)
class TextMatch:
    """The result of :func:`find_text`. ``how``: "exact", "fuzzy" (a faithful near match),
    "unfaithful" (a near match whose critical tokens differ from the page: not found; ``differs``
    says how, category → {"snippet": [...], "page": [...]}) or "none"."""

    found: bool
    how: str
    score: float = 0.0
    differs: dict[str, dict[str, list[str]]] | None = None


_NOT_FOUND = TextMatch(False, "none")


def find_text(haystack: str, needle: str, *, threshold: float = 90.0, fuzzy_min_chars: int = 12,
              critical: CriticalTokens | None = None, ocr: bool = False, quote: bool = True) -> TextMatch:
    """:func:`contains` with the evidence of its answer.

    Without ``critical`` the fuzzy match is the whole test (spacing, hyphenation, OCR noise and
    anything else of similar size pass). With it, a fuzzy (not exact) match is checked on the
    page window rapidfuzz aligned the needle with (:meth:`CriticalTokens.compare`): numbers,
    units, negation cues and laterality words must be there as written; when they are not, the
    next best window is tried (``critical.max_alignments`` in all), then the needle is not found
    (``how="unfaithful"``). ``ocr``: the haystack is an OCR'd page (extra digit tolerance, if the
    rules give any). ``quote``: the needle is a quoted snippet, so a verbatim occurrence governed
    by a negation just before it is no quote of what the page says (an anchor keyword is not).
    """
    n = _norm_cached(needle)
    if not n:
        return _NOT_FOUND
    h = _norm_cached(haystack)
    if n in h:
        if critical is not None and quote and (cut := critical.negation_cut_off(n, h)):
            return TextMatch(False, "unfaithful", 100.0, {"negation": {"snippet": [], "page": [cut]}})
        return TextMatch(True, "exact", 100.0)
    if len(n) < fuzzy_min_chars or not h:
        return _NOT_FOUND
    if critical is None:
        score = fuzz.partial_ratio(n, h, score_cutoff=threshold)
        return TextMatch(True, "fuzzy", score) if score >= threshold else _NOT_FOUND
    first: TextMatch | None = None
    for _ in range(max(1, critical.max_alignments)):
        al = fuzz.partial_ratio_alignment(n, h, score_cutoff=threshold)
        if al is None or al.score < threshold:
            break
        differs = critical.compare(n, h, al.dest_start, al.dest_end, al.score, ocr=ocr)
        if not differs:
            return TextMatch(True, "fuzzy", al.score)
        first = first or TextMatch(False, "unfaithful", al.score, differs)
        # the next best window: blank this one out (same length, so offsets hold)
        h = h[:al.dest_start] + "\x00" * (al.dest_end - al.dest_start) + h[al.dest_end:]
    return first or _NOT_FOUND


#: categories of critical tokens, as the issue messages name them
CRITICAL_LABELS = {"numbers": "a number", "units": "a unit", "negation": "a negation", "laterality": "laterality"}
_CUES = ("negation", "laterality")


@dataclass(frozen=True)
class _Span:
    start: int  # in the text without whitespace
    end: int
    category: str
    text: str
    quote: bool  # a span of the quote (the needle), not of the page


def _squeeze(text: str) -> tuple[str, list[int]]:
    """``text`` without whitespace, and the index in ``text`` of each character kept."""
    idx = [i for i, ch in enumerate(text) if not ch.isspace()]
    return "".join(text[i] for i in idx), idx


class FaithfulnessRules(TypedDict):
    """``faithfulness`` of ``include/rules/evidence.json``: the word lists of :class:`CriticalTokens`."""

    units: list[str]
    roman_after: list[str]
    negation_cues: list[str]
    laterality: list[str]
    number_abbreviations: NotRequired[list[str]]
    negation_prefixes: NotRequired[list[str]]
    negation_suffixes: NotRequired[list[str]]
    #: groups of characters OCR confuses (each folded to its first)
    confusable: NotRequired[list[str]]
    confusable_ocr: NotRequired[list[str]]
    anchor_chars: NotRequired[int]
    max_alignments: NotRequired[int]
    cue_similarity: NotRequired[float]


class CriticalTokens:
    """What a fuzzy match must not change (V4, ADR 0021), compiled once from rule data
    (``include/rules/evidence.json`` → ``faithfulness``).

    The needle is aligned character by character (Levenshtein opcodes, whitespace left out: spacing
    never counts) with the page stretch closest to it around the window rapidfuzz found. Critical
    spans are read on both sides, on whole words: numbers (integers, decimals, ranges and ratios
    "3-5", "3+4=7", "2/12", with a comparison sign before and a percent sign after: "<5 %"), the
    unit after a number ("0.5 ml": one of ``units``), a Roman numeral after a staging word ("stage
    iiia"), negation cues and laterality words. An edit touching a critical span is a difference,
    except

    * a same-length substitution of confusable characters inside the span (``confusable``: 0/o,
      1/l/i, 5/s, 8/b, "."/","; ``confusable_ocr`` adds groups on OCR'd pages only): an OCR slip
      can turn a digit into a letter, never into another digit;
    * a misread negation or laterality word: a cue on one side only, facing a word at least
      ``cue_similarity`` alike ("righl" / "right", "ab$ent" / "absent"; not "without" / "with");
    * on an OCR'd page, a unit read on one side only ("6 em" / "6 cm"): two different units
      ("mg" / "mcg") still differ;
    * at the edges (before the first, after the last run of ``anchor_chars`` equal characters) a
      token of the page alone: the page may go on where the quote stops, as an exact substring may.
    """

    def __init__(self, cfg: FaithfulnessRules) -> None:
        def words(items: list[str]) -> str:
            alts = sorted({re.escape(normalise(w)).replace(r"\ ", r"\s") for w in items}, key=len, reverse=True)
            return "|".join(alts)

        num = r"\d+(?:[.,]\d+)*"
        self.number = re.compile(rf"(?:[<>≤≥]=?\s?)?{num}(?:\s?[-+/x×:=]\s?{num})*(?:\s?%)?"
                                 rf"(?:\s?(?P<u>{words(cfg['units'])})(?![^\W_]))?")
        # "stage iiia", "grade ii": the numeral (group r) is a number
        self.roman = re.compile(rf"(?<![^\W_])(?:{words(cfg['roman_after'])})\s(?P<r>[ivx]+[a-d]?)(?![^\W_])")
        abbrev = words(cfg.get("number_abbreviations", []))
        # "no. 5", "no 12", "no: a123", "no #4" are numbers, not negations
        not_number = r"(?!\s?[.:#]{0,2}\s?#?[a-z]{0,3}\d)"
        parts = [rf"(?<![^\W_])(?:{abbrev})(?![^\W_]){not_number}"] if abbrev else []
        parts.append(rf"(?<![^\W_])(?:{words(cfg['negation_cues'])})(?![^\W_])")
        if cfg.get("negation_prefixes"):
            parts.append(rf"(?<![^\W_])(?:{words(cfg['negation_prefixes'])})(?=-?[a-z]{{3}})")
        if cfg.get("negation_suffixes"):
            parts.append(rf"(?<=[a-z])(?:{words(cfg['negation_suffixes'])})(?![^\W_])")
        self.negation = re.compile("|".join(parts))
        self.laterality = re.compile(rf"(?<![^\W_])(?:{words(cfg['laterality'])})(?![^\W_])")
        self.canon = self._table(cfg.get("confusable", []))
        self.canon_ocr = self._table(cfg.get("confusable", []) + cfg.get("confusable_ocr", []))
        self.anchor_chars = int(cfg.get("anchor_chars", 3))
        self.max_alignments = int(cfg.get("max_alignments", 3))
        self.cue_similarity = float(cfg.get("cue_similarity", 0.8))
        #: whole cue words, without whitespace, confusables folded → category
        self.cue_words = {_squeeze(normalise(w))[0].translate(self.canon): cat
                          for cat, cues in (("negation", cfg["negation_cues"]),
                                            ("negation", cfg.get("number_abbreviations", [])),
                                            ("laterality", cfg["laterality"]))
                          for w in cues}

    #: what may stand between a negation and what it negates: "no evidence of X", "negative for X"
    _GOVERNS = re.compile(r"(?:\s(?:evidence|signs?|history)\s(?:of|for)|\s(?:of|for))?\s?$")

    #: a negation that answers a form's question ("Smoker: no", "[ ] yes [ ] no", "yes | no",
    #: "biobank → no") governs nothing after it: the next field follows
    _ANSWER = re.compile(r"(?:[^\w\s.,;]|\byes|\bor)\s*$")

    def negation_cut_off(self, needle: str, haystack: str) -> str:
        """A quote found verbatim, but each time right after a negation that governs it ("evidence
        of malignancy" out of "no evidence of malignancy"): the page's negation ('' when some
        occurrence stands free, or the quote carries its own negation)."""
        if self.negation.match(needle):
            return ""
        cut = ""
        start = haystack.find(needle)
        while start >= 0:
            before = haystack[max(0, start - 40):start]
            tail = self._GOVERNS.search(before)
            assert tail is not None  # every part of _GOVERNS is optional: it matches at the end
            neg = [m for m in self.negation.finditer(before[:tail.start()]) if m.end() == tail.start()
                   and not self._ANSWER.search(before[:m.start()])]
            if not neg:
                return ""
            cut = cut or neg[-1].group()
            start = haystack.find(needle, start + 1)
        return cut

    @staticmethod
    def _table(groups: list[str]) -> dict[int, str]:
        table: dict[int, str] = {}
        for g in groups:
            for ch in g:
                table[ord(ch)] = g[0]
        return table

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, category) of the critical tokens of normalised ``text``."""
        out = []
        for m in self.number.finditer(text):
            u = m.start("u")
            out.append((m.start(), m.end() if u < 0 else len(text[:u].rstrip()), "numbers"))
            if u >= 0:
                out.append((u, m.end(), "units"))
        out += [(m.start("r"), m.end("r"), "numbers") for m in self.roman.finditer(text)]
        out += [(m.start(), m.end(), "negation") for m in self.negation.finditer(text)]
        out += [(m.start(), m.end(), "laterality") for m in self.laterality.finditer(text)]
        return out

    def compare(self, needle: str, haystack: str, start: int, end: int, score: float, *,
                ocr: bool = False) -> dict[str, dict[str, list[str]]]:
        """The critical differences between ``needle`` and the window ``haystack[start:end]``
        rapidfuzz aligned it with ({} = faithful). Both normalised."""
        # rapidfuzz's window has the needle's length; the page's version of the text may be longer
        # or shorter by the edits the score allows: look for the page stretch closest to the needle
        # (Levenshtein, whitespace left out) with its ends within that shift of the window's (on a
        # tie, one ending at a word's end and starting at a word's start, then the needle's length)
        h = haystack
        pad = int(len(needle) * (100.0 - score) / 50.0) + 4
        lo, hi = max(0, start - pad), min(len(h), end + pad)
        ns, n_idx = _squeeze(needle)
        rs, r_idx = _squeeze(h[lo:hi])
        if not rs:
            return {}
        pos = [lo + i for i in r_idx]  # squeezed index → index in h
        canon = self.canon_ocr if ocr else self.canon
        # confusables folded; a quote's character left out or changed costs more than a page
        # character taken in: the stretch reaches for a page's "no" rather than drop the quote's "-"
        nf, rf = ns.translate(canon), rs.translate(canon)
        dist = functools.partial(Levenshtein.distance, nf, weights=(1, 3, 3))

        def word_end(j: int) -> bool:  # the stretch ends with rs[j - 1]
            k = pos[j - 1]
            return h[k].isalnum() and (k + 1 == len(h) or not h[k + 1].isalnum())

        def word_start(i: int) -> bool:
            k = pos[i]
            return h[k].isalnum() and (k == 0 or not h[k - 1].isalnum())

        j0 = max(1, bisect.bisect_left(pos, end - pad))
        s0 = bisect.bisect_left(pos, start) + len(ns)  # the end of a stretch as long as the needle
        bq = min(range(j0, len(rs) + 1), key=lambda j: (dist(rf[:j]), not word_end(j), abs(j - s0), j))
        i1 = min(bisect.bisect_left(pos, start + pad), bq - 1)
        aq = min(range(0, i1 + 1), key=lambda i: (dist(rf[i:bq]), not word_start(i), abs(bq - i - len(ns)), -i))
        a, b = pos[aq], pos[bq - 1] + 1
        cs, c_idx = rs[aq:bq], [k - a for k in pos[aq:bq]]
        core = h[a:b]
        # critical tokens are read on whole words: one the stretch cuts is still whole
        wlo, whi = a, b
        while wlo > 0 and not h[wlo - 1].isspace():
            wlo -= 1
        while whi < len(h) and not h[whi].isspace():
            whi += 1
        n_spans = [_Span(bisect.bisect_left(n_idx, s), bisect.bisect_left(n_idx, e), cat, needle[s:e], True)
                   for s, e, cat in self.spans(needle)]
        words_text = h[wlo:whi]
        c_spans = [_Span(bisect.bisect_left(c_idx, s + wlo - a), bisect.bisect_left(c_idx, e + wlo - a), cat,
                         words_text[s:e], False) for s, e, cat in self.spans(words_text)]
        ops = Levenshtein.opcodes(ns, cs)
        anchors = [k for k, op in enumerate(ops) if op.tag == "equal" and op.src_end - op.src_start >= self.anchor_chars]
        first, last = (anchors[0], anchors[-1]) if anchors else (len(ops), -1)
        differs: dict[str, dict[str, list[str]]] = {}
        for k, op in enumerate(ops):
            if op.tag == "equal":
                continue
            hit_n = [s for s in n_spans if _touches(s, op.src_start, op.src_end)]
            hit_c = [s for s in c_spans if _touches(s, op.dest_start, op.dest_end)]
            # at an edge the page may go on where the quote stops: only the quote's tokens count
            critical = list(hit_n) if k < first or k > last else hit_n + hit_c
            if op.tag == "replace" and op.src_end - op.src_start == op.dest_end - op.dest_start:
                # same length: only a character inside a critical span that is not a confusable twin
                critical = [s for s in critical if any(
                    ns[op.src_start + i].translate(canon) != cs[op.dest_start + i].translate(canon)
                    and (_inside(s, op.src_start + i) if s.quote else _inside(s, op.dest_start + i))
                    for i in range(op.src_end - op.src_start))]
            if ocr:  # a unit OCR could not read on one side
                one_sided = not any(s.category == "units" for s in hit_n) or not any(
                    s.category == "units" for s in hit_c)
                critical = [s for s in critical if s.category != "units" or not one_sided]
            # a cue facing a word like it is OCR's misreading — only on an OCR'd page: in a text
            # layer "not" facing the "no" of "normal" is a negation added, not a misread
            critical = [s for s in critical if not (ocr and s.category in _CUES and self._misread_cue(
                s, hit_c if s.quote else hit_n, ops, ns if s.quote else cs, cs if s.quote else ns,
                canon, to_page=s.quote))]
            for s in critical:
                d = differs.setdefault(s.category, {"snippet": [], "page": []})
                for side, hits in (("snippet", hit_n), ("page", hit_c)):
                    for t in hits:
                        if t.category == s.category and t.text not in d[side]:
                            d[side].append(t.text)
            # a whole cue word inserted or left out between two words; OCR may have glued it to its
            # neighbour on one side ("noevidence"), where no word boundary shows it
            if op.tag == "delete" or (op.tag == "insert" and first <= k <= last):
                side, chunk, p, text, idx = (("snippet", ns[op.src_start:op.src_end], op.dest_start, core, c_idx)
                                             if op.tag == "delete" else
                                             ("page", cs[op.dest_start:op.dest_end], op.src_start, needle, n_idx))
                cat = self.cue_words.get(chunk.strip(".,;:()").translate(self.canon))
                if cat and _between_words(text, idx, p):
                    d = differs.setdefault(cat, {"snippet": [], "page": []})
                    if chunk not in d[side]:
                        d[side].append(chunk)
        return differs

    def _misread_cue(self, span: _Span, other_hits: list[_Span], ops: Opcodes, text: str, other: str,
                     canon: dict[int, str], *, to_page: bool) -> bool:
        """Is the cue ``span`` faced, on the other side, by a word that is no cue of its category
        but so alike that OCR misread it?"""
        if any(t.category == span.category for t in other_hits):
            return False  # a cue against a cue: "left" / "right"
        lo, hi = _map(ops, span.start, to_page), _map(ops, span.end, to_page)
        return fuzz.ratio(text[span.start:span.end].translate(canon),
                          other[lo:hi].translate(canon)) >= 100.0 * self.cue_similarity


def _map(ops: Opcodes, pos: int, to_page: bool) -> int:
    """Where position ``pos`` of one side of the alignment falls on the other side."""
    for op in ops:
        s0, s1, d0, d1 = ((op.src_start, op.src_end, op.dest_start, op.dest_end) if to_page
                          else (op.dest_start, op.dest_end, op.src_start, op.src_end))
        if s0 <= pos < s1 or (pos == s1 and op is ops[-1]):
            return d0 + (pos - s0) * (d1 - d0) // max(1, s1 - s0)
    return ops[-1].dest_end if to_page else ops[-1].src_end


def _between_words(text: str, idx: list[int], p: int) -> bool:
    """Is position ``p`` of the squeezed ``text`` (``idx``: squeezed → ``text`` indices) between two
    words, not inside one?"""
    if p <= 0 or p >= len(idx):
        return True
    before, after = idx[p - 1], idx[p]
    return after - before > 1 or not text[before].isalnum() or not text[after].isalnum()


def _inside(span: _Span, pos: int) -> bool:
    return span.start <= pos < span.end


def _touches(span: _Span, start: int, end: int) -> bool:
    """Does the edit [start, end) change ``span`` (an empty edit: an insertion inside it)?"""
    if start == end:
        return span.start < start < span.end
    return start < span.end and span.start < end


def describe_differences(differs: dict[str, dict[str, list[str]]]) -> str:
    """"a number (snippet 3, page 2); a negation (snippet –, page no)" for an issue message."""
    parts = []
    for cat, d in differs.items():
        s = ", ".join(d["snippet"]) or "–"
        p = ", ".join(d["page"]) or "–"
        parts.append(f"{CRITICAL_LABELS.get(cat, cat)} (snippet {s}, page {p})")
    return "; ".join(parts)


#: a word of a page's vocabulary for :func:`word_share`: 4+ letters
_VOCABULARY_WORD = re.compile(r"[^\W\d_]{4,}")


def distinct_words(text: str) -> frozenset[str]:
    """A page's distinct words of 4+ letters, lower-cased (what :func:`word_share` compares)."""
    return frozenset(_VOCABULARY_WORD.findall(text.lower()))


def word_share(a: frozenset[str], b: frozenset[str]) -> float | None:
    """The Jaccard share of two pages' distinct words (:func:`distinct_words`); None when either has no word
    (no evidence either way). Pages of one document share their vocabulary, the first page of another shares
    little: the classifier's page continuity (ADR 0035) and V2's seam check (ADR 0059) both read it."""
    if not a or not b:
        return None
    return len(a & b) / len(a | b)


def is_number(x: float) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def seg_loc(seg: Segment) -> str:
    return f"segments[{seg.segment_index}]"


def type_loc(seg: Segment, tc: TypeClassification) -> str:
    return f"segments[{seg.segment_index}] → {tc.doc_type}"


def iter_type_entries(cls: ClassificationOutput) -> Iterator[tuple[int, Segment, TypeClassification]]:
    """(position of the segment in the array, segment, type entry) for every entry."""
    for pos, seg in enumerate(cls.segments):
        for tc in seg.classifications:
            yield pos, seg, tc


def page_span(lo: int, hi: int) -> str:
    """``page 3`` or ``pages 3–5`` (for messages)."""
    return f"page {lo}" if lo == hi else f"pages {lo}–{hi}"


def page_runs(pages: Iterable[tuple[int, str]]) -> list[tuple[str, int, int]]:
    """Pages read as a type, ``(page number, type)`` in ascending page order → runs of consecutive pages
    of the same type, ``(type, first page, last page)``."""
    runs: list[tuple[str, int, int]] = []
    for num, doc_type in pages:
        if runs and runs[-1][0] == doc_type and runs[-1][2] == num - 1:
            runs[-1] = (doc_type, runs[-1][1], num)
        else:
            runs.append((doc_type, num, num))
    return runs


def segment_text(bundle: DocumentBundle, seg: Segment) -> str:
    lo, hi = min(seg.page_start, seg.page_end), max(seg.page_start, seg.page_end)
    return "\n\n".join(p.text for p in bundle.pages if lo <= p.page_num <= hi)




def strongest_presence(cls: ClassificationOutput) -> dict[str, str]:
    """The strongest presence level of each type over the mixture and every segment."""
    levels = [(m.doc_type, m.presence_level) for m in cls.document_mixture]
    levels += [(tc.doc_type, tc.presence_level) for _, _, tc in iter_type_entries(cls)]
    return strongest_levels(levels)


def primary_types(cls: ClassificationOutput) -> set[str]:
    """Types marked PRIMARY anywhere (a segment or the mixture)."""
    return {t for t, level in strongest_presence(cls).items() if level == "PRIMARY"}


# --------------------------------------------------------------------------- match form (V3's traps)

# invisible characters: a soft hyphen joins the two halves of its word, the others separate words
_INVISIBLE = {ord("\u00ad"): None, **dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u180e"), " ")}
_MATCH_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\ufe58\ufe63\uff0d"), "-")
#: a run of spaces and punctuation between two letters is a word separator ("Specimen-Receipt",
#: "D.O.B", "FAX\n\nCOVER SHEET"); next to a digit punctuation is kept (dates, phone numbers), and
#: so is "#" ("Authorization #A123", "Med. Rec. #: A1234")
_BETWEEN_LETTERS = re.compile(r"(?<=[^\W\d_])[^\w#]+(?=[^\W\d_])")
_ALNUM = r"[^\W_]"


def match_form(text: str) -> str:
    """The form V3's traps match keywords, vendors and header/footer patterns on: NFKC (no-break
    and other Unicode spaces become spaces, full-width letters ASCII), casefolded, dashes unified
    to ``-``, every run of whitespace (line breaks included) one space, and any run of spaces and
    punctuation between two letters one space. ``"TEST\\u00a0 REQUEST"``, ``"Test-Request"`` and
    ``"test\\nrequest"`` all become ``"test request"``; ``"D.O.B.: 01/15/1970"`` becomes
    ``"d o b.: 01/15/1970"``."""
    text = unicodedata.normalize("NFKC", text).translate(_INVISIBLE).translate(_MATCH_DASHES).casefold()
    text = _WS.sub(" ", text).strip()
    return _BETWEEN_LETTERS.sub(" ", text)


def term_pattern(term: str, *, stem: bool = False) -> re.Pattern[str]:
    """A regex finding ``term`` (a literal word or phrase) in :func:`match_form` text on word
    boundaries: "test request" finds "TEST  REQUEST" and "Test-Request" but not "contest
    requested"; "requisition" does not find "requisitioned". Between two words of the term any
    run of spaces/punctuation matches; next to a symbol of the term ("authorization #") optional
    spaces. A term already holding regex syntax (a backslash, ``c\\.\\d+``) is used as is. With
    ``stem`` the term is a word stem: letters may follow its last word ("histolog" finds
    "histology", "gene" finds "genetic")."""
    if "\\" in term:
        return re.compile(rf"(?<!{_ALNUM}){term}(?!{_ALNUM})", re.IGNORECASE)
    tokens = re.findall(rf"{_ALNUM}+|\S", match_form(term))
    if not tokens:
        raise ValueError("empty term")
    is_word = [re.fullmatch(rf"{_ALNUM}+", t) is not None for t in tokens]
    body = re.escape(tokens[0])
    for k in range(1, len(tokens)):
        body += (r"[\W_]+" if is_word[k - 1] and is_word[k] else r"\s*") + re.escape(tokens[k])
    head = f"(?<!{_ALNUM})" if is_word[0] else ""
    tail = f"(?!{_ALNUM})" if is_word[-1] and not stem else ""
    return re.compile(head + body + tail)
