"""The rooms of DESIGN.md, checked on the source: no two modules import each other (also not
lazily, inside a function), and the domain core imports no Airflow."""

from __future__ import annotations

import ast
import pathlib

PLUGINS = pathlib.Path(__file__).resolve().parents[1] / "plugins"


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for f in PLUGINS.rglob("*.py"):
        parts = f.relative_to(PLUGINS).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _imports(f: pathlib.Path, known: dict[str, pathlib.Path]) -> set[str]:
    deps = set()
    for node in ast.walk(ast.parse(f.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            deps |= {m for m in (node.module, *(f"{node.module}.{a.name}" for a in node.names)) if m in known}
        elif isinstance(node, ast.Import):
            deps |= {a.name for a in node.names if a.name in known}
    return deps


def test_no_two_modules_import_each_other():
    mods = _modules()
    deps = {m: _imports(f, mods) for m, f in mods.items()}
    loops = sorted((a, b) for a in deps for b in deps[a] if a < b and a in deps.get(b, ()))
    assert loops == []


def test_the_domain_core_imports_no_airflow():
    offenders = []
    for f in (PLUGINS / "docverify").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            offenders += [f"{f.relative_to(PLUGINS)}: {n}" for n in names if n.split(".")[0] == "airflow"]
    assert offenders == []
