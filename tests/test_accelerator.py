"""The accelerator top level (:class:`hw.accelerator.Accelerator`): AXI benches on
Verilator against golden (``sim/accelerator.py``), parameter checks, lint."""

import dataclasses
import json

import pytest

from specgen.golden.config import PRESETS, preset
from specgen.hw.accelerator import Accelerator
from specgen.hw.axi_stream import AXI4StreamSignature, tdata_width
from specgen.sim.lint import lint_modules
from specgen.sim.runner import BenchFailure, emit_verilog, run_bench

# Components whose constructor raised are never elaborated; amaranth warns when
# the garbage collector frees them.
pytestmark = pytest.mark.filterwarnings("ignore:.*created but never used")


#: The benches' memory: 1 MiB (20 address bits) holds two layers of the sim preset.
BENCH_ADDR_WIDTH = 20


def _run(testcase, seed, **params):
    dut = Accelerator(config=preset("sim"), addr_width=BENCH_ADDR_WIDTH)
    # Compiled at -O0: with Verilator's default -Os, g++ spent about 12 minutes on
    # the model of an earlier revision (with the exact PE array) on a 2-core machine;
    # at -O0 the build stays short and so do the benches.
    return run_bench(dut, name=dut.module_name, module="specgen.sim.accelerator", testcase=testcase,
                     params={"preset": "sim", **params}, seed=seed, cxx_opt="-O0")


@pytest.mark.sim
def test_step(seed, tmp_path):
    """Draft tokens (quantized linear job vs draft_dot, ROLLBACK, DRAFT_COMMIT), verify steps
    (every layer's tree nodes vs ssm_step_hw_bits from the parent's state, full linear jobs
    vs full_dot, the accepted path, the committed state), every SSM word in the modeled
    memory, under random pauses, stalls and back-pressure."""
    result = tmp_path / "step.json"
    _run("draft_verify_step", seed, result_file=str(result))
    figures = json.loads(result.read_text())
    print("step figures:", figures)
    assert figures["nodes"] == figures["nodes_in_tree"] and figures["layers"] == 2


@pytest.mark.sim
def test_reset_mid_step(seed):
    """A reset in mid commit pass leaves both committed banks whole; the step then passes."""
    _run("reset_mid_step", seed)


@pytest.mark.sim
def test_bench_catches_a_wrong_state_bank(seed):
    """The bench can fail: a step from the wrong committed bank gives y that differ."""
    with pytest.raises(BenchFailure, match="differ from golden"):
        _run("wrong_bank", seed)


@pytest.mark.sim
def test_errors(seed):
    """LINEAR_CMD, TREE_SIZE, TREE_ORDER, DIMENSIONS, DRAFT_ACCEPT, TREE_OVERFLOW codes; a
    step passes afterwards."""
    _run("errors", seed)


def test_rejects_bad_parameters():
    with pytest.raises(TypeError, match=r"Accelerator\.config must be a golden\.config\.Config, "
                                        r"not 'sim'"):
        Accelerator(config="sim")
    cfg = preset("sim")
    bad = cfg.replace(tree=cfg.tree.__class__(fifo_depth=4, tile_size=8, max_nodes=1))
    with pytest.raises(ValueError, match=r"Accelerator\.config\.tree\.max_nodes must be >= 2"):
        Accelerator(config=bad)
    with pytest.raises(TypeError):
        Accelerator(preset("sim"))
    with pytest.raises(ValueError, match=r"Accelerator\.addr_width must be an integer in "
                                         r"\[13, 64\], not 8"):
        Accelerator(config=cfg, addr_width=8)
    exact = cfg.replace(linear=dataclasses.replace(cfg.linear, contract="exact"))
    with pytest.raises(ValueError) as info:
        Accelerator(config=exact)
    assert str(info.value) == (
        "Accelerator.config.linear.contract must be 'dspfp32' (the memory-fed linear engine's "
        "DSPLinearUnit; the 'exact' LinearUnit is a block of its own), not 'exact'")


