"""The layer contract of the domain core (ADR 0039) and the Airflow side's rooms (ADR 0054), checked with ``ast``.

    python scripts/check_layers.py [--root ROOT]

The layers are listed bottom to top in ``pyproject.toml`` (``[[tool.docverify.layers]]``). Every
import statement of ``plugins/docverify`` — at the top of a module, under ``TYPE_CHECKING`` or
inside a function — may only point down or within its layer; so does every import of
``plugins/docverify_airflow``, whose rooms (config/, lineage/, web/, tasks/, operators/ …) are layers above
the core; the core imports no Airflow
(``airflow``, ``docverify_airflow``, ``docverify_documentai``). A module in no layer, and a layer
entry that names no module, are errors too; so is an entry naming a module inside a folder (a layer
is a folder of the core or a top-level module, so the folders show every arrow). And no import circle, of any length, among the modules of
``plugins/`` (the core and the Airflow packages): a circle within one layer is still a circle. Each
error names the file, the line and the fix; the exit code is 1 when there is one.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys
import tomllib
from dataclasses import dataclass

AIRFLOW_SIDE = ("airflow", "docverify_airflow", "docverify_documentai")
#: the packages under the contract: the core, then the Airflow side's rooms above it (ADR 0054)
PACKAGES = ("docverify", "docverify_airflow")


@dataclass(frozen=True)
class Layer:
    index: int
    name: str
    modules: tuple[str, ...]


def load_layers(pyproject: pathlib.Path) -> list[Layer]:
    rows = tomllib.loads(pyproject.read_text())["tool"]["docverify"]["layers"]
    return [Layer(i, row["name"], tuple(row["modules"])) for i, row in enumerate(rows)]


def core_modules(plugins: pathlib.Path, package: str = "docverify") -> dict[str, pathlib.Path]:
    out = {}
    for f in sorted((plugins / package).rglob("*.py") if package else plugins.rglob("*.py")):
        parts = f.relative_to(plugins).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def layer_of(module: str, layers: list[Layer]) -> tuple[Layer, str] | None:
    """The layer of ``module``: the one with the longest entry equal to it or a package holding it."""
    best: tuple[Layer, str] | None = None
    for layer in layers:
        for entry in layer.modules:
            if (module == entry or module.startswith(entry + ".")) and (best is None or len(entry) > len(best[1])):
                best = (layer, entry)
    return best


def imports(f: pathlib.Path, me: str, known: dict[str, pathlib.Path]) -> list[tuple[int, str]]:
    """(line, imported module) for every import statement of ``f``, wherever it stands."""
    is_package = f.name == "__init__.py"
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(f.read_text(), str(f))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package of this module
                pkg = me.split(".") if is_package else me.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join([*pkg, *([node.module] if node.module else [])])
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append((node.lineno, sub if sub in known else base))
    return out


def check(root: pathlib.Path) -> list[str]:
    plugins = root / "plugins"
    layers = load_layers(root / "pyproject.toml")
    known = {m: f for package in PACKAGES for m, f in core_modules(plugins, package).items()}
    errors: list[str] = []
    for layer in layers:
        for entry in layer.modules:
            if not any(m == entry or m.startswith(entry + ".") for m in known):
                errors.append(f"pyproject.toml: layer {layer.name!r} lists {entry!r}, which is no module of "
                              f"plugins/docverify or plugins/docverify_airflow. Fix: remove the entry or correct its name.")
    errors += _folder_entries(layers)
    order = " → ".join(layer.name for layer in layers)
    for me, f in known.items():
        rel = f.relative_to(root)
        if me in PACKAGES:  # a package root: its __init__ imports nothing (ADR 0032, tests/test_architecture.py)
            continue
        mine = layer_of(me, layers)
        if mine is None:
            errors.append(f"{rel}:1: {me} is in no layer. Fix: move it into the package of its layer "
                          f"({order}), or add it to a layer's modules in pyproject.toml [[tool.docverify.layers]].")
            continue
        for line, target in imports(f, me, known):
            top = target.split(".")[0]
            if top in AIRFLOW_SIDE and me.split(".")[0] == "docverify":
                errors.append(f"{rel}:{line}: {me} imports {target}: the domain core imports no Airflow. "
                              f"Fix: move this code to plugins/docverify_airflow (the Airflow glue) and pass "
                              f"what the core needs in as an argument.")
                continue
            if top not in PACKAGES or target in PACKAGES:
                continue
            theirs = layer_of(target, layers)
            if theirs is None:
                continue  # reported once, as a module in no layer
            if theirs[0].index > mine[0].index:
                errors.append(
                    f"{rel}:{line}: {me} (layer {mine[0].name}) imports {target} (layer {theirs[0].name}, "
                    f"above it): an import may only point down or within its layer ({order}). Fix: move "
                    f"what {me} needs from {target} down to layer {mine[0].name} or below, or move {me} "
                    f"up to layer {theirs[0].name}, or have the caller pass it in.")
    return errors + circles(root)


def _folder_entries(layers: list[Layer]) -> list[str]:
    """A layer is a folder of the core (``docverify.stages``) or a top-level module (``docverify.cli``):
    an entry naming a module inside a folder (``docverify.stages.common``) would give that module another
    layer than its folder's, and an import of it an arrow the folders do not show (ADR 0053: the report
    imported ``stages/common.py`` through such a "night" layer, and the check passed)."""
    return [f"pyproject.toml: layer {layer.name!r} lists {entry!r}, a module inside the folder "
            f"{'.'.join(entry.split('.')[:2])}: a layer is a folder or a top-level module of the core. Fix: "
            f"move what the lower layers need from {entry} into a folder of a layer at or below theirs."
            for layer in layers for entry in layer.modules if len(entry.split(".")) > 2]


def circles(root: pathlib.Path) -> list[str]:
    """Every import circle among the modules of ``plugins/`` (Tarjan's strongly connected components)."""
    plugins = root / "plugins"
    known = core_modules(plugins, "")
    edges: dict[str, dict[str, int]] = {}
    for me, f in known.items():
        edges[me] = {}
        for line, target in imports(f, me, known):
            if target in known and target != me and target not in edges[me]:
                edges[me][target] = line
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    errors = []
    for comp in found:
        loop = _shortest_loop(comp[0], set(comp), edges)
        arrows = [f"{known[a].relative_to(root)}:{edges[a][b]}: {a} → {b}" for a, b in zip(loop, loop[1:], strict=False)]
        errors.append(f"import circle {' → '.join(loop)} ({len(comp)} modules in the circle(s): "
                      f"{', '.join(comp)}): " + "; ".join(arrows)
                      + ". Fix: move what they share down into a module none of them imports back, "
                        "or have the caller pass it in.")
    return errors


def _shortest_loop(start: str, members: set[str], edges: dict[str, dict[str, int]]) -> list[str]:
    """The shortest path start → … → start inside one strongly connected component."""
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges[v]):
            if w == start:
                return [*paths[v], start]
            if w in members and w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    return [start, start]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parents[1]),
                    help="the repository (pyproject.toml and plugins/)")
    args = ap.parse_args()
    errors = check(pathlib.Path(args.root))
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"layer contract: {len(errors)} error(s) (ADR 0039)", file=sys.stderr)
        return 1
    print("layer contract: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
