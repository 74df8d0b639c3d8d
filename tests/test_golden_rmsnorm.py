"""The gated RMSNorm contract (:mod:`golden.rmsnorm`) against independent oracles.

* SoftFloat (``softfloatpy``), element by element, for every multiply and add
  in the contract's order (the DSPFP32 flush written from the encoding);
* exact rationals (``fractions``) for the sum of squares;
* float64 for ``rsqrt`` (an ulp bound) and for the whole norm (a stated tolerance).
"""

from fractions import Fraction

import numpy as np
import pytest
import softfloatpy as sf

from specgen.golden.dsp import Binary32Ops
from specgen.golden.nonlinear import DEFAULT_LUTS, LUTSpec, lut_eval
from specgen.golden.rmsnorm import (
    NORM_EPS,
    RSQRT_ERROR_BOUND,
    RSQRT_LUT,
    gated_rmsnorm_hw,
    gated_rmsnorm_hw_bits,
    gated_rmsnorm_ref,
    measure_rsqrt_error,
    rsqrt_hw,
)
from tests.oracles import ftz_add32, ftz_mul32, seeded_rng

SILU = DEFAULT_LUTS["silu"]


def _sf(op):
    def run(a, b):
        sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
        r = op(sf.Float32.from_bytes(int(a).to_bytes(4, "big")),
               sf.Float32.from_bytes(int(b).to_bytes(4, "big")))
        return int.from_bytes(r.to_bytes(), "big")
    return run


def _canon(u):
    return 0x7FC00000 if (u >> 23) & 0xFF == 0xFF and u & 0x7FFFFF else u


def _softfloat_norm(y, z, w, contract, lanes=1):
    """One vector, each binary32 operation by SoftFloat; the tables by the golden. With
    ``lanes``, lane ``j`` folds elements ``j, j + lanes, …`` and the lanes' sums meet in
    a tree of neighbours."""
    mul, add = ((_sf(sf.f32_mul), _sf(sf.f32_add)) if contract == "ieee"
                else (ftz_mul32, ftz_add32))
    ops = Binary32Ops(contract)
    yb, wb = y.view(np.uint32), w.view(np.uint32)
    s = lut_eval(SILU, z, ops=ops).view(np.uint32)
    g = [mul(yb[i], s[i]) for i in range(y.size)]
    sums = []
    for j in range(lanes):
        acc = 0x80000000
        for gi in g[j::lanes]:
            acc = add(mul(gi, gi), acc)
        sums.append(acc)
    while len(sums) > 1:
        sums = [add(sums[k], sums[k + 1]) for k in range(0, len(sums), 2)]
    acc = sums[0]
    ms = mul(acc, int(np.float32(1.0 / y.size).view(np.uint32)))
    t = add(ms, int(np.float32(NORM_EPS).view(np.uint32)))
    r = int(rsqrt_hw(np.array([t], np.uint32), ops=ops).view(np.uint32)[0])
    return np.array([_canon(mul(mul(gi, r), int(wi))) for gi, wi in zip(g, wb)], np.uint32)


def _vectors(rng, n, scale=1.0):
    """``y`` at ``scale``, a gate ``z`` of spread 3 and weights near 1."""
    y = (rng.standard_normal(n) * scale).astype(np.float32)
    z = (rng.standard_normal(n) * 3).astype(np.float32)
    return y, z, (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)


@pytest.mark.parametrize("contract", ["ieee", "dspfp32"])
@pytest.mark.parametrize("n, lanes", [(16, 1), (48, 1), (16, 2), (48, 4), (32, 16)])
def test_matches_softfloat_element_by_element(contract, n, lanes):
    rng = seeded_rng(f"rmsnorm_softfloat_{contract}_{n}_{lanes}")
    for scale in (1.0, 1e-19, 3e-20, 1e15):
        y, z, w = _vectors(rng, n, scale)
        got = gated_rmsnorm_hw(y, z, w, silu_lut=SILU, contract=contract,
                               lanes=lanes).view(np.uint32)
        want = _softfloat_norm(y, z, w, contract, lanes)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, f"scale {scale}, element {bad[0]}: {got[bad[0]]:#x} != {want[bad[0]]:#x}"


