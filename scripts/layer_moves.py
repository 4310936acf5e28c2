"""The folder moves of ADR 0039 (the layered core), as a script: the move of each module, then the
rewriting of every reference to a moved module in the working tree (tracked or not): imports
(``docverify.X``, ``from docverify import X``, ``from docverify.P import X``), dotted strings (mock
targets, logger names, ``:mod:`` roles) and file paths in the docs (``plugins/docverify/X.py``).

    python scripts/layer_moves.py --move      # move the files + rewrite (once; commit with git add)
    python scripts/layer_moves.py             # rewrite only (idempotent: a file written meanwhile
                                              # with the old names gets the new ones)

Kept after the move so that a branch written before it can be brought up to date with one command.
"""

from __future__ import annotations

import argparse
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: old dotted module → new dotted module (the layers are in pyproject.toml, [tool.docverify.layers])
MOVES: dict[str, str] = {
    # domain: the vocabulary (models, issue codes, policy, lexicon) and the project's data files
    "docverify.models": "docverify.domain.models",
    "docverify.codes": "docverify.domain.codes",
    "docverify.policy": "docverify.domain.policy",
    "docverify.lexicon": "docverify.domain.lexicon",
    "docverify.examples": "docverify.domain.examples",
    "docverify.schemas": "docverify.domain.json_schemas",
    "docverify.labelled_corpus": "docverify.domain.labelled_corpus",
    "docverify.resources": "docverify.domain.resources",
    "docverify.templating": "docverify.domain.templating",
    # storage: paths, limits, the artifact and run stores, the inputs, the shard summaries
    "docverify.limits": "docverify.storage.limits",
    "docverify.paths": "docverify.storage.paths",
    "docverify.store": "docverify.storage.store",
    "docverify.runstore": "docverify.storage.runstore",
    "docverify.inputs": "docverify.storage.inputs",
    "docverify.summaries": "docverify.storage.summaries",
    # judging: the judge interface and the offline judge; the LLM's price and rate limit beside the LLM judge
    "docverify.judges": "docverify.judging.judges",
    "docverify.cost": "docverify.llm.cost",
    "docverify.ratelimit": "docverify.llm.ratelimit",
    # arbiters: the jury beside its CR_V2 vote; the fraud decision arbiter named for what it is
    "docverify.jury": "docverify.arbiters.jury",
    "docverify.arbiters.decision": "docverify.arbiters.fraud_decision",
    # pipeline: one document's verification, its retry loop and the fixers the loop applies
    "docverify.pipeline": "docverify.pipeline.document",
    "docverify.retry": "docverify.pipeline.retry",
    "docverify.autofix": "docverify.pipeline.autofix",
    # reporting: what a night's outputs say
    "docverify.report": "docverify.reporting.report",
    "docverify.evaluate": "docverify.reporting.evaluate",
    "docverify.evaluate_render": "docverify.reporting.evaluate_render",
    "docverify.trend": "docverify.reporting.trend",
    "docverify.audit": "docverify.reporting.audit_sample",
    "docverify.outputs": "docverify.reporting.outputs",
    "docverify.trace": "docverify.reporting.trace",
    # stages: batch mode's collect/ingest passes run the verify stage's code
    "docverify.llm.batch": "docverify.stages.batch_mode",
    # not the product: the verifier benchmark's kit, used by scripts and their tests only
    "docverify.verifier_bench": "scripts.verifier_bench",
}

NEW_PACKAGES = {
    "domain": "The vocabulary of the core: the pydantic models, the issue codes, the verification policy, the\n"
              "lexicon, the worked examples, and the project's data files (``include/``) with their templates.",
    "storage": "Where a night's objects live: safe path parts, input limits, the artifact store, the typed run\n"
               "store, the inputs checked again when used, the shard summaries.",
    "judging": "The judgment phases behind one interface (:mod:`docverify.judging.judges`); the offline judge\n"
               "and the LLM judge (:mod:`docverify.llm.judge`) implement it.",
    "pipeline": "One document's verification (:mod:`docverify.pipeline.document`), its retry loop and the fixers\n"
                "the loop applies.",
    "reporting": "What a night's outputs say: the batch report, the feedback figures, the trend, the audit\n"
                 "sample, the per-document artifacts, one document's trail.",
}

EXCLUDE = {".venv", "airflow_home", "build", "data", ".git", ".mypy_cache", ".ruff_cache", ".pytest_cache",
           "node_modules", "__pycache__", ".hypothesis"}
#: files that name the new packages (``docverify.pipeline`` the package, not the old module): never rewritten
KEEP = {"layer_moves.py", "check_layers.py", "count_code.py", "pyproject.toml", "0039-layered-core.md"}
SUFFIXES = {".py", ".md", ".toml", ".cfg", ".txt", ".yaml", ".yml", ".j2", ".ini"}


