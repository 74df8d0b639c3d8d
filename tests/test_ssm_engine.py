"""``SSMEngine``: tree passes with the inputs, the committed state and the outputs in memory."""

import dataclasses

import pytest

from specgen.golden.config import preset
from specgen.golden.mamba2 import SSMConfig
from specgen.golden.nonlinear import COARSE_LUTS
from specgen.hw.ssm_engine import SSMEngine, StreamDownsizer
from specgen.sim.runner import BenchFailure, run_bench
from specgen.sim.ssm_unit import lut_params

GEOM = {"nheads": 2, "headdim": 4, "d_state": 8, "lanes": 4}


def _config(geom, *, contract="ieee", max_nodes=8, fifo_depth=4):
    c = preset("sim")
    return dataclasses.replace(
        c, ssm=SSMConfig(**geom, **COARSE_LUTS, contract=contract),
        tree=dataclasses.replace(c.tree, max_nodes=max_nodes, fifo_depth=fifo_depth))


def _params(engine, config, geom, **kw):
    p = {"cfg": {**geom, "contract": config.ssm.contract}, "luts": lut_params(COARSE_LUTS),
         "max_nodes": config.tree.max_nodes, "fifo_depth": config.tree.fifo_depth,
         "addr_width": 20, "sync_mhz": config.board.clock_mhz,
         "mem_mhz": config.board.memory_clock_mhz, "latency": 30, "stall": 0.3,
         "state_bytes": engine.state_bytes, "record_bytes": engine.record_bytes}
    p.update(kw)
    return p


#: Two state ports each way (slices of 2 of the 4 lanes): the striped path. The top
#: level's benches run the one-port engine of the ``sim`` preset.
STRIPED = {**GEOM, "state_ports": 2}


@pytest.mark.sim
def test_ssm_engine_steps_verilator(seed):
    """Three tree steps over two layers of a (2, 1) tree, every word in memory, the state
    striped over two ports each way, 30-cycle reads, stalls on every AXI channel (each
    port on its own subordinate), one pass cut by a reset in mid-burst."""
    config = _config(STRIPED)
    eng = SSMEngine(config=config, addr_width=20)
    assert eng.state_ports == 2 and eng.port_widths["st"] == 64
    run_bench(eng, name=eng.module_name, module="specgen.sim.ssm_engine", testcase="steps",
              params=_params(eng, config, STRIPED, parents=[-1, 0, 0, 1, 2], layers=2, steps=3,
                             cut_step=1), seed=seed)


#: Two rows of a head a cycle (lanes = 2·d_state): the unit word is two rows, striped over
#: two ports each way, and y leaves two words a beat on a 64-bit port.
TWO_ROWS = {"nheads": 2, "headdim": 4, "d_state": 4, "lanes": 8, "input_words": 2,
            "state_ports": 2}


@pytest.mark.sim
def test_ssm_engine_two_rows_a_cycle_verilator(seed):
    """Two tree steps over two layers with the unit sweeping two rows a cycle (the VHK158
    preset's geometry at bench scale), the board arithmetic, 30-cycle reads, stalls on
    every AXI channel, one pass cut by a reset in mid-burst."""
    config = _config(TWO_ROWS, contract="dspfp32")
    eng = SSMEngine(config=config, addr_width=20)
    assert eng.unit.rows_per_issue == 2
    assert eng.port_widths == {"in": 64, "st": 128, "y": 64}
    run_bench(eng, name=eng.module_name, module="specgen.sim.ssm_engine", testcase="steps",
              params=_params(eng, config, TWO_ROWS, parents=[-1, 0, 0, 1, 2], layers=2, steps=2,
                             cut_step=1), seed=seed)


@pytest.mark.sim
def test_ssm_engine_bench_catches_a_flipped_state_bit(seed):
    """The bench can fail: one exponent bit per head of the committed state flipped in memory
    (in the first of two steps, before the special values of the last)."""
    config = _config(STRIPED)
    eng = SSMEngine(config=config, addr_width=20)
    with pytest.raises(BenchFailure, match="in memory, golden"):
        run_bench(eng, name=eng.module_name, module="specgen.sim.ssm_engine", testcase="steps",
                  params=_params(eng, config, STRIPED, parents=[-1, 0, 0, 1, 2], layers=1,
                                 steps=2, corrupt=True), seed=seed)


# Engines built for their sizes only: their masters are never elaborated.
@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_ssm_engine_sizes_and_errors():
    config = _config(GEOM)
    eng = SSMEngine(config=config, addr_width=20)
    H, P, N = config.ssm.state_shape
    assert eng.record_bytes == 4 * (2 * N + H * P + H)
    assert eng.state_bytes == 4 * H * P * N
    assert eng.port_widths == {"in": 32, "st": 128, "y": 32}
    board = preset("vhk158")
    big = SSMEngine(config=board)
    assert big.port_widths == {"in": 256, "st": 256, "y": 64}
    # VHK158: 16 state ports each way, a 512-bit slice of the 256 lanes' word each (two
    # rows a cycle, two y words a beat), which the masters pack from and split into two
    # 256-bit beats at the memory clock.
    assert big.state_ports == 16 and 16 * 512 == 32 * board.ssm.lanes
    assert big.unit.rows_per_issue == 2
    assert big.stripe_bytes * 16 == big.state_bytes
    assert big.module_name.endswith("_s16")
    members = big.signature.members
    assert [n for n in members if n.startswith("m_axi_st_")] == (
        [f"m_axi_st_rd{q}" for q in range(16)] + [f"m_axi_st_wr{q}" for q in range(16)])
    assert SSMEngine(config=preset("vck190")).state_ports == 1
    with pytest.raises(TypeError, match="SSMEngine.config must be a golden.config.Config"):
        SSMEngine(config=config.ssm)
    with pytest.raises(ValueError, match="StreamDownsizer.out_width must divide in_width"):
        StreamDownsizer(in_width=96, out_width=64)


def test_head_groups_build_one_passs_engine_and_the_accelerator_a_layers():
    """With ``ssm.head_groups`` the engine is one pass's (VHK158: 40 of 80 heads); the
    ``Accelerator`` runs a layer a pass, and the design's emitted SSM engine block is the
    one it instantiates (``hw.accelerator.layer_pass_config``)."""
    from specgen.gen.emit.blocks import blocks
    from specgen.hw.accelerator import layer_pass_config
    from specgen.hw.hierarchy import silence
    cfg = preset("vhk158")
    assert cfg.ssm.head_groups == 2
    assert SSMEngine(config=cfg).unit.cfg.nheads == 40
    assert layer_pass_config(cfg).ssm.head_groups == 1
    assert layer_pass_config(preset("vck190")) == preset("vck190")
    built = silence(blocks(cfg))
    engines = [c for c in built.values() if isinstance(c, SSMEngine)]
    assert [e.unit.cfg.nheads for e in engines] == [80]
