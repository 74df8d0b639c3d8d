"""Packaging: ``python -m specgen``, ``--version`` from the package metadata, LICENSE, manifests."""

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from specgen.gen.cli.commands import main

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def run_module(*args):
    return subprocess.run([sys.executable, "-m", "specgen", *args], capture_output=True,
                          text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def installed_version():
    # The installed distribution's metadata: what `pip show specgen` reports.
    import importlib.metadata
    return importlib.metadata.version("specgen")


def test_python_m_specgen_is_the_cli():
    proc = run_module("--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: specgen ")
    for command in ("verilog", "golden", "perf", "config"):
        assert command in proc.stdout


def test_version_is_the_package_metadata():
    proc = run_module("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"specgen {installed_version()}\n"
    # The metadata is pyproject's version once installed (a stale install would differ).
    assert installed_version() == PYPROJECT["project"]["version"]


def test_license_matches_pyproject():
    text = (ROOT / "LICENSE").read_text()
    assert PYPROJECT["project"]["license"] == {"text": "Apache-2.0"}
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_entry_point_package_is_installed():
    assert "specgen" in PYPROJECT["tool"]["setuptools"]["packages"]
    assert PYPROJECT["project"]["scripts"]["specgen"] == "specgen.gen.cli:main"


def test_one_install_namespace():
    """Every room installs under ``specgen`` from its own folder (package-dir), and nothing
    else goes to the top of site-packages."""
    setup = PYPROJECT["tool"]["setuptools"]
    assert all(p == "specgen" or p.startswith("specgen.") for p in setup["packages"])
    assert setup["package-dir"] == {"specgen": "specgen", **{f"specgen.{r}": r for r in
                                                            ("hw", "gen", "sim", "golden")}}


def test_every_package_is_in_the_wheel():
    """Each folder with an ``__init__.py`` is in setuptools' list: one missing (a new room of
    gen/) would be absent from an installed specgen."""
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    found = {".".join(("specgen", *p.parent.relative_to(ROOT).parts)).replace("specgen.specgen",
                                                                                "specgen")
             for folder in ("hw", "gen", "sim", "golden", "specgen")
             for p in (ROOT / folder).rglob("__init__.py")}
    assert found - listed == set()


def test_no_unused_board_package():
    # amaranth-boards has no Versal board: the Vivado flow is gen/emit/vivado.py's own.
    deps = " ".join(PYPROJECT["project"]["dependencies"])
    assert "amaranth-boards" not in deps
    for folder in ("hw", "gen", "sim", "golden", "specgen"):
        for path in (ROOT / folder).rglob("*.py"):
            assert "amaranth_boards" not in path.read_text(), path


@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_manifests_record_the_version(tmp_path, monkeypatch):
    import specgen.gen.emit.verilog
    from specgen.hw.ring_fifo import RingFIFO
    monkeypatch.setattr(specgen.gen.emit.verilog, "blocks", lambda config: {"fifo": RingFIFO(width=4, depth=3)})
    assert main(["verilog", "--board", "sim", "--out", str(tmp_path / "v")]) == 0
    manifest = json.loads((tmp_path / "v" / "manifest.json").read_text())
    assert manifest["version"] == installed_version() and manifest["generator"] == "specgen"
    assert manifest["command"] == "verilog"


def test_ip_version_is_the_package_version():
    from specgen.gen.emit.vivado import ip_version
    major, minor, patch = (int(x) for x in PYPROJECT["project"]["version"].split(".")[:3])
    assert ip_version() == (f"{major}.{minor}", patch)
