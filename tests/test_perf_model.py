"""Properties of the performance model (``gen/perf/system.py``) and ``specgen perf``."""

import dataclasses
import json
import math

import numpy as np
import pytest

from specgen.gen.cli.commands import main
from specgen.gen.perf.blocks import (LinearJob, SSMTiming, linear_schedule, matmul_jobs, pe_latency,
                             ssm_stream)
from specgen.gen.perf.claims import SEED
from specgen.gen.perf.system import (JSON_KEYS, StepConfig, accelerator, expected_tokens,
                             mamba_dims, model_names, paper_rows, perf_board_names, seed_step,
                             speq_step, step_model, weight_bytes)
from specgen.golden.config import LinearConfig, preset
from specgen.golden.mamba2 import SSMConfig
from specgen.golden.tree import TreeShape

BOARDS = perf_board_names()

STEPS = [
    seed_step(),
    speq_step(),
    StepConfig(target="2.7B", draft="none", tree=()),
    StepConfig(target="1.3B", draft="130M", tree=(3, 1, 1), alpha=0.6, continue_prob=0.7),
    StepConfig(target="780M", draft="speq", tree=(1,) * 8, alpha=0.9, restore_policy="store"),
    StepConfig(target="2.7B", draft="370M", tree=(3, 2, 2, 1), alpha=0.8),   # 34 nodes > 16 lanes
]


@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("sizing", ["preset", "dsp"])
@pytest.mark.parametrize("step", STEPS, ids=lambda s: f"{s.target}-{s.draft}-{len(s.tree.branching)}")
def test_roofline_never_exceeded(board, sizing, step):
    for overlap in (0.0, 1.0):
        acc = accelerator(preset(board), sizing=sizing, overlap=overlap, restore_overlap=overlap)
        res = step_model(acc, step)
        assert res.tokens_per_s <= res.roofline_tokens_per_s * (1 + 1e-12)
        assert 0 < res.roofline_ratio <= 1 + 1e-12
        assert math.isclose(res.step_time, sum(p.time for p in res.phases))
        for p in res.phases:
            assert p.time >= 0 and p.bound in ("memory", "state", "compute")


def test_spec_anchor_152_target_passes():
    """The weight-streaming limit: 2.7B in FP16 (about 5.4 GB) at the VHK158's HBM2e, 819 GB/s
    (geometry below), allows about 152 passes/s."""
    res = step_model(accelerator(preset("vhk158")), StepConfig(target="2.7B", draft="none", tree=()))
    assert 5.3e9 < weight_bytes(mamba_dims("2.7B")) < 5.5e9
    assert 148 < res.roofline_tokens_per_s < 156


@pytest.mark.parametrize("step", STEPS[:4], ids=["seed", "speq", "ar", "small"])
def test_monotone_in_bandwidth_and_clock(step):
    config = preset("vhk158")
    base = accelerator(config)

    def board(**change):
        return accelerator(dataclasses.replace(config, board=dataclasses.replace(config.board,
                                                                                 **change)))
    last = 0.0
    for bw in (6.0, 12.0, 50.0, 200.0, 800.0, 3000.0):
        t = step_model(board(mem_bw_gbs=bw), step).tokens_per_s
        assert t >= last * (1 - 1e-12)
        last = t
    slow = board(clock_mhz=100.0)
    assert step_model(slow, step).tokens_per_s <= step_model(base, step).tokens_per_s


def test_monotone_in_rows_and_overlap():
    step = seed_step()
    config = preset("vhk158")
    prev = 0.0
    for rows in (16, 64, 256, 1024):
        acc = accelerator(dataclasses.replace(config, linear=LinearConfig(
            rows=rows, cols=16, quant_lanes=3, max_k=8192)))
        t = step_model(acc, step).tokens_per_s
        assert t >= prev
        prev = t
    ts = [step_model(accelerator(config, overlap=o), step).tokens_per_s for o in (0, 0.5, 1)]
    assert ts == sorted(ts)


