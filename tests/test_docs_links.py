"""The documentation holds together: every relative link of README.md and docs/**/*.md names a
file that exists (and, for an #anchor on a Markdown page, a heading of that page, GitHub's slug),
every file path they name in backticks exists (issue 41: short forms resolved, ``::name`` defined),
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


# --------------------------------------------------------------------------- paths named in the docs

#: a code span naming a file: a path (``plugins/docverify/x.py``, ``llm/judge.py``, ``tests/...py``) or a
#: bare module name (``notify.py``), optionally with ``::name`` (a function, class or test in it)
_PATH_SPAN = re.compile(r"(?<!`)`((?:[\w.-]+/)*[\w.-]+\.(?:py|md|j2|json|toml|yaml|cfg|sh))(?:::([A-Za-z_][\w.]*))?(?:\(\))?`(?!`)")
#: where a short form is looked up: the repository, plugins/, the core and the Airflow side (``llm/judge.py``,
#: ``docverify/llm/judge.py``, ``operators/layout.py``), include/ (``rules/x.json``)
_BASES = ("", "plugins", "plugins/docverify", "plugins/docverify_airflow", "include")
#: folders whose files a run writes (a night's ``reports/trend.json``, the e2e tests' ``build/e2e/...``, the
#: local Airflow's ``airflow_home/airflow.cfg``, the local store ``data/``): outputs, not files of the repository
_OUTPUTS = ("reports/", "build/", "incoming/", "runs/", "sme/", "cache/", "_stages/", "feedback/", "airflow_home/",
            "data/")
#: Records of moves: an ADR's table of old names and what became of them names the old ones on purpose.
#: Each entry: the page, the old names it may keep, and why.
_HISTORICAL = {
    "docs/adr/0032-one-address.md": (
        {"sme.py", "llm.py", "batch.py", "arbiter.py", "sme_answer.py", "sme_claims.py", "sme_render.py",
         "sme_context.py", "sme_correction.py", "sme_ground_truth.py", "sme_packets.py", "llm_cache.py",
         "llm_faults.py", "llm_prompts.py", "llm_schemas.py"},
        "the flat modules this ADR split into the sme/ and llm/ packages (its table of moves)"),
    "docs/adr/0039-layered-core.md": (
        {"arbiters/decision.py", "llm/batch.py", "config.py"},
        "the old names in this ADR's table of moves (arbiters/fraud_decision.py, stages/batch_mode.py now) and "
        "the configuration module of its figures (the config/ package since ADR 0055)"),
    "docs/adr/0044-typed-seams.md": (
        {"sme/jsonish.py"}, "the helper issue 41 replaced by domain/classification_view.py (a view validated once)"),
    "docs/adr/0053-short-functions-one-hash-support-out-of-the-product.md": (
        {"domain/examples.py", "domain/labelled_corpus.py", "llm/batch.py", "pipeline.py"},
        "the modules this ADR moved out of the product, and the removed ones the docs named"),
    "docs/adr/0055-configuration-in-one-place.md": (
        {"plugins/docverify_airflow/config.py"}, "the module this ADR split into the config/ package"),
}


def _tracked() -> set[str]:
    """The repository's files (git's list; outside a checkout, the tree without its generated folders)."""
    import subprocess

    out = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True)
    if out.returncode == 0:
        return set(out.stdout.split())
    skip = {".venv", ".git", "build", "airflow_home", "data", "__pycache__"}
    return {f.relative_to(ROOT).as_posix() for f in ROOT.rglob("*")
            if f.is_file() and not skip & set(f.relative_to(ROOT).parts)}


def _names_defined(py: pathlib.Path) -> set[str]:
    """Top-level functions and classes of a module, and ``Class.method``."""
    import ast

    names: set[str] = set()
    for node in ast.parse(py.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names |= {f"{node.name}.{n.name}" for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    return names


def named_paths(page: pathlib.Path) -> list[tuple[str, str | None]]:
    """(path, ``::name`` or None) of every file path a page names in a code span outside fenced blocks."""
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return [(m.group(1), m.group(2)) for m in _PATH_SPAN.finditer(text)]


def resolve(page: pathlib.Path, path: str, tracked: set[str]) -> pathlib.Path | None:
    """The file a named path means: a path with a folder against the repository, plugins/, the core, the
    Airflow side, include/ and the page's own folder; a bare name anywhere in the repository (git's files,
    so a file a local run generated, e.g. ``airflow_home/airflow.cfg``, does not count)."""
    if "/" not in path:  # a bare module name (a bare data file name is a night's artifact: not checked)
        if not path.endswith(".py"):
            return ROOT
        hits = sorted(t for t in tracked if t.rsplit("/", 1)[-1] == path)
        return ROOT / hits[0] if hits else None
    # a file of the repository (git's list), not one a local run generated (a fresh clone has none of those)
    folders = {t.rsplit("/", i)[0] for t in tracked for i in range(1, t.count("/") + 1)}
    for cand in [ROOT / base / path.lstrip("./") for base in _BASES] + [(page.parent / path).resolve()]:
        rel = cand.relative_to(ROOT).as_posix() if cand.is_relative_to(ROOT) else ""
        if rel in tracked or rel in folders:
            return cand
    return None


def test_resolve_finds_short_forms_and_misses_removed_modules():
    tracked, page = _tracked(), ROOT / "docs" / "architecture.md"
    for short in ("plugins/docverify/llm/judge.py", "docverify/llm/judge.py", "llm/judge.py"):
        assert resolve(page, short, tracked) == ROOT / "plugins/docverify/llm/judge.py"
    assert resolve(page, "check_layers.py", tracked) == ROOT / "scripts/check_layers.py"
    for gone in ("llm/batch.py", "pipeline.py", "docverify/domain/labelled_corpus.py"):
        assert resolve(page, gone, tracked) is None
    assert "_call" in _names_defined(ROOT / "plugins/docverify/llm/judge.py") or \
        "LLMJudge._call" in _names_defined(ROOT / "plugins/docverify/llm/judge.py")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_page_names_exists(page: pathlib.Path):
    """Issue 41: a module, script, test or data file named in backticks exists (short forms resolved),
    and a ``::name`` after a ``.py`` file is defined in it (a function, class, ``Class.method`` or test)."""
    tracked, rel = _tracked(), str(page.relative_to(ROOT))
    kept, _reason = _HISTORICAL.get(rel, (set(), ""))
    missing = []
    for path, name in named_paths(page):
        if path in kept or (path.startswith(_OUTPUTS) and not path.endswith(".py")) or "*" in path:
            continue
        found = resolve(page, path, tracked)
        if found is None:
            missing.append(f"`{path}`: no such file")
        elif name and found.suffix == ".py" and name not in _names_defined(found) \
                and name.split(".")[-1] not in _names_defined(found):
            missing.append(f"`{path}::{name}`: {name} is not defined in {found.relative_to(ROOT)}")
    assert missing == []
