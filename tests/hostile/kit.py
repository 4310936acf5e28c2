"""The hostile night: bad inputs of every kind the issue lists, generated here (nothing large is
committed), plus the checks every case ends with — nothing lost, nothing leaked, nothing
silently accepted, nothing read or written outside the storage root.

Used by the tests in this folder and by ``scripts/hostile_night.py`` (the README's figures)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import resource
import shutil
import sys
import threading
import zlib
from dataclasses import dataclass, field
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = REPO / "include" / "samples"
DS = "2026-11-20"

#: sentences that stand for PHI inside hostile inputs: none may reach a report, an error, a log
#: line or an XCom value
SECRET_TEXT = "Patient: John Q. Hostile-7731, DOB 1950-01-01"
SECRET_OUTSIDE = "root:$6$hostile-shadow-line-4412$"
SECRET_COMPANION = "companion-snippet-Hostile-9902"
SECRET_EMBEDDED = "embedded-attachment-Hostile-5512"
SECRETS = (SECRET_TEXT, SECRET_OUTSIDE, SECRET_COMPANION, SECRET_EMBEDDED)


# ----------------------------------------------------------------------------- generated PDFs


def raw_pdf(objects: list[bytes], root: int = 1) -> bytes:
    """A PDF from numbered object bodies (object i+1 = objects[i]) with a correct xref."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root {root} 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def _stream(data: bytes, extra: str = "") -> bytes:
    return f"<< /Length {len(data)} {extra}>>\nstream\n".encode() + data + b"\nendstream"


def text_pdf(lines: list[str], *, extra_catalog: str = "", extra_objects: list[bytes] | None = None) -> bytes:
    """One page with ``lines`` of Helvetica text (objects 1–5; extra objects from 6 on)."""
    ops = ["BT /F1 10 Tf 40 800 Td 12 TL"]
    for line in lines:
        safe = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        ops.append(f"({safe}) '")
    ops.append("ET")
    content = "\n".join(ops).encode("latin-1")
    objects = [
        f"<< /Type /Catalog /Pages 2 0 R {extra_catalog}>>".encode(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 4 0 R >> >> "
        b"/Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        _stream(content),
        *(extra_objects or []),
    ]
    return raw_pdf(objects)


CLINICAL_LINES = ["CLINICAL NOTE", "Chief complaint: cough for three days.",
                  "History of present illness: the patient reports fever and fatigue.",
                  "Assessment and plan: viral upper respiratory infection, supportive care, follow up in one week."]


def blank_pages_pdf(n: int) -> bytes:
    """``n`` blank pages (one shared empty content stream)."""
    kids = " ".join(f"{4 + i} 0 R" for i in range(n))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode(),
               _stream(b"")]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 3 0 R >>"] * n
    return raw_pdf(objects)


