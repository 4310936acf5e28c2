"""Jinja2 templates of the human-readable outputs (``include/templates/``).

One environment for the project: templates are found under ``include/templates/`` (see
:func:`docverify.resources.include_dir`), undefined names fail loudly (``StrictUndefined``), and
HTML templates (``*.html.j2``) autoescape everything they print — page text is untrusted. Markdown
and text templates are not HTML-escaped; the Python side escapes what their format needs (e.g.
``|`` in a Markdown table cell, the ``md_table`` filter).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

import jinja2

from docverify.resources import include_dir


def md_table(rows: Iterable[Sequence[Any]], header: Sequence[str]) -> str:
    """A compact Markdown (pipe) table; ``|`` inside a cell is escaped."""
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(include_dir() / "templates")),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2", "html"), default_for_string=False),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["md_table"] = md_table
    return env


def render(template_name: str, **context: Any) -> str:
    """``include/templates/<template_name>`` rendered with ``context``."""
    return environment().get_template(template_name).render(**context)
