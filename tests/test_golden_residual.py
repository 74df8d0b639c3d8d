"""The residual add (:mod:`golden.residual`) against SoftFloat, element by element."""

import numpy as np
import pytest
import softfloatpy as sf

from specgen.golden.residual import residual_hw, residual_hw_bits
from specgen.sim.residual import residual_inputs
from tests.oracles import ftz_add32, seeded_rng


def _sf_add(a, b):
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    r = sf.f32_add(sf.Float32.from_bytes(int(a).to_bytes(4, "big")),
                   sf.Float32.from_bytes(int(b).to_bytes(4, "big")))
    u = int.from_bytes(r.to_bytes(), "big")
    return 0x7FC00000 if (u >> 23) & 0xFF == 0xFF and u & 0x7FFFFF else u


@pytest.mark.parametrize("contract", ["ieee", "dspfp32"])
def test_matches_softfloat(contract):
    rng = seeded_rng(f"residual_{contract}")
    h, d = residual_inputs(rng, 3000)
    got = residual_hw_bits(h, d, contract=contract)
    add = _sf_add if contract == "ieee" else (
        lambda a, b: 0x7FC00000 if np.isnan(np.uint32(ftz_add32(a, b)).view(np.float32))
        else ftz_add32(a, b))
    want = np.array([add(a, b) for a, b in zip(h, d)], np.uint32)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"h {h[bad[0]]:#x} + d {d[bad[0]]:#x}: {got[bad[0]]:#x} != {want[bad[0]]:#x}"


def test_the_contracts_differ_on_subnormal_sums():
    rng = seeded_rng("residual_ftz")
    h, d = residual_inputs(rng, 3000)
    a, b = residual_hw_bits(h, d), residual_hw_bits(h, d, contract="dspfp32")
    assert np.count_nonzero(a != b) > 100
    # Where they differ, the DSP flushed: its sum is a zero, or an operand was subnormal.
    sub = lambda u: ((u >> 23) & 0xFF == 0) & (u & 0x7FFFFF != 0)  # noqa: E731
    diff = a != b
    assert np.all((b[diff] & 0x7FFFFFFF == 0) | sub(h[diff]) | sub(d[diff]))


def test_signs_of_zero_and_errors():
    z = np.array([0.0, -0.0, 0.0, -0.0], np.float32)
    w = np.array([0.0, -0.0, -0.0, 0.0], np.float32)
    assert list(residual_hw(z, w).view(np.uint32)) == [0, 0x80000000, 0, 0]
    with pytest.raises(ValueError, match=r"^residual: h and d must have the same shape, "
                                         r"not \(4,\) and \(3,\)$"):
        residual_hw(z, w[:3])
    with pytest.raises(TypeError, match=r"^d must be a uint32 bit array, not float32$"):
        residual_hw_bits(z.view(np.uint32), w)
