"""The conv1d + SiLU contract (:mod:`golden.conv1d`) against independent oracles.

* Berkeley SoftFloat (``softfloatpy``), element by element, for every multiply
  and add before the SiLU table, in the contract's order (with the DSPFP32 flush
  written from the encoding for ``"dspfp32"``, :mod:`tests.oracles`);
* the Mamba2 equations in float64 with a stated tolerance;
* the language model's own conv (:meth:`golden.mixer.Mamba2Mixer.conv`, ``"hw"``).
"""

import numpy as np
import pytest
import softfloatpy as sf

from specgen.golden.conv1d import conv1d_hw, conv1d_hw_bits, conv1d_ref
from specgen.golden.dsp import Binary32Ops
from specgen.golden.mamba2 import SSMConfig
from specgen.golden.mixer import Mamba2Mixer, MixerConfig, mixer_init_params
from specgen.golden.nonlinear import DEFAULT_LUTS, lut_eval
from tests.oracles import ftz_add32, ftz_mul32, is_nan32, seeded_rng

SILU = DEFAULT_LUTS["silu"]


def _random(rng, c, d=4, scale=1.0):
    f = lambda *s: (rng.standard_normal(s) * scale).astype(np.float32)  # noqa: E731
    return f(d - 1, c), f(c), f(c, d), f(c)


def _sf_mul(a, b):
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    r = sf.f32_mul(sf.Float32.from_bytes(int(a).to_bytes(4, "big")),
                   sf.Float32.from_bytes(int(b).to_bytes(4, "big")))
    return int.from_bytes(r.to_bytes(), "big")


def _sf_add(a, b):
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    r = sf.f32_add(sf.Float32.from_bytes(int(a).to_bytes(4, "big")),
                   sf.Float32.from_bytes(int(b).to_bytes(4, "big")))
    return int.from_bytes(r.to_bytes(), "big")


def _softfloat_v(window, x, w, b, contract):
    """The pre-SiLU value, one SoftFloat operation at a time."""
    mul, add = (_sf_mul, _sf_add) if contract == "ieee" else (ftz_mul32, ftz_add32)
    full = np.concatenate((window, x[None]), axis=0).view(np.uint32)
    wb, bb = w.view(np.uint32), b.view(np.uint32)
    out = []
    for c in range(x.size):
        acc = mul(full[0, c], wb[c, 0])
        for k in range(1, full.shape[0]):
            acc = add(mul(full[k, c], wb[c, k]), acc)
        out.append(add(acc, bb[c]))
    return np.array(out, dtype=np.uint32)


