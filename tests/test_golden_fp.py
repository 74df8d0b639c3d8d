"""golden.fp against independent oracles.

Oracles: Berkeley SoftFloat (``softfloatpy``) for FP16/FP32 arithmetic and the
FP16/FP32/BF16 conversions; numpy's own binary16 conversion for decode and
classify; exact rational arithmetic (``fractions``) with a first-principles
rounding for the other formats (FP8 e4m3 exhaustive, odd widths) and for the
(sig, sticky) interface of ``round_to``.

SoftFloat propagates NaN payloads while golden returns one canonical NaN, so
"both NaN" counts as a match, and every NaN golden returns must be exactly the
canonical one.

Random tests print their seed; set ``SPECGEN_SEED`` to replay one.
"""

import time
from fractions import Fraction

import numpy as np
import pytest
import softfloatpy as sf

from oracles import pow2, ref_round, seeded_rng

from specgen.golden.fp import (BF16, FP16, FP32, FPClass, FPFormat, add, classify, convert, decode, mul,
                       round_to)

FP8 = FPFormat(exp_bits=4, man_bits=3)
FP12 = FPFormat(exp_bits=3, man_bits=8)

N_RANDOM = 1_000_000          # per operation and format, default suite (measured: see docs)
N_RANDOM_SLOW = 10_000_000    # per operation and format, under -m slow


# --- seeds ---------------------------------------------------------------------------




@pytest.fixture(autouse=True)
def _softfloat_rne():
    # SoftFloat keeps its rounding mode in global state; pin it to RNE.
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)


# --- SoftFloat bridge (a Python loop per element: this is the oracle, not golden) -----

_SF = {FP16: (sf.Float16, ">u2", "f16"), FP32: (sf.Float32, ">u4", "f32"),
       BF16: (sf.BFloat16, ">u2", "bf16")}


_SF_TABLES = {}


def _to_sf(bits, fmt):
    cls, be, _ = _SF[fmt]
    if fmt.width == 16:
        # All 2**16 objects, built once: the bridge is the oracle's bottleneck.
        if fmt not in _SF_TABLES:
            raw = np.arange(1 << 16, dtype=">u2").tobytes()
            _SF_TABLES[fmt] = [cls.from_bytes(raw[i:i + 2]) for i in range(0, len(raw), 2)]
        table = _SF_TABLES[fmt]
        return [table[i] for i in np.asarray(bits).ravel().tolist()]
    raw = np.ascontiguousarray(bits).astype(be).tobytes()
    n = np.dtype(be).itemsize
    return [cls.from_bytes(raw[i:i + n]) for i in range(0, len(raw), n)]


def _from_sf(values, fmt):
    _, be, _ = _SF[fmt]
    return np.frombuffer(b"".join(v.to_bytes() for v in values), dtype=be).astype(fmt.dtype)


def sf_binop(op, a, b, fmt):
    f = getattr(sf, f"{_SF[fmt][2]}_{op}")
    return _from_sf([f(x, y) for x, y in zip(_to_sf(a, fmt), _to_sf(b, fmt))], fmt)


def sf_convert(bits, src, dst):
    f = getattr(sf, f"{_SF[src][2]}_to_{_SF[dst][2]}")
    return _from_sf([f(x) for x in _to_sf(bits, src)], dst)


def is_nan(bits, fmt):
    return classify(bits, fmt) == FPClass.NAN