def big_text_page_pdf(target_bytes: int) -> bytes:
    """One page whose content stream is ``target_bytes`` of text operators (uncompressed)."""
    line = "(visit {:07d} routine follow up, blood pressure stable, continue current medication) '\n"
    n = max(1, target_bytes // len(line.format(0)))
    leading = 800 / n  # every line stays on the page; each line is distinct
    content = (f"BT /F1 1 Tf 10 830 Td {leading:.6f} TL\n" + "".join(line.format(i) for i in range(n))
               + "ET").encode()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 4 0 R >> >> "
               b"/Contents 5 0 R >>",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>", _stream(content)]
    return raw_pdf(objects)


def flate_bomb_pdf(inflated_bytes: int = 1 << 30) -> bytes:
    """A page whose Flate content stream inflates to ``inflated_bytes`` (≈1 MB on disk per GB)."""
    comp = zlib.compressobj(9)
    chunk = b" " * (16 << 20)
    parts = [comp.compress(chunk) for _ in range(max(1, inflated_bytes // len(chunk)))]
    data = b"".join(parts) + comp.flush()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R >>",
               _stream(data, "/Filter /FlateDecode ")]
    return raw_pdf(objects)


def javascript_embedded_pdf() -> bytes:
    """A text page with an /OpenAction JavaScript and an embedded file attachment."""
    js = b"app.alert('hostile'); this.exportDataObject({cName: 'a.txt', nLaunch: 2});"
    attachment = SECRET_EMBEDDED.encode()
    extra = [
        f"<< /S /JavaScript /JS ({js.decode()}) >>".encode(),                        # 6
        _stream(attachment, "/Type /EmbeddedFile "),                                   # 7
        b"<< /Type /Filespec /F (a.txt) /UF (a.txt) /EF << /F 7 0 R >> >>",            # 8
        b"<< /Names [(a.txt) 8 0 R] >>",                                               # 9
    ]
    return text_pdf(CLINICAL_LINES, extra_catalog="/OpenAction 6 0 R /Names << /EmbeddedFiles 9 0 R >> ",
                    extra_objects=extra)


# ----------------------------------------------------------------------------- companions


def _classification(doc_id: str, segments: int = 1, pages: int = 1) -> dict:
    types = ["Clinical Note", "Pathology Report", "Genomic Report", "Radiology Report", "Other"]

    def tcs(primary: str) -> list[dict]:
        return [{"doc_type": t, "presence_level": "PRIMARY" if t == primary else "NO_EVIDENCE",
                 "confidence": 0.9 if t == primary else 0.0, "segment_share": 1.0 if t == primary else 0.0,
                 "top_evidence": [{"snippet": SECRET_COMPANION, "page": 1, "anchors_found": []}]
                 if t == primary else []} for t in types]

    segs = [{"segment_index": i + 1, "page_start": 1, "page_end": pages, "segment_page_count": pages,
             "dominant_type": "Clinical Note", "reasoning": SECRET_COMPANION, "classifications": tcs("Clinical Note")}
            for i in range(segments)]
    return {"doc_id": doc_id, "dominant_type_overall": "Clinical Note", "number_of_segments": segments,
            "segments": segs,
            "document_mixture": [{"doc_type": t, "presence_level": "PRIMARY" if t == "Clinical Note" else "NO_EVIDENCE",
                                  "overall_share": 1.0 if t == "Clinical Note" else 0.0} for t in types],
            "vendor_signals": [], "self_evaluation": {"confidence": 0.8, "notes": SECRET_COMPANION}}


def bad_companions() -> dict[str, tuple[bytes, str]]:
    """name → (companion bytes, the typed error code it must end in)."""
    good = json.dumps(_classification("x")).encode()
    return {
        "comp_list": (b"[1,2,3]\n", "INPUT_NOT_OBJECT"),
        "comp_null": (b"null\n\n\n\n\n", "INPUT_NOT_OBJECT"),
        "comp_truncated": (good[: len(good) // 2], "INPUT_INVALID_JSON"),
        "comp_deep": (b"[" * 100_000 + b"]" * 100_000, "INPUT_TOO_DEEP"),
        "comp_deep_object": (b'{"a":' * 5000 + b"1" + b"}" * 5000, "INPUT_TOO_DEEP"),
        "comp_nan": (good.replace(b'"confidence": 0.9', b'"confidence": NaN', 1), "INPUT_BAD_NUMBER"),
        "comp_inf": (good.replace(b'"confidence": 0.9', b'"confidence": 1e999', 1), "INPUT_BAD_NUMBER"),
        "comp_huge_int": (good.replace(b'"page_end": 1', b'"page_end": ' + b"9" * 40, 1), "INPUT_BAD_NUMBER"),
        "comp_many_segments": (json.dumps(_classification("x", segments=600)).encode(), "INPUT_TOO_MANY_ITEMS"),
        "comp_too_big": (b'{"pad": "' + b"x" * (1024 * 1024 + 10) + b'"}', "INPUT_TOO_LARGE"),
        "comp_not_utf8": (b'{"doc_id": "\xff\xfe"}', "INPUT_INVALID_JSON"),
    }


# ----------------------------------------------------------------------------- the night


@dataclass
class Night:
    root: pathlib.Path
    outside: pathlib.Path
    incoming: pathlib.Path
    #: file name → what must happen: ("route", None) for clean files, ("error", CODE) for hostile ones,
    #: ("escalate", None) for hostile inputs that are verified and must not be accepted
    expect: dict[str, tuple[str, str | None]] = field(default_factory=dict)

    def add(self, name: str, data: bytes, kind: str = "error", code: str | None = None) -> pathlib.Path:
        p = self.incoming / name
        p.write_bytes(data)
        self.expect[name] = (kind, code)
        return p


def sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def make_night(tmp: pathlib.Path, *, corpora: pathlib.Path | None = None, heavy: bool = False) -> Night:
    """The hostile night: two clean documents, then one hostile input of every kind.
    ``heavy`` adds the 20,000-page PDF, the 5 MB text page and the flate bomb."""
    root, outside = tmp / "root", tmp / "outside"
    incoming = root / "incoming" / DS
    incoming.mkdir(parents=True)
    outside.mkdir()
    n = Night(root, outside, incoming)
    # clean documents: they must be routed as on any night
    n.add("note_mts_19.pdf", sample("note_mts_19.pdf"), "route")
    n.add("genomic_brca_ngs.pdf", sample("genomic_brca_ngs.pdf"), "route")
    # names: spaces, unicode, leading dash, 250 characters, a.pdf beside a.PDF, only non-ASCII, '...pdf'
    note = sample("note_mts_19.pdf")
    for name in ("with spaces (1).pdf", "ünïcødé-名前.pdf", "-rf --no-preserve-root.pdf", "x" * 246 + ".pdf",
                 "a.pdf", "a.PDF", "日本語.pdf", "中文.pdf", "...pdf", "<script>alert(1)<|script>.pdf"):
        n.add(name, note, "route")
    # not PDFs / broken PDFs
    n.add("plaintext.pdf", f"{SECRET_TEXT}\nDiagnosis: hostile.\n".encode(), "error", "NOT_A_PDF")
    n.add("html.pdf", f"<html><body>{SECRET_TEXT}</body></html>".encode(), "error", "NOT_A_PDF")
    n.add("empty.pdf", b"", "error", "EMPTY_FILE")
    n.add("truncated.pdf", note[: len(note) // 3], "error", None)  # CORRUPT or a partial parse → escalated
    n.add("js_embedded.pdf", javascript_embedded_pdf(), "route")
    if corpora is not None:
        pdfs = corpora / "pdfs"
        for name, code in (("enc_pdfium_rc4_pw.pdf", "ENCRYPTED"), ("zero_pages_qpdf_empty.pdf", None),
                           ("corrupt_severe_bug1020226.pdf", None), ("corrupt_cyclic_page_tree.pdf", None),
                           ("scan_ccitt_fax_g4.pdf", "NO_TEXT_LAYER")):
            n.add(f"corpus_{name}", (pdfs / name).read_bytes(), "error", code)
    # companions that are not classifications: each a typed error of its document only
    for stem, (data, code) in bad_companions().items():
        n.add(f"{stem}.pdf", note, "error", code)
        (incoming / f"{stem}.classification.json").write_bytes(data)
    # a companion that parses but has the wrong types: verified, SCHEMA_INVALID, escalated
    n.add("comp_wrong_types.pdf", note, "escalate")
    (incoming / "comp_wrong_types.classification.json").write_text(
        json.dumps({"doc_id": 5, "segments": "all", "number_of_segments": "two"}))
    # symbolic links and non-regular files: never followed, never read
    (outside / "shadow").write_text(SECRET_OUTSIDE + "\n")
    (outside / "outside.pdf").write_bytes(note)
    os.symlink(outside / "shadow", incoming / "link_to_shadow.pdf")
    os.symlink(outside / "outside.pdf", incoming / "link_to_outside_pdf.pdf")
    os.symlink(incoming / "note_mts_19.pdf", incoming / "link_inside.pdf")
    os.symlink("/nonexistent/target.pdf", incoming / "dangling.pdf")
    for name in ("link_to_shadow.pdf", "link_to_outside_pdf.pdf", "link_inside.pdf", "dangling.pdf"):
        n.expect[name] = ("error", "INPUT_NOT_REGULAR")
    os.mkfifo(incoming / "fifo.pdf")
    (incoming / "folder.pdf").mkdir()
    n.expect["fifo.pdf"] = ("error", "INPUT_NOT_REGULAR")
    n.expect["folder.pdf"] = ("error", "INPUT_NOT_REGULAR")
    if heavy:
        n.add("blank_20000_pages.pdf", blank_pages_pdf(20_000), "error", "TOO_LARGE")
        n.add("text_5mb_one_page.pdf", big_text_page_pdf(5 * 1024 * 1024), "error", "TOO_LARGE")
        n.add("flate_bomb.pdf", flate_bomb_pdf(), "error", None)  # TOO_LARGE (MemoryError) or CORRUPT (abort)
    return n


# ----------------------------------------------------------------------------- watching


class AccessWatch:
    """Every file this process opens or lists (``sys.addaudithook``) under ``area`` but outside
    ``root``. Audit hooks cannot be removed: one is installed per process and switched on and
    off."""

    _installed = False
    _active: AccessWatch | None = None

    def __init__(self, area: pathlib.Path, root: pathlib.Path):
        self.area, self.root = os.path.realpath(area), os.path.realpath(root)
        self.outside: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    @classmethod
    def _hook(cls, event: str, args: tuple) -> None:
        w = cls._active
        if w is None or event not in ("open", "os.listdir", "os.scandir", "os.mkdir", "os.rename", "os.link",
                                      "os.symlink", "os.remove", "shutil.rmtree"):
            return
        target = args[0] if args else None
        if isinstance(target, int) or target is None:
            return
        try:
            path = os.fsdecode(target)
            if event == "open" and len(args) > 2 and isinstance(args[2], int) and args[2] & os.O_NOFOLLOW:
                # an O_NOFOLLOW open never follows its last component: a link there is not opened
                path = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
            else:
                path = os.path.realpath(path)
        except (TypeError, ValueError):
            return
        if path.startswith(w.area + os.sep) and not (path == w.root or path.startswith(w.root + os.sep)):
            with w.lock:
                w.outside.append((event, path))

    def __enter__(self) -> AccessWatch:
        if not AccessWatch._installed:
            sys.addaudithook(AccessWatch._hook)
            AccessWatch._installed = True
        AccessWatch._active = self
        return self

    def __exit__(self, *exc) -> None:
        AccessWatch._active = None


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@contextlib.contextmanager
def captured_logs():
    """Every log record of the docverify loggers (lineage included), formatted with tracebacks."""
    h = Capture()
    h.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    loggers = [logging.getLogger(n) for n in ("docverify", "docverify_airflow", "")]
    old = [(lg, lg.level) for lg in loggers]
    for lg in loggers:
        lg.addHandler(h)
    logging.getLogger("docverify").setLevel(logging.DEBUG)
    try:
        yield h
    finally:
        for lg, level in old:
            lg.removeHandler(h)
            lg.setLevel(level)


def _unwatched(fn: Any) -> None:
    """``fn()`` with the access watch paused: the test's own change of the file system (a link
    made to a file outside the root) is not the pipeline's access."""
    active, AccessWatch._active = AccessWatch._active, None
    try:
        fn()
    finally:
        AccessWatch._active = active


def run_night(night: Night, judge: Any, *, run_id: str = "hostile", watch: bool = True,
              after: dict[str, Any] | None = None, workers: int = 2) -> dict:
    """discover → … → batch report, in process, with every stage's return value (what the DAG
    puts on XCom) and every log line kept for the leak scan. ``after``: stage name (``discover``,
    ``layout``) → a callable run once that stage is done (the file system changing under the night).
    ``workers``: the layout's parse workers (a night of a few PDFs needs one: a worker's start-up
    is most of its cost)."""
    after = after or {}
    from docverify.reporting import report
    from docverify.stages.common import Batch
    from docverify.stages.discover import discover
    from docverify.stages.layout import layout_local
    from docverify.stages.routes import accept, write_sme_packets
    from docverify.stages.verify import arbiter, auto_fix_retry_shard, plan_shards, retry_shards, verify_shard
    from docverify.storage.store import ArtifactStore

    b = Batch(store=ArtifactStore(night.root), ds=DS, run_id=run_id)
    xcom: list[Any] = []
    with captured_logs() as logs, (AccessWatch(night.root.parent, night.root) if watch else
                                   contextlib.nullcontext()) as w:
        # every stage on a fresh Batch (an empty run-store memo), as every task of the DAG
        xcom.append(discover(b.fresh()))
        if "discover" in after:
            _unwatched(after["discover"])
        xcom.append(layout_local(b.fresh(), workers=workers, timeout_s=60))
        if "layout" in after:
            _unwatched(after["layout"])
        shards = plan_shards(b.fresh(), shard_size=8)
        xcom.append(shards)
        for i, shard in enumerate(shards):
            xcom.append(verify_shard(b.fresh(), shard, judge, str(i)))
        xcom.append(arbiter(b.fresh(), shards=len(shards)))
        for i, shard in enumerate(retry_shards(b.fresh())):
            xcom.append(auto_fix_retry_shard(b.fresh(), shard, judge, str(i)))
        xcom.append(accept(b.fresh()))
        xcom.append(write_sme_packets(b.fresh()))
        xcom.append(report.write(b.fresh()))
    rep = json.loads((night.root / "reports" / DS / "batch_report.json").read_text())
    return {"batch": b, "report": rep, "xcom": xcom, "logs": logs.lines,
            "outside": list(w.outside) if watch else []}


def peak_rss_mb() -> float:
    """Peak resident memory of this process and of its largest waited-for child (parse workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, kids) / 1024, 1)


# ----------------------------------------------------------------------------- the checks


def packets_of(root: pathlib.Path, doc: dict) -> list[pathlib.Path]:
    """The escalation packet files of this night's document (same doc id and input URI), whatever
    key they are stored under (``sme_packet_<doc_id>.json`` or ``sme_packet_<night>_<doc_id>_<sha>.json``).
    An audit packet of an accepted document (issue 21) is no route of its own: left out."""
    out = []
    for p in sorted((root / "sme_packets").glob("sme_packet_*.json")):
        packet = json.loads(p.read_text())
        if packet.get("review_kind", "escalation") == "audit":
            continue
        if packet.get("doc_id") == doc["doc_id"] and packet.get("pdf_path") == doc["pdf_uri"]:
            out.append(p)
    return out


def withdrawn_of(root: pathlib.Path, kind: str, doc_id: str) -> list[pathlib.Path]:
    """Records a re-run moved aside for ``doc_id`` (``withdrawn/<ds>/<kind>_<key>[.n].json``)."""
    return [p for p in sorted((root / "withdrawn" / DS).glob(f"{kind}_*.json"))
            if json.loads(p.read_text())["record"].get("doc_id") == doc_id]


def routes_of(root: pathlib.Path, doc: dict) -> list[str]:
    """Where a document ended: its accepted record and/or its pending/reviewed packet(s) of this
    night (same input URI)."""
    out = []
    if (root / "accepted" / DS / f"{doc['doc_id']}.json").exists():
        out.append("accepted")
    out += ["sme_packet"] * len(packets_of(root, doc))
    return out


def leak_texts(night: Night, run: dict) -> list[str]:
    """Every text the leak scan reads: report files (all formats), error records, stage stats,
    XCom values, log lines."""
    texts = [json.dumps(run["xcom"], default=str), *run["logs"]]
    for p in (night.root / "reports").rglob("*"):
        if p.is_file():
            texts.append(p.read_text(errors="replace"))
    for p in (night.root / "runs").rglob("*"):
        if p.is_file() and (p.name == "error.json" or "_stages" in p.parts or p.name.startswith("_")):
            texts.append(p.read_text(errors="replace"))
    for p in (night.root / "sme_packets").glob("*.json"):  # the packet's error part (its text part is for the SME)
        err = json.loads(p.read_text()).get("error")
        if err:
            texts.append(json.dumps(err))
    return texts


def check_night(night: Night, run: dict) -> dict[str, Any]:
    """The three promises (plus confinement), asserted; returns the night's figures."""
    rep, b = run["report"], run["batch"]
    manifest = b.manifest()["documents"]
    from docverify.storage.paths import printable_name

    # expectations name files as reports print them; the manifest keeps a readable file's real name
    # (e.g. a private-use or bidi character) and an unsafe name (never read) already printable
    def printed(d: dict) -> str:
        last = d["pdf_rel"].rsplit("/", 1)[-1]
        return last if last in night.expect else printable_name(last)

    by_name = {printed(d): d for d in manifest}
    per_doc = {d["doc_id"]: d for d in rep["per_document"]}
    # nothing lost: every input named *.pdf is one manifest document, in the report, in exactly one route
    assert sorted(by_name) == sorted(night.expect), "an input is missing from the manifest or one was invented"
    assert len({d["doc_id"] for d in manifest}) == len(manifest), "two inputs share a doc id"
    assert rep["documents"] == len(night.expect) == sum(rep["final_routes"].values())
    assert "UNKNOWN" not in rep["final_routes"], rep["errors"]
    lost, silent = [], []
    for name, (kind, code) in night.expect.items():
        doc = by_name[name]
        entry = per_doc[doc["doc_id"]]
        where = routes_of(night.root, doc)
        if len(where) != 1:
            lost.append((name, where))
            continue
        if kind in ("error", "escalate"):
            if where != ["sme_packet"] or entry["final_decision"] != "ESCALATE_TO_SME":
                silent.append(name)
            if kind == "error":
                assert entry.get("error"), f"{name}: escalated without a typed error"
                if code is not None:
                    assert entry["error"] == code, f"{name}: {entry['error']} instead of {code}"
                packet = json.loads(packets_of(night.root, doc)[0].read_text())
                assert packet["error"]["error"] == entry["error"], f"{name}: the packet does not carry the error"
    assert lost == [], f"documents not in exactly one route: {lost}"
    assert silent == [], f"hostile inputs accepted: {silent}"
    # nothing leaked
    texts = leak_texts(night, run)
    hits = [(s, t[:80]) for s in SECRETS for t in texts if s in t]
    assert hits == [], f"input text leaked: {hits[:3]}"
    # nothing raw in the Markdown/HTML report
    md = (night.root / "reports" / DS / "batch_report.md").read_text()
    html = (night.root / "reports" / DS / "batch_report.html").read_text()
    assert "<script>" not in md and "<script>" not in html
    # nothing read or written outside the root (this process; the parse workers get root paths only)
    assert run["outside"] == [], run["outside"][:5]
    assert sorted(p.name for p in night.outside.iterdir()) == ["outside.pdf", "shadow"]
    return {"documents": len(night.expect), "lost": len(lost), "silent_accepts": len(silent),
            "outside_accesses": len(run["outside"]),
            "hostile": sum(1 for k, _ in night.expect.values() if k != "route"),
            "escalated_with_error": sum(1 for d in rep["per_document"] if d.get("error"))}


def copy_samples(dest: pathlib.Path, names: list[str]) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for n in names:
        for f in SAMPLES.glob(f"{n}*"):
            shutil.copy(f, dest / f.name)


def stand_in_airflow(tmp_path: pathlib.Path, script: str, **env: str) -> tuple[pathlib.Path, dict[str, str]]:
    """An Airflow home and an environment whose ``airflow`` on PATH is ``script`` (a stand-in for the
    components `make up` starts, scripts/up.sh): the home, and the environment to run up.sh in (``env`` added;
    the operator's own DOCVERIFY_UP_HOST and simple auth manager users left out unless given)."""
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    bin_dir.mkdir()
    (bin_dir / "airflow").write_text(script)
    (bin_dir / "airflow").chmod(0o755)
    full = {**os.environ, "AIRFLOW_HOME": str(home), "PATH": f"{bin_dir}:{os.environ['PATH']}", **env}
    for k in ("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "DOCVERIFY_UP_HOST"):
        if k not in env:
            full.pop(k, None)
    return home, full
