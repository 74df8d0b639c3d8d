"""StateController: parameters, lint, and the benches of sim/state_controller.py.

Default set: the controller against the SSM-unit BFM on Amaranth's simulator
(lanes 1/2/4, slots 1–4, with and without records and conv window) and on
Verilator (cocotb), and one run of the real SSMUnit + StateController on
Amaranth's simulator, bit for bit ssm_step_hw_bits. Longer runs are ``slow``.
"""

import gc
import json

import pytest

from specgen.golden.mamba2 import SSMConfig
from specgen.golden.nonlinear import COARSE_LUTS
from specgen.hw.state_controller import Op, StateController
from specgen.sim.lint import lint_component
from specgen.sim.runner import run_bench
from specgen.sim.state_controller import run_bfm_pysim, run_system_pysim
from specgen.sim.ssm_unit import lut_params
from specgen.sim.state_controller_top import StateControllerTop
from specgen.sim.state_scenario import check_latencies

# Coarse tables as tests/test_ssm_unit.py: the same contract, a fraction of the ROM.
COARSE = COARSE_LUTS

# Components built only to read their properties, or rejected by their constructor,
# are never elaborated.
pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")

G4 = {"nheads": 2, "headdim": 2, "d_state": 8, "lanes": 4}


# -- parameters ----------------------------------------------------------------------------

def _cfg(**kw):
    return SSMConfig(**{**G4, **kw})


@pytest.mark.parametrize("kwargs,exc,message", [
    ({"slots": 0}, ValueError, "StateController.slots must be an integer in [1, 1024], not 0"),
    ({"slots": 2.0}, TypeError, "StateController.slots must be an integer in [1, 1024], not 2.0"),
    ({"slots": True}, TypeError, "StateController.slots must be an integer in [1, 1024], not True"),
    ({"slots": 1025}, ValueError, "StateController.slots must be an integer in [1, 1024], not 1025"),
    ({"slots": 2, "records": -1}, ValueError,
     "StateController.records must be an integer in [0, 1024], not -1"),
    ({"slots": 2, "conv_width": 0}, ValueError,
     "StateController.conv_width must be an integer in [1, 4096], not 0"),
    ({"slots": 2, "conv_depth": "4"}, TypeError,
     "StateController.conv_depth must be an integer in [0, 1048576], not '4'"),
])
def test_rejects_bad_parameters(kwargs, exc, message):
    with pytest.raises(exc) as info:
        StateController(ssm_cfg=_cfg(), **kwargs)
    assert str(info.value) == message
    del info
    gc.collect()


def test_rejects_bad_ssm_config():
    with pytest.raises(TypeError, match=r"^StateController.ssm_cfg must be an SSMConfig, not 3$"):
        StateController(ssm_cfg=3, slots=1)
    with pytest.raises(ValueError, match=r"^StateController.ssm_cfg.state_format must be 'fp32', "
                                         r"not 'fp16'$"):
        StateController(ssm_cfg=_cfg(state_format="fp16"), slots=1)
    with pytest.raises(ValueError, match=r"^StateController.ssm_cfg.lanes must be <= d_state "
                                         r"\(4\), not 8$"):
        StateController(ssm_cfg=SSMConfig(nheads=1, headdim=2, d_state=4, lanes=8), slots=1)


def test_parameters_are_keyword_only():
    with pytest.raises(TypeError):
        StateController(_cfg(), 2)


def test_properties():
    c = StateController(ssm_cfg=_cfg(), slots=3, records=4)
    # 2 heads · 2 rows · 8 columns / 4 lanes
    assert c.state_tiles == 8
    # Mamba2 conv window: 3 rows of d_inner + 2N = 20 binary32, 128-bit words (4 per word)
    assert (c.conv_width, c.conv_depth) == (128, 3 * 5)
    assert c.record_words == 8 + 4 + 2
    assert c.restore_cycles == c.checkpoint_cycles == max(8, 15) + 2
    assert c.replay_cycles == 14 + 2
    assert c.copy_overhead == 2
    assert c.index_bits == 2
    assert c.module_name == "StateController_h2_p2_n8_l4_s3_r4_c128x15"
    c = StateController(ssm_cfg=_cfg(lanes=1), slots=1, conv_depth=0)
    assert (c.state_tiles, c.restore_cycles, c.records, c.index_bits) == (32, 34, 0, 1)
    assert c.cmd.payload.shape().size == 2 + 1
    assert len(c.ssm_st_wdata) == 32 and len(c.conv_wdata) == 32
    # the 2.7B layer: 80 heads × 64 × 128, 64 lanes
    big = StateController(ssm_cfg=SSMConfig.from_model("2.7B", lanes=64), slots=2)
    assert big.state_tiles == 10240 and big.restore_cycles == 10242
    assert StateController.default_conv_depth(_cfg(), conv_width=32) == 3 * 20


def test_lint(tmp_path):
    for kw in ({"slots": 3, "records": 4}, {"slots": 1, "conv_depth": 0},
               {"slots": 4, "records": 1, "conv_width": 20, "conv_depth": 5}):
        dut = StateController(ssm_cfg=_cfg(), **kw)
        ok, out = lint_component(dut, folder=tmp_path)
        assert ok, out


