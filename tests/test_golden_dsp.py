"""golden.dsp (numerics contract v2, DSPFP32) against independent oracles.

Oracles: Berkeley SoftFloat (``softfloatpy``) for the binary32 add and multiply,
wrapped in a flush-to-zero written here from the encoding (AM004 "Subnormals":
a subnormal operand reads as a signed zero, a subnormal result is flushed with
its sign); exact rationals (``fractions``) with ``oracles.ref_round`` for whole
dot products, folded term by term. Nothing here reuses golden's rounding.
"""

from fractions import Fraction

import numpy as np
import pytest
import softfloatpy as sf

from oracles import ftz32, ftz_add32, ftz_mul32, is_nan32, pow2, ref_round, seeded_rng

from specgen.golden import bsfp, dsp
from specgen.golden.fp import FP16, FP32

N_PAIRS = 200_000


@pytest.fixture(autouse=True)
def _rne():
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)


# --- the oracle: SoftFloat with its own flush (tests/oracles.py) --------------------------

_ftz32, _is_nan32, oracle_add, oracle_mul = ftz32, is_nan32, ftz_add32, ftz_mul32


def _assert_same(got, want, a, b, what):
    bad = []
    for g, w, x, y in zip(got, want, a, b):
        g, w = int(g), int(w)
        if _is_nan32(g) and _is_nan32(w):
            continue
        if g != w:
            bad.append(f"{x:#010x} {what} {y:#010x}: golden {g:#010x}, oracle {w:#010x}")
    assert not bad, f"{len(bad)} mismatches:\n" + "\n".join(bad[:8])


def _edge_operands(rng, n):
    """binary32 operands crowded at the flush boundary, the specials and the overflow edge."""
    sign = rng.integers(0, 2, n, dtype=np.uint32) << np.uint32(31)
    efield = rng.choice(np.array([0, 0, 1, 1, 2, 3, 24, 25, 60, 127, 200, 253, 254, 254, 255],
                                 dtype=np.uint32), n)
    efield = np.where(rng.random(n) < 0.4, rng.integers(0, 256, n, dtype=np.uint32), efield)
    man = rng.integers(0, 1 << 23, n, dtype=np.uint32)
    man = np.where(rng.random(n) < 0.2, man & np.uint32(0x7), man)       # ties, tiny subnormals
    return (sign | (efield << np.uint32(23)) | man).astype(np.uint32)


# --- the elementary operations ------------------------------------------------------------

def test_flush_reads_subnormals_as_signed_zero():
    bits = np.array([0x0000_0001, 0x8000_0001, 0x007F_FFFF, 0x0080_0000, 0x8000_0000, 0x7FC0_0000],
                    np.uint32)
    got, flushed = dsp.flush(bits, FP32)
    assert got.tolist() == [0, 0x8000_0000, 0, 0x0080_0000, 0x8000_0000, 0x7FC0_0000]
    assert flushed.tolist() == [True, True, True, False, False, False]
    got16, f16 = dsp.flush(np.array([0x0001, 0x83FF, 0x0400], np.uint16), FP16)
    assert got16.tolist() == [0, 0x8000, 0x0400] and f16.tolist() == [True, True, False]


@pytest.mark.parametrize("op", ["add", "mul"])
def test_random_pairs_vs_softfloat_with_flush(op):
    rng = seeded_rng(f"dsp_{op}")
    a, b = _edge_operands(rng, N_PAIRS), _edge_operands(rng, N_PAIRS)
    if op == "add":
        # Near-cancellation lands sums in the subnormal range: the output flush.
        near = (a ^ np.uint32(0x8000_0000)) ^ rng.integers(0, 64, N_PAIRS).astype(np.uint32)
        b = np.where(rng.random(N_PAIRS) < 0.3, near, b).astype(np.uint32)
        got, _, _ = dsp.add(a, b)
        want = [oracle_add(x, y) for x, y in zip(a.tolist(), b.tolist())]
    else:
        got, _, _ = dsp.mul(a, b)
        want = [oracle_mul(x, y) for x, y in zip(a.tolist(), b.tolist())]
    _assert_same(got, want, a.tolist(), b.tolist(), "+" if op == "add" else "*")


