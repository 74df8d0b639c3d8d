
import dataclasses

import pytest

from specgen.golden.mamba2 import SSMConfig
from specgen.golden.nonlinear import COARSE_LUTS
from specgen.hw.ssm_unit import SSMUnit
from specgen.sim.lint import lint
from specgen.sim.runner import emit_verilog, run_bench
from specgen.sim.ssm_unit import check_pysim, lut_params, run_pysim

# Coarse tables (step 1/8, full ranges): the same contract (ssm_step_hw reads
# cfg's tables), a fraction of the ROM and build time. One slow run uses the
# default 1/128 tables.
COARSE = COARSE_LUTS


def _pysim(geom, *, lm, la, tokens, seed, luts=COARSE, contract="ieee", **kw):
    cfg = SSMConfig(**geom, **luts, contract=contract)
    out = run_pysim(SSMUnit(cfg=cfg, mul_stages=lm, add_stages=la), cfg, tokens=tokens,
                    seed=seed, **kw)
    check_pysim(out)
    return out


# The stream-fed SSMUnit is a library block now (the top level's is TreeSSMUnit, on the same
# SSMDatapath, tests/test_tree_ssm.py): make test keeps one shape of each kind, the others
# run in make test-slow.
@pytest.mark.parametrize("geom", [
    pytest.param({"nheads": 2, "headdim": 2, "d_state": 8, "lanes": 4}, id="h2p2n8l4"),
    # lanes divides neither N nor N·P: each row's last tile holds 2 of 4 lanes
    # (6 = 4 + 2), whose products are -0 in the tree.
    pytest.param({"nheads": 1, "headdim": 3, "d_state": 6, "lanes": 4}, id="h1p3n6l4",
                 marks=pytest.mark.slow),
    # No adder stages: a y stall right after a sweep's last tile used to let the
    # tile port re-read the state under it (found by the StateController bench).
    pytest.param({"nheads": 2, "headdim": 3, "d_state": 4, "lanes": 2, "la": 0}, id="h2p3n4l2a0"),
    # The board presets' pipelines (every FP boundary registered, golden.config
    # PipelineConfig): one tile per row (no accumulator adder, as on vhk158) and
    # two (as on vck190); both sweeps are shorter than the EMU's read-to-write-back.
    pytest.param({"nheads": 2, "headdim": 3, "d_state": 4, "lanes": 4, "lm": 5, "la": 6},
                 id="h2p3n4l4m5a6", marks=pytest.mark.slow),
    pytest.param({"nheads": 2, "headdim": 2, "d_state": 8, "lanes": 4, "lm": 5, "la": 6},
                 id="h2p2n8l4m5a6", marks=pytest.mark.slow),
])
def test_ssm_unit_tokens(geom, seed):
    """10 tokens, y back-pressure and input idles, the tile port's address moving, specials
    in the last 4 tokens; every y and the final state. h2p2n8l4: 2 groups per row;
    h1p3n6l4: a partial last group."""
    geom = dict(geom)
    la, lm = geom.pop("la", 1), geom.pop("lm", 1)
    _pysim(geom, lm=lm, la=la, tokens=10, seed=seed, stall=0.3, idle=0.1)


@pytest.mark.parametrize("geom", [
    # One tile per row (vhk158's shape): no accumulator.
    pytest.param({"nheads": 2, "headdim": 3, "d_state": 4, "lanes": 4}, id="h2p3n4l4",
                 marks=pytest.mark.slow),
    # Two tiles per row (vck190's shape): the DSP accumulator, P = T + P.
    pytest.param({"nheads": 2, "headdim": 2, "d_state": 8, "lanes": 4}, id="h2p2n8l4",
                 marks=pytest.mark.slow),
    # The board presets' wide input port: 2 and 4 words a beat.
    pytest.param({"nheads": 2, "headdim": 2, "d_state": 8, "lanes": 4, "input_words": 2},
                 id="h2p2n8l4w2", marks=pytest.mark.slow),
    pytest.param({"nheads": 4, "headdim": 1, "d_state": 8, "lanes": 4, "input_words": 4},
                 id="h4p1n8l4w4", marks=pytest.mark.slow),
    # 3 lanes: a partial last tile, an odd lane out of the fused first tree level.
    pytest.param({"nheads": 2, "headdim": 3, "d_state": 8, "lanes": 3}, id="h2p3n8l3",
                 marks=pytest.mark.slow),
    pytest.param({"nheads": 1, "headdim": 2, "d_state": 4, "lanes": 1}, id="h1p2n4l1",
                 marks=pytest.mark.slow),
    pytest.param({"nheads": 1, "headdim": 3, "d_state": 6, "lanes": 4}, id="h1p3n6l4",
                 marks=pytest.mark.slow),
])
def test_ssm_unit_dspfp32_tokens(geom, seed):
    """The board presets' arithmetic: every multiply and add a DSPFP32 slice (behavioural
    model), bit for bit ssm_step_hw with contract "dspfp32", under y back-pressure and
    input idles, with subnormal operands and results that underflow."""
    _pysim(geom, lm=1, la=1, tokens=10, seed=seed, stall=0.3, idle=0.1, contract="dspfp32")