@pytest.mark.parametrize("kwargs,exc,message", [
    ({"data_width": 12}, ValueError,
     "AXI4StreamSignature.data_width must be a multiple of 8 (whole bytes), not 12"),
    ({"data_width": 0}, ValueError, "AXI4StreamSignature.data_width must be an integer"),
    ({"data_width": 32, "user_width": -1}, ValueError,
     "AXI4StreamSignature.user_width must be an integer"),
])
def test_axi_stream_rejects_bad_widths(kwargs, exc, message):
    with pytest.raises(exc) as info:
        AXI4StreamSignature(**kwargs)
    assert str(info.value).startswith(message), str(info.value)


def test_axi_stream_adapter_rejects_narrow_tdata():
    from amaranth import Module
    from amaranth.lib import stream, wiring
    from specgen.hw.axi_stream import stream_to_axis

    axis = AXI4StreamSignature(data_width=8).create()
    src = stream.Signature(12).flip().create()
    with pytest.raises(ValueError, match="a payload of 12 bits does not fit tdata of 8 bits; "
                                         "use data_width >= 16"):
        stream_to_axis(Module(), src, axis)
    del wiring


def test_tdata_width():
    assert tdata_width(1) == 8 and tdata_width(32) == 32 and tdata_width(33) == 40


def test_ports_and_properties():
    a = Accelerator(config=preset("sim"))
    # sim: 2 heads × 2 × 8 states, 4 lanes; the engine's ports: 32-bit records (one input
    # word a beat), 128-bit state (4 lanes of binary32), 32-bit y; 40-bit addresses.
    assert a.ssm_port_widths == {"in": 32, "st": 128, "y": 32}
    assert len(a.m_axi_ssm_in.araddr) == 40 and len(a.m_axi_ssm_st_wr0.wdata) == 128
    lay = a.layout
    assert (lay.record_bytes, lay.state_bytes, lay.y_bytes) == (4 * (16 + 4 + 2), 128, 16)
    assert lay.state_layer_stride == 6 * 4096 and lay.io_layer_stride == 4 * 8192
    # The linear engine: four 512-bit weight-plane ports (the sim board's widest), a
    # 64-bit activation port, 512-bit result records (4 binary32 padded to one beat).
    assert a.linear_port_widths == {"w": 512, "x": 64, "y": 512}
    assert a.linear_engine.y_record_bytes == 64
    assert len(a.m_axi_lin_w3.araddr) == 40 and len(a.m_axi_lin_y.wdata) == 512
    assert a.module_name == "Accelerator_sim_d2x4t16k16_h2p2n8l4_t64d16_p222"
    assert Accelerator(config=preset("sim"), addr_width=20).module_name.endswith("_p222_a20")


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_vhk158_memory_ports_fit_the_hbm_nmus():
    """At paper scale the top's AXI4 masters are 24 weight-plane ports (6 weight ports of
    4 planes), the activation and result ports, 16 state ports each way (the state
    striped, ssm.state_ports) and the SSM input and y ports: 60, within the part's 64
    HBM_NMUs, each at most 256 bits wide."""
    from specgen.golden.config import HBM_NMU_PORTS
    a = Accelerator(config=preset("vhk158"))
    masters = [n for n in a.signature.members if n.startswith("m_axi_")]
    assert len([n for n in masters if n.startswith("m_axi_ssm_st_rd")]) == 16
    assert len([n for n in masters if n.startswith("m_axi_ssm_st_wr")]) == 16
    assert len(masters) == 24 + 2 + 2 + 32 == 60 <= HBM_NMU_PORTS
    widths = {**{f"st_rd{q}": len(getattr(a, f"m_axi_ssm_st_rd{q}").rdata) for q in range(16)},
              "lin_y": len(a.m_axi_lin_y.wdata), "lin_w0": len(a.m_axi_lin_w0.rdata)}
    assert max(widths.values()) <= 256, widths


@pytest.mark.slow   # tests/test_lint.py lints every module of the emitted sim design
def test_lint_sim(tmp_path):
    a = Accelerator(config=preset("sim"))
    path = tmp_path / "acc.v"
    path.write_text(emit_verilog(a, name=a.module_name))
    ok, out = lint_modules(path)
    assert ok, out


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in PRESETS if n != "sim"])
def test_lint_boards(tmp_path, name):
    a = Accelerator(config=preset(name))
    path = tmp_path / "acc.v"
    path.write_text(emit_verilog(a, name=a.module_name))
    ok, out = lint_modules(path)
    assert ok, out
