"""golden.dot against exact rational arithmetic and SoftFloat.

The reference sums the exact decoded products as ``fractions.Fraction`` and
rounds once with a first-principles rounding written here (not golden's
``round_to``). SoftFloat cross-checks the cases where one IEEE operation is
already exact (n = 1; n = 2 through a fused multiply-add).

Random tests print their seed; set ``SPECGEN_SEED`` to replay one.
"""

from fractions import Fraction

import numpy as np
import pytest
import softfloatpy as sf

from oracles import pow2, ref_round, seeded_rng
from hypothesis import given, settings, strategies as st

from specgen.golden.dot import (Accumulator, AccumulatorSpec, Terms, acc_width, accumulate,
                        accumulator_spec, dot, merge, product_terms, round_accumulator,
                        round_sum)
from specgen.golden.fp import BF16, FP16, FP32, FPFormat

FP8 = FPFormat(exp_bits=4, man_bits=3)





# --- exact reference -----------------------------------------------------------------------




def ref_decode(bits, fmt):
    """('nan' | 'inf' | 'fin', sign, exact Fraction or None) from the encoding's definition."""
    bits = int(bits)
    s = bits >> (fmt.width - 1)
    e = (bits >> fmt.man_bits) & fmt.exp_mask
    f = bits & fmt.man_mask
    if e == fmt.exp_mask:
        return ("nan" if f else "inf"), s, None
    sig = f if e == 0 else (1 << fmt.man_bits) | f
    v = sig * pow2(max(e, 1) - fmt.bias - fmt.man_bits)
    return "fin", s, (-v if s else v)





def ref_dot_row(a, b, fmt_in, fmt_out):
    """Exact dot product of one row with the specified special-value rules."""
    total, nan, pos_inf, neg_inf, all_neg_zero = Fraction(0), False, False, False, True
    for x, y in zip(a, b):
        kx, sx, vx = ref_decode(x, fmt_in)
        ky, sy, vy = ref_decode(y, fmt_in)
        s = sx ^ sy
        if kx == "nan" or ky == "nan" or (kx == "inf" and vy == 0) or (ky == "inf" and vx == 0):
            nan = True
        elif kx == "inf" or ky == "inf":
            pos_inf |= s == 0
            neg_inf |= s == 1
        else:
            p = vx * vy
            total += p
            all_neg_zero &= p == 0 and s == 1
        if kx != "fin" or ky != "fin":
            all_neg_zero = False
    if nan or (pos_inf and neg_inf):
        return fmt_out.nan_bits
    if pos_inf or neg_inf:
        return (int(neg_inf) << (fmt_out.width - 1)) | fmt_out.inf_bits
    return ref_round(total, fmt_out, zero_sign=int(all_neg_zero and len(a) > 0))


def ref_dot(a, b, fmt_in, fmt_out):
    a, b = np.broadcast_arrays(a, b)
    rows = [ref_dot_row(x, y, fmt_in, fmt_out)
            for x, y in zip(a.reshape(-1, a.shape[-1]).tolist(), b.reshape(-1, b.shape[-1]).tolist())]
    return np.array(rows, dtype=fmt_out.dtype).reshape(a.shape[:-1])


def assert_bits(got, want, fmt, a=None, b=None):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == fmt.dtype and got.shape == want.shape
    bad = np.flatnonzero((got != want).ravel())
    if bad.size:
        i = bad[0]
        ctx = ""
        if a is not None:
            ctx = f"\n a={[hex(v) for v in a.reshape(-1, a.shape[-1])[i]]}" \
                  f"\n b={[hex(v) for v in b.reshape(-1, b.shape[-1])[i]]}"
        pytest.fail(f"{bad.size} rows differ; first: got {got.ravel()[i]:#x} "
                    f"want {want.ravel()[i]:#x}{ctx}")


# --- operand generators --------------------------------------------------------------------

