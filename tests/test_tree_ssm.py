"""``TreeSSMUnit``: tile-streamed FIFO tree passes against ``ssm_step_hw`` along the tree."""

import pytest

import specgen.sim.tree_ssm as bench
from specgen.golden.config import preset
from specgen.golden.mamba2 import SSMConfig
from specgen.golden.nonlinear import COARSE_LUTS
from specgen.hw.tree_ssm import TreeSSMUnit
from specgen.sim.lint import lint_component
from specgen.sim.runner import run_bench
from specgen.sim.ssm_unit import lut_params

CASES = [
    # A chain (each node its predecessor's child): the parent-to-child read-after-
    # write distance is one tile; one tile per row, two tiles per state.
    pytest.param({"nheads": 4, "headdim": 4, "d_state": 4, "lanes": 4}, 1, 1, "ieee",
                 [-1, 0, 1, 2, 3], 4, 4, {"stall": 0.3, "st_idle": 0.3, "idle": 0.1}, id="chain"),
    # A partial last group per row (6 = 4 + 2 lanes); the (2, 2) tree of the notes.
    pytest.param({"nheads": 2, "headdim": 3, "d_state": 6, "lanes": 4}, 1, 1, "ieee",
                 [-1, 0, 0, 1, 1, 2, 2], 6, 5, {"stall": 0.2, "st_idle": 0.5}, id="partial-tree22"),
    # The board arithmetic (DSPFP32 models, the DSP accumulator), a wide input port,
    # two passes, the second from the first's st_out (a commit chain).
    pytest.param({"nheads": 2, "headdim": 4, "d_state": 8, "lanes": 4, "input_words": 2}, 1, 1,
                 "dspfp32", [-1, 0, 0, 1, 2], 2, 4, {"stall": 0.3, "passes": 2}, id="dsp-w2-2pass"),
    # Two rows of a head an issue (lanes = 2·d_state: two trees, a 64-bit y), the board
    # arithmetic, input beats of two issues' x words (the item select); a (2, 1) tree with
    # stalls on every port.
    pytest.param({"nheads": 4, "headdim": 4, "d_state": 4, "lanes": 8, "input_words": 4}, 1, 1,
                 "dspfp32", [-1, 0, 0, 1], 3, 4, {"stall": 0.3, "st_idle": 0.3, "idle": 0.1},
                 id="two-rows-dsp"),
    # Four rows an issue (a head's rows a word, an input beat's x words), fabric units, a
    # reset in mid-pass, two passes.
    pytest.param({"nheads": 4, "headdim": 4, "d_state": 4, "lanes": 16, "input_words": 4}, 1, 1,
                 "ieee", [-1, 0, 1, 1], 2, 4, {"stall": 0.2, "reset_at": 30, "passes": 2},
                 id="four-rows-reset"),
    # A state of fewer issues than the gap (4 against the DSP arithmetic's 9: one tile, and
    # a child waits on its parent's write-back) under st_in stalls: a stretched root's
    # issues must not let its child read before the write-back.
    pytest.param({"nheads": 2, "headdim": 2, "d_state": 4, "lanes": 4}, 1, 1, "dspfp32",
                 [-1, 0, 1, 1], 3, 4, {"st_idle": 0.4}, id="small-state-st-stalls"),
    # Combinational FP units (gap 2): a one-row tile; a reset cuts the first pass.
    pytest.param({"nheads": 4, "headdim": 2, "d_state": 4, "lanes": 2}, 0, 0, "ieee",
                 [-1, 0, 0, 0, 1], 4, 4, {"stall": 0.3, "reset_at": 40}, id="reset-mid-pass"),
]


def _unit(geom, lm, la, contract, fifo_depth, max_nodes=8):
    cfg = SSMConfig(**geom, **COARSE_LUTS, contract=contract)
    return cfg, TreeSSMUnit(cfg=cfg, max_nodes=max_nodes, fifo_depth=fifo_depth,
                            mul_stages=lm, add_stages=la)


@pytest.mark.parametrize("geom,lm,la,contract,parents,out_node,fifo_depth,kw", CASES)
def test_tree_ssm_passes(geom, lm, la, contract, parents, out_node, fifo_depth, kw, seed):
    """Every node's y and the out node's state equal golden under stalls on every port."""
    cfg, unit = _unit(geom, lm, la, contract, fifo_depth)
    bench.check(bench.run_pysim(unit, cfg, parents=parents, out_node=out_node, seed=seed, **kw))


def test_tree_ssm_bench_catches_a_wrong_slot(monkeypatch, seed):
    """The bench can fail: node 3 told to read slot 2 (its uncle's) instead of its parent's."""
    cfg, unit = _unit({"nheads": 2, "headdim": 3, "d_state": 6, "lanes": 4}, 1, 1, "ieee", 5)
    real = bench.node_table

    def wrong(parents, fifo_depth):
        t = real(parents, fifo_depth)
        t[3] = (t[3][0], 2, t[3][2])
        return t

    monkeypatch.setattr(bench, "node_table", wrong)
    res = bench.run_pysim(unit, cfg, parents=[-1, 0, 0, 1, 1, 2, 2], out_node=3, seed=seed)
    with pytest.raises(AssertionError, match="node 3 y"):
        bench.check(res)


@pytest.mark.parametrize("geom", [
    {"nheads": 4, "headdim": 4, "d_state": 4, "lanes": 4},
    # Two rows an issue: half the sweep's issues, the same latencies.
    {"nheads": 4, "headdim": 4, "d_state": 4, "lanes": 8, "input_words": 2}])
