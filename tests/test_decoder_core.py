# amaranth: UnusedElaboratable=no
"""The decoder core: whole decode steps of a 2-layer Mamba2 LM from one program in memory,
every node's logits, argmax and conv windows bit for bit against
``golden.decoder.HardwareLM``. In ``make test-slow``: the core's cold Verilator build
takes minutes."""

import pytest
from specgen.gen.perf.traffic import commit_traffic, pass_traffic
from specgen.golden.tree import ROOT, tree_depths
from specgen.sim.decoder_core import make_core
from specgen.sim.runner import BenchFailure, run_bench

#: The bench's design: ``linear.cols = 3`` divides none of the model's segments (z and x
#: 16 rows, B and C 8, dt 2, vocab 16, d_model 8), so every in-place read has a ragged
#: last chunk and in_proj's segments are padded; the SSM unit has the model's geometry.
DESIGN = {"linear": {"cols": 6}, "ssm": {"nheads": 2, "headdim": 8, "d_state": 8},
          "model": {"vocab": 16, "d_model": 8, "n_layer": 2, "d_state": 8, "headdim": 8},
          "max_records": 128, "addr_width": 18, "max_nodes": 8}


def _run(seed, **kw):
    p = {**DESIGN, "model_seed": 7, "linear_pass": "verify", "parents": [ROOT, 0, 0, 1, 2],
         "prompt": [3, 1, 4], "steps": 3, "cut_step": 1, "cut_commit": 0, "abort_step": 2,
         "abort_commit": 1, "latency": 24, "stall": 0.3}
    p.update(kw)
    config, model, core = make_core(p)
    # The bytes each program moves, as the performance model counts them: the bench
    # holds the RTL's AXI traffic equal to them.
    count = dict(groups=config.ssm.head_groups, record_bytes=core.record_bits // 8)
    step = pass_traffic(config, model, tokens=len(p["parents"]),
                        mode=int(p["linear_pass"] == "draft"), accept=True, **count)
    paths = {int(d) + 1 for d in tree_depths(p["parents"])}
    commits = {n: commit_traffic(config, model, path=n, **count) for n in paths}
    p["traffic"] = {"step": [step.read, step.written],
                    "commit": {str(n): [t.read, t.written] for n, t in commits.items()}}
    edit = p.pop("edit", None)
    if edit is not None:
        edit(p)
    run_bench(core, name=core.module_name, module="specgen.sim.decoder_core", testcase="steps",
              params=p, seed=seed)


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.parametrize("linear_pass", ["verify", "draft"])
def test_decode_step(seed, linear_pass):
    """Three steps over a branching tree of 5 nodes, each followed by the commit of a
    path (lengths 3, 3 and 3 of the tree's leaves, in turn) that the next step starts
    from: the first commit and the second step cut by a reset and rerun, the second
    commit and the third step aborted (``abort_req``) and rerun with nothing restored. The verify pass
    (both BSFP planes) and SPEQ's draft pass (the nibble plane), 24-cycle reads and 30 %
    stalls on every channel of the core's AXI ports."""
    _run(seed, linear_pass=linear_pass)


@pytest.mark.sim
@pytest.mark.slow
def test_decode_step_in_head_groups(seed):
    """The same steps with the layer's SSM work in two head groups (``ssm.head_groups``):
    4 heads of 4 rows, the engine built for 2, each group's pass reading its own records,
    parameters and half of the state, and writing its half of the committed state; every
    word checked as above."""
    _run(seed, ssm={"nheads": 4, "headdim": 4, "d_state": 8, "head_groups": 2},
         model={**DESIGN["model"], "headdim": 4})


@pytest.mark.sim
@pytest.mark.slow
def test_decode_step_with_conv1d_planes(seed):
    """The same steps on 256-bit HBM ports with four vector lanes, VHK158's: the conv1d's
    windows, taps and new windows each split over two ports and two planes in memory
    (``Config.conv1d_parts``), every node's window and the committed one read back
    through the plane order and checked as above."""
    _run(seed, linear={"cols": 4}, vector={"lanes": 4},
         board={"memory": "HBM", "memory_port_bits": 256},
         ssm={"nheads": 4, "headdim": 4, "d_state": 8},
         model={**DESIGN["model"], "headdim": 4})


@pytest.mark.sim
@pytest.mark.slow
def test_decoder_bench_can_fail(seed):
    """One flipped expected logit fails the bench."""
    with pytest.raises(BenchFailure, match="golden"):
        _run(seed, steps=1, cut_step=None, cut_commit=None, abort_step=None, abort_commit=None,
             corrupt=True)


@pytest.mark.sim
@pytest.mark.slow
def test_decoder_bench_traffic_check_can_fail(seed):
    """A count one byte off the RTL's fails the bench's traffic check."""
    def off(p):
        p["traffic"]["step"][0] += 1
    with pytest.raises(BenchFailure, match="the model counts"):
        _run(seed, steps=1, cut_step=None, cut_commit=None, abort_step=None, abort_commit=None,
             edit=off)
