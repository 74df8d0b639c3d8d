# amaranth: UnusedElaboratable=no
"""``Sequencer``: descriptor programs in memory handed to the engines in order, with
barriers."""

import pytest
from amaranth.lib import data
from specgen.golden.config import preset
from specgen.hw.sequencer import OP_END, Sequencer, encode_record
from specgen.sim.runner import BenchFailure, run_bench

SIM = preset("sim")
ADDR_WIDTH = 18
#: Model engines: names and descriptor widths (one of them the full 480-bit payload of
#: a 512-bit record).
ENGINES = [("lin", 219), ("conv", 37), ("ssm", 480)]


def _seq(max_records=24):
    return Sequencer.from_config(SIM, engines={n: data.StructLayout({"v": w})
                                               for n, w in ENGINES},
                                 max_records=max_records, addr_width=ADDR_WIDTH)


def _run(seq, seed, **kw):
    p = {"addr_width": ADDR_WIDTH, "max_records": 24, "record_bits": seq.record_bits,
         "engines": ENGINES, "sync_mhz": SIM.board.clock_mhz,
         "mem_mhz": SIM.board.memory_clock_mhz, "latency": 30, "stall": 0.3, "ready": 0.6,
         "programs": 14, "cut_program": 5, "abort_programs": [2, 9]}
    p.update(kw)
    return run_bench(seq, name=seq.module_name, module="specgen.sim.sequencer",
                     testcase="programs", params=p, seed=seed)


@pytest.mark.sim
def test_programs(seed):
    """14 programs of 1-24 records to three model engines (random ready 60 %, random work
    times, random waits), 30-cycle reads with 30 % AR/R stalls; every fourth program has
    a bad record; one is cut by a reset after a few hand-overs, two are aborted (and the
    program after each runs with no reset between)."""
    _run(_seq(), seed)


@pytest.mark.sim
def test_bench_catches_a_wrong_payload(seed):
    with pytest.raises(BenchFailure):
        _run(_seq(), seed, programs=1, cut_program=None, abort_programs=[], corrupt=True)


def test_record_size_and_errors():
    seq = _seq()
    assert seq.record_bits == 512            # 32 header bits + 480
    with pytest.raises(ValueError, match="record_bits must be a power of two >= 512"):
        Sequencer.from_config(SIM, engines={"a": data.StructLayout({"v": 480})},
                              max_records=4, record_bits=768, addr_width=ADDR_WIDTH)
    with pytest.raises(ValueError, match="engines must be a dict of 1 to 16"):
        Sequencer.from_config(SIM, engines={}, max_records=4, addr_width=ADDR_WIDTH)
    with pytest.raises(ValueError, match="'busy' is not a usable port name"):
        Sequencer.from_config(SIM, engines={"busy": data.StructLayout({"v": 4})},
                              max_records=4, addr_width=ADDR_WIDTH)
    with pytest.raises(ValueError, match="payload must fit 480 bits"):
        encode_record(512, op=OP_END, payload=1 << 480)
    rec = encode_record(512, op=1, engine=2, wait=(0, 2), payload=0xABC)
    word = int.from_bytes(rec, "little")
    assert word & 0xF == 1 and word >> 4 & 0xF == 2 and word >> 16 & 0xFFFF == 0b101
    assert word >> 32 == 0xABC and len(rec) == 64