def test_tree_ssm_pass_cycles_are_the_model(geom, seed):
    """Without stalls a pass takes pass_cycles plus the output FIFOs' two cycles."""
    cfg, unit = _unit(geom, 1, 1, "ieee", 4)
    parents = [-1, 0, 0, 1, 2]
    res = bench.run_pysim(unit, cfg, parents=parents, out_node=4, seed=seed)
    bench.check(res)
    assert res[0]["cycles"] - unit.pass_cycles(len(parents)) in range(4), (
        res[0]["cycles"], unit.pass_cycles(len(parents)))


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_tree_ssm_tile_covers_the_write_back():
    """The tile is the fewest whole rows whose issue spans the read-to-write-back gap."""
    for board in ("sim", "vck190", "vhk158"):
        c = preset(board)
        u = TreeSSMUnit.from_config(c)
        rows, K = c.ssm.nheads * c.ssm.headdim, c.ssm.groups_per_row
        Q = c.ssm.rows_per_word
        R = u.rows_per_tile
        assert rows % R == 0 and R % Q == 0 and (R // Q * K >= u.gap or R == rows)
        assert all(rows % r or r // Q * K < u.gap for r in range(Q, R, Q))
        assert u.ring_words == c.tree.fifo_depth * R // Q * K
    with pytest.raises(ValueError, match="TreeSSMUnit.max_nodes must be"):
        TreeSSMUnit(cfg=preset("sim").ssm, max_nodes=0, fifo_depth=4)
    with pytest.raises(ValueError, match="TreeSSMUnit.fifo_depth must be"):
        TreeSSMUnit(cfg=preset("sim").ssm, max_nodes=4, fifo_depth=0)
    with pytest.raises(ValueError, match=r"TreeSSMUnit.cfg.lanes \(8\) sweeps 2 rows of 4 "
                                         r"columns a cycle, which must divide headdim \(2\) "
                                         r"and input_words \(1\)"):
        TreeSSMUnit(cfg=SSMConfig(nheads=1, headdim=2, d_state=4, lanes=8), max_nodes=4,
                    fifo_depth=4)
    with pytest.raises(ValueError, match=r"which must divide headdim \(3\)"):
        TreeSSMUnit(cfg=SSMConfig(nheads=2, headdim=3, d_state=4, lanes=8, input_words=2),
                    max_nodes=4, fifo_depth=4)


def test_tree_ssm_lint(tmp_path):
    _cfg, unit = _unit({"nheads": 2, "headdim": 4, "d_state": 8, "lanes": 4, "input_words": 2},
                       1, 1, "dspfp32", 4)
    ok, out = lint_component(unit, folder=tmp_path)
    assert ok, out


# The default suite runs the unit's Verilog inside SSMEngine (tests/test_ssm_engine.py) and
# the unit alone on amaranth.sim; its own Verilator build runs with the slow set.
@pytest.mark.sim
@pytest.mark.slow
def test_tree_ssm_verilator(seed):
    """cocotb on Verilator, the emitted Verilog: a (2, 1) tree twice, DSPFP32 models, the
    DSP accumulator, stalls on every port and a reset in mid-pass."""
    geom = {"nheads": 2, "headdim": 4, "d_state": 8, "lanes": 4}
    _cfg, unit = _unit(geom, 1, 1, "dspfp32", 4)
    run_bench(unit, name=unit.module_name, module="specgen.sim.tree_ssm", testcase="passes",
              params={"cfg": {**geom, "contract": "dspfp32"}, "luts": lut_params(COARSE_LUTS),
                      "max_nodes": 8, "fifo_depth": 4, "lm": 1, "la": 1,
                      "parents": [-1, 0, 0, 1, 2], "out_node": 3, "passes": 2, "stall": 0.3,
                      "idle": 0.1, "st_idle": 0.3, "reset_at": 50}, seed=seed)


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_tree_ssm_board_scale_verilator(seed):
    """The ``vhk158`` preset's pass unit on Verilator: 40 heads of 64 × 128, two rows an issue
    (256 lanes), the board's tables and DSPFP32 arithmetic, 64 node banks and a ring of 16
    tiles: a root and two children, every node's y and the written state bit for bit
    against ``ssm_step_hw``, and the pass in ``pass_cycles`` (no stalls)."""
    c = preset("vhk158")
    cfg = c.ssm.pass_config
    unit = TreeSSMUnit.from_config(c)
    assert (cfg.nheads, cfg.lanes, unit.rows_per_issue) == (40, 256, 2)
    parents = [-1, 0, 0]
    geom = {k: getattr(cfg, k) for k in ("nheads", "headdim", "d_state", "lanes", "input_words",
                                          "contract")}
    luts = {k: getattr(cfg, k) for k in ("exp_lut", "softplus_lut", "silu_lut")}
    run_bench(unit, name=unit.module_name, module="specgen.sim.tree_ssm", testcase="passes",
              params={"cfg": geom, "luts": lut_params(luts),
                      "max_nodes": c.tree.max_nodes, "fifo_depth": c.tree.fifo_depth,
                      "lm": c.pipeline.fp_mul_stages, "la": c.pipeline.fp_add_stages,
                      "parents": parents, "out_node": 2, "passes": 1, "stall": 0.0,
                      "idle": 0.0, "st_idle": 0.0, "pass_cycles": unit.pass_cycles(3)},
              seed=seed)
