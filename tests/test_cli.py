import os
import subprocess
import sys

import pytest

from specgen.gen.cli.commands import main
from specgen.golden.config import preset_names


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "gen", *args], capture_output=True, text=True)


def test_help_lists_commands():
    proc = run_cli("--help")
    assert proc.returncode == 0
    for command in ("verilog", "golden", "bsfp-study", "bench"):
        assert command in proc.stdout


@pytest.mark.slow
def test_verilog_is_reproducible_across_processes(tmp_path):
    """A second run, in another process with other string hashing (Amaranth orders
    clock-domain ports by a set; hw.hierarchy.stable_headers undoes it), gives the same
    bytes. (make test-slow: two emissions of the design, about 45 s; the hashing case
    of one block is in tests/test_hierarchy.py.)"""
    out = tmp_path / "sim"
    assert main(["verilog", "--board", "sim", "--out", str(out)]) == 0
    out2 = tmp_path / "again"
    proc = subprocess.run([sys.executable, "-m", "gen", "verilog", "--board", "sim", "--out",
                           str(out2)], capture_output=True, text=True,
                          env=os.environ | {"PYTHONHASHSEED": "2"})
    assert proc.returncode == 0, proc.stderr
    assert (out / "manifest.json").read_bytes() == (out2 / "manifest.json").read_bytes()


def test_verilog_replaces_earlier_output(tmp_path, monkeypatch):
    import specgen.gen.emit.verilog
    from specgen.hw.ring_fifo import RingFIFO
    monkeypatch.setattr(specgen.gen.emit.verilog, "blocks", lambda config: {"fifo": RingFIFO(width=4, depth=3)})
    out = tmp_path / "out"
    assert main(["verilog", "--board", "sim", "--out", str(out)]) == 0
    (out / "fifo.v").unlink()
    (out / "notes.v").write_text("// not specgen's: kept (tests/test_output.py)")
    assert main(["verilog", "--board", "sim", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["fifo.core", "fifo.v", "manifest.json",
                                                     "notes.v", "regmap", "specgen_regs.h"]


def test_unknown_board_is_one_line_exit_2(tmp_path):
    out = tmp_path / "x"
    proc = run_cli("verilog", "--board", "zcu102", "--out", str(out))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "specgen verilog: error: unknown board 'zcu102'; allowed: " + ", ".join(preset_names()))
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_unwritable_out_is_one_line_exit_2(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    proc = run_cli("verilog", "--board", "sim", "--out", str(blocker / "sub"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("specgen verilog: error: cannot write --out")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_refuses_foreign_non_empty_folder(tmp_path):
    (tmp_path / "precious.txt").write_text("user data")
    proc = run_cli("verilog", "--board", "sim", "--out", str(tmp_path))
    assert proc.returncode == 2
    assert "not written by specgen" in proc.stderr
    assert (tmp_path / "precious.txt").read_text() == "user data"


@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_failure_midway_leaves_no_output(tmp_path, monkeypatch):
    import specgen.gen.emit.verilog

    real, calls = specgen.gen.emit.verilog.convert, []

    def boom(*args, **kwargs):
        # The first module is written, the second fails: nothing may remain.
        calls.append(kwargs["name"])
        if len(calls) == 2:
            raise RuntimeError("simulated failure while emitting")
        return real(*args, **kwargs)
    out = tmp_path / "out"
    monkeypatch.setattr(specgen.gen.emit.verilog, "convert", boom)
    with pytest.raises(RuntimeError, match="simulated failure"):
        main(["verilog", "--board", "sim", "--out", str(out)])
    assert len(calls) == 2
    assert list(tmp_path.iterdir()) == []


def test_docs_rewrites_the_committed_pages_byte_for_byte(tmp_path):
    """``specgen docs regmap memory-map tree-memory`` is the one path to those pages: run on a copy of
    ``docs/``, it gives the committed bytes (a stale page, or a second writer, fails here)."""
    import shutil
    from pathlib import Path
    docs = Path(__file__).resolve().parent.parent / "docs"
    shutil.copy(docs / "tree.md", tmp_path / "tree.md")
    (tmp_path / "regmap.md").write_text("stale\n")
    (tmp_path / "memory-map.md").write_text("stale\n")
    assert main(["docs", "regmap", "memory-map", "tree-memory", "--out", str(tmp_path),
                 "--quiet"]) == 0
    for name in ("regmap.md", "memory-map.md", "tree.md"):
        assert (tmp_path / name).read_bytes() == (docs / name).read_bytes(), name


def test_docs_refuses_a_missing_folder(tmp_path, capsys):
    assert main(["docs", "regmap", "--out", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"specgen docs: error: --out {str(tmp_path / 'none')!r} is not an existing folder")