def draw(rng, fmt, shape, *, special=0.0):
    """Finite operands over the whole range, biased to subnormals, large and near-one values."""
    size = int(np.prod(shape))
    sign = rng.integers(0, 2, size, dtype=np.uint64)
    frac = rng.integers(0, 1 << fmt.man_bits, size, dtype=np.uint64)
    efield = np.select([rng.random(size) < p for p in (0.15, 0.3, 0.45)],
                       [rng.integers(0, 2, size), rng.integers(fmt.exp_mask - 3, fmt.exp_mask, size),
                        fmt.bias + rng.integers(-3, 4, size)],
                       rng.integers(0, fmt.exp_mask, size)).astype(np.uint64)
    bits = (sign << np.uint64(fmt.width - 1)) | (efield << np.uint64(fmt.man_bits)) | frac
    specials = np.array([fmt.inf_bits, fmt.inf_bits | fmt.sign_mask, fmt.nan_bits, 0, fmt.sign_mask])
    bits = np.where(rng.random(size) < special, rng.choice(specials, size), bits)
    return bits.astype(fmt.dtype).reshape(shape)


# --- accumulator width -------------------------------------------------------------------

def test_accumulator_spec_fp16_worked_numbers():
    spec = accumulator_spec(FP16, 128)
    assert (spec.lsb_exp, spec.msb_exp, spec.guard_bits, spec.width) == (-48, 32, 7, 88)
    assert (spec.fraction_bits, spec.integer_bits, spec.magnitude_bits) == (48, 39, 80)
    assert [accumulator_spec(FP16, n).width for n in (1, 2, 64, 128, 4096)] == [81, 82, 87, 88, 93]
    assert accumulator_spec(FP32, 1).width == 256 + 298 + 1
    assert acc_width(lsb_exp=-48, msb_exp=32, n=4096) == 93
    assert acc_width(lsb_exp=-3, msb_exp=5, n=5) == 8 + 3 + 1


@pytest.mark.parametrize("kwargs, exc, msg", [
    (dict(lsb_exp=0, msb_exp=0, n=1), ValueError, "AccumulatorSpec.msb_exp must be an integer >= 1, not 0"),
    (dict(lsb_exp=0, msb_exp=4, n=0), ValueError, "AccumulatorSpec.n must be an integer >= 1, not 0"),
    (dict(lsb_exp=0.5, msb_exp=4, n=1), TypeError, "AccumulatorSpec.lsb_exp must be an integer"),
])
def test_accumulator_spec_validation(kwargs, exc, msg):
    with pytest.raises(exc) as info:
        AccumulatorSpec(**kwargs)
    assert str(info.value).startswith(msg)


def test_argument_validation():
    with pytest.raises(TypeError, match=r"^accumulator_spec\.fmt_in must be an FPFormat"):
        accumulator_spec("fp16", 4)
    with pytest.raises(ValueError, match=r"^accumulator_spec\.n must be an integer >= 1, not 0$"):
        accumulator_spec(FP16, 0)
    with pytest.raises(TypeError, match=r"^dot\.fmt_out must be an FPFormat"):
        dot([0], [0], fmt_out=32)
    with pytest.raises(ValueError, match=r"^product_terms\.a and product_terms\.b must broadcast"):
        product_terms(0, 0, FP16)
    with pytest.raises(ValueError, match=r"^dot\.a and dot\.b must broadcast"):
        dot(0, 0)
    with pytest.raises(ValueError, match=r"^dot\.a must hold e5m10 bit patterns"):
        dot([-1], [0])
    with pytest.raises(ValueError, match=r"^product_terms\.b must hold e5m10 bit patterns"):
        product_terms([0], [1 << 16], FP16)
    with pytest.raises(TypeError, match=r"^round_sum\.terms must be a Terms record, not tuple$"):
        round_sum((1, 2, 3, 4, 5), FP32)
    terms = product_terms(np.array([1]), np.array([1]), FP16)          # 2**-48
    with pytest.raises(ValueError, match=r"^accumulate\.lsb_exp=-47 is above the LSB of a nonzero term"):
        accumulate(terms, lsb_exp=-47)
    with pytest.raises(ValueError, match=r"^merge\.y\.lsb_exp must equal merge\.x\.lsb_exp=-48, not -49$"):
        merge(accumulate(terms, lsb_exp=-48), accumulate(terms, lsb_exp=-49))


