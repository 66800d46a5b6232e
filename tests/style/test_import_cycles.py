"""Imports point one way: no module cycles in goose/, baselines/, experiments/ and analysis/, and each layer
imports only the layers below it (issue 30, item 4; STYLE.md, "Arrows one way").

What counts as an import: every `import` and `from ... import` statement in a module, wherever it sits:
at module level, under `if TYPE_CHECKING:`, and inside functions. A function-level import hides a cycle
from the interpreter but not from the reader (lean_forward <-> lean_gemma3 was one), so it counts here.
An edge goes to the deepest module of the tree an imported name resolves to (`from goose.engine.core import
tree` -> goose.engine.core.tree); the implicit import of parent packages' `__init__` is not an edge, but
what a module can run (`reach`) includes its parents' module-level imports, since importing it runs them.

The layers, bottom up: goose.engine.core (the verifier and what it needs; goose.validation is below
everything); goose.engine.forward (backends plugged into core); the rest of goose; baselines; experiments.
analysis reads records only: it reaches neither torch nor goose.engine / goose.harness.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("goose", "baselines", "experiments", "analysis")


def module_names(*package_dirs: Path) -> dict[str, Path]:
    """Dotted name -> file of every module under `package_dirs` (a package's name for its __init__)."""
    names = {}
    for package_dir in package_dirs:
        for path in sorted(package_dir.rglob("*.py")):
            parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            names[".".join(parts)] = path
    return names


def imported_names(name: str, path: Path, in_functions: bool = True) -> set[str]:
    """Every dotted name the import statements of module `name` (at `path`) name, relative ones resolved;
    with `in_functions` False only those outside function bodies (what importing the module runs)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree) if in_functions else _outside_functions(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _outside_functions(node: ast.AST):
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield child
            yield from _outside_functions(child)


def import_graph(*package_dirs: Path, in_functions: bool = True) -> dict[str, set[str]]:
    """Module -> the modules of `package_dirs` it imports (module docstring: what counts)."""
    return _graphs(package_dirs, in_functions)[0]


def external_imports(*package_dirs: Path, in_functions: bool = True) -> dict[str, set[str]]:
    """Module -> the top-level names of what it imports from outside `package_dirs` (torch, pandas, ...)."""
    return _graphs(package_dirs, in_functions)[1]


def _graphs(
    package_dirs: tuple[Path, ...], in_functions: bool
) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    modules = module_names(*package_dirs)
    tops = {m.split(".")[0] for m in modules}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    external: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for target in imported_names(name, path, in_functions):
            if target.split(".")[0] not in tops:
                external[name].add(target.split(".")[0])
                continue
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                graph[name].add(target)
    return graph, external


def reach(graph: dict[str, set[str]], on_import: dict[str, set[str]], start: str) -> dict[str, bool]:
    """What using `start` can run: module -> True for `start` and what it imports (`graph`), transitively;
    -> False for a parent package that only runs on import, followed by its module-level imports
    (`on_import`; e.g. goose/__init__'s lazy `goose.speculate` runs only when asked for)."""
    found: dict[str, bool] = {}
    todo = [(start, True)]
    while todo:
        module, whole = todo.pop()
        if found.get(module, False) or (module in found and not whole):
            continue
        found[module] = whole
        parts = module.split(".")
        todo += [(p, False) for p in (".".join(parts[:i]) for i in range(1, len(parts))) if p in graph]
        todo += [(m, whole) for m in (graph if whole else on_import)[module]]
    return found


def in_layer(module: str, *layers: str) -> bool:
    return any(module == layer or module.startswith(layer + ".") for layer in layers)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def whole_graph() -> dict[str, set[str]]:
    return import_graph(*(ROOT / p for p in PACKAGES))


def crossings(graph: dict[str, set[str]], source: tuple[str, ...], allowed: tuple[str, ...]) -> list[str]:
    """Edges `a -> b` of `graph` from a module in `source` to one outside `allowed`."""
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        if in_layer(a, *source)
        for b in targets
        if not in_layer(b, *allowed)
    )


def test_goose_has_no_import_cycles():
    graph = import_graph(ROOT / "goose")
    assert "goose.engine.core.backend" in graph["goose.engine.forward.choose"]  # the graph is real
    assert cycles(graph) == []


def test_the_whole_tree_has_no_import_cycles():
    graph = whole_graph()
    assert "goose.records.results" in graph["analysis.load"]  # the graph spans the four packages
    assert cycles(graph) == []


def test_core_is_the_bottom_layer():
    """core imports only core and goose.validation: never forward, budget, the rest of goose, or baselines."""
    graph = whole_graph()
    assert crossings(graph, ("goose.engine.core",), ("goose.engine.core", "goose.validation")) == []


def test_forward_backends_import_only_core():
    graph = whole_graph()
    allowed = ("goose.engine.forward", "goose.engine.core", "goose.validation")
    assert crossings(graph, ("goose.engine.forward",), allowed) == []


def test_batching_is_an_engine_service():
    """goose.engine.batch builds on core and budget=auto's sizer; it knows nothing of the harness or drafters."""
    graph = whole_graph()
    allowed = ("goose.engine.batch", "goose.engine.core", "goose.engine.budget", "goose.validation")
    assert "goose.engine.batch.engine" in graph["goose.engine.batch.serve"]
    assert crossings(graph, ("goose.engine.batch",), allowed) == []


def test_goose_imports_neither_baselines_nor_drivers_nor_analysis():
    graph = whole_graph()
    assert crossings(graph, ("goose",), ("goose",)) == []
    assert crossings(graph, ("baselines",), ("goose", "baselines")) == []


def test_experiments_do_not_import_analysis():
    """Drivers write records; analysis reads them. What both need lives below both (goose.records)."""
    graph = whole_graph()
    assert crossings(graph, ("experiments",), ("goose", "baselines", "experiments")) == []


def test_analysis_reaches_neither_torch_nor_the_engine_or_harness():
    """Every analysis module, with all it imports transitively, stays off torch, goose.engine, goose.harness,
    baselines and experiments, so figures regenerate on a machine without torch."""
    dirs = [ROOT / p for p in PACKAGES]
    graph, on_import = import_graph(*dirs), import_graph(*dirs, in_functions=False)
    external = {True: external_imports(*dirs), False: external_imports(*dirs, in_functions=False)}
    forbidden = ("goose.engine", "goose.harness", "goose.api", "baselines", "experiments")
    found = []
    for module in sorted(m for m in graph if in_layer(m, "analysis")):
        for reached, whole in sorted(reach(graph, on_import, module).items()):
            if in_layer(reached, *forbidden):
                found.append(f"{module} reaches {reached}")
            if "torch" in external[whole][reached]:
                found.append(f"{module} reaches {reached}, which imports torch")
    assert "goose.records.results" in reach(graph, on_import, "analysis.load")  # the check is real
    assert found == []


def test_the_cycle_finder_sees_type_checking_and_function_level_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import g\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import d\n")
    (pkg / "d.py").write_text("import pkg.c\n")
    (pkg / "e.py").write_text("import pkg.a\n")
    (pkg / "f.py").write_text("def f():\n    from torch.nn import functional\n")
    graph = import_graph(pkg)
    assert graph["pkg.sub.b"] == {"pkg.a"} and graph["pkg.e"] == {"pkg.a"}
    assert sorted(cycles(graph)) == [["pkg.a", "pkg.sub.b"], ["pkg.c", "pkg.d"]]
    assert external_imports(pkg)["pkg.f"] == {"torch"} and external_imports(pkg)["pkg.a"] == set()
    (pkg / "sub" / "__init__.py").write_text("def __getattr__(name):\n    from pkg import c\n")
    graph, on_import = import_graph(pkg), import_graph(pkg, in_functions=False)
    assert on_import["pkg.sub"] == set() and graph["pkg.sub"] == {"pkg.c"}
    assert reach(graph, on_import, "pkg.e") == {
        "pkg": False,
        "pkg.e": True,
        "pkg.a": True,
        "pkg.sub": False,
        "pkg.sub.b": True,
    }