def assert_bits_equal(got, want, fmt, *context):
    """Bit equality, except that any NaN matches any NaN; golden NaNs must be canonical."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == fmt.dtype
    got_nan = is_nan(got, fmt)
    assert np.all(got[got_nan] == fmt.nan_bits), "golden returned a non-canonical NaN"
    ok = (got == want) | (got_nan & is_nan(want, fmt))
    if not ok.all():
        bad = np.flatnonzero(~ok.ravel())[:8]
        rows = [" ".join(f"{np.asarray(c).ravel()[i]:#x}" for c in context)
                + f" -> got {got.ravel()[i]:#x} want {want.ravel()[i]:#x}" for i in bad]
        pytest.fail(f"{(~ok).sum()} mismatches in {fmt}:\n" + "\n".join(rows))


# --- operand generators ----------------------------------------------------------------

def special_values(fmt):
    """Both signs of zero, min/max subnormal, min normal, one, max, Inf; assorted NaNs."""
    mags = [0, 1, fmt.min_normal_bits - 1, fmt.min_normal_bits, fmt.min_normal_bits + 1,
            fmt.one_bits, fmt.one_bits + 1, fmt.max_bits - 1, fmt.max_bits, fmt.inf_bits]
    vals = mags + [m | fmt.sign_mask for m in mags]
    quiet = 1 << (fmt.man_bits - 1)
    vals += [fmt.nan_bits, fmt.nan_bits | fmt.sign_mask, fmt.inf_bits | 1,  # sNaN
             fmt.inf_bits | quiet | 5, fmt.sign_mask | fmt.inf_bits | fmt.man_mask]
    return np.array(vals, dtype=fmt.dtype)


def draw(rng, fmt, size):
    """Operands mixing uniform bit patterns with exponent fields biased to the edges."""
    sign = rng.integers(0, 2, size, dtype=np.uint64)
    frac = rng.integers(0, 1 << fmt.man_bits, size, dtype=np.uint64)
    # Fractions with few bits set make exact ties and carries common.
    sparse = frac & rng.integers(0, 1 << fmt.man_bits, size, dtype=np.uint64) & \
        rng.integers(0, 1 << fmt.man_bits, size, dtype=np.uint64)
    frac = np.where(rng.random(size) < 0.25, sparse, frac)
    edge = rng.choice(np.array([0, 0, 0, 1, 2, fmt.exp_mask - 2, fmt.exp_mask - 1,
                                fmt.exp_mask - 1, fmt.exp_mask]), size)
    mid = np.clip(fmt.bias + rng.integers(-fmt.man_bits - 3, fmt.man_bits + 4, size),
                  0, fmt.exp_mask)
    efield = np.where(rng.random(size) < 0.5, edge, mid).astype(np.uint64)
    biased = (sign << np.uint64(fmt.width - 1)) | (efield << np.uint64(fmt.man_bits)) | frac
    uniform = rng.integers(0, 1 << fmt.width, size, dtype=np.uint64)
    return np.where(rng.random(size) < 0.4, uniform, biased).astype(fmt.dtype)


def _with_efield(rng, bits, efield, fmt):
    efield = np.clip(efield, 0, fmt.exp_mask).astype(np.uint64)
    keep = bits.astype(np.uint64) & np.uint64(fmt.sign_mask | fmt.man_mask)
    return (keep | (efield << np.uint64(fmt.man_bits))).astype(fmt.dtype)


def draw_pairs(rng, fmt, size, op):
    """Operand pairs; a third are correlated to hit the op's hard cases."""
    a, b = draw(rng, fmt, size), draw(rng, fmt, size)
    ea = (a.astype(np.int64) >> fmt.man_bits) & fmt.exp_mask
    jitter = rng.integers(-fmt.man_bits - 3, fmt.man_bits + 4, size)
    if op == "mul":
        # Products landing at the overflow threshold or in the subnormal range.
        target = rng.choice(np.array([0, 1, fmt.exp_mask - 1]), size)
        b2 = _with_efield(rng, b, target - ea + fmt.bias + jitter, fmt)
    else:
        # Cancellation (b ~ -a) and alignment shifts around the precision.
        near = (a ^ fmt.dtype.type(fmt.sign_mask)) ^ rng.integers(0, 8, size).astype(fmt.dtype)
        shifted = _with_efield(rng, b, ea - rng.integers(0, fmt.precision + 4, size), fmt)
        b2 = np.where(rng.random(size) < 0.5, near, shifted)
    b = np.where(rng.random(size) < 1 / 3, b2, b).astype(fmt.dtype)
    return a, b


# --- exact rational reference (independent of golden's rounding) -----------------------




def ref_value(bits, fmt):
    """Exact value of one encoding as a Fraction, or None for Inf/NaN; plus its sign."""
    bits = int(bits)
    s = bits >> (fmt.width - 1)
    e = (bits >> fmt.man_bits) & fmt.exp_mask
    f = bits & fmt.man_mask
    if e == fmt.exp_mask:
        return None, s
    if e == 0:
        v = f * pow2(1 - fmt.bias - fmt.man_bits)
    else:
        v = ((1 << fmt.man_bits) + f) * pow2(e - fmt.bias - fmt.man_bits)
    return (-v if s else v), s