def _acc_int(acc):
    """The accumulator rows as Python ints (two's complement limbs, top limb signed)."""
    flat = acc.limbs.reshape(-1, acc.limbs.shape[-1])
    return [sum(int(v) << (32 * k) for k, v in enumerate(row)) for row in flat.tolist()]


@pytest.mark.parametrize("n", [1, 2, 3, 64, 128, 4096])
def test_accumulator_width_holds_max_magnitude(n):
    """n max-magnitude products of either sign fit the two's complement width (a proof by bound)."""
    spec = accumulator_spec(FP16, n)
    max_product = Fraction(65504) ** 2
    # Every product is a multiple of 2**lsb_exp ...
    assert (Fraction(2) ** -24) ** 2 == pow2(spec.lsb_exp)
    # ... and |sum| <= n * max_product fits in width - 1 magnitude bits.
    bound = n * max_product / pow2(spec.lsb_exp)
    assert bound.denominator == 1 and bound < 2 ** (spec.width - 1)
    assert max_product < pow2(spec.msb_exp)
    # The golden accumulator, on the RTL's LSB, reaches exactly that bound.
    a = np.full((2, n), FP16.max_bits, dtype=np.uint16)
    b = np.stack([np.full(n, FP16.max_bits), np.full(n, FP16.max_bits | FP16.sign_mask)]).astype(np.uint16)
    acc = accumulate(product_terms(a, b, FP16), lsb_exp=spec.lsb_exp)
    assert _acc_int(acc) == [int(bound), -int(bound)]
    assert all(-(1 << (spec.width - 1)) <= v < (1 << (spec.width - 1)) for v in _acc_int(acc))
    # The guard bits are needed: without them the n = 2**k case would overflow.
    if n > 1:
        assert bound >= 2 ** (spec.magnitude_bits + spec.guard_bits - 1)


# --- random vectors against Fractions ---------------------------------------------------

@pytest.mark.parametrize("fmt_out", [FP32, FP16], ids=str)
@pytest.mark.parametrize("n", [1, 2, 7, 32])
def test_random_vs_fractions(n, fmt_out):
    rng = seeded_rng(f"dot_random_{n}_{fmt_out}")
    a = draw(rng, FP16, (400, n), special=0.01)
    b = draw(rng, FP16, (400, n), special=0.01)
    assert_bits(dot(a, b, fmt_out=fmt_out), ref_dot(a, b, FP16, fmt_out), fmt_out, a, b)


@pytest.mark.parametrize("fmt_in", [FP32, BF16, FP8], ids=str)
def test_other_input_formats_vs_fractions(fmt_in):
    rng = seeded_rng(f"dot_fmt_in_{fmt_in}")
    a, b = draw(rng, fmt_in, (300, 9)), draw(rng, fmt_in, (300, 9))
    for fmt_out in (FP32, FP16, BF16):
        got = dot(a, b, fmt_in=fmt_in, fmt_out=fmt_out)
        assert_bits(got, ref_dot(a, b, fmt_in, fmt_out), fmt_out, a, b)


def test_batch_dims_and_broadcasting():
    rng = seeded_rng("dot_batch")
    a = draw(rng, FP16, (2, 3, 16))
    b = draw(rng, FP16, (16,))
    got = dot(a, b)
    assert got.shape == (2, 3) and got.dtype == np.uint32
    assert_bits(got, ref_dot(a, b, FP16, FP32), FP32)
    assert dot(a[0, 0], b).shape == ()


# --- adversarial vectors -------------------------------------------------------------------