def test_sum_of_squares_against_exact_rationals():
    """The fold's error is within the sequential-sum bound n·2^-24 of the exact Σ g²."""
    rng = seeded_rng("rmsnorm_fractions")
    for n in (7, 256, 1000):
        y = rng.standard_normal(n).astype(np.float32)
        ops = Binary32Ops("ieee")
        acc = np.float32(-0.0)
        for v in y:
            acc = ops.add(ops.mul(v, v), acc)
        exact = sum(Fraction(float(v)) ** 2 for v in y)
        assert abs(Fraction(float(acc)) - exact) <= Fraction(n, 1 << 24) * exact
        # The contract's ms is this acc times 1/n, so the norm of constant vectors is exact:
    c = np.full(64, 0.5, np.float32)
    out = gated_rmsnorm_hw(c, None, np.ones(64, np.float32), silu_lut=SILU, eps=0.0)
    assert np.all(out == 1.0)


def test_rsqrt_error_bound_and_exact_reduction():
    for contract in ("ieee", "dspfp32"):
        got = measure_rsqrt_error(ops=Binary32Ops(contract))
        assert got["max_ulp"] <= RSQRT_ERROR_BOUND, got
        assert got["points"] > 200_000
    # A coarser table misses the bound: the measurement can fail.
    coarse = LUTSpec(function="rsqrt", lo=1.0, hi=4.0, step_log2=4, degree=3)
    assert measure_rsqrt_error(spec=coarse)["max_ulp"] > 10 * RSQRT_ERROR_BOUND
    # rsqrt(t·4^k) = rsqrt(t)·2^-k exactly: the reduction adds nothing.
    rng = seeded_rng("rsqrt_reduction")
    t = rng.uniform(1, 4, 1000).astype(np.float32)
    k = rng.integers(-60, 60, 1000)
    a = rsqrt_hw(np.ldexp(t, 2 * k).astype(np.float32)).astype(np.float64)
    assert np.array_equal(a, np.ldexp(rsqrt_hw(t).astype(np.float64), -k))


def test_rsqrt_special_arguments():
    t = np.array([0x7FC00000, 0x7F800000, 0x00000000, 0x80000000, 0x00000001, 0xBF800000,
                  0xFF800000, 0x3F800000, 0x40800000], np.uint32)
    r = rsqrt_hw(t).view(np.uint32)
    assert list(r) == [0x7FC00000, 0x00000000, 0x7F800000, 0xFF800000, 0x7F800000,
                       0x7FC00000, 0x7FC00000, 0x3F800000, 0x3F000000]
    with pytest.raises(TypeError, match=r"^rsqrt_hw.spec must be a LUTSpec of 'rsqrt'"):
        rsqrt_hw(t, spec=SILU)


def test_float64_tolerance():
    """|out − out64| ≤ (n·2^-25 + 8·2^-24 + 4.5e-7)·|out64| + 2^-24·|g|·r·|w|: half the
    mean's relative error, the rsqrt bound, the multiplies and the SiLU table."""
    rng = seeded_rng("rmsnorm_f64")
    n = 512
    y = rng.standard_normal((8, n)).astype(np.float32)
    z = (rng.standard_normal((8, n)) * 3).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    out = gated_rmsnorm_hw(y, z, w, silu_lut=SILU).astype(np.float64)
    ref = gated_rmsnorm_ref(y, z, w)
    rel = np.abs(out - ref) / np.abs(ref)
    assert np.all(rel <= n * 2.0 ** -25 + 8 * 2.0 ** -24 + 4.5e-7), float(rel.max())
    # z = None: the plain RMSNorm (the final norm), same bound without the table.
    out = gated_rmsnorm_hw(y, None, w, silu_lut=SILU).astype(np.float64)
    rel = np.abs(out - gated_rmsnorm_ref(y, None, w)) / np.abs(gated_rmsnorm_ref(y, None, w))
    assert np.all(rel <= n * 2.0 ** -25 + 8 * 2.0 ** -24), float(rel.max())


