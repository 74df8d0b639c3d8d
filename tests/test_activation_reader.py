# amaranth: UnusedElaboratable=no
"""``ActivationReader``: token-major binary16 vectors in memory, the linear unit's
input-major, token-minor stream out."""

import json

import pytest
from specgen.golden.config import preset
from specgen.hw.activation_reader import ActivationReader
from specgen.hw.axi_master import AXI4ReadMaster
from specgen.sim.runner import BenchFailure, run_bench

SIM = preset("sim")
ADDR_WIDTH = 16


def _master(config=SIM):
    return AXI4ReadMaster.config_kwargs(config, addr_width=ADDR_WIDTH, data_width=64)


def _reader(chunk_beats=2, max_steps=40, max_tokens=5, config=SIM):
    return ActivationReader(max_tokens=max_tokens, max_steps=max_steps, chunk_beats=chunk_beats,
                            **_master(config))


def _run(rd, testcase, seed, **kw):
    p = {"addr_width": ADDR_WIDTH, "max_steps": rd._max_steps, "max_tokens": rd.max_tokens,
         "sync_mhz": SIM.board.clock_mhz, "mem_mhz": SIM.board.memory_clock_mhz,
         "latency": 30, "stall": 0.3, "batches": 5, "cut_batch": 2}
    p.update(kw)
    return run_bench(rd, name=rd.module_name, module="specgen.sim.activation_reader",
                     testcase=testcase, params=p, seed=seed)


@pytest.mark.sim
def test_random_jobs_and_reset(seed):
    """Jobs of 1-5 tokens and 1-40 inputs in chunks of 2 beats (8 words) a token, so a job
    has up to 10 chunks and a partial last one; strides from vectors apart with gaps down
    to overlapping and all tokens on one vector; 30-cycle reads, 30 % stalls on AR, R and
    the output; a reset in mid-stream. Every word is the memory's, in order."""
    _run(_reader(), "random_jobs", seed)


@pytest.mark.sim
def test_bench_catches_a_wrong_word(seed):
    """One expected word flipped: the bench must fail on it."""
    with pytest.raises(BenchFailure):
        _run(_reader(), "random_jobs", seed, corrupt=True, batches=1, cut_batch=None)


@pytest.mark.sim
@pytest.mark.parametrize("tokens", [1, 5])
def test_rate(seed, tmp_path, tokens):
    """Jobs of 200 inputs (four chunks of the default 16 beats a token, the last partial)
    back to back with the output always ready, a 60-cycle memory latency and 30 % AR/R
    stalls: after the first word, one word a cycle on at least 97 % of the cycles (a chunk
    follows the last one without a bubble; only the run's first chunk waits for memory).
    Chunks of a few beats would not: the master keeps max_outstanding bursts in flight,
    so a chunk's burst must carry the latency's worth of words."""
    out = tmp_path / "rate.json"
    _run(_reader(chunk_beats=16, max_steps=200), "rate", seed, tokens=tokens, rate_jobs=6,
         latency=60, report=str(out))
    r = json.loads(out.read_text())
    rate = r["words"] / r["span"]
    print(f"activation reader, {tokens} token(s): {r['words']} words in {r['span']} cycles "
          f"({rate:.3f} a cycle), first word at cycle {r['first']}")
    assert r["words"] == 6 * 200 * tokens
    assert rate >= 0.97, r


def test_parameters_are_checked():
    kw = _master()
    with pytest.raises(ValueError, match="chunk_beats must be a power of two"):
        ActivationReader(max_tokens=2, max_steps=8, chunk_beats=3, **kw)
    with pytest.raises(ValueError, match="max_tokens"):
        ActivationReader(max_tokens=0, max_steps=8, **kw)


def test_ring_sizes():
    """Two chunks of max_tokens tokens, rounded up to a power of two: one RAMB36 (512 × 72)
    on the boards' 16-token linear unit."""
    for name in ("sim", "vck190", "vhk158"):
        rd = ActivationReader.from_config(preset(name))
        assert rd.ring_beats == 512 and rd.master.data_width == 64
