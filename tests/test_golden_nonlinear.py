import dataclasses
import hashlib
import math

import numpy as np
import pytest

from specgen.golden.nonlinear import (CANONICAL_NAN32, DEFAULT_LUTS, ERROR_BOUNDS, FUNCTIONS, LUTSpec,
                              exact_fp32, lut_eval, lut_tables, measure_lut_error, reference64)
from specgen.golden.nonlinear import _tables_cached


def bits(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32)


# -- validation ----------------------------------------------------------------

@pytest.mark.parametrize("kwargs,exc,message", [
    (dict(function="tanh", lo=-1.0, hi=1.0), ValueError,
     "LUTSpec.function must be one of 'exp', 'softplus', 'silu', 'rsqrt', not 'tanh'"),
    (dict(function="exp", lo=1.0, hi=-1.0), ValueError, "LUTSpec.lo must be < hi (-1.0), not 1.0"),
    (dict(function="exp", lo=-1.001, hi=1.0), ValueError,
     "LUTSpec.lo must be a multiple of the step 2**-7, not -1.001"),
    (dict(function="exp", lo=-1.0, hi=1.0, degree=4), ValueError,
     "LUTSpec.degree must be an integer in [1, 3], not 4"),
    (dict(function="exp", lo=-1.0, hi=1.0, step_log2=7.0), TypeError,
     "LUTSpec.step_log2 must be an integer in [0, 12], not 7.0"),
    (dict(function="exp", lo="a", hi=1.0), TypeError,
     "LUTSpec.lo must be a finite number in [-126.0, 126.0], not 'a'"),
    (dict(function="exp", lo=-100.0, hi=100.0, step_log2=12), ValueError,
     "LUTSpec range/step gives 819201 nodes; at most 131072 are allowed"),
])
def test_lutspec_rejects_bad_parameters(kwargs, exc, message):
    with pytest.raises(exc) as info:
        LUTSpec(**kwargs)
    assert str(info.value) == message


def test_lutspec_geometry():
    spec = DEFAULT_LUTS["exp"]
    assert (spec.first_index, spec.nodes, spec.step) == (-2560, 4097, 1 / 128)
    assert spec.table_bits == 4097 * 4 * 32
    with pytest.raises(TypeError):
        LUTSpec("exp", -1.0, 1.0)      # keyword-only


# -- tables --------------------------------------------------------------------

@pytest.mark.parametrize("function", FUNCTIONS)
def test_tables_shape_readonly_and_stable(function):
    spec = DEFAULT_LUTS[function]
    t = lut_tables(spec)
    assert t.dtype == np.float32 and t.shape == (spec.degree + 1, spec.nodes)
    assert not t.flags.writeable
    # A fresh computation, bypassing the cache, gives the same bytes.
    again = _tables_cached.__wrapped__(spec)
    assert hashlib.sha256(t.tobytes()).digest() == hashlib.sha256(again.tobytes()).digest()


@pytest.mark.parametrize("function", FUNCTIONS)
def test_table_c0_is_the_rounded_function_at_the_nodes(function):
    # The decimal coefficients against an independent float64 evaluation:
    # within one binary32 rounding everywhere, identical almost everywhere.
    spec = DEFAULT_LUTS[function]
    nodes = spec.lo + np.arange(spec.nodes) * spec.step
    c0 = lut_tables(spec)[0].astype(np.float64)
    ref = reference64(function, nodes)
    close = np.isclose(c0, ref, rtol=2 ** -23, atol=0)
    assert close.all()
    assert (c0 == ref.astype(np.float32)).mean() > 0.999


@pytest.mark.parametrize("function", FUNCTIONS)
def test_node_inputs_return_c0_exactly(function):
    spec = DEFAULT_LUTS[function]
    nodes = (spec.lo + np.arange(spec.nodes) * spec.step).astype(np.float32)
    assert np.array_equal(bits(lut_eval(spec, nodes)), bits(lut_tables(spec)[0]))


# -- error bounds --------------------------------------------------------------

@pytest.mark.parametrize("function", FUNCTIONS)
def test_measured_error_within_documented_bound(function):
    m = measure_lut_error(DEFAULT_LUTS[function], per_segment=16)
    print(function, m)
    assert m["max_rel"] <= ERROR_BOUNDS[function]["rel"]
    assert m["max_ulp"] <= ERROR_BOUNDS[function]["ulp"]
    spec = DEFAULT_LUTS[function]
    assert m["below_max_abs"] <= abs(reference64(function, spec.lo))
    if m["above_max_rel"] is not None:
        assert m["above_max_rel"] <= 2.0 ** -24       # the identity rounds correctly


