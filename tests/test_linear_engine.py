"""``LinearEngine``: the DSP linear unit with its weights, activations and results in memory."""

import dataclasses
import json

import pytest

from specgen.golden.config import preset
from specgen.hw.linear_engine import LinearEngine
from specgen.sim.runner import run_bench

pytestmark = pytest.mark.filterwarnings("ignore:.*created but never used")

ADDR_WIDTH = 20


def _config(**linear):
    c = preset("sim")
    return c.replace(linear=dataclasses.replace(c.linear, **{"contract": "dspfp32",
                                                            "max_tokens": 16, **linear}))


def _run(engine, config, testcase, seed, **kw):
    lin = config.linear
    p = {"rows": lin.rows, "cols": lin.cols, "max_tokens": lin.max_tokens, "max_k": lin.max_k,
         "addr_width": ADDR_WIDTH, "sync_mhz": config.board.clock_mhz,
         "mem_mhz": config.board.memory_clock_mhz, "latency": 30, "stall": 0.3,
         "word_bits": engine.weight_stream.word_width, "y_record_bytes": engine.y_record_bytes,
         "weight_ports": engine.weight_ports, "weight_beats": engine.unit.weight_beats,
         "draft_plane": engine.unit.draft_plane, "jobs": 6}
    p.update(kw)
    return run_bench(engine, name=engine.module_name, module="specgen.sim.linear_engine",
                     testcase=testcase, params=p, seed=seed)


@pytest.mark.sim
@pytest.mark.parametrize("ports", [pytest.param(1, id="w1", marks=pytest.mark.slow),
                                   pytest.param(2, id="w2")])
def test_random_jobs_and_reset(seed, ports):
    """Random jobs of both passes queued back to back, 30-cycle reads and 30 % stalls on every
    AXI channel: every result word in memory equals golden.dsp; a reset with jobs in flight
    leaves the engine idle and the jobs after it exact. With two weight ports (eight plane
    ports), each port's regions at their offsets; one port runs in make test-slow, and in
    make test inside the accelerator bench (the sim preset's engine has one). K up to 64,
    so a port's region is one or two 512-bit words and its offset changes with K."""
    config = _config(max_k=64)
    eng = LinearEngine(config=config, weight_ports=ports, addr_width=ADDR_WIDTH)
    _run(eng, config, "random_jobs,reset_mid_job", seed)


@pytest.mark.sim
def test_split_tiles_on_the_engine(seed):
    """A 4 × 4 array (16 slots; packs of 2 and 4) on two weight ports, jobs of 9 to 12
    rows laid out as ``linear.split_tiles`` cuts a matrix's last tile: a piece of 8 rows
    packed 2 and one of the rest packed 4, each its own descriptor into the same result
    vector, under 30-cycle reads and 30 % stalls on every channel, with whole jobs of
    both passes between them. The sim preset's 2-row array never splits (one pack)."""
    config = _config(rows=4, max_k=32)
    eng = LinearEngine(config=config, weight_ports=2, addr_width=ADDR_WIDTH)
    _run(eng, config, "split_tile", seed, split_rows=[9, 10, 11, 12])


@pytest.mark.sim
def test_issue_rate(seed, tmp_path):
    """Four jobs of the largest tile back to back, both passes: the unit issues every
    operation, and at a 30-cycle latency with 30 % stalls on every channel it issues on
    at least 95 % of the cycles from its first operation to its last (the jobs' reads
    overlap the previous job's compute, its results drain while the next job runs)."""
    config = _config()
    eng = LinearEngine(config=config, addr_width=ADDR_WIDTH)
    out = tmp_path / "rate.json"
    _run(eng, config, "efficiency", seed, result_file=str(out))
    r = json.loads(out.read_text())
    print("linear engine:", r, f"{r['operations'] / r['span']:.3f} operations per cycle "
          f"while streaming, {r['operations'] / r['cycles']:.3f} over the whole run")
    assert r["operations"] / r["span"] >= 0.95, r


@pytest.mark.sim
@pytest.mark.parametrize("ports,beats", [pytest.param(1, 1, id="w1", marks=pytest.mark.slow),
                                         pytest.param(1, 2, id="w1x2"),
                                         pytest.param(2, 1, id="w2")])
