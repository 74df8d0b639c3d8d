# amaranth: UnusedElaboratable=no
"""The bytes a decoder-core program moves (``gen.perf.traffic``), which the performance
model prices on the memory's bandwidth: counted by hand for the decoder bench's core,
its record size against paper-scale cores, and its place in the step model. The
decoder-core benches (``tests/test_decoder_core.py``, ``make test-slow``) hold the same
counts equal to the bytes the RTL moves on Verilator."""

import dataclasses

import pytest
from specgen.gen.perf.system import accelerator, mamba_dims, seed_step, step_model
from specgen.gen.perf.traffic import RECORD_BYTES, commit_traffic, pass_traffic
from specgen.golden.config import preset
from specgen.golden.lm import LMConfig
from specgen.hw.decoder import DecoderCore
from specgen.sim.decoder_core import make_core
from tests.test_decoder_core import DESIGN


@pytest.fixture(scope="module")
def bench_core():
    config, model, core = make_core(DESIGN)
    return config, model, core.record_bits // 8


def test_a_tree_pass_counted_by_hand(bench_core):
    """Five nodes through the bench's 2-layer model (d_model 8, d_inner 16, d_state 8, two
    heads of 8, vocab 16) on ``linear.cols = 6``, ``rows = 2`` (12-slot tiles), 512-bit
    ports and 64-byte records: every term worked out here. The decoder bench measured
    these totals on Verilator (29,600 bytes read, 17,520 written, 2026-12-06)."""
    config, model, rb = bench_core
    V, L = 5, 2
    assert rb == 64
    # in_proj's segments padded to 6 rows: B 12, C 12, dt 6, x 18, z 18 = 66 rows, jobs of
    # 12, 12, 12, 12, 12 and 6 rows; out_proj 8 rows, one job; the head 16: 12 and 4.
    # Each job reads 5 tokens × 8 (16) inputs × 2 bytes and writes a 64-byte record per 6
    # rows a token.
    in_jobs_r, in_jobs_w = 6 * V * 8 * 2, (5 * 2 + 1) * V * 64
    out_r, out_w = V * 16 * 2, 2 * V * 64
    head_r, head_w = 2 * V * 8 * 2, (2 + 1) * V * 64
    conv_r, conv_w = V * 32 * (16 + 4 + 16 + 4), V * 32 * (4 + 16)   # 32 channels
    layer_r = (V * 8 * 8 + in_jobs_r + conv_r + V * 2 * 4 + (24 + V * 136 + 512)
               + V * 16 * 12 + out_r + V * 8 * 8)
    layer_w = V * 8 * 2 + in_jobs_w + conv_w + V * 2 * 4 + V * 16 * 4 + V * 16 * 2 + out_w + V * 8 * 4
    records = V + L * (1 + 6 + 3 * V + 2 + 1 + 1 + 1) + 1 + 2 + 1 + 1 + 1
    assert records == 65                                 # the program the bench logs
    weights = 4608                                       # both planes, as laid out
    read = (weights + V * 8 * 4 + L * layer_r + V * 8 * 8 + head_r + V * 16 * 4 + V * 16
            + records * rb)
    written = V * 8 * 4 + L * layer_w + V * 8 * 2 + head_w + V * 8 + V * 8
    t = pass_traffic(config, model, tokens=V, accept=True, record_bytes=rb)
    assert (t.read, t.written) == (read, written) == (29_600, 17_520)
    assert t.weights == (weights, 0) and t.state == (L * 512, 0)
    # SPEQ's draft pass reads the draft plane (the sim preset's linear.draft_plane): a
    # job's four stripes of at most 32 sub-beats of 8 bits, a 64-byte word each: 16 jobs
    # (in_proj's 6 and out_proj's a layer, the head's 2), 4,096 bytes; without it, the
    # nibble plane alone (a quarter of both planes).
    d = pass_traffic(config, model, tokens=V, mode=1, accept=True, record_bytes=rb)
    assert d.weights == ((6 + 1) * L * 4 * 64 + 2 * 4 * 64, 0) == (4096, 0)
    assert d.stage == t.stage
    one_copy = config.replace(linear=dataclasses.replace(config.linear, draft_plane=False))
    n = pass_traffic(one_copy, model, tokens=V, mode=1, accept=True, record_bytes=rb)
    assert n.weights == (weights // 4, 0)


def test_a_commit_counted_by_hand(bench_core):
    """A 3-node path: per layer the parameters (24 bytes), three 136-byte input records,
    the 512-byte state read and written, and the 32 channels' 16-byte windows copied; 5
    records. Measured on Verilator: 3,232 bytes read, 2,048 written."""
    config, model, rb = bench_core
    t = commit_traffic(config, model, path=3, record_bytes=rb)
    assert (t.read, t.written) == (5 * rb + 2 * (24 + 3 * 136 + 512 + 32 * 16),
                                   2 * (512 + 32 * 16)) == (3_232, 2_048)
    # The node flow's draft commit adopts a stored state: the windows alone.
    w = commit_traffic(config, model, path=3, replay=False, record_bytes=rb)
    assert (w.read, w.written) == (3 * rb + 2 * 32 * 16, 2 * 32 * 16)


@pytest.mark.parametrize("board", ["vck190", "vhk158"])
def test_record_bytes_of_a_paper_scale_core(board):
    """The model's program record is the decoder core's at the boards' 40-bit addresses."""
    d = mamba_dims("2.7B")
    m = LMConfig(vocab=d.vocab, d_model=d.d_model, n_layer=d.n_layer, d_state=d.d_state,
                 headdim=d.headdim)
    core = DecoderCore(config=preset(board), model=m, max_records=65536, addr_width=40,
                       max_nodes=16)
    assert core.record_bits // 8 == RECORD_BYTES


def test_the_step_model_prices_the_stage_bytes_on_the_memory():
    """On VCK190's DDR a phase's memory time is all its bytes at the bandwidth: the weight
    planes, the SSM state and the stages' (the decoder core keeps every word in memory)."""
    c = preset("vck190")
    res = step_model(accelerator(c), seed_step())
    v = res.phase("verify")
    d = mamba_dims("2.7B")
    # One binary32 SSM state of every layer (d_state = 128, two tiles of VCK190's 64 lanes).
    state = 4 * d.n_layer * d.nheads * d.headdim * d.d_state
    assert v.stage_bytes > 0
    assert v.bytes == pytest.approx(v.weight_bytes + state + v.stage_bytes)
    assert v.t_mem == pytest.approx(v.bytes / (c.board.mem_bw_gbs * 1e9))
    # The 15-node pass's stages move about 50 MB a node (every tile's job re-reads its
    # activations; the conv1d reads its taps with every node): 62.5 ms at 12 GB/s.
    assert 45e6 < v.stage_bytes / 15 < 55e6


@pytest.mark.parametrize("kw, match", [({"tokens": 0}, "tokens"), ({"tokens": 2, "mode": 2}, "mode"),
                                       ({"tokens": 2, "state_writes": 2}, "state_writes")])
def test_pass_traffic_refuses_bad_arguments(bench_core, kw, match):
    config, model, _ = bench_core
    with pytest.raises(ValueError, match=match):
        pass_traffic(config, model, **kw)
    with pytest.raises(ValueError, match="path"):
        commit_traffic(config, model, path=0)


def test_the_reuse_what_if_by_hand(bench_core):
    """``reuse`` (not built): each matrix's inputs read once for all its jobs, the stages'
    weights once a pass. On the bench's 5-node pass: in_proj's 6 jobs read their inputs
    once (5 fewer times 80 bytes a layer), the head's 2 jobs once (80 fewer); the
    pre-norms', gated norms' and final norm's weights once (4 of 5 nodes' 8, 16 and 8
    words a layer fewer); the conv1d's taps and bias once (4 of 5 nodes' 32 channels of
    20 bytes a layer)."""
    config, model, rb = bench_core
    t = pass_traffic(config, model, tokens=5, accept=True, record_bytes=rb)
    r = pass_traffic(config, model, tokens=5, accept=True, record_bytes=rb, reuse=True)
    saved = 2 * (5 * 80 + 4 * (8 + 16) * 4 + 4 * 32 * 20) + 80 + 4 * 8 * 4
    assert t.stage[0] - r.stage[0] == saved and t.stage[1] == r.stage[1]
    assert r.weights == t.weights and r.state == t.state


def test_the_cli_prices_the_reuse_what_if(capsys):
    from specgen.gen.cli import main
    args = ["perf", "--board", "vck190", "--target", "2.7B", "--draft", "370M", "--json"]
    import json
    rates = []
    for extra in ([], ["--stage-reuse"]):
        assert main(args + extra) in (0, None)
        rates.append(json.loads(capsys.readouterr().out)["tokens_per_s"])
    assert rates[1] > rates[0]