def ref_binop(op, a, b, fmt):
    """Reference mul/add for one pair, IEEE specials spelled out."""
    va, sa = ref_value(a, fmt)
    vb, sb = ref_value(b, fmt)
    nan = lambda x: (int(x) >> fmt.man_bits) & fmt.exp_mask == fmt.exp_mask and \
        int(x) & fmt.man_mask  # noqa: E731
    if nan(a) or nan(b):
        return fmt.nan_bits
    inf_bits = lambda s: (s << (fmt.width - 1)) | fmt.inf_bits  # noqa: E731
    if op == "mul":
        if va is None or vb is None:
            if va == 0 or vb == 0:
                return fmt.nan_bits
            return inf_bits(sa ^ sb)
        return ref_round(va * vb, fmt, zero_sign=sa ^ sb)
    if va is None and vb is None:
        return inf_bits(sa) if sa == sb else fmt.nan_bits
    if va is None or vb is None:
        return inf_bits(sa if va is None else sb)
    return ref_round(va + vb, fmt, zero_sign=sa & sb)


# --- FPFormat -----------------------------------------------------------------------------

def test_format_properties():
    assert (FP16.width, FP16.bias, FP16.emin, FP16.emax, FP16.dtype) == (16, 15, -14, 15, np.uint16)
    assert (FP32.width, FP32.bias, FP32.emin, FP32.emax, FP32.dtype) == (32, 127, -126, 127, np.uint32)
    assert (BF16.width, BF16.bias, BF16.dtype) == (16, 127, np.uint16)
    assert (FP8.dtype, FP8.precision) == (np.uint8, 4)
    assert (FP16.nan_bits, FP32.nan_bits, BF16.nan_bits) == (0x7E00, 0x7FC00000, 0x7FC0)
    assert (FP16.inf_bits, FP16.max_bits, FP16.one_bits) == (0x7C00, 0x7BFF, 0x3C00)
    assert (FP32.inf_bits, FP32.max_bits, FP32.one_bits) == (0x7F800000, 0x7F7FFFFF, 0x3F800000)
    assert FP16 == FPFormat(exp_bits=5, man_bits=10) and hash(FP16) == hash(FPFormat(exp_bits=5, man_bits=10))
    assert str(FP16) == "e5m10"


@pytest.mark.parametrize("kwargs, exc, msg", [
    (dict(exp_bits=0, man_bits=10), ValueError, "FPFormat.exp_bits must be an integer in [2, 11], not 0"),
    (dict(exp_bits=12, man_bits=3), ValueError, "FPFormat.exp_bits must be an integer in [2, 11], not 12"),
    (dict(exp_bits=5.0, man_bits=10), TypeError, "FPFormat.exp_bits must be an integer in [2, 11], not 5.0"),
    (dict(exp_bits=True, man_bits=10), TypeError, "FPFormat.exp_bits must be an integer in [2, 11], not True"),
    (dict(exp_bits=5, man_bits=0), ValueError, "FPFormat.man_bits must be an integer in [1, 30], not 0"),
    (dict(exp_bits=8, man_bits=24), ValueError, "FPFormat width 1 + exp_bits + man_bits must be <= 32, not 33"),
])
def test_format_validation(kwargs, exc, msg):
    with pytest.raises(exc) as info:
        FPFormat(**kwargs)
    assert str(info.value).startswith(msg)


def test_format_is_keyword_only_and_frozen():
    with pytest.raises(TypeError):
        FPFormat(5, 10)
    with pytest.raises(AttributeError):
        FP16.exp_bits = 6


def test_operation_argument_validation():
    with pytest.raises(TypeError, match=r"^mul\.fmt must be an FPFormat, not 'fp16'$"):
        mul(0, 0, "fp16")
    with pytest.raises(TypeError, match=r"^add\.a must be an integer array of e5m10 bit patterns"):
        add(np.array([1.0]), 0, FP16)
    with pytest.raises(ValueError, match=r"^add\.b must hold e5m10 bit patterns in \[0, 0xffff\]$"):
        add(0, 0x10000, FP16)
    with pytest.raises(ValueError, match=r"^convert\.bits must hold e5m10 bit patterns"):
        convert(np.array([-1]), FP16, FP32)
    with pytest.raises(TypeError, match=r"^convert\.dst_fmt must be an FPFormat"):
        convert(0, FP16, None)
    with pytest.raises(ValueError, match=r"^round_to\.sig must be >= 2\*\*12 where sticky is set"):
        round_to(0, 5, 0, FP16, sticky=True)