@pytest.mark.parametrize("fmt_out", [FP32, FP16], ids=str)
def test_massive_cancellation(fmt_out):
    rng = seeded_rng(f"dot_cancel_{fmt_out}")
    rows, n = 300, 16
    x = draw(rng, FP16, (rows, n // 2 - 1))
    y = draw(rng, FP16, (rows, n // 2 - 1))
    tiny = rng.integers(1, 1 << 10, (rows, 2)).astype(np.uint16)     # subnormals
    tiny[:, 1] |= rng.integers(0, 2, rows).astype(np.uint16) << 15
    a = np.concatenate([x, x, tiny[:, :1]], axis=1)
    b = np.concatenate([y, y ^ np.uint16(0x8000), tiny[:, 1:]], axis=1)
    perm = rng.permuted(np.tile(np.arange(n - 1), (rows, 1)), axis=1)
    a, b = np.take_along_axis(a, perm, 1), np.take_along_axis(b, perm, 1)
    got = dot(a, b, fmt_out=fmt_out)
    assert_bits(got, ref_dot(a, b, FP16, fmt_out), fmt_out, a, b)
    if fmt_out is FP32:
        # The survivor is the tiny product alone, exact in FP32 (>= 2**-48).
        finite = (np.abs(x.view(np.float16).astype(np.float64) * y.view(np.float16)) < np.inf).all(1)
        want = (tiny[:, 0].view(np.float16).astype(np.float64)
                * tiny[:, 1].view(np.float16).astype(np.float64)).astype(np.float32).view(np.uint32)
        assert np.array_equal(got[finite], want[finite])


@pytest.mark.parametrize("fmt_out", [FP32, FP16], ids=str)
def test_all_subnormal(fmt_out):
    rng = seeded_rng(f"dot_subnormal_{fmt_out}")
    a = rng.integers(0, 1 << 10, (300, 64)).astype(np.uint16) | (rng.integers(0, 2, (300, 64)) << 15).astype(np.uint16)
    b = rng.integers(0, 1 << 10, (300, 64)).astype(np.uint16)
    assert_bits(dot(a, b, fmt_out=fmt_out), ref_dot(a, b, FP16, fmt_out), fmt_out, a, b)


def test_overflow_to_inf_fp16_out():
    one, mx = FP16.one_bits, FP16.max_bits
    # 65504 + 16 = 65520 is the midpoint to 2**16: ties-to-even goes up, to Inf.
    a = np.array([[mx, 0x4C00], [mx, 0x4BFF], [mx, mx], [mx | 0x8000, mx]], np.uint16)
    b = np.array([[one, one], [one, one], [one, one], [one, one]], np.uint16)   # 0x4C00 = 16
    got = dot(a, b, fmt_out=FP16)
    assert got.tolist() == [0x7C00, 0x7BFF, 0x7C00, 0x0000]
    rng = seeded_rng("dot_overflow")
    big = rng.integers(0x7000, 0x7C00, (200, 8)).astype(np.uint16)
    sgn = (rng.random((200, 8)) < 0.3).astype(np.uint16) << 15
    assert_bits(dot(big | sgn, np.full((200, 8), 0x4000, np.uint16), fmt_out=FP16),
                ref_dot(big | sgn, np.full((200, 8), 0x4000, np.uint16), FP16, FP16), FP16)


def test_ties_round_to_even():
    one, e12 = FP16.one_bits, 0x0C00                      # 0x0C00 = 2**-12
    a = np.array([[one, e12, 0], [one, e12, 0x0001], [0x3C01, e12, 0]], np.uint16)
    b = np.array([[one, e12, 0], [one, e12, 0x0001], [one, e12, 0]], np.uint16)
    # 1 + 2**-24 is a tie -> 1.0; + 2**-48 breaks it upward; (1 + 2**-10) + 2**-24 -> even neighbour.
    assert dot(a, b).tolist() == [0x3F800000, 0x3F800001, 0x3F802000]


def test_zero_sign_rules():
    pz, nz, one = 0x0000, 0x8000, FP16.one_bits
    cases = [([nz], [one], 0x80000000),                   # single -0 product
             ([nz, nz], [one, one], 0x80000000),          # all -0
             ([nz, pz], [one, one], 0x00000000),          # one +0
             ([nz, nz], [one, nz], 0x00000000),           # (-0)(-0) = +0
             ([one, one], [one, one | 0x8000], 0x00000000),   # x + (-x) = +0
             ([one | 0x8000, one, nz], [one, one, one], 0x00000000)]
    for a, b, want in cases:
        assert dot(np.array(a, np.uint16), np.array(b, np.uint16)) == want, (a, b)
        assert dot(np.array(a, np.uint16), np.array(b, np.uint16), fmt_out=FP16) == want >> 16
    empty = np.zeros((3, 0), np.uint16)
    assert dot(empty, empty).tolist() == [0, 0, 0]


def test_nan_inf_rules():
    inf, ninf, nan, one, zero = 0x7C00, 0xFC00, 0x7E00, FP16.one_bits, 0
    cases = [([inf, one], [one, one], 0x7F800000),
             ([inf, one], [one | 0x8000, one], 0xFF800000),
             ([inf, ninf], [one, one], FP32.nan_bits),        # +Inf + -Inf
             ([inf, inf], [one, one], 0x7F800000),
             ([inf, one], [zero, one], FP32.nan_bits),        # Inf * 0
             ([0xFD55, one], [one, one], FP32.nan_bits),      # signalling, negative NaN in
             ([nan, inf], [one, one], FP32.nan_bits),
             # 3 * 65504**2 = 0xBFD003 * 2**10: exact in FP32, no overflow
             ([FP16.max_bits] * 3, [FP16.max_bits] * 3, 0x503FD003)]
    for a, b, want in cases:
        got = dot(np.array(a, np.uint16), np.array(b, np.uint16))
        assert got == want, (a, b, hex(got))
    rng = seeded_rng("dot_specials")
    a = draw(rng, FP16, (500, 6), special=0.3)
    b = draw(rng, FP16, (500, 6), special=0.3)
    for fmt_out in (FP32, FP16):
        assert_bits(dot(a, b, fmt_out=fmt_out), ref_dot(a, b, FP16, fmt_out), fmt_out, a, b)


def test_terms_are_exact_products():
    rng = seeded_rng("dot_terms")
    a, b = draw(rng, FP16, (2000,)), draw(rng, FP16, (2000,))
    t = product_terms(a[None], b[None], FP16)
    assert isinstance(t, Terms)
    assert (t.sign.dtype, t.sig.dtype, t.exp.dtype, t.nan.dtype, t.inf.dtype) == \
        (np.uint8, np.uint64, np.int32, bool, bool)
    for i in range(2000):
        _, sa, va = ref_decode(a[i], FP16)
        _, sb, vb = ref_decode(b[i], FP16)
        assert t.sign[0, i] == sa ^ sb
        if va is not None and vb is not None:
            assert int(t.sig[0, i]) * pow2(int(t.exp[0, i])) == abs(va * vb)


# --- order and tiling independence (property tests) ----------------------------------------

_SPECIAL16 = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF,
              0x7C00, 0xFC00, 0x7E00]
fp16_values = st.one_of(st.integers(0, 0xFFFF), st.sampled_from(_SPECIAL16),
                        st.integers(0, 0x03FF), st.integers(0x7000, 0x7BFF))
pairs = st.lists(st.tuples(fp16_values, fp16_values), min_size=1, max_size=48)


@settings(max_examples=150, deadline=None)
@given(pairs=pairs, data=st.data())
def test_permutation_invariance(pairs, data):
    perm = data.draw(st.permutations(range(len(pairs))))
    a = np.array([p[0] for p in pairs], np.uint16)
    b = np.array([p[1] for p in pairs], np.uint16)
    for fmt_out in (FP32, FP16):
        assert dot(a, b, fmt_out=fmt_out) == dot(a[perm], b[perm], fmt_out=fmt_out)
        assert dot(a, b, fmt_out=fmt_out) == ref_dot(a, b, FP16, fmt_out)


@settings(max_examples=150, deadline=None)
@given(pairs=pairs, data=st.data())
def test_tiling_merge_equals_whole(pairs, data):
    n = len(pairs)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=4)))
    a = np.array([p[0] for p in pairs], np.uint16)
    b = np.array([p[1] for p in pairs], np.uint16)
    spec = accumulator_spec(FP16, n)
    bounds = [0] + cuts + [n]
    tiles = [accumulate(product_terms(a[i:j], b[i:j], FP16), lsb_exp=spec.lsb_exp)
             for i, j in zip(bounds[:-1], bounds[1:])]
    total = tiles[0]
    for tile in tiles[1:]:
        total = merge(total, tile)
    assert isinstance(total, Accumulator) and total.count == n
    whole = accumulate(product_terms(a, b, FP16), lsb_exp=spec.lsb_exp)
    assert _acc_int(total) == _acc_int(whole)
    for fmt_out in (FP32, FP16):
        assert round_accumulator(total, fmt_out) == dot(a, b, fmt_out=fmt_out)