@pytest.mark.parametrize("function", FUNCTIONS)
def test_random_bit_patterns_within_bound(function, seed):
    spec = DEFAULT_LUTS[function]
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 1 << 32, size=400_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = x[(x >= spec.lo) & (x <= spec.hi)]
    y = lut_eval(spec, x).astype(np.float64)
    ref = reference64(function, x)
    a = np.abs(ref)
    exponent = np.maximum(np.floor(np.log2(np.where(a > 0, a, 1.0))), -126).astype(int)
    ulp = np.ldexp(1.0, exponent - 23)
    err = np.abs(y - ref) / ulp
    print(function, x.size, err.max())
    assert err.max() <= ERROR_BOUNDS[function]["ulp"]


def test_linear_interpolation_would_miss_the_bound():
    # Documents the design choice: LightMamba-style degree 1 at 1/128 is ~250× worse.
    m = measure_lut_error(dataclasses.replace(DEFAULT_LUTS["exp"], degree=1), per_segment=8)
    assert m["max_rel"] > 100 * ERROR_BOUNDS["exp"]["rel"]


# -- an independent scalar evaluation of the contract --------------------------

def scalar_eval(spec, x):
    """The evaluation contract, one input at a time, with Python ints for the index."""
    f32 = np.float32
    x = f32(x)
    if math.isnan(x):
        return f32(np.nan)
    if x < spec.lo:
        return {"exp": f32(0.0), "softplus": f32(0.0), "silu": f32(-0.0)}[spec.function]
    if x > spec.hi:
        return f32(np.inf) if spec.function == "exp" else x
    # x = i·h + r exactly, i truncated toward zero: use exact rational arithmetic.
    from fractions import Fraction
    fx = Fraction(float(x))
    scaled = fx * spec.scale
    i = math.trunc(scaled)
    r = fx - Fraction(i, spec.scale)
    r32 = f32(float(r))
    assert Fraction(float(r32)) == r          # the contract's claim: r is representable
    c = lut_tables(spec)[:, i - spec.first_index]
    y = c[spec.degree]
    for k in range(spec.degree - 1, -1, -1):
        y = f32(f32(y * r32) + c[k])
    return y


@pytest.mark.parametrize("function", FUNCTIONS)
def test_vectorized_matches_scalar_contract(function, seed):
    spec = DEFAULT_LUTS[function]
    rng = np.random.default_rng(seed)
    x = np.concatenate([
        rng.uniform(spec.lo - 3, spec.hi + 3, size=1500),
        rng.standard_normal(500) * 1e-3,
        np.ldexp(rng.uniform(-1, 1, size=200), rng.integers(-149, -120, size=200)),
    ]).astype(np.float32)
    x = np.concatenate([x, np.float32([0.0, -0.0, spec.lo, spec.hi, np.inf, -np.inf, np.nan])])
    with np.errstate(all="ignore"):
        want = np.array([scalar_eval(spec, v) for v in x], dtype=np.float32)
    got = lut_eval(spec, x)
    want = np.where(np.isnan(want), CANONICAL_NAN32, bits(want))
    assert np.array_equal(bits(got), want)


# -- special values ------------------------------------------------------------

@pytest.mark.parametrize("function,inputs,expected", [
    ("exp", [np.nan, np.inf, -np.inf, 0.0, -0.0, -20.5, 12.5],
     [np.nan, np.inf, 0.0, 1.0, 1.0, 0.0, np.inf]),
    ("softplus", [np.nan, np.inf, -np.inf, -26.0, 21.0, 1e30],
     [np.nan, np.inf, 0.0, 0.0, 21.0, 1e30]),
    ("silu", [np.nan, np.inf, -np.inf, 0.0, -0.0, -26.0, 21.0],
     [np.nan, np.inf, -0.0, 0.0, 0.0, -0.0, 21.0]),
])
def test_special_values(function, inputs, expected):
    got = lut_eval(DEFAULT_LUTS[function], np.array(inputs, dtype=np.float32))
    want = np.array(expected, dtype=np.float32)
    want_bits = np.where(np.isnan(want), CANONICAL_NAN32, bits(want))
    assert np.array_equal(bits(got), want_bits)


def test_nan_payloads_are_canonical():
    x = np.array([0x7FC00001, 0xFFC12345, 0x7F800001], dtype=np.uint32).view(np.float32)
    for spec in DEFAULT_LUTS.values():
        assert (bits(lut_eval(spec, x)) == 0x7FC00000).all()


def test_subnormal_inputs_are_honoured():
    tiny = np.float32(np.ldexp(1.0, -140))
    silu = DEFAULT_LUTS["silu"]
    # silu(x) ≈ x/2 near 0: a subnormal result, not flushed to zero.
    assert lut_eval(silu, tiny) == np.float32(np.ldexp(1.0, -141))
    assert lut_eval(DEFAULT_LUTS["exp"], tiny) == np.float32(1.0)
    assert lut_eval(DEFAULT_LUTS["softplus"], tiny) == np.float32(math.log(2.0))


def test_exact_fp32_is_correctly_rounded_reference():
    x = np.float32([-3.5, 0.25, 7.0])
    for f in FUNCTIONS:
        assert np.array_equal(exact_fp32(f, x), reference64(f, x).astype(np.float32))
