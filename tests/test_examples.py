"""The README's example: a user's own cocotb test against emitted Verilog."""

import importlib.util
from pathlib import Path

import pytest

from specgen.gen.cli.commands import main

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "own_cocotb_test"


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_own_cocotb_test_runs_on_emitted_verilog(tmp_path, monkeypatch):
    """Emit one RingFIFO, run examples/own_cocotb_test on it (about 30 s: one build)."""
    import specgen.sim.runner
    ok, reason = specgen.sim.runner.simulator_available("verilator")
    if not ok:
        pytest.skip(reason)
    monkeypatch.setattr(specgen.sim.runner, "SIM_BUILD", tmp_path / "sim_build")
    out = tmp_path / "fifo"
    assert main(["verilog", "--board", "sim", "--only", "ring_fifo", "--out", str(out), "-q"]) == 0
    monkeypatch.syspath_prepend(str(EXAMPLE))    # the cocotb module is found on sys.path
    spec = importlib.util.spec_from_file_location("example_run", EXAMPLE / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    run.main(out)    # raises BenchFailure if the user's test fails
    latest = (tmp_path / "sim_build" / "latest").resolve()
    assert latest.name.startswith("fifo_smoke-all-seed")
    assert "three_words_in_order" in (latest / "results.xml").read_text()
