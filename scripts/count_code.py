"""The figures of ADR 0039 (the layered core), computed on the source with ``ast`` so they can be reproduced.

    python scripts/count_code.py [ROOT]          # ROOT: a checkout (default: this repository)
    python scripts/count_code.py --json [ROOT]
    python scripts/count_code.py --by-folder [ROOT]   # the core's type figures per folder

For ``plugins/`` (all three packages) and for the Airflow-free core ``plugins/docverify`` alone:

* ``Any``: every use of the name ``Any`` (``Any`` or ``typing.Any``) outside import lines;
* ``dict[str, Any]``: every subscript ``dict[str, Any]`` / ``Dict[str, Any]``;
* ``-> dict``: functions whose return annotation is the bare ``dict``;
* ``Any + object in annotations (lines)`` (issue 41): lines of a file where an annotation names ``Any``
  (``typing.Any``) or ``object`` — a parameter's (``*args`` and ``**kwargs`` included), a return, an
  annotated assignment or class field, and a type alias (a capitalised name bound to a subscript,
  ``X = dict[str, Any]``); string annotations are parsed. A line counts once whatever it names
  (``Mapping[str, object]``, ``dict[str, Any]``, ``-> object``: one line each); ``JsonValue`` is not
  counted (list those places apart: they are still loose);
* functions over 60 lines: ``def`` / ``async def`` (methods and nested functions included) whose
  ``end_lineno - lineno + 1`` exceeds 60;
* imports inside functions: ``import`` / ``from … import`` statements nested in a function body,
  and, of them, those from one module of the core to another (``docverify.*`` from ``docverify``);
* private imports: ``from docverify.a import _name`` in a module other than ``docverify.a``;
* top-level modules of the core: ``plugins/docverify/*.py`` beside its packages.
"""

from __future__ import annotations

import argparse
import ast
import json
import pathlib
from collections.abc import Iterator

LONG = 60
AO = "Any + object in annotations (lines)"


def _is_any(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (
        isinstance(node, ast.Attribute) and node.attr == "Any")


def _annotations(tree: ast.AST) -> Iterator[ast.expr]:
    """Every annotation of a module: parameters, returns, annotated assignments, type aliases."""
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = n.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                if arg is not None and arg.annotation is not None:
                    yield arg.annotation
            if n.returns is not None:
                yield n.returns
        elif isinstance(n, ast.AnnAssign):
            yield n.annotation
        elif (isinstance(n, ast.Assign) and isinstance(n.value, ast.Subscript) and len(n.targets) == 1
              and isinstance(n.targets[0], ast.Name) and n.targets[0].id[:1].isupper()):
            yield n.value


def _names_any_or_object(node: ast.AST) -> bool:
    for m in ast.walk(node):
        if _is_any(m) or (isinstance(m, ast.Name) and m.id == "object"):
            return True
        if isinstance(m, ast.Constant) and isinstance(m.value, str):  # a string annotation
            try:
                if _names_any_or_object(ast.parse(m.value, mode="eval")):
                    return True
            except SyntaxError:
                pass
    return False


def loose_annotation_lines(tree: ast.AST) -> int:
    """Lines of a module where an annotation names ``Any`` or ``object`` (see the module docstring)."""
    return len({a.lineno for a in _annotations(tree) if _names_any_or_object(a)})


def _module_of(f: pathlib.Path, plugins: pathlib.Path) -> str:
    parts = f.relative_to(plugins).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def count(files: list[pathlib.Path], plugins: pathlib.Path) -> dict[str, int]:
    c = dict.fromkeys(("files", "lines", "Any", "dict[str, Any]", "-> dict", AO, "functions over 60 lines",
                       "imports inside functions", "of them core → core", "private-name imports"), 0)
    for f in files:
        src = f.read_text()
        tree = ast.parse(src)
        c["files"] += 1
        c["lines"] += src.count("\n")
        me = _module_of(f, plugins)
        c[AO] += loose_annotation_lines(tree)
        for node in ast.walk(tree):
            if _is_any(node):
                c["Any"] += 1
            if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                    and node.value.id in ("dict", "Dict") and isinstance(node.slice, ast.Tuple)
                    and len(node.slice.elts) == 2 and isinstance(node.slice.elts[0], ast.Name)
                    and node.slice.elts[0].id == "str" and _is_any(node.slice.elts[1])):
                c["dict[str, Any]"] += 1
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.end_lineno is not None and node.end_lineno - node.lineno + 1 > LONG:
                    c["functions over 60 lines"] += 1
                if isinstance(node.returns, ast.Name) and node.returns.id == "dict":
                    c["-> dict"] += 1
                for inner in ast.walk(node):
                    if inner is node or not isinstance(inner, (ast.Import, ast.ImportFrom)):
                        continue
                    # counted once, at the innermost function (ast.walk also visits nested defs)
                    if _innermost(node, inner):
                        c["imports inside functions"] += 1
                        target = (inner.module or "") if isinstance(inner, ast.ImportFrom) else inner.names[0].name
                        if me.split(".")[0] == "docverify" and target.split(".")[0] == "docverify":
                            c["of them core → core"] += 1
            if (isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "docverify"
                    and node.module != me):
                c["private-name imports"] += sum(1 for a in node.names if a.name.startswith("_"))
    return c


def _innermost(fn: ast.AST, imp: ast.AST) -> bool:
    for child in ast.walk(fn):
        if child is not fn and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and any(n is imp for n in ast.walk(child)):
            return False
    return True


def figures(root: pathlib.Path) -> dict[str, dict[str, int]]:
    plugins = root / "plugins"
    every = sorted(plugins.rglob("*.py"))
    core = [f for f in every if f.relative_to(plugins).parts[0] == "docverify"]
    out = {"plugins/": count(every, plugins), "plugins/docverify": count(core, plugins)}
    out["plugins/docverify"]["top-level modules"] = len([f for f in (plugins / "docverify").glob("*.py")
                                                         if f.name != "__init__.py"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", nargs="?", default=str(pathlib.Path(__file__).resolve().parents[1]))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--by-folder", action="store_true", help="the core's figures per folder (plugins/docverify/<x>/)")
    args = ap.parse_args()
    if args.by_folder:
        plugins = pathlib.Path(args.root) / "plugins"
        groups: dict[str, list[pathlib.Path]] = {}
        for f in sorted((plugins / "docverify").rglob("*.py")):
            parts = f.relative_to(plugins / "docverify").parts
            groups.setdefault(parts[0] if len(parts) > 1 else "(top level)", []).append(f)
        rows = {name: count(files, plugins) for name, files in groups.items()}
        print(f"| {'folder':<12} | {'Any':>5} | {'dict[str, Any]':>14} | {'-> dict':>7} | {'Any+object lines':>16} |")
        print(f"|{'-' * 14}|{'-' * 6}:|{'-' * 15}:|{'-' * 8}:|{'-' * 17}:|")
        for name, c in rows.items():
            print(f"| {name:<12} | {c['Any']:>5} | {c['dict[str, Any]']:>14} | {c['-> dict']:>7} | {c[AO]:>16} |")
        return
    figs = figures(pathlib.Path(args.root))
    if args.json:
        print(json.dumps(figs, indent=2))
        return
    keys = list(figs["plugins/docverify"])
    print(f"| {'figure':<35} | {'plugins/':>9} | {'plugins/docverify':>17} |")
    print(f"|{'-' * 37}|{'-' * 10}:|{'-' * 18}:|")
    for k in keys:
        print(f"| {k:<35} | {figs['plugins/'].get(k, ''):>9} | {figs['plugins/docverify'][k]:>17} |")


if __name__ == "__main__":
    main()
