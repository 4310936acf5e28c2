"""The rooms of DESIGN.md, checked on the source: no two modules import each other (also not
lazily, inside a function), the domain core imports no Airflow, and (ADR 0032) every name has one
address: no package re-exports, ``docverify.sme.*`` / ``docverify.llm.*`` names come from their module."""

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


def test_a_package_init_re_exports_nothing():
    """ADR 0032: a package's ``__init__`` imports nothing (its docstring, at most a ``__version__``);
    every name has one address, the module that defines it."""
    offenders = []
    for f in PLUGINS.rglob("__init__.py"):
        offenders += [f"{f.relative_to(PLUGINS)}:{node.lineno}" for node in ast.parse(f.read_text()).body
                      if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "module", "") != "__future__"]
    assert offenders == []


def _defined(f: pathlib.Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(f.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def test_sme_and_llm_names_are_imported_from_the_module_that_defines_them():
    """ADR 0032: ``from docverify.sme.<module> import X`` / ``from docverify.llm.<module> import X``
    name the module where X is defined (no re-exports), in the code, the DAGs, the tests and the scripts."""
    mods = _modules()
    offenders = []
    for root in ("plugins", "dags", "tests", "scripts"):
        for f in (PLUGINS.parent / root).rglob("*.py"):
            for node in ast.walk(ast.parse(f.read_text())):
                if not (isinstance(node, ast.ImportFrom) and node.module
                        and node.module.split(".")[:2] in (["docverify", "sme"], ["docverify", "llm"])):
                    continue
                where = mods.get(node.module)
                if where is None:
                    offenders.append(f"{f.name}:{node.lineno}: no module {node.module}")
                    continue
                defined = _defined(where)
                offenders += [f"{f.name}:{node.lineno}: {node.module}.{a.name}" for a in node.names
                              if a.name not in defined and f"{node.module}.{a.name}" not in mods]
    assert offenders == []