# --- classify / decode against numpy's binary16 ---------------------------------------

def test_classify_decode_exhaustive_fp16():
    bits = np.arange(1 << 16, dtype=np.uint16)
    f = bits.view(np.float16).astype(np.float64)
    cls = classify(bits, FP16)
    want = np.select([np.isnan(f), np.isinf(f), f == 0, np.abs(f) < 2.0 ** -14],
                     [FPClass.NAN, FPClass.INF, FPClass.ZERO, FPClass.SUBNORMAL], FPClass.NORMAL)
    assert np.array_equal(cls, want)
    sign, sig, exp = decode(bits, FP16)
    assert (sign.dtype, sig.dtype, exp.dtype) == (np.uint8, np.uint64, np.int32)
    finite = np.isfinite(f)
    value = np.where(sign == 1, -1.0, 1.0) * sig * np.exp2(exp.astype(np.float64))
    assert np.array_equal(value[finite], f[finite])
    assert np.array_equal(np.signbit(f), sign == 1)
    assert np.all(sig[~finite] == 0) and np.all(exp[~finite] == 0)
    assert np.all(sig[cls == FPClass.NORMAL] >> 10 == 1)


def test_classify_decode_fp32_random():
    rng = seeded_rng("decode_fp32")
    bits = draw(rng, FP32, 200_000)
    with np.errstate(invalid="ignore"):   # NaN payload casts
        f = bits.view(np.float32).astype(np.float64)
    sign, sig, exp = decode(bits, FP32)
    finite = np.isfinite(f)
    value = np.where(sign == 1, -1.0, 1.0) * sig * np.exp2(exp.astype(np.float64))
    assert np.array_equal(value[finite], f[finite])
    assert np.array_equal(classify(bits, FP32) == FPClass.SUBNORMAL,
                          (f != 0) & (np.abs(f) < 2.0 ** -126))


# --- special-class pairs ------------------------------------------------------------------

@pytest.mark.parametrize("fmt", [FP16, FP32], ids=str)
@pytest.mark.parametrize("op", ["mul", "add"])
def test_special_pairs_vs_softfloat(op, fmt):
    vals = special_values(fmt)
    a, b = (x.ravel() for x in np.meshgrid(vals, vals))
    got = {"mul": mul, "add": add}[op](a, b, fmt)
    assert_bits_equal(got, sf_binop(op, a, b, fmt), fmt, a, b)


def test_special_rules_spelled_out():
    pz, nz, one, inf = 0x0000, 0x8000, 0x3C00, 0x7C00
    ninf, none = inf | 0x8000, one | 0x8000
    assert add(one, none, FP16) == pz                    # x + (-x) = +0 (§6.3)
    assert add(nz, nz, FP16) == nz                       # -0 + -0 = -0
    assert add(pz, nz, FP16) == pz
    assert add(inf, ninf, FP16) == FP16.nan_bits         # +Inf + -Inf invalid (§7.2)
    assert add(ninf, none, FP16) == ninf
    assert mul(inf, nz, FP16) == FP16.nan_bits           # Inf * 0 invalid (§7.2)
    assert mul(nz, one, FP16) == nz and mul(nz, none, FP16) == pz
    assert mul(ninf, none, FP16) == inf
    assert mul(0x7D00, one, FP16) == FP16.nan_bits       # sNaN in, canonical qNaN out
    assert mul(0xFE01, one, FP16) == FP16.nan_bits       # payload and sign dropped
    assert mul(0x7BFF, 0x4000, FP16) == inf              # overflow rounds to Inf (§7.4)
    assert mul(0x0001, 0x3800, FP16) == pz               # 2**-25: tie to even -> +0
    assert mul(0x0003, 0x3800, FP16) == 0x0002           # 1.5 quanta: tie to even -> 2
    assert mul(0x03FF, 0x3C01, FP16) == 0x0400           # subnormal rounds up to min normal


