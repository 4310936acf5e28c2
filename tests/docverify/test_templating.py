"""The templates of the human-readable outputs: HTML escapes what it prints (as html.escape does),
Markdown escapes through its filters, a missing variable is an error (never an empty string in a
report), templates follow include/; the SME packet templates print hostile page text as text."""

import re

import jinja2
import pytest

from docverify.domain import templating
from docverify.domain.models import SMEPacket
from docverify.domain.resources import include_dir
from docverify.domain.templating import environment, md_table, render
from docverify.reporting.evaluate import FeedbackFigures, UnreadableFile
from docverify.reporting.evaluate_render import render_html, render_markdown, render_text
from docverify.sme.render import packet_html, packet_markdown


def test_html_escapes_untrusted_text_and_markdown_does_not():
    hostile = "gs://b/<script>alert(1)</script>"
    f = FeedbackFigures(source=hostile, unreadable=[UnreadableFile(uri=hostile + "/gt_x.json", reason="a & b")])
    html = render_html(f)
    assert "<script>" not in html and "&lt;script&gt;" in html and "a &amp; b" in html
    md = render_markdown(f)
    assert f"`{hostile}`" in md  # Markdown keeps the text (a code span), it is not HTML
    assert hostile in render_text(f)


def test_markdown_table_escapes_the_cell_separator():
    assert md_table([("a|b", "1")], ("k", "v")).splitlines() == ["| k | v |", "|---|---|", "| a\\|b | 1 |"]


def test_a_missing_variable_fails_loudly():
    with pytest.raises(jinja2.UndefinedError):
        render("feedback_figures.md.j2", h="#", sub="##")
    assert environment().undefined is jinja2.StrictUndefined


# --------------------------------------------------------------------------- the environment; the SME packet


HOSTILE = "<script>alert('x')</script> & \"q\" {{ 7*7 }} {% raw %} {# c #} `` | * _ [a](b)"


@pytest.fixture
def own_templates(tmp_path, monkeypatch):
    """An include/ of the test's own with a few templates (DOCVERIFY_INCLUDE_DIR)."""
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "page.html.j2").write_text("<p title='{{ v }}'>{{ v }}</p>{{ none }}|{{ n }}\n")
    (folder / "note.md.j2").write_text("{% if v %}\n{{ v }}|{{ none }}\n{% endif %}\n")
    (folder / "cell.md.j2").write_text("| {{ v|md_cell }} | {{ v|md_inline }} |\n{{ v|md_fence }}")
    (folder / "missing.html.j2").write_text("{{ nowhere }}")
    monkeypatch.setenv("DOCVERIFY_INCLUDE_DIR", str(tmp_path))
    return folder


def test_templates_come_from_include_templates_and_follow_the_include_dir(own_templates):
    assert templating.environment().loader.searchpath == [str(own_templates)]
    assert templating.render("note.md.j2", v="x", none=None) == "x|None\n"  # block-tag lines print nothing


def test_the_project_templates_are_in_include():
    names = set(templating.environment().list_templates())
    assert {"sme_packet.html.j2", "sme_packet.md.j2", "_macros.html.j2", "sme_packet.css"} <= names
    assert templating.environment().loader.searchpath == [str(include_dir() / "templates")]


def test_html_is_escaped_like_html_escape_and_markdown_is_not(own_templates):
    out = templating.render("page.html.j2", v=HOSTILE, none=None, n=3)
    assert "<script" not in out and "{{" not in out.replace("{{ 7*7 }}", "") and "49" not in out
    escaped = ("&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &quot;q&quot; {{ 7*7 }} {% raw %} "
               "{# c #} `` | * _ [a](b)")
    assert out == f"<p title='{escaped}'>{escaped}</p>|3\n"  # None prints as nothing in HTML
    assert templating.render("note.md.j2", v=HOSTILE, none=None) == HOSTILE + "|None\n"


def test_a_name_missing_from_the_context_is_an_error(own_templates):
    with pytest.raises(jinja2.UndefinedError, match="nowhere"):
        templating.render("missing.html.j2")


def test_markdown_filters(own_templates):
    out = templating.render("cell.md.j2", v="a|b <i>x</i>\n*y* ```")
    # a cell: whitespace collapsed, | escaped, no HTML; a line: also no emphasis or code syntax
    assert out.splitlines()[0] == r"| a\|b &lt;i&gt;x&lt;/i&gt; *y* ``` | a\|b \<i\>x\</i\> \*y\* \`\`\` |"
    assert out.endswith("````text\na|b <i>x</i>\n*y* ```\n````")  # the fence outgrows the text's backticks
    assert templating.clip("abcdef", 4) == "abc…" and templating.clip("abc", 4) == "abc"


def test_no_template_marks_text_safe():
    folder = include_dir() / "templates"
    paths = [p for p in folder.rglob("*") if p.is_file()]
    assert any(p.parent.name == "web" for p in paths)  # the Airflow side's pages too (ADR 0054)
    for path in paths:
        text = path.read_text()
        assert not re.search(r"\|\s*safe\b|autoescape\s+false", text), path.name


def _packet(text: str) -> SMEPacket:
    issue = {"issue_id": "V3-0001", "severity": "BLOCKER", "agent": "V3", "code": "TRAP", "message": text,
             "location": "segments[0] → Genomic Report", "formatted": f"[BLOCKER] V3-0001 {text}",
             "context": {"page": 1, "before": [text], "match": text, "after": [text], "found": True, "how": "exact",
                         "score": 100}}
    primary = {"dominant_type_overall": text, "vendor_signals": [text], "segments": [
        {"segment_index": 0, "page_start": 1, "page_end": 1, "dominant_type": text, "reasoning": text,
         "classifications": [{"doc_type": "Genomic Report", "presence_level": "PRIMARY", "confidence": 0.9,
                              "top_evidence": [{"snippet": text, "page": 1, "anchors_found": [text]}]}]}]}
    return SMEPacket.model_validate({
        "doc_id": "d1", "pdf_filename": text, "pdf_path": "file:///x/d1.pdf", "total_pages": 1, "bundle_path": "",
        "v5_rule": 1, "v5_reason": text, "v5_explanation": f"{text}\n{text}", "total_issues": 1,
        "issues_summary": [issue], "primary_classification": primary, "created_at": "2026-11-21T00:00:00Z"})


def test_packet_templates_print_template_syntax_in_page_text_as_text():
    html = packet_html(_packet(HOSTILE))
    assert "<script" not in html and "49" not in html
    # every place the text goes (file name, reason, why, issue, page text, evidence, classification)
    assert html.count("{{ 7*7 }} {% raw %} {# c #}") >= 12
    md = packet_markdown(_packet(HOSTILE))
    assert "49" not in md and "{{ 7\\*7 }} {% raw %} {\\# c \\#}" in md  # inline text, escaped for Markdown
    assert ">> <script>alert('x')</script>" in md  # inside the page-text fence: verbatim