def _hard_inputs(rng, c):
    """Random values with subnormals, FTZ boundaries, zeros of both signs, Infs and NaNs."""
    window, x, w, b = _random(rng, c)
    pool = np.array([0x00000001, 0x807FFFFF, 0x00800000, 0x80800000, 0x007FFFFF, 0x0,
                     0x80000000, 0x7F800000, 0xFF800000, 0x7FC00001, 0x1F800000, 0x20000000,
                     0x9F000000, 0x7F7FFFFF, 0x00400000], dtype=np.uint32).view(np.float32)
    for arr in (window, x, w, b):
        flat = arr.reshape(-1)
        idx = rng.choice(flat.size, size=flat.size // 4, replace=False)
        flat[idx] = rng.choice(pool, size=idx.size)
    return window, x, w, b


@pytest.mark.parametrize("contract", ["ieee", "dspfp32"])
def test_matches_softfloat_element_by_element(contract):
    rng = seeded_rng(f"conv1d_softfloat_{contract}")
    for window, x, w, b in (_random(rng, 300), _hard_inputs(rng, 600),
                            _random(rng, 300, scale=1e-19)):
        y, _ = conv1d_hw(window, x, w, b, silu_lut=SILU, contract=contract)
        v = _softfloat_v(window, x, w, b, contract)
        want = lut_eval(SILU, v.view(np.float32), ops=Binary32Ops(contract)).view(np.uint32)
        got = y.view(np.uint32)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (f"channel {bad[0]}: y {got[bad[0]]:#010x}, SoftFloat order "
                               f"gives {want[bad[0]]:#010x}")


def test_dspfp32_differs_from_ieee_only_by_flushes():
    """Tiny products are subnormal: the DSP flushes them, IEEE keeps them."""
    rng = seeded_rng("conv1d_ftz")
    window, x, w, b = _random(rng, 400, scale=1e-20)
    b[:] = 0
    yi, _ = conv1d_hw(window, x, w, b, silu_lut=SILU, contract="ieee")
    yd, _ = conv1d_hw(window, x, w, b, silu_lut=SILU, contract="dspfp32")
    assert np.all(yd.view(np.uint32) & 0x7FFFFFFF == 0)          # all flushed to ±0
    assert np.count_nonzero(yi.view(np.uint32) & 0x7FFFFFFF) > 300


def test_float64_tolerance():
    """|y − y64| ≤ 1.1·2^-21·(Σ|w·s| + |b|) + 2.5e-7·|y64|: four roundings of the sum
    (|silu'| < 1.1) plus the SiLU table's bound (golden.nonlinear.ERROR_BOUNDS, 2e-7)."""
    rng = seeded_rng("conv1d_f64")
    window, x, w, b = _random(rng, 20_000)
    y, _ = conv1d_hw(window, x, w, b, silu_lut=SILU)
    ref = conv1d_ref(window, x, w, b)
    full = np.concatenate((window, x[None]), axis=0).astype(np.float64)
    mag = np.abs(full.T * w).sum(axis=1) + np.abs(b)
    err = np.abs(y.astype(np.float64) - ref)
    bound = 1.1 * 2.0 ** -21 * mag + 2.5e-7 * np.abs(ref) + 1e-30
    assert np.all(err <= bound), float(np.max(err / bound))
    # ... and the bound is not vacuous: y is far from the pre-activation.
    assert np.median(err / bound) < 0.2


def test_matches_the_language_models_conv():
    """Under "ieee" the block is the LM's ``"hw"`` conv (golden.mixer), bit for bit."""
    rng = seeded_rng("conv1d_mixer")
    mix = MixerConfig(ssm=SSMConfig(nheads=2, headdim=4, d_state=8, lanes=4), d_model=8)
    mixer = Mamba2Mixer(mix=mix, params=mixer_init_params(mix, rng), numerics="hw")
    window = rng.standard_normal((mix.d_conv - 1, mix.conv_dim)).astype(np.float32)
    xbc = rng.standard_normal(mix.conv_dim).astype(np.float32)
    want_y, want_win = mixer.conv(window, xbc)
    y, win = conv1d_hw(window, xbc, mixer.params.conv_w, mixer.params.conv_b,
                       silu_lut=mix.ssm.silu_lut)
    assert np.array_equal(y.view(np.uint32), np.asarray(want_y, np.float32).view(np.uint32))
    assert np.array_equal(win, want_win)


def test_a_wrong_order_is_caught():
    """The bit-exact check can fail: summing newest-first differs on random data."""
    rng = seeded_rng("conv1d_order")
    window, x, w, b = _random(rng, 2000)
    y, _ = conv1d_hw(window, x, w, b, silu_lut=SILU)
    rev_full = np.concatenate((window, x[None]), axis=0)[::-1]
    wrong, _ = conv1d_hw(rev_full[:-1], rev_full[-1], w[:, ::-1].copy(), b, silu_lut=SILU)
    assert np.count_nonzero(wrong.view(np.uint32) != y.view(np.uint32)) > 100


def test_special_values():
    silu = SILU
    c = 6
    window = np.zeros((3, c), np.float32)
    w = np.ones((c, 4), np.float32)
    b = np.zeros(c, np.float32)
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0], np.float32)
    window[2, 3] = np.float32(np.inf)
    w[3, 2] = 0.0                          # Inf·0 → NaN in channel 3
    window[0, 5] = np.uint32(0x7FA00001).view(np.float32)       # a NaN payload in the window
    y, win = conv1d_hw(window, x, w, b, silu_lut=silu)
    bits = y.view(np.uint32)
    assert bits[0] == 0x7FC00000 and bits[3] == 0x7FC00000 and bits[5] == 0x7FC00000
    assert bits[1] == 0x7F800000 and bits[2] == 0x80000000
    assert bits[4] == 0x00000000 and y[4] == 0         # silu(+0): (+0) + (−0) = +0 in the sum
    assert all(is_nan32(int(v)) for v in bits[[0, 3, 5]])
    # The new window is a copy: the NaN payload moved up one row, the raw x entered.
    assert win.view(np.uint32)[0, 5] == 0 and win.view(np.uint32)[2, 0] == x.view(np.uint32)[0]
    _, win2 = conv1d_hw(np.concatenate((window[1:], x[None])), x, w, b, silu_lut=silu)
    assert win2.view(np.uint32)[1, 0] == x.view(np.uint32)[0]


def test_bits_interface_and_errors():
    rng = seeded_rng("conv1d_bits")
    window, x, w, b = _random(rng, 5)
    yb, wb = conv1d_hw_bits(*(a.view(np.uint32) for a in (window, x, w, b)), silu_lut=SILU)
    y, win = conv1d_hw(window, x, w, b, silu_lut=SILU)
    assert np.array_equal(yb, y.view(np.uint32)) and np.array_equal(wb, win.view(np.uint32))
    with pytest.raises(TypeError, match=r"^x must be a uint32 bit array, not float32$"):
        conv1d_hw_bits(window.view(np.uint32), x, w.view(np.uint32), b.view(np.uint32),
                       silu_lut=SILU)
    with pytest.raises(ValueError, match=r"^conv1d: window must have shape \(3, 5\) "
                                         r"\(x is \(5,\), d_conv = 4\), not \(2, 5\)$"):
        conv1d_hw(window[:2], x, w, b, silu_lut=SILU)
    with pytest.raises(ValueError, match=r"^conv1d.d_conv must be an integer in \[2, 8\], not 1$"):
        conv1d_hw(window[:0], x, w[:, :1], b, silu_lut=SILU)
    with pytest.raises(TypeError, match=r"^conv1d.silu_lut must be a LUTSpec of 'silu'"):
        conv1d_hw(window, x, w, b, silu_lut=DEFAULT_LUTS["exp"])
    with pytest.raises(ValueError, match=r"^Binary32Ops.contract must be one of"):
        conv1d_hw(window, x, w, b, silu_lut=SILU, contract="fast")
