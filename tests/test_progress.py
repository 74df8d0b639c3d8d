"""Progress only on a terminal, quiet under --quiet, and a closing summary of files written."""

import io
import json
import os
import subprocess
import sys

import pytest

import specgen.gen.cli.progress
from specgen.gen.cli.commands import main
from specgen.gen.emit.verilog import fit_notes
from specgen.gen.cli.progress import Progress, summary_lines
from specgen.golden.config import preset
from specgen.golden.config_io import apply_overrides


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_shows_only_on_a_terminal(monkeypatch):
    monkeypatch.setattr(specgen.gen.cli.progress, "BAR_DELAY_S", 0.0)
    tty, pipe = FakeTTY(), io.StringIO()
    shown = Progress("golden", stream=tty)
    assert list(shown.bar(range(3), desc="sets", total=3)) == [0, 1, 2]
    shown.status("step two")
    assert "specgen golden: sets" in tty.getvalue() and "specgen golden: step two\n" in tty.getvalue()
    hidden = Progress("golden", stream=pipe)
    assert hidden.bar(range(3), desc="sets") == range(3)    # not even wrapped
    hidden.status("step two")
    assert pipe.getvalue() == ""
    quiet = Progress("golden", stream=FakeTTY(), quiet=True)
    assert quiet.bar(range(3), desc="sets") == range(3) and not quiet.live


def test_a_short_job_draws_no_bar():
    # The bar waits BAR_DELAY_S: a loop that ends sooner leaves the terminal untouched.
    tty = FakeTTY()
    assert specgen.gen.cli.progress.BAR_DELAY_S >= 1.0
    list(Progress("verilog", stream=tty).bar(range(1000), desc="converting", total=1000))
    assert tty.getvalue() == ""


def test_summary_counts_the_files(tmp_path):
    (tmp_path / "a.v").write_text("x" * 1500)
    (tmp_path / "b.v").write_text("y" * 500)
    lines = summary_lines("verilog", [tmp_path / "a.v", tmp_path / "b.v"], root=tmp_path,
                          notes=["fits"])
    assert lines == [f"specgen verilog: wrote 2 files (2.0 kB) to {tmp_path}", "  fits"]


def test_fit_verdict_from_the_dsp_count():
    # One DSP58 per MAC slot and the SSM unit's DSPFP32 slices: vck190 has 64x8 slots and
    # 64 lanes, half a row: 3 a lane, 31 tree adds, u, D·x, y and the row's accumulator
    # (two tiles a row), and the prologue's 8.
    vck = preset("vck190")
    assert vck.board.dsp58 == 1968
    dsp, timing = fit_notes(vck)
    assert 512 + 3 * 64 + 31 + 3 + 1 + 8 == 747
    assert dsp.startswith("DSP58: 747 of 1,968 (38%") and dsp.endswith(": fits vck190")
    assert timing.startswith("timing: 400 MHz allows ")
    # 1,920 slots and the SSM unit (30 columns take 2 vector lanes at most)
    big = apply_overrides(vck, [("linear.cols", "30"), ("vector.lanes", "2")])
    assert "does NOT fit vck190" in fit_notes(big)[0]


@pytest.fixture
def small_design(monkeypatch):
    import specgen.gen.emit.verilog
    from specgen.hw.ring_fifo import RingFIFO
    monkeypatch.setattr(specgen.gen.emit.verilog, "blocks", lambda config: {"fifo": RingFIFO(width=4, depth=3)})


@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_verilog_ends_with_a_summary_and_quiet_silences_it(tmp_path, capsys, small_design):
    out = tmp_path / "v"
    assert main(["verilog", "--board", "sim", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    n = sum(1 for p in out.rglob("*") if p.is_file())
    assert captured.out.splitlines()[0].startswith(f"specgen verilog: wrote {n} files (")
    assert captured.out.splitlines()[0].endswith(f" to {out}")
    assert "DSP58:" in captured.out
    assert captured.err == ""    # capsys is not a terminal: no progress
    assert main(["verilog", "--board", "sim", "--out", str(out), "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")


def test_every_command_takes_quiet():
    from specgen.gen.cli.commands import build_parser, iter_commands
    for name, sub in iter_commands(build_parser()):
        flags = {s for a in sub._actions for s in a.option_strings}
        assert "--quiet" in flags, name


def test_not_a_terminal_means_no_progress_in_a_real_process(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gen", "golden", "--out", str(tmp_path / "g")],
                          capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    sets = len(json.loads((tmp_path / "g" / "manifest.json").read_text())["sets"])
    assert proc.stdout.splitlines()[0].startswith("specgen golden: wrote ")
    assert f"{sets} sets, seed 0, config sim" in proc.stdout