@pytest.mark.parametrize("op", ["add", "mul"])
def test_native_ops_equal_the_spec(op):
    # mul/add are checked against SoftFloat above; the native ones must give their bits,
    # flags included, on every operand class (specials, subnormals, ties, overflow).
    rng = seeded_rng(f"dsp_native_{op}")
    a, b = _edge_operands(rng, 5 * N_PAIRS), _edge_operands(rng, 5 * N_PAIRS)
    if op == "add":
        near = (a ^ np.uint32(0x8000_0000)) ^ rng.integers(0, 64, a.size).astype(np.uint32)
        b = np.where(rng.random(a.size) < 0.3, near, b).astype(np.uint32)
    spec, native = (dsp.add, dsp.add_native) if op == "add" else (dsp.mul, dsp.mul_native)
    want, got = spec(a, b), native(a, b)
    for w, g, name in zip(want, got, ("result", "flushed_in", "flushed_out")):
        bad = np.flatnonzero(w != g)
        assert bad.size == 0, (f"{name}: {bad.size} mismatches, first {a[bad[0]]:#010x} {op} "
                               f"{b[bad[0]]:#010x}: spec {w[bad[0]]}, native {g[bad[0]]}")
    assert want[2].any() and want[1].any()      # the flushes were exercised


def test_flush_boundaries_spelled_out():
    min_normal, half = 0x0080_0000, 0x3F00_0000
    # (1 + 2**-23) * 2**-126 minus 2**-126: exactly 2**-149, a subnormal -> +0, counted.
    p, fin, fout = dsp.add(np.uint32(min_normal + 1), np.uint32(min_normal | 0x8000_0000))
    assert int(p) == 0 and not fin and fout
    # -(that): -0 keeps its sign.
    p, _, fout = dsp.add(np.uint32(min_normal | 0x8000_0000), np.uint32(min_normal + 1 | 0))
    assert int(p) == 0 and fout
    p, _, fout = dsp.add(np.uint32((min_normal + 1) | 0x8000_0000), np.uint32(min_normal))
    assert int(p) == 0x8000_0000 and fout
    # min normal * 0.5 is subnormal -> flushed to +0 ...
    m, _, fo = dsp.mul(np.uint32(min_normal), np.uint32(half))
    assert int(m) == 0 and fo
    # ... but (2**-126 - 2**-150 rounded) = a product that rounds up to min normal is kept.
    m, _, fo = dsp.mul(np.uint32(0x00FF_FFFF), np.uint32(half))       # (2 - 2**-23) * 2**-127
    assert int(m) == min_normal and not fo
    # A subnormal operand is zero: subnormal * Inf is invalid (0 * Inf).
    m, fin, _ = dsp.mul(np.uint32(1), np.uint32(0x7F80_0000))
    assert int(m) & 0x7FFF_FFFF == 0x7FC0_0000 and fin
    # The multiplier's NaN carries sign(A) XOR sign(B); the adder's NaN is canonical.
    m, _, _ = dsp.mul(np.uint32(0x7FC0_0000), np.uint32(0xBF80_0000))
    assert int(m) == 0xFFC0_0000
    p, _, _ = dsp.add(np.uint32(0xFFC0_0000), np.uint32(0x3F80_0000))
    assert int(p) == 0x7FC0_0000
    # -0 is the identity of the accumulation, also for -0 products.
    p, _, _ = dsp.add(dsp.NEG_ZERO, np.uint32(0x8000_0000))
    assert int(p) == 0x8000_0000
    p, _, _ = dsp.add(dsp.NEG_ZERO, np.uint32(0))
    assert int(p) == 0


