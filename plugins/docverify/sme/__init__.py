"""SME review (spec slides 9–10): one module per job, imported from where each name is defined.

:mod:`~docverify.sme.packets` (build, key, write, find and list packets),
:mod:`~docverify.sme.ground_truth` (validate an answer, save it as a new ground-truth version),
:mod:`~docverify.sme.answer` (an SME's answer from any channel, the rules every channel shares),
:mod:`~docverify.sme.correction` (a correction applied to a classification),
:mod:`~docverify.sme.context` (the page text and highlights around an issue),
:mod:`~docverify.sme.render` (a packet as Markdown / HTML),
:mod:`~docverify.sme.claims` (one review run per packet at a time) and
:mod:`~docverify.sme.helper` (the notebook's :class:`~docverify.sme.helper.SMEReviewHelper`).

A stored classification is read through :class:`docverify.domain.classification_view.ClassificationView`
(validated once, each field its JSON type or None). This package re-exports nothing (ADR 0032). Packet text, page text and snippets are PHI: these
modules log doc ids, versions, sources and URIs only.
"""