def test_bench_tokens_reach_the_flush_boundary(seed):
    """The bench's tokens make the two contracts differ (so the DSP bench can fail on a
    missing flush): the dspfp32 golden model flushes and its state differs from IEEE's."""
    import numpy as np

    from specgen.golden.mamba2 import mamba2_init_params, ssm_step_hw
    from specgen.sim.ssm_unit import initial_state, make_tokens
    geom = {"nheads": 2, "headdim": 2, "d_state": 8, "lanes": 4}
    rng = np.random.default_rng(seed)
    cfgs = [SSMConfig(**geom, **COARSE, contract=c) for c in ("ieee", "dspfp32")]
    prm = mamba2_init_params(cfgs[0], rng)
    state = initial_state(rng, cfgs[0])
    x, B, C, dt = make_tokens(rng, cfgs[0], prm, 10)[0]
    ieee, dsp = (ssm_step_hw(c, prm, state, x, B, C, dt) for c in cfgs)
    assert sum(dsp.flushes) > 0 and ieee.flushes == (0, 0)
    assert not np.array_equal(ieee.state.view(np.uint32), dsp.state.view(np.uint32))
    assert not np.array_equal(ieee.y.view(np.uint32), dsp.y.view(np.uint32))


@pytest.mark.slow
@pytest.mark.parametrize("geom,lm,la", [
    pytest.param({"nheads": 2, "headdim": 2, "d_state": 8, "lanes": 4}, 1, 1, id="h2p2n8l4"),
    pytest.param({"nheads": 3, "headdim": 3, "d_state": 6, "lanes": 2}, 0, 2, id="h3p3n6l2"),
    pytest.param({"nheads": 2, "headdim": 3, "d_state": 4, "lanes": 4}, 2, 1, id="h2p3n4l4"),
    pytest.param({"nheads": 1, "headdim": 2, "d_state": 4, "lanes": 1}, 1, 0, id="h1p2n4l1"),
    pytest.param({"nheads": 2, "headdim": 3, "d_state": 8, "lanes": 3}, 1, 1, id="h2p3n8l3"),
    pytest.param({"nheads": 2, "headdim": 2, "d_state": 7, "lanes": 7}, 0, 1, id="h2p2n7l7"),
    pytest.param({"nheads": 3, "headdim": 1, "d_state": 10, "lanes": 6}, 2, 2, id="h3p1n10l6"),
])
def test_ssm_unit_long(geom, lm, la, seed):
    """50 tokens: the state carries across tokens; specials in the last 4."""
    _pysim(geom, lm=lm, la=la, tokens=50, seed=seed, stall=0.3, idle=0.1)


@pytest.mark.slow
def test_ssm_unit_default_tables(seed):
    """The default 1/128 tables (DEFAULT_LUTS), 12 tokens."""
    from specgen.golden.nonlinear import DEFAULT_LUTS
    luts = {"exp_lut": DEFAULT_LUTS["exp"], "softplus_lut": DEFAULT_LUTS["softplus"],
            "silu_lut": DEFAULT_LUTS["silu"]}
    _pysim({"nheads": 2, "headdim": 2, "d_state": 4, "lanes": 2}, lm=1, la=1, tokens=12,
           seed=seed, stall=0.3, luts=luts)