def test_speq_draft_reads_the_nibble_plane():
    """The SPEQ draft's linear weights cost exactly the packed nibble plane: 4 bits per weight."""
    from specgen.golden.bsfp import encode, pack_nibbles

    dims = mamba_dims("2.7B")
    nibble_bytes = sum(o * math.ceil(i / 2) * n for _, o, i, n in dims.matrices())
    assert weight_bytes(dims, bits=4) - 2 * dims.small_params == nibble_bytes
    assert weight_bytes(dims, bits=16) - 2 * dims.small_params == 4 * nibble_bytes
    # the golden packing of a nibble plane agrees with ceil(in/2) bytes per row
    w = (np.random.default_rng(0).standard_normal((5, 33)) * 0.1).astype(np.float16)
    assert pack_nibbles(encode(w.view(np.uint16)).nibbles).nbytes == 5 * math.ceil(33 / 2)
    # and the step model charges every draft pass the nibble plane as laid out (padded
    # tiles: test_design_reads_the_padded_planes_by_hand), the verify pass both planes
    from specgen.gen.perf.system import layout_weight_bytes
    c = preset("vhk158")
    res = step_model(accelerator(c), speq_step(continue_prob=1.0))
    # 16 depths drafted (16 expanded nodes of the chain): a pass each. The 17th node,
    # which no draft pass ran, rides in the next step's root pass when the whole chain
    # is accepted (carried): no pass of its own in either flow.
    passes = 16
    assert res.draft_passes == 16
    # (The planes alone: the other weights are binary32 words the stages read, per node,
    # with their operands: the phase's stage_bytes, gen.perf.traffic.)
    small = 2 * dims.small_params
    assert math.isclose(res.phase("draft").weight_bytes,
                        passes * (layout_weight_bytes(c, dims, bits=4) - small))
    # The ceilings count the weights once a depth.
    assert math.isclose(res.phase("draft").dense_weight_bytes, 16 * weight_bytes(dims, bits=4))
    assert math.isclose(res.phase("verify").weight_bytes,
                        layout_weight_bytes(c, dims, bits=16) - small)
    # Both planes are four nibble planes; the draft reads the draft plane (VHK158's
    # linear.draft_plane): the nibble plane again, striped, each input padded to whole
    # draft transfers.
    one_copy = c.replace(linear=dataclasses.replace(c.linear, draft_plane=False))
    nib = layout_weight_bytes(one_copy, dims, bits=4) - small
    assert math.isclose(layout_weight_bytes(c, dims, bits=16) - small, 4 * nib)
    assert nib < layout_weight_bytes(c, dims, bits=4) - small < 1.2 * nib


def test_model_dims_match_the_checkpoints():
    expect = {"130M": 129e6, "370M": 368e6, "780M": 780e6, "1.3B": 1.34e9, "2.7B": 2.70e9}
    for name in model_names():
        d = mamba_dims(name)
        assert abs(d.params / expect[name] - 1) < 0.03, (name, d.params)
    assert mamba_dims("2.7B").state_elems == 655_360
    assert mamba_dims("2.7B").nheads == 80


def test_expected_tokens():
    a = 0.8
    chain = TreeShape((1,) * 6)
    assert math.isclose(expected_tokens(chain, alpha=a), (1 - a ** 7) / (1 - a))
    assert expected_tokens(TreeShape((2, 2)), alpha=a) > expected_tokens(TreeShape((1, 1)), alpha=a)
    assert expected_tokens(chain, alpha=1.0) == 7


def test_block_models_use_the_rtl_latencies():
    """The model's constants are the RTL's properties, not copies that can drift."""
    from specgen.golden.fp import FP32
    from specgen.hw.dual_mode_pe import DualModePE
    from specgen.hw.linear_unit import LinearUnit
    from specgen.hw.ssm_unit import SSMUnit

    # The model's PE latency is the one of the PEs built from the same config: it follows
    # pipeline.pe_round_stages one for one (a constant in the model would not).
    sim = preset("sim")
    lat = {r: pe_latency(dataclasses.replace(sim, pipeline=dataclasses.replace(
        sim.pipeline, pe_round_stages=r))) for r in (1, 2, 4)}
    assert (lat[2] - lat[1], lat[4] - lat[1]) == (1, 3)
    assert lat[sim.pipeline.pe_round_stages] == DualModePE(
        round_stages=sim.pipeline.pe_round_stages).latency
    assert LinearUnit(rows=2, cols=2, fmt_out=FP32).latency == DualModePE().latency + 1
    for geom, lm, la in [(dict(nheads=2, headdim=4, d_state=8, lanes=2), 1, 1),
                         (dict(nheads=80, headdim=64, d_state=128, lanes=128), 2, 2),
                         (dict(nheads=3, headdim=3, d_state=6, lanes=2), 0, 5)]:
        cfg = SSMConfig(**geom)
        t, u = SSMTiming(cfg=cfg, mul_stages=lm, add_stages=la), SSMUnit(cfg=cfg, mul_stages=lm,
                                                                         add_stages=la)
        assert (t.tiles, t.emu_latency, t.prologue_latency, t.row_latency) == \
            (u.sweep_cycles, u.emu_latency, u.prologue_latency, u.latency)


