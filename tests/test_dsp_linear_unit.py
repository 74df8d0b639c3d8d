"""DSPLinearUnit: cocotb benches on Verilator against golden.dsp, and parameter checks."""

import pytest

from specgen.golden.bsfp import BSFPConfig
from specgen.hw.dsp_linear_unit import DSPLinearUnit
from specgen.sim.runner import run_bench

TESTS = ["random_jobs", "every_t", "special_values", "boundary_jobs", "reset_mid_job", "latency"]

CONFIGS = [
    # rows (slots per column), cols (columns), max_tokens, max_k, weight ports, beats a
    # transfer. T not a power of two, 6 slots, two columns share a weight port.
    pytest.param(2, 3, 5, 9, 2, 1, id="r2-c3-t5-k9-w2"),
    # Packed transfers with ragged ends, as VHK158's 14 columns a port take them: six
    # columns on one port, two sub-beats a transfer; a job packed 2 fills four columns a
    # transfer (two transfers an input, the second half padding), one packed 4 all six in
    # one (two padding beats), refilling every column in the cycle of its use.
    pytest.param(4, 6, 3, 5, 1, 2, id="r4-c6-t3-k5-w1x2"),
    # The draft plane's wide transfers too (draft jobs at random), on the same array: 8
    # columns a wide transfer (four sub-beats' nibbles in each slot of two), 16 packed 2.
    pytest.param(4, 6, 3, 5, 1, 2, True, id="r4-c6-t3-k5-w1x2-wide"),
    # Two ports of four columns, two beats a transfer: two groups a port, as VHK158's
    # six ports of 14 columns take seven.
    pytest.param(2, 8, 3, 5, 2, 2, id="r2-c8-t3-k5-w2x2", marks=pytest.mark.slow),
    pytest.param(1, 1, 1, 4, 1, 1, id="r1-c1-t1-k4-w1", marks=pytest.mark.slow),   # T = 1 only
    pytest.param(3, 2, 16, 6, 2, 1, id="r3-c2-t16-k6-w2", marks=pytest.mark.slow),
    # One group a port: every column refilled in the cycle of its use.
    pytest.param(2, 4, 4, 6, 1, 4, id="r2-c4-t4-k6-w1x4", marks=pytest.mark.slow),
]


def _unit(rows, cols, max_tokens, max_k, ports, beats=1, wide=False):
    return DSPLinearUnit(rows=rows, cols=cols, max_tokens=max_tokens, max_k=max_k,
                         weight_ports=ports, weight_beats=beats, draft_plane=wide)


@pytest.mark.sim
@pytest.mark.parametrize("rows,cols,max_tokens,max_k,ports,beats,wide",
                         [pytest.param(*c.values, *([False] if len(c.values) == 6 else []),
                                       id=c.id, marks=c.marks) for c in CONFIGS])
def test_dsp_linear_unit(rows, cols, max_tokens, max_k, ports, beats, wide):
    unit = _unit(rows, cols, max_tokens, max_k, ports, beats, wide)
    run_bench(unit, name=unit.module_name, module="specgen.sim.dsp_linear_unit", testcase=TESTS,
              params={"rows": rows, "cols": cols, "max_tokens": max_tokens, "max_k": max_k,
                      "weight_ports": ports, "weight_beats": beats, "jobs": 12,
                      "latency": unit.latency, "draft_plane": wide},
              cxx_opt="-O0")


