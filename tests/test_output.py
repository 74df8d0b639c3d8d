"""Output folders never lose data (``gen.cli.output``), through the CLI as a user runs it."""

import json
import os
import subprocess
import sys

import pytest

from specgen.gen.cli.commands import main
from specgen.gen.cli.output import MANIFEST


@pytest.fixture
def small_design(monkeypatch):
    """Emit one small block instead of the whole sim design: the folder logic is under test."""
    import specgen.gen.emit.verilog
    from specgen.hw.ring_fifo import RingFIFO
    modules = {"fifo": RingFIFO(width=4, depth=3)}
    monkeypatch.setattr(specgen.gen.emit.verilog, "blocks", lambda config: dict(modules))
    return modules


def verilog(out):
    return main(["verilog", "--board", "sim", "--out", str(out)])


def one_line_error(capsys, *fragments):
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, err
    return err


def snapshot(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_foreign_manifest_is_refused(tmp_path, capsys, small_design):
    # A user's folder with its own manifest.json and a thesis: nothing may be touched.
    out = tmp_path / "thesis"
    (out / "src").mkdir(parents=True)
    (out / MANIFEST).write_text('{"name": "my thesis", "files": ["src/thesis.tex"]}')
    (out / "src" / "thesis.tex").write_text("\\documentclass{article}")
    before = snapshot(out)
    assert verilog(out) == 2
    one_line_error(capsys, "--out", "specgen did not write")
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thesis"]


def test_not_json_manifest_is_refused(tmp_path, capsys, small_design):
    out = tmp_path / "o"
    out.mkdir()
    (out / MANIFEST).write_text("not json")
    assert verilog(out) == 2
    one_line_error(capsys, "specgen did not write")
    assert (out / MANIFEST).read_text() == "not json"


def test_golden_does_not_replace_verilog(tmp_path, capsys, small_design):
    out = tmp_path / "v"
    assert verilog(out) == 0
    before = snapshot(out)
    capsys.readouterr()
    assert main(["golden", "--out", str(out)]) == 2
    one_line_error(capsys, "'specgen verilog', not 'specgen golden'")
    assert snapshot(out) == before


def test_verilog_does_not_replace_golden(tmp_path, capsys, small_design):
    out = tmp_path / "g"
    out.mkdir()
    (out / MANIFEST).write_text(json.dumps({"generator": "specgen golden", "files": {}}))
    assert verilog(out) == 2
    one_line_error(capsys, "'specgen golden', not 'specgen verilog'")


def test_rerun_keeps_vivado_run_and_notes(tmp_path, capsys, small_design):
    out = tmp_path / "v"
    assert verilog(out) == 0
    (out / "vivado" / "reports").mkdir(parents=True)
    (out / "vivado" / "post_route.dcp").write_bytes(b"\x00checkpoint")
    (out / "vivado" / "reports" / "timing.rpt").write_text("WNS 0.1")
    (out / "notes.txt").write_text("my notes")
    assert verilog(out) == 0
    assert (out / "vivado" / "post_route.dcp").read_bytes() == b"\x00checkpoint"
    assert (out / "vivado" / "reports" / "timing.rpt").read_text() == "WNS 0.1"
    assert (out / "notes.txt").read_text() == "my notes"
    # The kept files are the user's, not specgen's: the manifest does not claim them.
    files = json.loads((out / MANIFEST).read_text())["files"]
    assert "notes.txt" not in files and not any(f.startswith("vivado/") for f in files)
    assert [p.name for p in tmp_path.iterdir()] == ["v"]


def test_rerun_drops_specgen_files_no_longer_written(tmp_path, small_design):
    out = tmp_path / "v"
    from specgen.hw.ring_fifo import RingFIFO
    small_design["fifo2"] = RingFIFO(width=2, depth=2)
    assert verilog(out) == 0
    assert (out / "fifo2.v").exists()
    del small_design["fifo2"]
    assert verilog(out) == 0
    assert not (out / "fifo2.v").exists()


def test_user_edit_of_an_output_is_refused(tmp_path, capsys, small_design):
    out = tmp_path / "v"
    assert verilog(out) == 0
    (out / "fifo.v").write_text("// my fix")
    assert verilog(out) == 2
    one_line_error(capsys, "fifo.v changed since specgen wrote it")
    assert (out / "fifo.v").read_text() == "// my fix"


def test_user_file_where_a_new_output_goes_is_refused(tmp_path, capsys, small_design):
    out = tmp_path / "v"
    assert verilog(out) == 0
    (out / "fifo2.v").write_text("// the user's own module")
    before = snapshot(out)
    from specgen.hw.ring_fifo import RingFIFO
    small_design["fifo2"] = RingFIFO(width=2, depth=2)
    assert verilog(out) == 2
    one_line_error(capsys, "fifo2.v not written by specgen would be overwritten")
    assert snapshot(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["v"]


def test_legacy_manifest_without_command_is_replaced(tmp_path, small_design):
    # Outputs of earlier releases recorded only the generator ("specgen" for Verilog).
    out = tmp_path / "v"
    out.mkdir()
    (out / "old.v").write_text("// old")
    (out / MANIFEST).write_text(json.dumps({"generator": "specgen", "files": {
        "old.v": "8b1a9953c4611296a827abf8c47804d7e6c49c6b2b3fb1bd3e0c3f6d8b0a5a9c"}}))
    # The digest above is not old.v's: an edited output is refused, the legacy kind is not.
    assert verilog(out) == 2
    from specgen.gen.cli.output import sha256_file
    (out / MANIFEST).write_text(json.dumps({"generator": "specgen",
                                            "files": {"old.v": sha256_file(out / "old.v")}}))
    assert verilog(out) == 0
    assert sorted(p.name for p in out.iterdir()) == ["fifo.core", "fifo.v", MANIFEST, "regmap",
                                                     "specgen_regs.h"]


@pytest.mark.parametrize("out", ["", ".", "./", "..", "CWD", "PARENT"])
def test_out_that_would_replace_the_current_folder_is_refused(tmp_path, monkeypatch, out):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    (work / "precious.txt").write_text("user data")
    # A manifest of specgen's own in the current folder must not make it replaceable either.
    (work / MANIFEST).write_text(json.dumps({"generator": "specgen", "command": "verilog",
                                             "files": {}}))
    out = {"CWD": str(work), "PARENT": str(tmp_path)}.get(out, out)
    proc = subprocess.run([sys.executable, "-m", "gen", "verilog", "--board", "sim", "--out", out],
                          cwd=work, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--out" in proc.stderr
    assert (work / "precious.txt").read_text() == "user data"
    assert sorted(p.name for p in work.iterdir()) == [MANIFEST, "precious.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]


def test_output_folder_has_a_new_folders_permissions(tmp_path, small_design):
    umask = os.umask(0o022)
    try:
        assert verilog(tmp_path / "v") == 0
    finally:
        os.umask(umask)
    assert (tmp_path / "v").stat().st_mode & 0o777 == 0o755


def test_estimate_report_is_written_whole(tmp_path, monkeypatch):
    # The synthesis is stubbed: only how the report reaches the disk is under test.
    import specgen.gen.estimate.report as est
    from specgen.gen.cli.errors import CLIError
    from specgen.golden.config import preset
    report = {"board": "sim", "clock_mhz": 100.0, "budget_levels": 19, "blocks": [],
              "dsp58": est.analytical_dsp58(preset("sim"))}
    monkeypatch.setattr(est, "estimate", lambda *args, **kwargs: report)
    est.write_estimate(board="sim", out=tmp_path / "r" / "est.md")
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["est.json", "est.md"]
    assert json.loads((tmp_path / "r" / "est.json").read_text())["board"] == "sim"
    with pytest.raises(CLIError, match="is a folder; give a file path"):
        est.write_estimate(board="sim", out=tmp_path / "r")