def test_linear_closed_form_equals_recurrence():
    rng = np.random.default_rng(1)
    for _ in range(50):
        s, r, n = int(rng.integers(1, 12)), int(rng.integers(1, 9)), int(rng.integers(1, 30))
        job = LinearJob(steps=s, n_rows=r)
        runs = linear_schedule([(n, job)], pe_latency=6)
        one = linear_schedule([job] * n, pe_latency=6)
        assert (runs.end, runs.stall_cycles, runs.capture) == (one.end, one.stall_cycles, one.capture)
    # a steady stream of tall jobs never stalls: Σ steps + latency + rows
    big = linear_schedule([(5000, LinearJob(steps=100, n_rows=64))], pe_latency=9)
    assert big.end == 5000 * 100 + 9 + 64 and big.stall_cycles == 0 and big.capture == ()


def test_matmul_jobs_cover_the_matrix():
    lin = LinearConfig(rows=4, cols=3, quant_lanes=3, max_k=64)
    runs = matmul_jobs(linear=lin, out_features=10, in_features=50, tokens=7, mode=1)
    assert sum(n * j.n_rows for n, j in runs) == 10 * 3     # three token groups
    assert sum(n * j.n_tokens * j.n_rows for n, j in runs) == 10 * 7
    assert {j.steps for _, j in runs} == {17}
    with pytest.raises(ValueError, match="at most LinearConfig.max_k = 64 beats"):
        matmul_jobs(linear=lin, out_features=1, in_features=65, tokens=1, mode=0)


def test_ssm_period_is_the_stream_steady_state():
    for geom in (dict(nheads=1, headdim=2, d_state=4, lanes=1),
                 dict(nheads=80, headdim=64, d_state=128, lanes=128),
                 dict(nheads=80, headdim=64, d_state=128, lanes=32)):
        t = SSMTiming(cfg=SSMConfig(**geom))
        s = ssm_stream(t, tokens=41)
        assert math.isclose((s.last_y[-1] - s.last_y[-21]) / 20, t.period(), rel_tol=0.03)


