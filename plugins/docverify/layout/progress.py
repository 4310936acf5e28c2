"""Page progress of a parse: the parser says each page it has finished; whoever runs it may listen.

In a parse worker (:mod:`docverify.layout.pool`) the listener sends each report to the parent over
the worker's pipe, and the parent extends the file's deadline while pages advance (a long scan is
read; a page that does not finish within the per-page budget is stopped, ADR 0047). In-process
(the CLI's ``parse_pdf``, the tests) nobody listens and a report costs one function call.
"""

from __future__ import annotations

from collections.abc import Callable

#: ``listener(done, total, ocr)``: ``done`` of ``total`` pages finished, ``ocr`` of them OCR'd
Listener = Callable[[int, int, int], None]

_listener: Listener | None = None


def listen(listener: Listener | None) -> None:
    """Send this process's page reports to ``listener`` (None: nobody listens)."""
    global _listener
    _listener = listener


def page_done(done: int, total: int, ocr: int = 0) -> None:
    """``done`` of the document's ``total`` pages are finished (0 right after it opened), ``ocr``
    of them read by OCR. A parse function run by the pool calls this to earn the per-page budget;
    one that never calls it has the pool's base limit for the whole file."""
    if _listener is not None:
        _listener(done, total, ocr)


#: OCR work of the current document in this process: pages OCR'd, seconds spent reading them
_ocr = [0, 0.0]


def ocr_page(seconds: float) -> None:
    """One page was OCR'd in ``seconds`` (its render, detection and recognition; not the engine's load)."""
    _ocr[0] += 1
    _ocr[1] += seconds


def take_ocr() -> tuple[int, float]:
    """The pages OCR'd and seconds spent since the last call (a parse worker asks after each job, and
    sends them with its answer: the layout stage records them per document, ADR 0052)."""
    pages, seconds = int(_ocr[0]), float(_ocr[1])
    _ocr[0], _ocr[1] = 0, 0.0
    return pages, seconds
