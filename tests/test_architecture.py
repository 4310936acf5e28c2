"""The rooms of the design, checked on the source: the core's layers (ADR 0039: every import points
down or within its layer, lazy ones included; no import circle of any length), the domain core imports
no Airflow, and (ADR 0032) every name has one address: no package re-exports, ``docverify.sme.*`` /
``docverify.llm.*`` names come from their module."""

from __future__ import annotations

import ast
import pathlib
import shutil
import subprocess
import sys

from scripts import check_layers

ROOT = pathlib.Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "plugins"


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for f in PLUGINS.rglob("*.py"):
        parts = f.relative_to(PLUGINS).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def test_the_core_keeps_its_layers_and_nothing_imports_in_a_circle():
    """ADR 0039: the layer contract of ``scripts/check_layers.py`` (``make lint``) holds on the tree:
    every import of the core points down or within its layer, and no import circle, of any length
    and lazy imports included, among the modules of ``plugins/``."""
    assert check_layers.check(ROOT) == []


def _copy(tmp_path: pathlib.Path) -> pathlib.Path:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    # the core alone: the planted fault is then the only one, whatever the Airflow packages hold today
    shutil.copytree(PLUGINS / "docverify", tmp_path / "plugins/docverify", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_an_upward_import_fails_the_check_naming_file_line_and_fix(tmp_path):
    root = _copy(tmp_path)
    models = root / "plugins/docverify/domain/models.py"
    lines = models.read_text().splitlines()
    # a lazy one, inside a function: the kind the old pairwise test could not see in a longer circle
    lines += ["", "", "def _planted():", "    from docverify.reporting.report import write", "", "    return write"]
    models.write_text("\n".join(lines) + "\n")
    # the upward arrow, and the circle it closes (the report imports the models)
    errors = [e for e in check_layers.check(root) if not e.startswith("import circle")]
    assert len(errors) == 1, errors
    line = len(lines) - 2
    assert errors[0].startswith(f"plugins/docverify/domain/models.py:{line}: docverify.domain.models (layer domain) "
                                "imports docverify.reporting.report (layer reporting, above it)")
    assert "Fix: move what docverify.domain.models needs from docverify.reporting.report down" in errors[0]
    result = subprocess.run([sys.executable, str(ROOT / "scripts/check_layers.py"), "--root", str(root)],
                            capture_output=True, text=True)
    assert result.returncode == 1 and f"domain/models.py:{line}:" in result.stderr


def test_a_circle_within_one_layer_and_a_module_in_no_layer_fail_the_check(tmp_path):
    root = _copy(tmp_path)
    store = root / "plugins/docverify/storage/store.py"
    store.write_text(store.read_text() + "\n\ndef _planted():\n    from docverify.storage import runstore\n\n"
                                         "    return runstore\n")
    (root / "plugins/docverify/stray.py").write_text('"""a module dropped at the top."""\n')
    airflow = root / "plugins/docverify/domain/policy.py"
    airflow.write_text(airflow.read_text() + "\nimport airflow  # noqa\n")
    errors = check_layers.check(root)
    assert any(e.startswith("plugins/docverify/stray.py:1: docverify.stray is in no layer. Fix: move it into")
               for e in errors), errors
    assert any(e.startswith("import circle docverify.storage.runstore → docverify.storage.store → "
                            "docverify.storage.runstore") for e in errors), errors
    assert any("plugins/docverify/domain/policy.py" in e and "the domain core imports no Airflow. Fix:" in e
               for e in errors), errors
    assert len(errors) == 3, errors


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


def test_the_plugin_loader_skips_every_package():
    """``plugins/.airflowignore`` names every package of ``plugins/`` (ADR 0039): the plugin manager
    imports only ``docverify_plugin.py``, never a package's modules (PDF, LLM and Google libraries)."""
    ignored = {line.strip() for line in (PLUGINS / ".airflowignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    packages = {f"{d.name}/" for d in PLUGINS.iterdir() if (d / "__init__.py").exists()}
    assert packages - ignored == set()