# --- random pairs against SoftFloat --------------------------------------------------------

def _random_vs_softfloat(op, fmt, n, tag):
    rng = seeded_rng(tag)
    t0 = time.perf_counter()
    for start in range(0, n, 250_000):
        a, b = draw_pairs(rng, fmt, min(250_000, n - start), op)
        got = {"mul": mul, "add": add}[op](a, b, fmt)
        assert_bits_equal(got, sf_binop(op, a, b, fmt), fmt, a, b)
    print(f"[{tag}] {n} pairs in {time.perf_counter() - t0:.1f} s")


@pytest.mark.parametrize("fmt", [FP16, FP32], ids=str)
@pytest.mark.parametrize("op", ["mul", "add"])
def test_random_pairs_vs_softfloat(op, fmt):
    _random_vs_softfloat(op, fmt, N_RANDOM, f"{op}_{fmt}_random")


@pytest.mark.slow
@pytest.mark.parametrize("fmt", [FP16, FP32], ids=str)
@pytest.mark.parametrize("op", ["mul", "add"])
def test_random_pairs_vs_softfloat_slow(op, fmt):
    _random_vs_softfloat(op, fmt, N_RANDOM_SLOW, f"{op}_{fmt}_random_slow")


def _fixed_operands(rng, fmt):
    return np.concatenate([special_values(fmt), draw(rng, fmt, 4)])


@pytest.mark.parametrize("op", ["mul", "add"])
def test_fp16_every_value_against_fixed_operands(op):
    """Every FP16 encoding times/plus a fixed operand set (specials and randoms)."""
    rng = seeded_rng(f"{op}_fp16_every_value")
    a = np.arange(1 << 16, dtype=np.uint16)
    for b0 in _fixed_operands(rng, FP16):
        b = np.full_like(a, b0)
        got = {"mul": mul, "add": add}[op](a, b, FP16)
        assert_bits_equal(got, sf_binop(op, a, b, FP16), FP16, a, b)


@pytest.mark.slow
@pytest.mark.parametrize("op", ["mul", "add"])
def test_fp16_every_value_against_many_operands_slow(op):
    rng = seeded_rng(f"{op}_fp16_many_operands")
    a = np.arange(1 << 16, dtype=np.uint16)
    for b0 in draw(rng, FP16, 256):
        b = np.full_like(a, b0)
        assert_bits_equal({"mul": mul, "add": add}[op](a, b, FP16),
                          sf_binop(op, a, b, FP16), FP16, a, b)


# --- conversions ------------------------------------------------------------------------------

def test_convert_fp16_to_fp32_exhaustive():
    bits = np.arange(1 << 16, dtype=np.uint16)
    got = convert(bits, FP16, FP32)
    assert_bits_equal(got, sf_convert(bits, FP16, FP32), FP32, bits)
    # Widening is exact: numpy's own binary16 -> binary32 agrees outside NaN.
    finite = classify(bits, FP16) != FPClass.NAN
    assert np.array_equal(got[finite], bits[finite].view(np.float16).astype(np.float32).view(np.uint32))
    # And narrowing back is the identity on every non-NaN.
    assert np.array_equal(convert(got, FP32, FP16)[finite], bits[finite])


def test_convert_fp32_to_fp16_random():
    rng = seeded_rng("convert_fp32_fp16")
    bits = draw(rng, FP32, 400_000)
    # Concentrate on the FP16 range: exponents around its subnormal and overflow edges.
    e = rng.choice(np.array([127 - 26, 127 - 25, 127 - 24, 127 - 15, 127 - 14, 127 + 15, 127 + 16]), 400_000)
    e = e + rng.integers(-2, 3, 400_000)
    near = ((bits.astype(np.uint64) & np.uint64(0x807FFFFF)) | (e.astype(np.uint64) << np.uint64(23)))
    bits = np.where(rng.random(400_000) < 0.6, near, bits).astype(np.uint32)
    assert_bits_equal(convert(bits, FP32, FP16), sf_convert(bits, FP32, FP16), FP16, bits)


