"""The documentation holds together: every relative link of README.md and docs/**/*.md names a
file that exists (and, for an #anchor on a Markdown page, a heading of that page, GitHub's slug),
and README.md stays a front door: at most 200 lines, `make run` and `make test` in its first 40."""

from __future__ import annotations

import pathlib
import re
import urllib.parse

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]

# [text](target) and ![alt](target); a target may carry a "title"; reference definitions [x]: target
_INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)


def _strip_code(text: str) -> str:
    """Markdown inside fenced blocks and code spans is not a link."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's heading anchor: lower case, markup and punctuation dropped (letters, digits,
    spaces, hyphens and underscores kept), each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(page: pathlib.Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for m in _HEADING.finditer(_FENCE.sub("", page.read_text(encoding="utf-8"))):
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: pathlib.Path) -> list[str]:
    text = _strip_code(page.read_text(encoding="utf-8"))
    return [m.group(1) for m in _INLINE.finditer(text)] + [m.group(1) for m in _REFDEF.finditer(text)]


def _relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) and not target.startswith("//")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: pathlib.Path):
    broken = []
    for target in links(page):
        if not _relative(target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / urllib.parse.unquote(path)).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with the anchor #{anchor} in {dest.relative_to(ROOT)}")
    assert broken == []


def test_readme_is_a_front_door():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines (at most 200: move the rest to docs/)"
    head = "\n".join(lines[:40])
    assert "make run" in head and "make test" in head


def test_slug_follows_github():
    assert slug("Feedback figures: `python -m docverify evaluate`") == "feedback-figures-python--m-docverify-evaluate"
    assert slug("Issue numbers → records") == "issue-numbers--records"
    assert slug("V5 second opinion (`arbiters/second_opinion.py`; off by default)") == \
        "v5-second-opinion-arbiterssecond_opinionpy-off-by-default"