def test_ssm_unit_lint(tmp_path):
    dut = SSMUnit(cfg=SSMConfig(nheads=1, headdim=2, d_state=4, lanes=2, **COARSE),
                  mul_stages=1, add_stages=1)
    path = tmp_path / f"{dut.module_name}.v"
    # Flattened: Amaranth's submodules would be extra modules of the file (DECLFILENAME).
    path.write_text(emit_verilog(dut, name=dut.module_name))
    ok, out = lint(path, top=dut.module_name)
    assert ok, out


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_ssm_unit_properties_and_errors():
    cfg = SSMConfig(nheads=2, headdim=4, d_state=16, lanes=4, **COARSE)
    dut = SSMUnit(cfg=cfg, mul_stages=2, add_stages=3)
    assert dut.sweep_cycles == cfg.cycles_per_token == 32
    assert dut.emu_latency == 1 + 2 * 2 + 3
    # issue → y: read 1, u 2, products 2, h' 3, q 2, tree 2·3, 3 more groups, acc 1, y 3
    assert dut.latency == 1 + 3 * 2 + 3 * (1 + 2) + 3 + 1 + 3
    # On DSPFP32 slices: read 1, u 3, h' 4 (u·B the addend), q + first level 4, one more
    # level 4, 3 more groups, the DSP accumulator 4, y 4.
    dsp = SSMUnit(cfg=dataclasses.replace(cfg, contract="dspfp32"))
    assert dsp.emu_latency == 1 + 3 + 4
    assert dsp.latency == 1 + 3 + 4 + 4 + 4 + 3 + 4 + 4
    assert dsp.module_name == "SSMUnit_h2_p4_n16_l4_dsp"
    assert dut.module_name == "SSMUnit_h2_p4_n16_l4_m2a3"
    with pytest.raises(TypeError, match=r"^SSMUnit.cfg must be an SSMConfig, not 3$"):
        SSMUnit(cfg=3)
    with pytest.raises(ValueError, match=r"^SSMUnit.cfg.lanes must be <= d_state \(4\): several "
                                         r"rows a cycle are hw.tree_ssm.TreeSSMUnit's, not 8$"):
        SSMUnit(cfg=SSMConfig(nheads=1, headdim=2, d_state=4, lanes=8))
    with pytest.raises(ValueError, match=r"^SSMUnit supports state_format 'fp32' only, not 'fp16'$"):
        SSMUnit(cfg=SSMConfig(nheads=1, headdim=2, d_state=4, lanes=2, state_format="fp16"))


@pytest.mark.sim
@pytest.mark.parametrize("geom", [
    # 3 lanes: 8 = 3 + 3 + 2 columns per row (a partial last tile), 3·3·2 = 18 tiles,
    # and a tree with an odd value out; lanes divides neither N nor N·P.
    pytest.param({"nheads": 2, "headdim": 3, "d_state": 8, "lanes": 3}, id="h2p3n8l3",
                 marks=pytest.mark.slow),
    pytest.param({"nheads": 2, "headdim": 2, "d_state": 8, "lanes": 4}, id="h2p2n8l4",
                 marks=pytest.mark.slow),
    pytest.param({"nheads": 1, "headdim": 3, "d_state": 6, "lanes": 4}, id="h1p3n6l4",
                 marks=pytest.mark.slow),
    pytest.param({"nheads": 3, "headdim": 1, "d_state": 10, "lanes": 6}, id="h3p1n10l6",
                 marks=pytest.mark.slow),
    # The board arithmetic: DSPFP32 behavioural models, the DSP accumulator (2 tiles a row).
    pytest.param({"nheads": 2, "headdim": 2, "d_state": 8, "lanes": 4, "contract": "dspfp32"},
                 id="h2p2n8l4-dsp", marks=pytest.mark.slow),
])
def test_ssm_unit_verilator(geom, seed):
    """cocotb on Verilator, the shipped (hierarchical) Verilog: 12 tokens under y
    back-pressure and input idles, specials in the last 4; every y and the final state."""
    dut = SSMUnit(cfg=SSMConfig(**geom, **COARSE), mul_stages=1, add_stages=1)
    run_bench(dut, name=dut.module_name, module="specgen.sim.ssm_unit", testcase="tokens",
              params={"cfg": geom, "luts": lut_params(COARSE), "tokens": 12, "stall": 0.3,
                      "idle": 0.1}, seed=seed)
