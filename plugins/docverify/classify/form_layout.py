"""Form pages by their layout (classifier-only; offline-lexicon-v8, ADR 0048).

Hospital intake joins forms -- a fax cover, a requisition, a consent or release form, a registration form or a
questionnaire -- to the reports. A short form page has little vocabulary to go by (and a questionnaire or a
requisition names clinical words on its options), so the Viterbi pass used to let the report beside it absorb it.
What a form has that a report has not is its *layout*: line after line of fields. :func:`form_layout` counts, on
one page, its non-empty lines, its **field lines** and its sentences of prose. A field line is a line with

* a blank to fill in (``____``, a dot leader ``........``);
* a checkbox or radio button (``[ ]``, ``( )``, ``☐``, ``○``, a symbol font's private-use glyph as pypdf extracts it);
* a yes/no choice (``Yes  No``, ``yes/no``);
* an instruction to the one filling it in (``Please circle``, ``check all that apply``, ``If yes``);
* a signature or date line (``Patient signature``, ``Printed name``, ``Date:`` alone; not a report's
  ``Electronically signed by`` or ``signature on file``);
* or labels with nothing after them (``Name:``, ``Date of birth:   Phone:``) that are not answered on the next line
  either -- the next line is a field line too, or the page ends. A report's ``MARGINS:`` over its value, and its
  section header alone on a line (a header cue of a clinical type of the shared lexicon: ``FINAL DIAGNOSIS:``,
  ``FINDINGS:``, ``Reason for visit:``) are no fields.

Whether a page *is* a form (the share of field lines, the sentences, the clinical evidence) and what follows from
it is the classifier's decision: :func:`docverify.classify.offline.is_form`. Nothing here changes the shared
lexicon (V2 and V4 read it); only the classifier reads this module. Numbers only: no page text leaves it.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from docverify.domain.lexicon import TextAnalysis
from docverify.domain.models import DocType

OTHER = DocType.OTHER.value

#: a blank to fill in (underscores, a dot leader)
_BLANK = re.compile(r"_{3,}|\.{6,}")
#: a checkbox or radio button: a bracket pair, a box glyph, a private-use glyph (a symbol font's box, as pypdf
#: extracts it)
_BOX = re.compile(r"\[\s?[xX✓✔]?\s?\]|\(\s?\)|[☐☑☒□■❑❒○◯\u25a2\ue000-\uf8ff]")
#: a yes/no choice
_YES_NO = re.compile(r"(?i)\byes\b[\s/.,]{0,6}\bno\b")
#: a signature or date line
_SIGN = re.compile(r"(?i)\bsignature\b|\bsign(?:ed)? here\b|\binitials\b|\bdate signed\b|\bprint(?:ed)? name\b"
                   r"|^\s*date\s*[:_.]*\s*$")
#: an instruction to the one filling the form in ("Please circle", "check all that apply", "If yes, ...")
_INSTRUCTION = re.compile(r"(?i)\b(?:please\s+(?:circle|check|print|initial|sign|list|describe|explain|complete|fill|"
                          r"answer|mark|indicate)|check\s+(?:one|all|any|if|here|the\s+box)|circle\s+(?:one|all|any)|"
                          r"if\s+yes\b|fill\s+in\b|mark\s+(?:one|all|an?\s+x))")
#: a sentence end of prose
_SENTENCE = re.compile(r"[a-z]{3,}[.!?](?=\s|$)")
#: a word, and a word that addresses the reader ("you", "your"): a form speaks to the one filling it in, a
#: report speaks about the patient
_WORD = re.compile(r"[^\W\d_]{2,}")
_YOU = re.compile(r"(?i)\b(?:you|your|yours|yourself)\b")


@dataclass(frozen=True)
class FormLayout:
    """The layout of one page: its lines (non-empty), the field lines among them, its sentences."""

    lines: int
    fields: int
    sentences: int
    #: its words (2+ letters) and, of them, those that address the reader ("you", "your", "yours", "yourself")
    words: int = 0
    addressed: int = 0
    #: lines that instruct the one filling the form in ("Please circle", "check all that apply", "If yes")
    instructions: int = 0

    @property
    def field_share(self) -> float:
        return self.fields / self.lines if self.lines else 0.0

    @property
    def addressed_share(self) -> float:
        return self.addressed / self.words if self.words else 0.0


def _mark(line: str) -> bool:
    """A line with a field's mark: a blank, a checkbox, a yes/no choice, a signature or date line (not a
    report's "Electronically signed by", "signature on file")."""
    if _BLANK.search(line) or _BOX.search(line) or _YES_NO.search(line) or _INSTRUCTION.search(line):
        return True
    return bool(_SIGN.search(line)) and len(line.strip()) <= SIGN_CHARS and not _SIGNED.search(line)


#: a signature line is at most this long
SIGN_CHARS = 80
_SIGNED = re.compile(r"(?i)electronic|on file|signed by|\bsigned\b")


def _empty_labels(line: str) -> bool:
    """The line is labels with nothing after them ("Name:", "Date of birth:   Phone:")."""
    pieces = line.strip().split(":")
    if len(pieces) < 2 or pieces[-1].strip(" \t_.,()/-"):
        return False
    return all(0 < len(p.strip(" \t_.,()/-")) <= LABEL_CHARS and p.strip(" \t_.,()/-")[0].isalpha()
               for p in pieces[:-1])


#: a label is at most this many characters long
LABEL_CHARS = 48


def _holds(starts: list[int], lo: int, hi: int) -> bool:
    """Some start in ``starts`` (sorted) lies in [lo, hi)."""
    i = bisect.bisect_left(starts, lo)
    return i < len(starts) and starts[i] < hi


def form_layout(analysis: TextAnalysis) -> FormLayout:
    """The layout of a page: how many of its lines are field lines and how many sentences of prose it holds.
    A field line has a field's mark (a blank, a checkbox, a yes/no choice, a signature or date line), or is
    labels with nothing after them that are not answered on the next line either (the next line is a field
    line too, or the page ends): a report's "MARGIN:" over its value, or its section header ("FINAL DIAGNOSIS:",
    a header cue of a clinical type) alone on a line, is no field."""
    text = analysis.text
    headers = sorted(h.start for t, hs in analysis.hits.items() if t != OTHER
                     for h in hs if h.entry.kind == "header")
    rows: list[tuple[bool, bool]] = []  # per non-empty line: (a mark, empty labels)
    pos = 0
    for raw in text.split("\n"):
        if raw.strip():
            label = _empty_labels(raw) and not _holds(headers, pos, pos + len(raw))
            rows.append((_mark(raw), label))
        pos += len(raw) + 1
    fields = 0
    for i, (mark, label) in enumerate(rows):
        if mark or label and (i + 1 == len(rows) or rows[i + 1][0] or rows[i + 1][1]):
            fields += 1
    return FormLayout(len(rows), fields, len(_SENTENCE.findall(text)), len(_WORD.findall(text)),
                      len(_YOU.findall(text)), len(_INSTRUCTION.findall(text)))
