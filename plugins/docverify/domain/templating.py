"""Jinja2 templates of the human-readable outputs (``include/templates/``): one environment, one ``render``.

- Templates are found under ``include/templates/`` (located like every data file of the project:
  :func:`docverify.domain.resources.include_dir`; ``DOCVERIFY_INCLUDE_DIR`` overrides it).
- HTML templates (``*.html.j2``, ``*.html``) autoescape everything they print — page text is
  untrusted. Markdown and text templates are not HTML-escaped; what their format needs is escaped
  by the filters below (``md_inline`` for a line, ``md_cell`` for a table cell, ``md_fence`` for a
  code block, ``md_table`` for a whole table).
- In HTML a value is escaped as :func:`html.escape` does (``'`` → ``&#x27;``, ``"`` → ``&quot;``:
  what the project's pages printed before the templates) instead of MarkupSafe's ``&#39;`` /
  ``&#34;`` — the same characters escaped, byte-identical pages — and ``None`` prints as nothing.
  Markup (a macro's output) passes through as it is.
- Undefined names fail loudly (``StrictUndefined``: never an empty string in a report);
  ``trim_blocks``/``lstrip_blocks``: a line holding only a ``{% … %}`` tag prints nothing;
  ``keep_trailing_newline``: a file's last newline is part of its output.

Untrusted text is data, never template source (``{{`` in a PDF is printed, not evaluated), and no
template marks it safe.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Iterable, Sequence

import jinja2
from markupsafe import Markup

from docverify.domain.resources import include_dir

_AUTOESCAPE = ("html.j2", "html", "htm.j2", "htm", "xml.j2", "xml")


@jinja2.pass_eval_context
def _finalize(eval_ctx: jinja2.nodes.EvalContext, value: object) -> object:
    """Every ``{{ … }}`` passes here before it is printed. In an autoescaped template the value is
    escaped by ``html.escape`` (quote=True), ``None`` as nothing; Markup is already escaped."""
    if not eval_ctx.autoescape or hasattr(value, "__html__"):
        return value
    # html.escape's output is escaped text: as Markup, Jinja's autoescape leaves it as it is
    return Markup(html.escape("" if value is None else str(value), quote=True))


# --------------------------------------------------------------------------- Markdown filters


def md_table(rows: Iterable[Sequence[object]], header: Sequence[str]) -> str:
    """A compact Markdown (pipe) table; ``|`` inside a cell is escaped."""
    def esc(s: object) -> str:
        return str(s).replace("|", "\\|")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def md_inline(value: object) -> str:
    """Text for a Markdown line: whitespace collapsed, no HTML, no emphasis/link/heading syntax."""
    s = " ".join(str("" if value is None else value).split())
    return re.sub(r"([\\`*_\[\]<>#|!])", r"\\\1", s)


def md_cell(value: object) -> str:
    """Text for a Markdown table cell: whitespace collapsed, ``|`` and ``\\`` escaped, no HTML."""
    s = " ".join(str("" if value is None else value).split())
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def md_fence(text: str, info: str = "text") -> str:
    """``text`` as a fenced code block whose fence is longer than any run of backticks in it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def clip(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters (the last one an ellipsis) when longer."""
    return text if len(text) <= n else text[: n - 1] + "…"


FILTERS = {"md_table": md_table, "md_inline": md_inline, "md_cell": md_cell, "md_fence": md_fence, "clip": clip}


def environment() -> jinja2.Environment:
    """The project's environment for the current ``include/`` (one per folder and process: each
    template is compiled once)."""
    return _environment(str(include_dir() / "templates"))


@functools.cache
def _environment(folder: str) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        autoescape=jinja2.select_autoescape(enabled_extensions=_AUTOESCAPE, default_for_string=False,
                                            default=False),
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    return env


def render(template_name: str, **context: object) -> str:
    """``include/templates/<template_name>`` rendered with ``context``."""
    return environment().get_template(template_name).render(**context)