def test_batched_tiling_of_128_by_4_tiles():
    rng = seeded_rng("dot_tiles")
    a, b = draw(rng, FP16, (500, 128), special=0.002), draw(rng, FP16, (500, 128), special=0.002)
    lsb = accumulator_spec(FP16, 128).lsb_exp
    accs = [accumulate(product_terms(a[:, k:k + 32], b[:, k:k + 32], FP16), lsb_exp=lsb)
            for k in range(0, 128, 32)]
    total = merge(merge(accs[0], accs[1]), merge(accs[2], accs[3]))
    for fmt_out in (FP32, FP16):
        assert np.array_equal(round_accumulator(total, fmt_out), dot(a, b, fmt_out=fmt_out))
    # Order along the vector does not matter either.
    perm = rng.permutation(128)
    assert np.array_equal(dot(a[:, perm], b[:, perm]), dot(a, b))


# --- SoftFloat cross-checks ----------------------------------------------------------------

def _sf16(bits):
    raw = np.asarray(bits).astype(">u2").tobytes()
    return [sf.Float16.from_bytes(raw[i:i + 2]) for i in range(0, len(raw), 2)]


def _bits(values, be):
    return np.frombuffer(b"".join(v.to_bytes() for v in values), dtype=be)


def _nan_equal(got, want, fmt):
    nan = lambda x: ((x >> fmt.man_bits) & fmt.exp_mask == fmt.exp_mask) & (x & fmt.man_mask != 0)  # noqa: E731
    got, want = got.astype(np.int64), want.astype(np.int64)
    assert np.all(got[nan(got)] == fmt.nan_bits)
    ok = (got == want) | (nan(got) & nan(want))
    assert ok.all(), f"{(~ok).sum()} mismatches, first at {np.flatnonzero(~ok)[:4]}"