# --- dot products against exact rationals, folded term by term ----------------------------

def _value16(u):
    s, e, m = u >> 15, (u >> 10) & 0x1F, u & 0x3FF
    if e == 0:
        return None if m else Fraction(0), s            # None: a subnormal
    return (-1) ** s * (1024 + m) * pow2(e - 25), s


def _value32(u):
    s, e, m = u >> 31, (u >> 23) & 0xFF, u & 0x7F_FFFF
    if e == 0:
        return Fraction(0), s
    return (-1) ** s * ((1 << 23) + m) * pow2(e - 150), s


def oracle_dot(w, x):
    """Fold of a rounded multiply and a rounded add per term, with flushes, in ascending k,
    from -0 (finite operands)."""
    acc, acc_sign = Fraction(0), 1
    flushes = 0
    for wk, xk in zip(w, x):
        xv = _value16(xk)
        if xv[0] is None:                       # subnormal activation: a signed zero
            xv = (Fraction(0), xk >> 15)
        wv = _value32(wk)
        prod = xv[0] * wv[0]
        prod_sign = xv[1] ^ wv[1]
        if prod != 0:
            # The multiplier rounds M once (exact for the linear unit's operands,
            # not for these general binary32 weights).
            pbits = ref_round(prod, FP32)
            prod = Fraction(0) if (pbits >> 23) & 0xFF == 0 else _value32(pbits)[0]
        total = acc + prod
        if total == 0:
            # IEEE 754 §6.3 under RNE: -0 only if both addends are -0.
            sign = 1 if (acc == 0 and prod == 0 and acc_sign and prod_sign) else 0
            acc, acc_sign = Fraction(0), sign
            continue
        bits = ref_round(total, FP32)
        if (bits >> 23) & 0xFF == 0:
            flushes += 1
            acc, acc_sign = Fraction(0), bits >> 31
        else:
            acc, acc_sign = _value32(bits)
    if acc == 0:
        return acc_sign << 31, flushes
    return ref_round(acc, FP32), flushes


