"""Block cycle models (``gen/perf/blocks.py``) against cycle counts measured on the RTL.

Every case drives the RTL with ``gen/perf/calibrate.py`` (Amaranth's Python
simulator, or cocotb on Verilator) and fails if the model's total differs from
the measurement by more than :data:`gen.perf.calibrate.TOLERANCE` (5 %), or any
single predicted event (a job's first result, a token's last ``y``, a tree's
path) by more than that. Small configs run by default, the rest in ``slow``.
"""

import pytest

from specgen.gen.perf.calibrate import FAST, SLOW, TOLERANCE, VERILATOR, calibrate

# Verilator cases of the default suite: builds shared with tests/test_ring_fifo.py and
# tests/test_tree_verifier.py, so they cost a cocotb start-up each; the smallest SSMUnit
# (about 25 s with its build) is the default suite's one run of that unit on Verilator, its
# y checked bit for bit against golden.mamba2.ssm_step_hw_bits.
VERILATOR_FAST = [("ring", 0), ("tree", 0), ("ssm", 0)]


def _cases(sets, marks=()):
    return [pytest.param(block, i, id=f"{block}{i}", marks=list(marks))
            for block, idx in sets.items() for i in idx]


def _check(rec):
    print(f"{rec['block']} {rec['config']} on {rec['simulator']}: measured {rec['measured']}, "
          f"model {rec['model']} ({100 * rec['error']:.2f} %), worst event "
          f"{100 * rec['worst_event']:.2f} %")
    assert rec["error"] <= TOLERANCE, (
        f"{rec['block']} {rec['config']} ({rec['simulator']}): model {rec['model']} cycles, "
        f"measured {rec['measured']} ({100 * rec['error']:.1f} % > {100 * TOLERANCE:.0f} %)")
    assert rec["worst_event"] <= TOLERANCE, (
        f"{rec['block']} {rec['config']} ({rec['simulator']}): an event is off by "
        f"{100 * rec['worst_event']:.1f} % > {100 * TOLERANCE:.0f} %")


@pytest.mark.parametrize("block,index", _cases(FAST) + _cases(SLOW, [pytest.mark.slow]))
def test_model_matches_amaranth_sim(block, index):
    _check(calibrate(block, index, simulator="amaranth"))


@pytest.mark.sim
@pytest.mark.parametrize("block,index", [pytest.param(b, i, id=f"{b}{i}") for b, i in VERILATOR_FAST]
                         + [pytest.param(b, i, id=f"{b}{i}", marks=pytest.mark.slow)
                            for b, idx in VERILATOR.items() for i in idx
                            if (b, i) not in VERILATOR_FAST])
def test_model_matches_verilator(block, index):
    _check(calibrate(block, index, simulator="verilator"))


def test_at_least_five_configs_per_block():
    from specgen.gen.perf import calibrate as pc
    for configs in (pc.LINEAR_CONFIGS, pc.SSM_CONFIGS, pc.TREE_CONFIGS, pc.RING_CONFIGS):
        assert len(configs) >= 5
    for block in ("linear", "ssm", "tree", "ring"):
        assert sorted(FAST.get(block, []) + SLOW.get(block, [])) == list(range(pc._N[block]))


def test_calibrate_rejects_bad_arguments():
    with pytest.raises(ValueError, match="calibrate.block must be one of 'linear'"):
        calibrate("pe", 0)
    with pytest.raises(ValueError, match=r"calibrate.index must be an integer in \[0, 4\], not 9"):
        calibrate("ring", 9)
    with pytest.raises(ValueError, match="calibrate.simulator must be one of 'amaranth', "
                                         "'verilator', not 'questa'"):
        calibrate("ssm", 0, simulator="questa")
