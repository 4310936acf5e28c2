"""The templates of the human-readable outputs: HTML escapes what it prints, Markdown tables escape
their cell separator, a missing variable is an error (never an empty string in a report)."""

import jinja2
import pytest

from docverify.evaluate import FeedbackFigures, UnreadableFile
from docverify.evaluate_render import render_html, render_markdown, render_text
from docverify.templating import environment, md_table, render


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