def test_n1_matches_softfloat_products():
    """n = 1: FP32 out is the exact product (f32_mul of widened operands); FP16 out is f16_mul."""
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    rng = seeded_rng("dot_n1_softfloat")
    a, b = draw(rng, FP16, (100_000,), special=0.02), draw(rng, FP16, (100_000,), special=0.02)
    xa, xb = _sf16(a), _sf16(b)
    want32 = _bits([sf.f32_mul(sf.f16_to_f32(x), sf.f16_to_f32(y)) for x, y in zip(xa, xb)], ">u4")
    want16 = _bits([sf.f16_mul(x, y) for x, y in zip(xa, xb)], ">u2")
    _nan_equal(dot(a[:, None], b[:, None]), want32, FP32)
    _nan_equal(dot(a[:, None], b[:, None], fmt_out=FP16), want16, FP16)


def test_n2_matches_softfloat_fma():
    """n = 2, FP32 out: a1*b1 + a2*b2 = fma(a1, b1, a2*b2), the inner product exact in FP32."""
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    rng = seeded_rng("dot_n2_softfloat")
    a, b = draw(rng, FP16, (100_000, 2), special=0.02), draw(rng, FP16, (100_000, 2), special=0.02)
    w = lambda col: [sf.f16_to_f32(x) for x in _sf16(col)]  # noqa: E731
    a1, b1, a2, b2 = w(a[:, 0]), w(b[:, 0]), w(a[:, 1]), w(b[:, 1])
    want = _bits([sf.f32_mul_add(x1, y1, sf.f32_mul(x2, y2))
                  for x1, y1, x2, y2 in zip(a1, b1, a2, b2)], ">u4")
    _nan_equal(dot(a, b), want, FP32)