def _operands(rng, rows, tokens, K):
    w = (rng.standard_normal((rows, K)) * np.exp2(rng.integers(-20, 8, (rows, K)))).astype(np.float32)
    w[rng.random(w.shape) < 0.1] = 0.0
    w = w.view(np.uint32)
    x = rng.standard_normal((tokens, K)).astype(np.float16).view(np.uint16)
    pool = np.array([0x0001, 0x83FF, 0x0400, 0x8000, 0x0000, 0x7BFF, 0xFBFF], np.uint16)
    mask = rng.random(x.shape) < 0.15
    x[mask] = rng.choice(pool, int(mask.sum()))
    # Cancelling pairs drive partial sums through the flush range.
    w[:, 1::2] = np.where(rng.random((rows, K // 2)) < 0.3, w[:, 0:K - 1:2] ^ np.uint32(0x8000_0000),
                          w[:, 1::2])
    return w, x


def test_dot_matches_exact_fold():
    rng = seeded_rng("dsp_dot_exact")
    flushed = 0
    for K in (1, 2, 7, 33):
        w, x = _operands(rng, 5, 3, K)
        got, counts = dsp.dot(w, x, counts=True)
        n_sum = 0
        for r in range(w.shape[0]):
            for t in range(x.shape[0]):
                want, n = oracle_dot(w[r].tolist(), x[t].tolist())
                n_sum += n
                assert int(got[r, t]) == want, f"K={K} r={r} t={t}: {int(got[r, t]):#x} vs {want:#x}"
        assert counts.sums == n_sum
        flushed += n_sum
        assert counts.activations == int(np.count_nonzero(
            ((x >> 10) & 0x1F == 0) & (x & 0x3FF != 0))) * w.shape[0]


def is_finite32(bits):
    return (np.asarray(bits, np.uint32) >> 23) & 0xFF != 0xFF


def is_finite16(bits):
    return (np.asarray(bits, np.uint16) >> 10) & 0x1F != 0x1F


def _extreme_operands(rng, rows, tokens, K):
    """:func:`_operands` plus weights at binary32's ends (products that round to a
    subnormal and are flushed, that round up to ``2**-126`` and stay, subnormal weights)
    in every row, and Inf, NaN and overflowing weights and special activations in the
    first half of the rows and tokens: the other half stays finite for the
    exact-rational oracle."""
    w, x = _operands(rng, rows, tokens, K)
    tiny32 = np.array([0x0080_0000, 0x8080_0001, 0x0000_0001, 0x807F_FFFF, 0x0000_0000, 0x8000_0000,
                       0x0C80_0000, 0x0D7F_FFFF, 0x3F80_0000], np.uint32)
    huge32 = np.array([0x7F7F_FFFF, 0xFF7F_FFFF, 0x7F80_0000, 0xFF80_0000, 0x7FC0_0000], np.uint32)
    mask = rng.random(w.shape) < 0.25
    w[mask] = rng.choice(tiny32, int(mask.sum()))
    mask = rng.random(w.shape) < 0.15
    mask[rows // 2:] = False
    w[mask] = rng.choice(huge32, int(mask.sum()))
    pool16 = np.array([0x7C00, 0xFC00, 0x7E00, 0x0001, 0x03FF, 0x0400, 0x3C00, 0x8000], np.uint16)
    mask = rng.random(x.shape) < 0.1
    mask[tokens // 2:] = False
    x[mask] = rng.choice(pool16, int(mask.sum()))
    return w, x


def test_dot_native_equals_dot_and_the_exact_fold():
    # The exact-rational fold (oracle_dot) is the independent oracle; dot is the spec.
    rng = seeded_rng("dsp_dot_native")
    for K in (1, 2, 5, 16, 40):
        for operands in (_operands, _extreme_operands):
            w, x = operands(rng, 6, 4, K)
            got = dsp.dot_native(w, x)
            assert got.dtype == np.uint32 and got.shape == (6, 4)
            assert np.array_equal(got, dsp.dot(w, x)), f"K={K} {operands.__name__}"
            finite = 0
            for r in range(w.shape[0]):
                for t in range(x.shape[0]):
                    # oracle_dot folds finite operands to a finite sum; dot (checked op by
                    # op against SoftFloat) covers Inf, NaN and overflow above.
                    if (not is_finite32(w[r]).all() or not is_finite16(x[t]).all()
                            or not is_finite32(got[r, t])):
                        continue
                    finite += 1
                    want, _ = oracle_dot(w[r].tolist(), x[t].tolist())
                    assert int(got[r, t]) == want, (f"K={K} r={r} t={t}: {int(got[r, t]):#x} vs "
                                                    f"{want:#x}")
            assert finite > 0, f"K={K} {operands.__name__}: no finite dot product checked"


def test_dot_native_flushes_tiny_sums_and_checks_k():
    one = np.uint16(0x3C00)
    w = np.array([[0x0080_0001, 0x8080_0000]], np.uint32)
    assert int(dsp.dot_native(w, np.array([[one, one]]))[0, 0]) == 0
    with pytest.raises(ValueError, match=r"dot_native: weights have K = 2 inputs, activations K = 3"):
        dsp.dot_native(w, np.zeros((1, 3), np.uint16))


def test_dot_flush_fires_on_tiny_sums():
    # 2**-126 * (1 + 2**-23) - 2**-126 as products of FP16 x FP32 operands.
    one = np.uint16(0x3C00)
    w = np.array([[0x0080_0001, 0x8080_0000]], np.uint32)
    y, c = dsp.dot(w, np.array([[one, one]]), counts=True)
    assert int(y[0, 0]) == 0 and c.sums == 1


def test_dot_specials():
    one16, inf16, nan16 = 0x3C00, 0x7C00, 0x7E00
    one32 = 0x3F80_0000
    w = np.array([[one32, 0xBF80_0000], [0, one32]], np.uint32)
    x = np.array([[inf16, inf16], [nan16, one16], [inf16, one16]], np.uint16)
    y = dsp.dot(w, x)
    assert int(y[0, 0]) == 0x7FC0_0000       # +Inf + -Inf
    assert int(y[0, 1]) == 0x7FC0_0000       # NaN in
    assert int(y[1, 2]) == 0x7FC0_0000       # 0 * Inf
    assert int(y[0, 2]) == 0x7F80_0000       # Inf * 1 + (-1) * 1 = Inf
    y2 = dsp.dot(np.array([[one32]], np.uint32), np.array([[inf16]], np.uint16))
    assert int(y2[0, 0]) == 0x7F80_0000


def test_dot_is_independent_of_the_batch():
    rng = seeded_rng("dsp_batch")
    w, x = _operands(rng, 4, 6, 20)
    together = dsp.dot(w, x)
    for t in range(x.shape[0]):
        assert np.array_equal(dsp.dot(w, x[t:t + 1])[:, 0], together[:, t])


# --- BSFP operands --------------------------------------------------------------------------

def _tensor(rng, shape, group_size=None, scale=0.1):
    w = (rng.standard_normal(shape) * scale).astype(np.float16)
    w.flat[0] = np.float16(1e-7)            # a subnormal weight
    return w, bsfp.encode(w.view(np.uint16), config=bsfp.BSFPConfig(group_size=group_size))


@pytest.mark.parametrize("group_size,scale", [(None, 0.1), (128, 0.1), (None, 40.0)])
def test_full_weight_operand_is_the_original_weight(group_size, scale):
    rng = seeded_rng("dsp_full_operand")
    w, t = _tensor(rng, (6, 256), group_size, scale)
    op, flushed = dsp.full_weight_operand(t)
    # The weights the BSFP planes hold: the originals, except those the scale
    # itself rounded (counted by encode's ScalingReport).
    held = bsfp.reconstruct(nibbles=t.nibbles, residue=t.residue, scales=t.scales,
                            config=t.config).view(np.float16).astype(np.float64)
    got = op.view(np.float32).astype(np.float64)
    assert np.array_equal(got[~flushed], held[~flushed])
    assert np.all(got[flushed] == 0)
    # Scaled words that are subnormal are exactly the nonzero held weights below 2**(k-14).
    k = t.scale_per_weight().astype(np.float64)
    assert np.array_equal(flushed, (held != 0) & (np.abs(held) < np.exp2(k - 14)))
    if scale < 1:
        assert flushed.reshape(-1)[0]
    assert np.array_equal(held[:, 1:], w[:, 1:].astype(np.float64)) or t.report.inexact


def test_draft_weight_operand_is_the_draft_value():
    rng = seeded_rng("dsp_draft_operand")
    _, t = _tensor(rng, (5, 200), 128)
    op = dsp.draft_weight_operand(t).view(np.float32).astype(np.float64)
    assert np.array_equal(op, bsfp.draft_dequantize(t).value)


def test_full_dot_is_close_to_exact():
    """The contract's only rounding is in its K - 1 additions: |error| <= (K-1) u sum|w x| (+ flushes)."""
    rng = seeded_rng("dsp_vs_exact")
    w, t = _tensor(rng, (8, 512))
    x = rng.standard_normal(512).astype(np.float16).view(np.uint16)
    y = dsp.full_dot(t, x).view(np.float32).astype(np.float64)
    exact = bsfp.full_dot(t, x).view(np.float32).astype(np.float64)
    bound = 511 * 2.0 ** -24 * (np.abs(w.astype(np.float64)) @ np.abs(x.view(np.float16).astype(np.float64)))
    assert np.all(np.abs(y - exact) <= bound + 2.0 ** -24 * np.abs(exact))
    assert not np.array_equal(y, exact)      # the contracts do differ
