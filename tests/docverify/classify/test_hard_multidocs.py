"""The harder multi-document set of scripts/bench_classifier.py (issue 13): bundles of 2–4 texts
with short parts (one-page covers, short reports, few-line last pages, uneven page lengths), built
from tuning texts only. Synthetic texts written for this test (no corpus text)."""

from __future__ import annotations

from tests.docverify.classify.test_generalization import PATHOLOGY

RADIOLOGY = """EXAMINATION: CT chest with contrast.
TECHNIQUE: axial images were obtained after intravenous contrast.
COMPARISON: prior radiograph.
FINDINGS: no pulmonary embolism. No consolidation or pleural effusion. Heart size normal.
IMPRESSION: no acute cardiopulmonary abnormality.
"""

NOTE = """HISTORY OF PRESENT ILLNESS: 58-year-old man with two days of chest pain radiating to the left arm.
PAST MEDICAL HISTORY: hypertension, hyperlipidemia. MEDICATIONS: lisinopril, atorvastatin.
PHYSICAL EXAMINATION: blood pressure 150/90, heart regular, lungs clear.
ASSESSMENT AND PLAN: rule out acute coronary syndrome; serial troponins, aspirin, cardiology consult.
"""

ORDER = """REQUEST FOR MEDICAL RECORDS
Status: active   Intent: order   Priority: routine
Requested by: Records department, on behalf of the insurer
Reason for request: claim review. Payment of the claim is pending receipt of the records.
Please return the completed request with your signature and date.
"""

LETTER = """Dear colleague,
Further to our telephone conversation last week, please find enclosed the copies you asked for.
The originals remain with us; these copies are for your own files. If anything is missing or hard
to read, our office is open Monday to Friday between nine and five, and the copies can be sent
again by post or by courier at no charge to you.
Kindly confirm that they reached you by replying to this letter or by calling the office.
With thanks for your patience in this matter and kind regards,
The front office team"""


def test_the_harder_multi_document_set_is_seeded_and_has_short_parts(repo_dir):
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("bench_classifier_hard", repo_dir / "scripts" / "bench_classifier.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    texts = {"Clinical Note": NOTE * 12, "Pathology Report": PATHOLOGY * 10, "Radiology Report": RADIOLOGY,
             "Genomic Report": ("Gene: BRCA1 c.68_69del pathogenic variant, heterozygous.\n" * 90),
             "Other": ORDER * 6 + LETTER}
    records = [{"id": f"{t}-{i}", "corpus": "synthetic", "proposed_doc_type": t, "text": x[: len(x) - 40 * i]}
               for t, x in texts.items() for i in range(3)]
    docs = bench.make_hard_multidocs(records, n=200, seed=5)
    again = bench.make_hard_multidocs(records, n=200, seed=5)
    assert [[p.text for p in b.pages] for b, _ in docs] == [[p.text for p in b.pages] for b, _ in again]
    covers = tails = 0
    for bundle, truth in docs:
        assert 2 <= len(truth) <= 4
        assert all(a[0] != b[0] for a, b in zip(truth, truth[1:], strict=False))  # neighbours differ
        assert truth[0][1] == 1 and truth[-1][2] == bundle.total_pages == len(bundle.pages)
        assert all(b[1] == a[2] + 1 for a, b in zip(truth, truth[1:], strict=False))  # contiguous
        for t, a, b in truth:
            texts_ = [bundle.pages[i - 1].text for i in range(a, b + 1)]
            assert all(x.strip() for x in texts_)
            covers += t == "Other" and a == b and len(texts_[0]) <= bench.COVER_CHARS[1]
            tails += b > a and len(texts_[-1]) <= bench.TAIL_CHARS[1]
    assert covers > 20 and tails > 20  # the short parts are there