def test_a_different_sum_order_is_caught():
    """Numpy's pairwise sum of the squares gives other bits: the fold's order matters."""
    rng = seeded_rng("rmsnorm_order")
    y = rng.standard_normal((200, 300)).astype(np.float32)
    w = np.ones(300, np.float32)
    out = gated_rmsnorm_hw(y, None, w, silu_lut=SILU)
    ms = np.sum(y * y, axis=-1) * np.float32(1 / 300)
    r = rsqrt_hw(ms + np.float32(NORM_EPS))
    other = (y * r[:, None]) * w
    assert np.count_nonzero(other.view(np.uint32) != out.view(np.uint32)) > 100


def test_lanes_change_the_bits():
    """Lanes are part of the contract: 4 partial sums give other bits than 1 on many
    vectors (so a block built with the wrong count fails its bench)."""
    rng = seeded_rng("rmsnorm_lanes")
    y = rng.standard_normal((200, 64)).astype(np.float32)
    w = np.ones(64, np.float32)
    one = gated_rmsnorm_hw(y, None, w, silu_lut=SILU).view(np.uint32)
    four = gated_rmsnorm_hw(y, None, w, silu_lut=SILU, lanes=4).view(np.uint32)
    assert np.count_nonzero((one != four).any(axis=-1)) > 20
    with pytest.raises(ValueError, match=r"^gated_rmsnorm: lanes must be a power of two "
                                         r"dividing the vector's 64 elements, not 3$"):
        gated_rmsnorm_hw(y, None, w, silu_lut=SILU, lanes=3)


def test_special_values_and_flushes():
    n = 8
    y = np.arange(1, n + 1, dtype=np.float32)
    w = np.ones(n, np.float32)
    z = np.full(n, 20.0, np.float32)
    out = gated_rmsnorm_hw(y, z, w, silu_lut=SILU)
    assert np.all(np.isfinite(out))
    y2 = y.copy()
    y2[3] = np.nan
    assert np.all(gated_rmsnorm_hw(y2, z, w, silu_lut=SILU).view(np.uint32) == 0x7FC00000)
    y2[3] = np.inf                                    # acc = +Inf, r = +0: Inf·0 = NaN, g·0 = 0
    out = gated_rmsnorm_hw(y2, z, w, silu_lut=SILU).view(np.uint32)
    assert out[3] == 0x7FC00000 and np.all(out[np.arange(n) != 3] == 0)
    zero = gated_rmsnorm_hw(np.zeros(n, np.float32), None, w, silu_lut=SILU)
    assert np.all(zero.view(np.uint32) == 0)
    # A subnormal element: kept by "ieee" (a tiny nonzero output), flushed by "dspfp32".
    ys = np.full(n, np.uint32(0x00000400).view(np.float32))
    ys[0] = 1.0
    a = gated_rmsnorm_hw(ys, None, w, silu_lut=SILU, contract="ieee").view(np.uint32)
    b = gated_rmsnorm_hw(ys, None, w, silu_lut=SILU, contract="dspfp32").view(np.uint32)
    assert np.all(a[1:] != 0) and np.all(b[1:] == 0) and a[0] == b[0]


def test_bits_and_errors():
    rng = seeded_rng("rmsnorm_errors")
    y, z, w = _vectors(rng, 8)
    got = gated_rmsnorm_hw_bits(y.view(np.uint32), z.view(np.uint32), w.view(np.uint32),
                                silu_lut=SILU)
    assert np.array_equal(got, gated_rmsnorm_hw(y, z, w, silu_lut=SILU).view(np.uint32))
    with pytest.raises(TypeError, match=r"^z must be a uint32 bit array, not float32$"):
        gated_rmsnorm_hw_bits(y.view(np.uint32), z, w.view(np.uint32), silu_lut=SILU)
    with pytest.raises(ValueError, match=r"^gated_rmsnorm: w must have shape \(8,\) "
                                         r"\(the last axis of y\), not \(7,\)$"):
        gated_rmsnorm_hw(y, z, w[:7], silu_lut=SILU)
    with pytest.raises(ValueError, match=r"^gated_rmsnorm.eps must be a finite number >= 0.0, "
                                         r"not -1.0$"):
        gated_rmsnorm_hw(y, z, w, silu_lut=SILU, eps=-1.0)
    with pytest.raises(TypeError, match=r"^gated_rmsnorm.silu_lut must be a LUTSpec of 'silu'"):
        gated_rmsnorm_hw(y, z, w, silu_lut=RSQRT_LUT)
