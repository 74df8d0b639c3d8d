import pytest

from specgen.golden.fp import FORMATS
from specgen.hw.linear_unit import LinearUnit
from specgen.sim.runner import run_bench

TESTS = ["random_jobs", "special_values", "boundary_jobs", "reset_mid_job"]

CONFIGS = [
    # rows, cols, lanes, max_k, fmt_out
    # 6 PEs take minutes to compile: in the slow set.
    pytest.param(2, 3, 3, 8, "fp32", id="r2-c3-q3-fp32", marks=pytest.mark.slow),
    # A library block since the top level's linear unit is the DSPFP32 array: one case in
    # make test, the rest in make test-slow.
    pytest.param(3, 1, 2, 6, "fp16", id="r3-c1-q2-fp16", marks=pytest.mark.slow),  # T = 1, FP16
    pytest.param(1, 2, 1, 5, "fp32", id="r1-c2-q1-fp32"),     # T > rows, one-row array
]


def _unit(rows, cols, lanes, max_k, fmt_out):
    return LinearUnit(rows=rows, cols=cols, quant_lanes=lanes, max_k=max_k,
                      fmt_out=FORMATS[fmt_out])


@pytest.mark.sim
@pytest.mark.parametrize("rows,cols,lanes,max_k,fmt_out", CONFIGS)
def test_linear_unit(rows, cols, lanes, max_k, fmt_out):
    run_bench(_unit(rows, cols, lanes, max_k, fmt_out),
              name=f"linear_unit_r{rows}_c{cols}_q{lanes}_k{max_k}_{fmt_out}",
              module="specgen.sim.linear_unit", testcase=TESTS,
              params={"rows": rows, "cols": cols, "lanes": lanes, "max_k": max_k,
                      "fmt_out": fmt_out, "jobs": 10})


@pytest.mark.parametrize("kwargs,exc,message", [
    ({"rows": 0, "cols": 2}, ValueError, "LinearUnit.rows must be an integer >= 1, not 0"),
    ({"rows": 2, "cols": 2.0}, TypeError, "LinearUnit.cols must be an integer >= 1, not 2.0"),
    ({"rows": 2, "cols": 2, "quant_lanes": 9}, ValueError,
     "LinearUnit.quant_lanes must be an integer in [1, 8], not 9"),
    ({"rows": 2, "cols": 2, "max_k": 0}, ValueError, "LinearUnit.max_k must be an integer >= 1, not 0"),
])
def test_linear_unit_rejects_bad_parameters(kwargs, exc, message):
    with pytest.raises(exc) as info:
        LinearUnit(**kwargs)
    assert str(info.value) == message


@pytest.mark.sim
@pytest.mark.slow
def test_linear_unit_long():
    """A long randomized run: 300 jobs on the sim preset's array."""
    rows, cols, lanes, max_k, fmt_out = 2, 3, 3, 8, "fp32"
    run_bench(_unit(rows, cols, lanes, max_k, fmt_out),
              name=f"linear_unit_r{rows}_c{cols}_q{lanes}_k{max_k}_{fmt_out}",
              module="specgen.sim.linear_unit", testcase=["random_jobs"],
              params={"rows": rows, "cols": cols, "lanes": lanes, "max_k": max_k,
                      "fmt_out": fmt_out, "jobs": 300})
