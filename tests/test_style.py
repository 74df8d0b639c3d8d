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


def test_golden_imports_nothing_else_of_the_project():
    """golden/ is the spec: it may not import hw, sim or gen."""
    import ast
    for path in (ROOT / "golden").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            for name in names:
                assert name.split(".")[0] not in ("hw", "sim", "gen"), f"{path.name} imports {name}"