@pytest.mark.parametrize("kwargs,exc,message", [
    ({"rows": 0, "cols": 2}, ValueError, "DSPLinearUnit.rows must be an integer >= 1, not 0"),
    ({"rows": 2, "cols": 2.0}, TypeError, "DSPLinearUnit.cols must be an integer >= 1, not 2.0"),
    ({"rows": 2, "cols": 2, "max_tokens": 17}, ValueError,
     "DSPLinearUnit.max_tokens must be an integer in [1, 16], not 17"),
    ({"rows": 2, "cols": 2, "max_k": 0}, ValueError,
     "DSPLinearUnit.max_k must be an integer >= 1, not 0"),
    ({"rows": 2, "cols": 2, "weight_ports": 3}, ValueError,
     "DSPLinearUnit.weight_ports must be an integer in [1, 2], not 3"),
    ({"rows": 2, "cols": 6, "weight_ports": 2, "weight_beats": 2}, ValueError,
     "DSPLinearUnit.weight_beats must be one of 1, not 2"),
    ({"rows": 2, "cols": 8, "weight_ports": 2, "weight_beats": 3}, ValueError,
     "DSPLinearUnit.weight_beats must be one of 1, 2, 4, not 3"),
    ({"rows": 2, "cols": 2, "config": BSFPConfig(draft="E2M1")}, ValueError,
     "MACSlot.config.draft must be one of 'E3M0', 'E3M0-noremap', not 'E2M1'"),
])
def test_dsp_linear_unit_rejects_bad_parameters(kwargs, exc, message):
    with pytest.raises(exc) as info:
        DSPLinearUnit(**kwargs)
    assert str(info.value) == message


@pytest.mark.sim
def test_cycle_model_matches_rtl_and_slots_stay_busy():
    """The perf model's DSPLinearUnit schedule equals the RTL's cycle count (the calibration
    of gen.perf.blocks.dsp_linear_schedule), and every MAC slot is busy while a job issues, for
    T = 1, 3 and 16 in both passes."""
    from specgen.gen.bench.linear import measure_dsp
    report = measure_dsp(steps=64, jobs=2, tokens=(1, 3, 16))
    assert len(report) == 6
    for key, r in report.items():
        assert r["utilization"] == 1.0, key
        assert abs(r["model_cycles"] / r["cycles"] - 1) <= 0.01, (key, r)
        # Two short jobs (K = 64): the fill and the last drain (15 cycles at T = 1) are
        # the only idle slot-cycles; make bench measures K = 256 (docs/perf.md).
        assert r["utilization_end_to_end"] >= 0.85, (key, r)


@pytest.mark.sim
@pytest.mark.slow
def test_cycle_model_waits_on_the_weight_ports():
    """With one weight port for four columns an input's weights take four cycles, so a job
    of T < 4 tokens issues at T / 4 of the slots' rate and one of T >= 4 at full rate; the
    model's ``feed`` term (what bounds VHK158's draft passes: 84 columns on 6 ports) equals
    the RTL's cycle count within 1 %; with two beats a transfer, two cycles an input. A
    job of at most a half (a quarter) of the 16 slots is fed two (four) columns a
    sub-beat: two cycles an input (one), one with two beats a transfer."""
    from specgen.gen.bench.linear import measure_dsp
    for beats, tokens, n_rows, feed in ((1, (1, 3, 4), None, 4), (2, (1, 2), None, 2),
                                        (1, (1, 2), 8, 2), (1, (1,), 4, 1), (2, (1,), 8, 1)):
        report = measure_dsp(steps=64, jobs=2, tokens=tokens, weight_ports=1, weight_beats=beats,
                             n_rows=n_rows)
        for key, r in report.items():
            assert abs(r["model_cycles"] / r["cycles"] - 1) <= 0.01, (beats, n_rows, key, r)
            assert r["utilization"] == pytest.approx(min(1.0, r["n_tokens"] / feed), abs=0.02), \
                (beats, n_rows, key, r)


@pytest.mark.sim
@pytest.mark.slow
def test_a_million_dot_products():
    """At least 10**6 dot products through 4 x 8 MAC slots, bit for bit golden.dsp."""
    unit = _unit(4, 8, 16, 4, 8)
    run_bench(unit, name=unit.module_name, module="specgen.sim.dsp_linear_unit",
              testcase=["many_dot_products"],
              params={"rows": 4, "cols": 8, "max_tokens": 16, "max_k": 4, "weight_ports": 8,
                      "dot_products": 1_000_000}, cxx_opt="-O0")