def test_ssm_rows_what_if_sweeps_rows_a_cycle():
    """``ssm_rows`` (a what-if): a 1-node pass of a 2.7B layer's two head groups issues
    R times fewer row sweeps a group than the design's (two rows of 128 lanes an issue),
    the rest of the pass (input writes, prologue, the row's latency) the same; the EMUs
    and their DSP58 grow R-fold, and the design ceiling counts them."""
    from specgen.gen.perf.system import _ssm_cycles, head_groups
    from specgen.gen.perf.roofline import roofline
    acc = accelerator(preset("vhk158"))
    dims = mamba_dims("2.7B")
    G = head_groups(acc, dims)
    Q = acc.config.ssm.lanes // dims.d_state        # the preset's own rows a cycle (2)
    rows = dims.nheads // G * dims.headdim // Q     # a group's row issues at R = 1
    for R in (2, 4):
        wide = dataclasses.replace(acc, ssm_rows=R)
        saved = _ssm_cycles(acc, dims, tokens=1) - _ssm_cycles(wide, dims, tokens=1)
        assert saved == dims.n_layer * G * (rows - rows // R)
        # R times the rows' DSP58, the per-head prologue's eight once.
        assert (wide.ssm_emus, wide.dsp_ssm) == (R * Q * 128, R * (acc.dsp_ssm - 8) + 8)
        assert "x %d rows (what-if)" % R in wide.describe()
    step = StepConfig(target="2.7B", draft="speq", tree=(1,) * 8, tokens_per_step=6)
    base, fast = (roofline(step_model(a, step)) for a in (acc, dataclasses.replace(acc, ssm_rows=2)))
    assert fast.design_compute > base.design_compute
    assert step_model(dataclasses.replace(acc, ssm_rows=2), step).tokens_per_s \
        > step_model(acc, step).tokens_per_s
    with pytest.raises(ValueError, match="ssm_rows must be one of 1, 2, 4, 8, not 3"):
        dataclasses.replace(acc, ssm_rows=3)


def test_bigger_trees_pay_for_more_lanes():
    """A tree with more nodes than token lanes needs a second weight pass in the exact array."""
    from specgen.golden.config import LinearConfig
    acc = accelerator(dataclasses.replace(preset("vhk158"),
                                          linear=LinearConfig(rows=64, cols=16, max_k=8192)))
    small = step_model(acc, StepConfig(target="2.7B", draft="370M", tree=(3, 1, 1, 1),
                                       tokens_per_step=4))                 # 13 nodes
    big = step_model(acc, StepConfig(target="2.7B", draft="370M", tree=(1, 1, 3, 3),
                                     tokens_per_step=4))                   # 15 nodes
    huge = step_model(acc, StepConfig(target="2.7B", draft="370M", tree=(3, 2, 2, 1),
                                      tokens_per_step=4))                  # 34 nodes
    v = [r.phase("verify").linear_cycles for r in (small, big, huge)]
    assert math.isclose(v[0], v[1], rel_tol=1e-3) and v[2] > 2.9 * v[0]


def test_dsp_array_cost_grows_with_the_nodes_not_the_lanes():
    """The DSPFP32 array (board preset) spends one cycle per node and input, in jobs of at
    most 16 nodes, each job at least 7 cycles an input (VHK158's 6 weight ports of two
    column beats a transfer deliver an input's 84 columns in 7; 4 in a tile packed two to
    one): 13, 15 and 31 nodes (16 + 15) cost in proportion, with no rounding to a lane
    count; 34 nodes (16 + 16 + 2) cost 16 + 16 + 7 (or 4)."""
    acc = accelerator(preset("vhk158"))
    assert acc.linear.contract == "dspfp32" and acc.weight_feed(0) == 7
    trees = ((1, 1, 3, 3), (3, 3, 1, 1), (3, 2, 2, 1), (3, 1, 1, 1))
    runs = [step_model(acc, StepConfig(target="2.7B", draft="370M", tree=tree, tokens_per_step=4))
            for tree in trees]
    # The root and every drafted node: 1 + the running products of the branching.
    nodes = [1 + sum(math.prod(tree[:i + 1]) for i in range(len(tree))) for tree in trees]
    assert nodes == [15, 31, 34, 13]
    v = [r.phase("verify").linear_cycles for r in runs]
    for vi, cycles in zip(v[1:], (31, 13)):
        assert math.isclose(vi / v[0] if cycles == 31 else v[3] / v[0], cycles / 15,
                            rel_tol=0.01)
    # 34 nodes: the 2-token job waits on the feed, 7 cycles an input of a full tile and 4
    # of a tile packed two to one (out_proj, 5,120 inputs a layer, and the LM head's last
    # tile, 2,560); in_proj's two tiles and the head's nine others are full (2,560 each).
    full, packed = 64 * 2 * 2560 + 9 * 2560, 64 * 5120 + 2560
    want = (full * (16 + 16 + 7) + packed * (16 + 16 + 4)) / ((full + packed) * 15)
    assert math.isclose(v[2] / v[0], want, rel_tol=0.01)


def test_validation_messages():
    with pytest.raises(ValueError, match="Accelerator.config.board 'sim' has no memory model "
                                         r"\(mem_bw_gbs 0.0\); allowed boards: vck190, vhk158"):
        accelerator(preset("sim"))
    with pytest.raises(TypeError, match="accelerator: config must be a golden.config.Config, "
                                        "not 'vhk158'"):
        accelerator("vhk158")
    with pytest.raises(ValueError, match="StepConfig.target must be one of '130M'"):
        StepConfig(target="3B", draft="370M", tree=(2,), tokens_per_step=2)
    with pytest.raises(ValueError, match=r"StepConfig.tokens_per_step must be a finite number in \[1.0, 3\]"):
        StepConfig(target="2.7B", draft="370M", tree=(2, 2), tokens_per_step=4.91)
    with pytest.raises(ValueError, match="needs tokens_per_step or alpha"):
        StepConfig(target="2.7B", draft="370M", tree=(2, 2))
    with pytest.raises(ValueError, match=r"Accelerator.overlap must be a finite number in \[0.0, 1.0\]"):
        accelerator(preset("vhk158"), overlap=1.5)
    with pytest.raises(ValueError, match="tree needs 17 live state slots"):
        step_model(accelerator(preset("vhk158")), StepConfig(target="2.7B", draft="370M", tree=(2, 2, 2, 2),
                                                     alpha=0.8))
    with pytest.raises(TypeError):
        StepConfig("2.7B", "370M", (2,))


def test_json_schema():
    # A tokens/step chosen here, not the seed's: the JSON must report the step it was given.
    step = dataclasses.replace(seed_step(), tokens_per_step=4.5)
    res = step_model(accelerator(preset("vhk158")), step)
    d = json.loads(res.to_json())
    assert tuple(sorted(d)) == JSON_KEYS
    assert [p["name"] for p in d["phases"]] == ["draft", "verify", "restore"]
    for p in d["phases"]:
        assert {"time_s", "t_mem", "t_compute", "bound", "bytes", "linear_cycles", "ssm_cycles",
                "intensity_ops_per_byte"} <= set(p)
    assert d["tokens_per_step"] == 4.5 and d["board"] == "vhk158"
    assert math.isclose(d["tokens_per_s"], d["tokens_per_step"] / d["step_time_s"])


def test_cli_json_and_table(capsys):
    assert main(["perf", "--board", "vck190", "--target", "2.7B", "--draft", "370M", "--json",
                 "--accept", "4.5"]) == 0
    d = json.loads(capsys.readouterr().out)
    # The CLI adds the step's ceilings (gen.perf.roofline) to the model's keys.
    assert tuple(sorted(set(d) - {"ceilings"})) == JSON_KEYS and "ceilings" in d
    assert d["tokens_per_step"] == 4.5
    # Without --accept, the seed's draft runs at SpecMamba's reported tokens per step.
    assert main(["perf", "--board", "vck190", "--target", "2.7B", "--draft", "370M", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens_per_step"] == SEED["tokens_per_step"]
    assert main(["perf", "--board", "vhk158", "--target", "1.3B", "--draft", "speq",
                 "--tree", "chain8", "--alpha", "0.9"]) == 0
    out = capsys.readouterr().out
    assert "tokens/s" in out and "roofline tokens/s" in out and "draft" in out


@pytest.mark.parametrize("argv,message", [
    (["--board", "sim", "--target", "2.7B", "--draft", "370M"],
     "unknown board 'sim'; allowed: vck190, vhk158"),
    (["--board", "zcu102", "--target", "2.7B", "--draft", "370M"],
     "unknown board 'zcu102'; allowed: vck190, vhk158"),
    (["--board", "vhk158", "--target", "3B", "--draft", "370M"],
     "unknown target '3B'; allowed: 130M, 370M, 780M, 1.3B, 2.7B"),
    (["--board", "vhk158", "--target", "2.7B", "--draft", "7B"],
     "unknown draft '7B'; allowed: 130M, 370M, 780M, 1.3B, 2.7B, speq, none"),
    (["--board", "vhk158", "--target", "2.7B", "--draft", "370M", "--tree", "2,0"],
     "--tree must be a comma-separated branching list"),
    (["--board", "vhk158", "--target", "2.7B", "--draft", "370M", "--sizing", "huge"],
     "unknown sizing 'huge'; allowed: preset, dsp"),
    (["--board", "vhk158", "--target", "2.7B", "--draft", "370M", "--accept", "2", "--alpha", "0.5"],
     "not both"),
    (["--board", "vhk158", "--target", "2.7B", "--draft", "370M", "--tree", "2,2"],
     "commits at most 3 tokens per step"),
])
def test_cli_errors(argv, message, capsys):
    assert main(["perf"] + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("specgen perf: error: ") and message in err


def test_paper_rows_cover_both_boards():
    rows = paper_rows()
    assert {(r["board"], r["sizing"]) for r in rows} == {(b, s) for b in ("vhk158", "vck190")
                                                         for s in ("preset", "dsp")}
    vck = [r for r in rows if r["board"] == "vck190"]
    # The design is bound by the DDR: its bandwidth, or the state traffic that shares it
    # (the SPEQ draft's passes each read the 2.7B state through the one state port).
    assert all(p.bound in ("memory", "state") for r in vck if r["sizing"] == "preset"
               for p in r["result"].phases if p.name != "restore")
    # The DSP-sized array too, within 5 %: its SPEQ chain drafted a depth at a time over
    # the nodes so far (the prefix flow, which carries the deepest node into the next
    # step's passes) computes the chain's nodes again in every pass, a little over its
    # weight reads.
    assert all(p.t_mem >= 0.95 * p.time for r in vck for p in r["result"].phases
               if p.name != "restore")
    # The VH1582's HBM2e, from its geometry (AMD Versal HBM Series Product Selection Guide):
    # 2 stacks x 1024 data bits x 3.2 Gb/s per pin = 819.2 GB/s.
    assert math.isclose(preset("vhk158").board.mem_bw_gbs, 2 * 1024 * 3.2 / 8, rel_tol=1e-3)


def test_design_reads_the_padded_planes_by_hand():
    """The design's passes read the weight planes as laid out: each matrix in output tiles
    of rows × cols slots (VHK158: 64 × 84 = 5,376), padding rows included, but a tile that
    fills at most half (a quarter, an eighth) of the slots packs two (four, eight) beats to
    a sub-beat, input by input: a weight port's 14 columns of an input take 8 (4, 2)
    sub-beats, whole transfers of two, against 14. On VHK158 a column beat is 64 weights ×
    4 bit = one 256-bit word, so a tile row of K inputs is K/2 nibble bytes and 3K/2
    residue bytes, with no word padding."""
    from specgen.gen.perf.system import layout_weight_bytes, mamba_dims, weight_bytes
    c = preset("vhk158")
    d = mamba_dims("2.7B")
    tile = 64 * 84
    # A tile packed 2 reads 8 of every 14 sub-beats, one packed 4 reads 4.
    half, quarter = tile * 8 // 14, tile * 4 // 14
    # in_proj 10,576 rows -> 2 tiles, its second 5,200 rows (unpacked); out_proj 2,560 ->
    # 1 tile, packed two to one (2,560 ≤ 5,376 / 2); the tied LM head 50,288 -> 10 tiles,
    # the last 1,904 rows packed two to one.
    rows_k = [(2 * tile, d.d_model, d.n_layer), (half, d.d_inner, d.n_layer),
              (9 * tile + half, d.d_model, 1)]
    assert (d.d_in_proj, d.d_model, d.vocab - 9 * tile) == (10_576, 2_560, 1_904)
    nibble = sum(r * k * n for r, k, n in rows_k) // 2
    small = d.small_params * 2
    one_copy = c.replace(linear=dataclasses.replace(c.linear, draft_plane=False))
    assert layout_weight_bytes(one_copy, d, bits=4) == nibble + small
    assert layout_weight_bytes(c, d, bits=16) == 4 * nibble + small
    # The draft pass reads the draft plane (linear.draft_plane): each input padded to
    # whole draft transfers of 8 sub-beats, 16 for a full tile's 14, 8 for a tile packed 2.
    full = tile * 16 // 14
    draft = sum(r * k * n for r, k, n in [(2 * full, d.d_model, d.n_layer),
                                          (half, d.d_inner, d.n_layer),
                                          (9 * full + half, d.d_model, 1)]) // 2
    assert layout_weight_bytes(c, d, bits=4) == draft + small
    # 1.074x the dense FP16 bytes (1.027x when a packed input could share a transfer with
    # the next; 1.36x before the partial tiles were packed).
    ratio = layout_weight_bytes(c, d, bits=16) / weight_bytes(d, bits=16)
    assert 1.073 < ratio < 1.075
    # The 370M draft: in_proj 4,384 rows in one tile (unpacked), out_proj 1,024 packed
    # four to one, the head as above: 1.27x dense (2.5x unpacked).
    d3 = mamba_dims("370M")
    assert (d3.d_in_proj, d3.d_model) == (4_384, 1_024)
    rows3 = [(tile, d3.d_model, d3.n_layer), (quarter, d3.d_inner, d3.n_layer),
             (9 * tile + half, d3.d_model, 1)]
    nib3 = sum(r * k * n for r, k, n in rows3) // 2
    assert layout_weight_bytes(c, d3, bits=16) == 4 * nib3 + d3.small_params * 2
    # The design's verify pass (one per step) moves the padded planes (its stages read
    # the other weights, binary32, with their operands: stage_bytes); the roofline keeps
    # the dense bytes.
    res = step_model(accelerator(c), seed_step())
    assert res.phase("verify").weight_bytes == pytest.approx(4 * nibble)
    roof = step_model(accelerator(c), seed_step()).roofline_tokens_per_s
    dense = res.tokens_per_step / ((4 * weight_bytes(mamba_dims("370M")) + weight_bytes(d))
                                   / c.board.mem_bw_gbs / 1e9)
    assert roof == pytest.approx(dense, rel=1e-9)


def test_vector_stages_add_their_elements_over_the_lanes():
    """A 2.7B verify pass of 15 nodes spends its vector elements (counted by hand from the
    Mamba2 widths) over each stage's lanes, in series with the rest of the pass: the
    design's 4 by default (the argmax and the conv1d too: its four windows a beat over two
    256-bit HBM ports each way). With one head group (on VHK158 nothing of a layer then overlaps); the
    preset's two run the conv1d of B and C once more a layer."""
    grouped = preset("vhk158")
    acc = accelerator(grouped.replace(ssm=dataclasses.replace(grouped.ssm, head_groups=1)))
    assert acc.vector_lanes == 4 and acc.stage_lanes("conv1d") == 4
    assert acc.config.conv1d_parts() == 2 and acc.config.conv1d_parts(lanes=10**9) == 5 * 10**8
    res = {n: step_model(dataclasses.replace(acc, vector_lanes=n), seed_step())
           for n in (1, 4, 10**9)}
    assert step_model(acc, seed_step()).tokens_per_s == res[4].tokens_per_s
    d = mamba_dims("2.7B")

    def per_node(lanes):
        # pre-norm 2560, conv1d 5120 + 2·128, dt 80, gated norm 5120, residual 2560 a
        # layer; the gather, the final norm and the argmax once a node.
        return (64 * ((2560 + 80 + 5120 + 2560 + 5376) / lanes)
                + (2560 + 2560 + d.vocab) / lanes)
    v1 = res[1].phase("verify")
    assert v1.vector_cycles == pytest.approx(15 * per_node(1))
    assert res[4].phase("verify").vector_cycles == pytest.approx(15 * per_node(4))
    far = res[10**9].phase("verify")
    assert v1.t_compute - far.t_compute == pytest.approx(
        15 * (per_node(1) - per_node(10**9)) / acc.clock_hz, rel=1e-6)
    assert res[1].tokens_per_s < res[4].tokens_per_s < res[10**9].tokens_per_s
    two = step_model(accelerator(grouped), seed_step()).phase("verify")
    assert two.vector_cycles == pytest.approx(15 * (per_node(4) + 64 * 2 * 128 / 4))


def test_deepest_probability_by_hand():
    """The chance that the accepted path ends on the deepest drafted depth, whose node no
    draft pass ran: the product of each depth's chance that the target's token is among
    the drafted ones, ``1 − (1 − α)^b``; from tokens per step, through the α that gives
    them (a chain's tokens are ``(1 − α^(L+1)) / (1 − α)``)."""
    from specgen.gen.perf.system import deepest_probability
    chain = TreeShape((1,) * 6)
    assert math.isclose(deepest_probability(chain, levels=6, alpha=0.8), 0.8 ** 6)
    assert math.isclose(deepest_probability(chain, levels=3, alpha=0.8), 0.8 ** 3)
    tokens = (1 - 0.8 ** 7) / (1 - 0.8)
    assert math.isclose(deepest_probability(chain, levels=6, tokens=tokens), 0.8 ** 6,
                        rel_tol=1e-9)
    # All tokens a step: every path reaches the deepest depth.
    assert deepest_probability(chain, levels=6, tokens=7.0) == 1.0
    tree = TreeShape((2, 2, 1, 1))
    assert math.isclose(deepest_probability(tree, levels=4, alpha=0.5),
                        (1 - 0.5 ** 2) ** 2 * 0.5 ** 2)


def test_layer_overlap_by_hand():
    """Two groups, two in_proj jobs of 10 cycles, group 0's rows in the first: its conv1d
    (3) and SSM pass (8) run 10 … 21 while the second job runs 13 … 23 (handed out after
    the pass's hand-over), so 8 of the serial 42 cycles are hidden. One group with a job
    left after its x (z): that job runs beside the pass."""
    from specgen.gen.perf.system import layer_overlap
    assert layer_overlap(jobs=2, need=[1, 2], job_cycles=10, conv=[3, 3], ssm=[8, 8]) == 8
    assert layer_overlap(jobs=3, need=[2], job_cycles=10, conv=[5], ssm=[20]) == 10
    # Nothing to hide: every job before the only pass.
    assert layer_overlap(jobs=2, need=[2], job_cycles=10, conv=[5], ssm=[20]) == 0


def test_head_groups_shorten_the_vhk158_verify_pass():
    """VHK158's preset runs 2.7B's SSM work in two head groups: its verify pass is shorter
    than with one (group 0's pass beside in_proj's second tile), by at most that tile."""
    from specgen.gen.perf.system import head_groups, mamba_dims
    cfg = preset("vhk158")
    assert cfg.ssm.head_groups == 2
    one = cfg.replace(ssm=dataclasses.replace(cfg.ssm, head_groups=1))
    step = StepConfig(target="2.7B", draft="370M", tree=TreeShape([2, 2, 1, 1]),
                      tokens_per_step=4.91)
    two_r, one_r = (step_model(accelerator(c), step) for c in (cfg, one))
    v2, v1 = two_r.phase("verify").time, one_r.phase("verify").time
    tile = 2560 * 15 / cfg.board.clock_mhz / 1e6 * 64          # K = d_model, 15 tokens
    assert 0 < v1 - v2 <= tile
    assert two_r.tokens_per_s > one_r.tokens_per_s
    # A model whose heads the groups do not split into whole input beats runs one group.
    acc = accelerator(cfg.replace(ssm=dataclasses.replace(cfg.ssm, head_groups=10)))
    assert head_groups(acc, mamba_dims("2.7B")) == 10
    assert head_groups(acc, mamba_dims("370M")) == 1       # 32 heads


def test_draft_passes_wait_on_the_weight_ports():
    """VHK158's linear engine has 6 weight ports for 84 columns (14 column beats an input),
    two beats a transfer, so a pass of one token takes 7 cycles an input, not 1: by hand,
    the 370M draft's one-node pass is 7 × (inputs of every job) cycles up to the fills and
    drains, and the program model (gen.perf.program.job_terms, calibrated on the RTL)
    gives a job the same period. One beat a transfer (what the engine had before) doubles
    it; from 16 tokens up the slots, not the ports, set the pace."""
    from specgen.gen.perf.program import job_terms
    from specgen.gen.perf.system import _linear_cycles, mamba_dims
    cfg = preset("vhk158")
    acc = accelerator(cfg)
    # A full pass takes 7 cycles an input; a nibble pass reads the draft plane, four
    # stripes a transfer: 2.
    assert (acc.weight_ports, acc.weight_beats, acc.weight_feed(0), acc.weight_feed(1)) == (
        6, 2, 7, 2)
    dims = mamba_dims("370M")
    tile = cfg.linear.rows * cfg.linear.cols
    inputs = sum(-(-o // tile) * i * n for _, o, i, n in dims.matrices())

    def by_hand(beats):
        # Every tile's inputs at its feed: a port's 14 columns, q to a sub-beat in a tile of
        # at most 1/q of the slots, rounded up to whole transfers of `beats` sub-beats.
        def feed(n_rows):
            q = max(q for q in (1, 2, 4, 8) if n_rows * q <= tile)
            return -(-(-(-14 // q)) // beats)
        return sum(n * i * sum(feed(min(tile, o - r)) for r in range(0, o, tile))
                   for _, o, i, n in dims.matrices())
    one = _linear_cycles(acc, dims, tokens=1, mode=0)
    # The 370M out_proj (1,024 rows of 5,376: a quarter) packs 4 (2 cycles an input), the
    # LM head's last tile (1,896 rows) 2 (4 cycles), in_proj (4,384) none (7).
    assert by_hand(2) < 7 * inputs
    assert by_hand(2) <= one <= by_hand(2) * 1.01
    job = {"steps": 1024, "n_tokens": 1, "n_rows": tile}
    kw = dict(rows=64, cols=84, weight_ports=6)
    assert job_terms(job, **kw, weight_beats=2)[0] == 7 * 1024
    assert job_terms(job, **kw)[0] == 14 * 1024
    assert job_terms({**job, "n_rows": 1024}, **kw, weight_beats=2)[0] == 2 * 1024
    assert job_terms({**job, "n_rows": 2560}, **kw, weight_beats=2)[0] == 4 * 1024
    assert [acc.weight_feed(0, q) for q in (1, 2, 4, 8)] == [7, 4, 2, 1]
    slow = _linear_cycles(dataclasses.replace(acc, weight_beats=1), dims, tokens=1, mode=0)
    assert by_hand(1) <= slow <= by_hand(1) * 1.01
    # SPEQ's nibble pass (mode 1) follows nibble_beats (the draft plane's 8 as built, the
    # nibble plane's 2 without it); the full pass keeps weight_beats.
    one_copy = accelerator(cfg.replace(linear=dataclasses.replace(cfg.linear,
                                                                   draft_plane=False)))
    assert (acc.nibble_beats, one_copy.nibble_beats) == (8, 2)
    assert (one_copy.weight_feed(0), one_copy.weight_feed(1)) == (7, 7)
    assert [acc.weight_feed(1, q) for q in (1, 2, 4, 8)] == [2, 1, 1, 1]
    # 16 tokens: one operation per token and input, whatever the ports.
    t16 = _linear_cycles(acc, dims, tokens=16, mode=0)
    assert t16 == _linear_cycles(dataclasses.replace(acc, weight_beats=1), dims, tokens=16, mode=0)
    assert 16 * inputs <= t16 <= 16 * inputs * 1.01