def _path(mod: str) -> str:
    if mod.startswith("scripts."):
        return mod.replace(".", "/") + ".py"
    return "plugins/" + mod.replace(".", "/") + ".py"


def files() -> list[pathlib.Path]:
    out = []
    for p in ROOT.rglob("*"):
        rel = p.relative_to(ROOT).parts
        if any(part in EXCLUDE for part in rel) or not p.is_file():
            continue
        if p.suffix in SUFFIXES or p.name in ("Makefile", ".airflowignore"):
            out.append(p)
    return out


def _dotted(old: str, new: str) -> re.Pattern[str]:
    # a new module under the old name (docverify.pipeline → docverify.pipeline.document) must not
    # be rewritten again: the rewrite is idempotent
    children = sorted({n[len(old) + 1:].split(".")[0] for n in MOVES.values() if n.startswith(old + ".")})
    guard = ""
    if children:
        alt = "|".join(map(re.escape, children))
        guard = r"(?!\.(?:" + alt + r")\b)(?! import (?:" + alt + r")\b)"
    return re.compile(r"(?<![\w.])" + re.escape(old) + r"(?![\w])" + guard)


def rewrite(text: str) -> str:
    # 1. from PARENT import NAME [as ALIAS]: one name per line in this repository (checked by the caller)
    def from_import(m: re.Match[str]) -> str:
        indent, parent, name, alias, rest = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5)
        old = f"{parent}.{name}"
        if old not in MOVES:
            return m.group(0)
        new_parent, new_name = MOVES[old].rsplit(".", 1)
        if alias is None and new_name != name:
            alias = f" as {name}"
        return f"{indent}from {new_parent} import {new_name}{alias or ''}{rest}"

    text = re.sub(r"(?m)^([ \t]*)from (docverify(?:\.\w+)*) import (\w+)( as \w+)?([ \t]*(?:#.*)?)$",
                  from_import, text)
    # 2. dotted names: import lines, mock targets, logger names, :mod: roles, prose
    for old in sorted(MOVES, key=len, reverse=True):
        text = _dotted(old, MOVES[old]).sub(MOVES[old], text)
    # 3. file paths: plugins/docverify/x.py, docverify/x.py
    for old in sorted(MOVES, key=len, reverse=True):
        old_rel = old.replace(".", "/") + ".py"
        new_path = _path(MOVES[old])
        new_rel = new_path if MOVES[old].startswith("scripts.") else new_path[len("plugins/"):]
        text = re.sub(r"(?<![\w/.])plugins/" + re.escape(old_rel), new_path, text)
        text = re.sub(r"(?<=\.\./)plugins/" + re.escape(old_rel), new_path, text)
        text = re.sub(r"(?<![\w/.])" + re.escape(old_rel), new_rel, text)
    return text


def move() -> None:
    """Moves the files in the working tree (the index is left to the commit that records them)."""
    for pkg, doc in NEW_PACKAGES.items():
        if pkg == "pipeline":
            continue  # made below: plugins/docverify/pipeline.py is still a file
        d = ROOT / "plugins" / "docverify" / pkg
        d.mkdir(exist_ok=True)
        (d / "__init__.py").write_text(f'"""{doc}"""\n')
    # pipeline.py becomes pipeline/document.py: the file must leave before the folder comes
    tmp = ROOT / "plugins/docverify/_pipeline_tmp.py"
    (ROOT / _path("docverify.pipeline")).rename(tmp)
    (ROOT / "plugins/docverify/pipeline").mkdir()
    (ROOT / "plugins/docverify/pipeline/__init__.py").write_text(f'"""{NEW_PACKAGES["pipeline"]}"""\n')
    tmp.rename(ROOT / _path("docverify.pipeline.document"))
    for old, new in MOVES.items():
        if old != "docverify.pipeline":
            (ROOT / _path(old)).rename(ROOT / _path(new))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--move", action="store_true", help="git mv the modules first (once)")
    ap.add_argument("--dry-run", action="store_true", help="list the files that would change")
    args = ap.parse_args()
    if args.move:
        move()
    changed = []
    for f in files():
        if f.name in KEEP:
            continue
        try:
            before = f.read_text()
        except UnicodeDecodeError:
            continue
        after = rewrite(before)
        if after != before:
            changed.append(f.relative_to(ROOT))
            if not args.dry_run:
                f.write_text(after)
    print("\n".join(map(str, changed)))
    print(f"{len(changed)} files {'would change' if args.dry_run else 'rewritten'}")


if __name__ == "__main__":
    main()