def test_convert_bf16():
    rng = seeded_rng("convert_bf16")
    bits16 = np.arange(1 << 16, dtype=np.uint16)
    assert_bits_equal(convert(bits16, BF16, FP32), sf_convert(bits16, BF16, FP32), FP32, bits16)
    bits32 = draw(rng, FP32, 300_000)
    assert_bits_equal(convert(bits32, FP32, BF16), sf_convert(bits32, FP32, BF16), BF16, bits32)


def test_convert_fp16_to_fp8_vs_fractions():
    bits = np.arange(1 << 16, dtype=np.uint16)
    got = convert(bits, FP16, FP8)
    want = [FP8.nan_bits if v is None and b & FP16.man_mask else
            ((s << 7) | FP8.inf_bits) if v is None else ref_round(v, FP8, zero_sign=s)
            for b, (v, s) in zip(bits.tolist(), (ref_value(b, FP16) for b in bits.tolist()))]
    assert_bits_equal(got, np.array(want, dtype=np.uint8), FP8, bits)


# --- other formats against exact rationals ------------------------------------------------

@pytest.mark.parametrize("op", ["mul", "add"])
def test_fp8_all_pairs_vs_fractions(op):
    vals = np.arange(1 << 8, dtype=np.uint8)
    a, b = (x.ravel() for x in np.meshgrid(vals, vals))
    got = {"mul": mul, "add": add}[op](a, b, FP8)
    want = np.array([ref_binop(op, x, y, FP8) for x, y in zip(a.tolist(), b.tolist())], np.uint8)
    assert_bits_equal(got, want, FP8, a, b)


@pytest.mark.parametrize("fmt", [FP12, BF16, FPFormat(exp_bits=2, man_bits=1),
                                 FPFormat(exp_bits=2, man_bits=29)], ids=str)
@pytest.mark.parametrize("op", ["mul", "add"])
def test_other_formats_random_vs_fractions(op, fmt):
    rng = seeded_rng(f"{op}_{fmt}_fractions")
    a, b = draw_pairs(rng, fmt, 20_000, op)
    got = {"mul": mul, "add": add}[op](a, b, fmt)
    want = np.array([ref_binop(op, x, y, fmt) for x, y in zip(a.tolist(), b.tolist())], fmt.dtype)
    assert_bits_equal(got, want, fmt, a, b)


# --- round_to: the (sig, sticky) interface dot.py relies on ------------------------------

@pytest.mark.parametrize("fmt", [FP16, FP32, BF16], ids=str)
def test_round_to_wide_sig_with_sticky_vs_fractions(fmt):
    rng = seeded_rng(f"round_to_{fmt}")
    n = 20_000
    nbits = rng.integers(fmt.man_bits + 3, 65, n)
    sig = (rng.integers(0, 1 << 62, n, dtype=np.uint64) << np.uint64(2)) | rng.integers(0, 4, n, dtype=np.uint64)
    sig = (sig >> (64 - nbits).astype(np.uint64)) | (np.uint64(1) << (nbits - 1).astype(np.uint64))
    # Exact ties need zeros below the guard bit: keep only the top man_bits + 2 bits sometimes.
    low = (np.uint64(1) << (nbits - fmt.man_bits - 2).astype(np.uint64)) - np.uint64(1)
    sig = np.where(rng.random(n) < 0.3, sig & ~low, sig)
    sticky = rng.random(n) < 0.5
    # Exponents sweeping underflow to overflow of fmt.
    lo, hi = fmt.emin - fmt.man_bits - 70, fmt.emax + 2
    exp = rng.integers(lo, hi, n) - nbits
    sign = rng.integers(0, 2, n)
    got = round_to(sign, sig, exp, fmt, sticky=sticky)
    quarter = Fraction(1, 4)
    want = [ref_round((-1) ** s * (Fraction(int(m)) + (quarter if st else 0)) * pow2(int(e)),
                      fmt, zero_sign=s)
            for s, m, e, st in zip(sign.tolist(), sig.tolist(), exp.tolist(), sticky.tolist())]
    assert_bits_equal(got, np.array(want, dtype=fmt.dtype), fmt, sig, exp)


def test_round_to_zero_keeps_sign_and_broadcasts():
    got = round_to(np.array([0, 1]), 0, np.array([[-5], [100]]), FP16)
    assert got.shape == (2, 2) and got.tolist() == [[0, 0x8000], [0, 0x8000]]
