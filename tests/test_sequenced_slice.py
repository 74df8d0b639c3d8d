# amaranth: UnusedElaboratable=no
"""The layer sequencer driving real engines: norm → projection → residual from one program
in memory, against the golden contracts. In ``make test-slow``: the top level's cold
Verilator build is over a minute, and ``make test`` is near its 15-minute limit."""

import dataclasses

import pytest
from specgen.golden.config import preset
from specgen.sim.runner import BenchFailure, run_bench
from specgen.sim.sequenced_slice import SliceTop

ADDR_WIDTH = 20
K, N, NODES = 16, 8, 3


def _config():
    c = preset("sim")
    return c.replace(linear=dataclasses.replace(c.linear, contract="dspfp32"))


def _run(seed, **kw):
    config = _config()
    top = SliceTop(config=config, k=K, n=N, nodes=NODES, addr_width=ADDR_WIDTH)
    lin, norm = config.linear, top.norm.block
    p = {"addr_width": ADDR_WIDTH, "k": K, "n": N, "nodes": NODES, "rows": lin.rows,
         "cols": lin.cols, "max_tokens": lin.max_tokens, "max_k": lin.max_k,
         "y_record_bytes": top.lin.y_record_bytes, "word_bits": top.lin.weight_stream.word_width,
         "weight_ports": top.lin.weight_ports, "group": None,
         "record_bits": top.seq.record_bits, "contract": config.ssm.contract,
         "silu_lut": dataclasses.asdict(config.ssm.silu_lut),
         "rsqrt_lut": dataclasses.asdict(norm._rsqrt_spec), "eps": norm._eps,
         "sync_mhz": config.board.clock_mhz, "mem_mhz": config.board.memory_clock_mhz,
         "latency": 24, "stall": 0.3, "runs": 3, "cut_run": 1}
    p.update(kw)
    run_bench(top, name=top.module_name, module="specgen.sim.sequenced_slice", testcase="slices",
              params=p, seed=seed)


@pytest.mark.sim
@pytest.mark.slow
def test_norm_projection_residual(seed):
    """Three slices of 3 nodes (norm of 16, an 8 × 16 projection in a random pass, the
    residual of 8) from one 4-record program each, 24-cycle reads with 30 % stalls on every
    channel, one cut by a reset and run again: h' in memory equals the composed golden
    contracts, and nothing outside the slice's buffers changed."""
    _run(seed)


@pytest.mark.sim
@pytest.mark.slow
def test_slice_bench_can_fail(seed):
    """One flipped expected word fails the bench."""
    with pytest.raises(BenchFailure, match="golden"):
        _run(seed, runs=1, cut_run=None, corrupt=True)
