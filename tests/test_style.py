import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_pyflakes_clean():
    """No unused imports, undefined names or shadowed definitions (ruff's F rules)."""
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.fail("ruff is not installed; it is part of the dev extra")
    proc = subprocess.run([ruff, "check", "--select", "F", "--no-cache", "golden", "hw", "sim",
                           "gen", "tests"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


ROOMS = ("golden", "hw", "sim", "gen")


def _project(name):
    """``specgen.golden.x`` -> ``golden.x``: the project module an absolute import names
    (the rooms install under one namespace, ``specgen``)."""
    return name.removeprefix("specgen.")


def _import_graph():
    """``module -> set of project modules it imports`` over the rooms, every import
    counted (module level or inside a function; relative ones resolved)."""
    import ast
    mods = {}
    for room in ROOMS:
        for path in (ROOT / room).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def targets(module, node):
        if isinstance(node, ast.Import):
            return [_project(a.name) for a in node.names]
        base = _project(node.module or "")
        if node.level:
            package = module.split(".")
            if mods[module].name != "__init__.py":
                package = package[:-1]
            package = package[:len(package) - node.level + 1]
            base = ".".join(package + ([base] if base else []))
        # ``from gen import cli`` imports the module gen.cli
        return [base] + [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]

    graph = {}
    for module, path in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for name in targets(module, node):
                    while name and name not in mods:     # a name inside a module
                        name = name.rpartition(".")[0]
                    if name and name != module:
                        deps.add(name)
        graph[module] = deps
    return graph


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
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
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
                on_stack.discard(comp[-1])
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_cycle():
    """The check below can fail: a two-module and a three-module cycle are found."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c", "a"}, "f": set()}
    assert _cycles(graph) == [["a", "b"], ["c", "d", "e"]]


def test_no_import_cycle():
    """No module of the project imports, directly or through others, itself."""
    assert _cycles(_import_graph()) == []


def test_rooms_import_downwards():
    """golden <- hw <- sim, and gen composes: golden imports nothing else of the project,
    hw only golden, sim only golden and hw."""
    allowed = {"golden": {"golden"}, "hw": {"golden", "hw"}, "sim": {"golden", "hw", "sim"},
               "gen": set(ROOMS)}
    bad = [f"{m} imports {d}" for m, deps in sorted(_import_graph().items()) for d in sorted(deps)
           if d.split(".")[0] not in allowed[m.split(".")[0]]]
    assert bad == []


def test_golden_imports_nothing_else_of_the_project():
    """golden/ is the spec: it may not import hw, sim, gen or tests."""
    import ast
    for path in (ROOT / "golden").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            for name in names:
                assert _project(name).split(".")[0] not in ("hw", "sim", "gen", "tests"), \
                    f"{path.name} imports {name}"


def test_every_project_import_is_in_the_specgen_namespace():
    """``from golden.x`` beside ``from specgen.golden.x`` would load the module twice (two
    ``Config`` classes), and the first is absent from an installed wheel."""
    import ast
    bad = []
    for folder in (*ROOMS, "tests", "specgen"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module or ""]
                bad += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in ROOMS]
    assert bad == []