# -- the controller against the SSM-unit BFM ------------------------------------------------

BFM_CONFIGS = [
    pytest.param(G4, {"slots": 3, "records": 4}, id="l4-s3-r4"),
    pytest.param({"nheads": 1, "headdim": 2, "d_state": 4, "lanes": 1}, {"slots": 1}, id="l1-s1-r0"),
    pytest.param({"nheads": 2, "headdim": 3, "d_state": 4, "lanes": 2},
                 {"slots": 2, "records": 1, "conv_width": 20, "conv_depth": 40}, id="l2-s2-r1-conv40"),
    pytest.param({"nheads": 3, "headdim": 1, "d_state": 2, "lanes": 2},
                 {"slots": 4, "records": 3, "conv_width": 7, "conv_depth": 1}, id="l2-s4-r3-conv1"),
    pytest.param({"nheads": 1, "headdim": 1, "d_state": 2, "lanes": 2},
                 {"slots": 2, "records": 2, "conv_depth": 0}, id="l2-s2-r2-noconv"),
]


def _check_bfm(out):
    assert out["resets"] >= 1 and out["checks"] >= 2 and out["tokens"] > 10
    check_latencies(out)
    ops = {r["op"] for r in out["records"] if not r["error"]}
    assert {Op.CHECKPOINT, Op.RESTORE} <= ops


@pytest.mark.parametrize("geom,kw", BFM_CONFIGS)
def test_bfm_pysim(geom, kw, seed):
    """Speculative steps under store/replay/recompute, errors, a reset mid-command;
    y, responses, state and conv window checked; latency = fixed + waits, exactly."""
    out = run_bfm_pysim(SSMConfig(**geom), **kw, seed=seed, steps=6, resets=2)
    _check_bfm(out)


@pytest.mark.slow
@pytest.mark.parametrize("geom,kw", BFM_CONFIGS)
def test_bfm_pysim_long(geom, kw, seed):
    for k in range(8):
        out = run_bfm_pysim(SSMConfig(**geom), **kw, seed=seed + k, steps=20, resets=4)
        _check_bfm(out)


@pytest.mark.sim
@pytest.mark.parametrize("geom,kw", [BFM_CONFIGS[0], BFM_CONFIGS[1]])
def test_bfm_verilator(geom, kw, seed, tmp_path):
    """The BFM bench through cocotb on Verilator (the emitted Verilog)."""
    dut = StateController(ssm_cfg=SSMConfig(**geom), **kw)
    res = tmp_path / "result.json"
    run_bench(dut, name=dut.module_name, module="specgen.sim.state_controller", testcase="bfm",
              params={"cfg": geom, **kw, "steps": 6, "resets": 2, "result_file": str(res)},
              seed=seed)
    out = json.loads(res.read_text())
    assert out["resets"] >= 1 and out["checks"] >= 2 and out["tokens"] > 10


# -- SSMUnit + StateController, bit for bit ------------------------------------------------

def test_system_pysim(seed):
    """The real unit (H1 P2 N4, 2 lanes: 2 tiles per row): 2 speculative steps, every y and
    the state bit for bit ssm_step_hw_bits from the right states, y back-pressure, a reset
    mid-stream. Lanes 1 and 4 run in the slow set and on Verilator."""
    cfg = SSMConfig(nheads=1, headdim=2, d_state=4, lanes=2, **COARSE)
    out = run_system_pysim(cfg, slots=2, records=3, seed=seed, steps=2)
    assert out["resets"] == 1 and out["checks"] >= 2
    check_latencies(out)


SYSTEM_SLOW = [
    pytest.param({"nheads": 1, "headdim": 2, "d_state": 4, "lanes": 1}, {"slots": 1, "records": 2},
                 0, 1, id="l1-s1-r2"),
    pytest.param({"nheads": 2, "headdim": 3, "d_state": 4, "lanes": 2},
                 {"slots": 2, "conv_width": 32, "conv_depth": 6}, 1, 0, id="l2-s2-r0"),
    pytest.param(G4, {"slots": 4, "records": 3}, 2, 1, id="l4-s4-r3"),
]


@pytest.mark.slow
@pytest.mark.parametrize("geom,kw,lm,la", SYSTEM_SLOW)
def test_system_pysim_long(geom, kw, lm, la, seed):
    cfg = SSMConfig(**geom, **COARSE)
    out = run_system_pysim(cfg, **kw, seed=seed, steps=8, resets=2, mul_stages=lm, add_stages=la)
    assert out["resets"] >= 1
    check_latencies(out)


@pytest.mark.sim
@pytest.mark.slow
def test_system_verilator(seed, tmp_path):
    """SSMUnit + StateController on Verilator (about 2 minutes of build)."""
    top = StateControllerTop(ssm_cfg=SSMConfig(**G4, **COARSE), slots=3, records=4)
    res = tmp_path / "result.json"
    run_bench(top, name=top.module_name, module="specgen.sim.state_controller", testcase="system",
              params={"cfg": G4, "luts": lut_params(COARSE), "slots": 3, "records": 4,
                      "steps": 6, "resets": 2, "result_file": str(res)}, seed=seed)
    out = json.loads(res.read_text())
    assert out["resets"] >= 1 and out["checks"] >= 2