def test_weight_ports_set_the_rate_of_short_jobs(seed, tmp_path, ports, beats):
    """Jobs of 2 tokens on the 4-column array: each input's 4 column beats serve 2
    operations, so one weight port of one beat a transfer lets the unit issue on at most
    half the cycles, and two ports, or one of two beats a transfer (the sim preset's, as
    VHK158's), on all of them (what engine_weight_ports and linear.weight_beats size the
    vhk158 engine by)."""
    config = _config(weight_beats=beats)
    eng = LinearEngine(config=config, weight_ports=ports, addr_width=ADDR_WIDTH)
    out = tmp_path / "rate.json"
    _run(eng, config, "efficiency", seed, result_file=str(out), tokens=2)
    r = json.loads(out.read_text())
    rate = r["operations"] / r["span"]
    print(f"linear engine, {ports} weight port(s) of {beats} beat(s), 2-token jobs: "
          f"{rate:.3f} operations a cycle")
    # The weight stream's FIFOs hold a few beats ahead, so a run may beat the bound by a
    # few operations at its start.
    bound = min(1.0, 2 * ports * beats / config.linear.cols)
    assert bound - 0.05 <= rate <= bound + 0.02, r


def test_rejects_bad_parameters():
    with pytest.raises(TypeError, match=r"LinearEngine\.config must be a golden\.config\.Config"):
        LinearEngine(config="sim")
    with pytest.raises(ValueError) as info:
        LinearEngine(config=_config(contract="exact"))
    assert str(info.value) == ("LinearEngine needs linear.contract 'dspfp32' (the "
                               "DSPLinearUnit), not 'exact'")
    with pytest.raises(ValueError, match=r"LinearEngine\.addr_width must be an integer in "
                                         r"\[12, 64\], not 8"):
        LinearEngine(config=_config(), addr_width=8)
    with pytest.raises(ValueError) as info:
        LinearEngine(config=_config(), weight_ports=3)
    assert str(info.value) == "LinearEngine.weight_ports must divide cols (4), not 3"
    with pytest.raises(ValueError, match=r"LinearEngine\.weight_ports must be an integer in "
                                         r"\[1, 4\], not 5"):
        LinearEngine(config=_config(), weight_ports=5)
    with pytest.raises(ValueError) as info:
        LinearEngine(config=_config(), weight_ports=4)
    assert str(info.value) == ("LinearEngine.weight_ports 4 leaves 1 column(s) a port, which "
                               "linear.weight_beats 2 must divide")


def test_ports_and_records():
    eng = LinearEngine(config=preset("vhk158"))
    # 84 binary32 results a record, padded to whole 256-bit HBM beats: 11 beats.
    assert eng.port_widths == {"w": 256, "x": 64, "y": 256}
    # Two column beats a transfer: the streams' words are two 256-bit sub-beats.
    assert eng.unit.weight_beats == 2 and eng.weight_stream.word_width == 512
    assert eng.y_record_bytes == 11 * 32
    # 84 columns at 16 tokens take 5.25 column beats a cycle: 6 weight ports (a divisor
    # of 84), each streaming 14 columns' beats through four plane ports.
    assert eng.weight_ports == 6 and len(eng.m_axi_w) == 24
    # A job's sub-beats a port: 8,192 inputs of 16 (the draft plane's whole draft
    # transfers for an input's 14 columns).
    assert eng.weight_stream.max_beats == 8192 * 16
    assert LinearEngine(config=preset("vck190")).weight_ports == 1   # 8 columns, 16 tokens


@pytest.mark.slow
def test_vhk158_engine_passes_lint(tmp_path):
    """The paper-scale engine (64 × 84 slots, six weight ports, 26 AXI masters): every
    module linted with -Wall and the project's waivers only (53 s here; make test-slow)."""
    from specgen.sim.lint import lint_component
    eng = LinearEngine(config=preset("vhk158"))
    assert eng.weight_ports == 6
    ok, output = lint_component(eng, folder=tmp_path, hierarchical=True)
    assert ok, output
