"""Exact dot products: the accumulation contract of every PE array (``docs/numerics.md``).

A dot product is computed the way the hardware computes it, in two stages:

1. **Product stage** (:func:`product_terms`): every product ``a[i] * b[i]`` is
   exact. It is kept as an integer significand and an exponent (a :class:`Terms`
   record), never rounded.
2. **Accumulate-and-round stage** (:func:`accumulate`, :func:`round_accumulator`,
   together :func:`round_sum`): the terms are added exactly in a two's
   complement fixed-point accumulator and the sum is rounded *once* to the output
   format with roundTiesToEven (IEEE 754 §4.3.1), overflow to ±Inf (§7.4) and
   gradual underflow (§7.5).

Because nothing is rounded before the end, the result does not depend on the
summation order, the tiling or the array shape: partial accumulators of tiles
add up (:func:`merge`) to the accumulator of the whole vector. Any product
kind (FP16 x FP16, draft weight ±2**e x FP16, ...) only has to produce
:class:`Terms`; the second stage is shared.

Special values (the RTL carries them as flags next to the accumulator):

* any NaN term (a NaN operand or ``Inf * 0``), or +Inf and -Inf terms both
  present -> the output format's canonical NaN (positive, quiet bit only);
* otherwise any Inf term -> that Inf;
* an exact zero sum -> -0 only if there is at least one term and every term is
  a zero with sign 1, otherwise +0. This is IEEE 754 §6.3 for ``x + y`` under
  roundTiesToEven extended to n terms: a left-to-right chain of correctly
  rounded additions of the same terms would give the same zero sign.
* an empty vector (n = 0) sums to +0.

The accumulator width the RTL needs is given by :class:`AccumulatorSpec`.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .fp import FP16, FP32, FPFormat, round_to, _as_bits, _unpack
from .validate import check_int

__all__ = [
    "Terms", "Accumulator", "AccumulatorSpec", "acc_width", "accumulator_spec",
    "product_terms", "accumulate", "merge", "round_accumulator", "round_sum", "dot",
    "LIMB_BITS",
]

LIMB_BITS = 32
"""Bits per limb of the golden accumulator (a modelling choice, not an RTL width)."""

_LIMB_MASK = (1 << LIMB_BITS) - 1

# Per-limb partial sums get up to three contributions < 2**33 per term; keeping
# n below 2**28 keeps them inside int64 before carry propagation.
_MAX_TERMS = 1 << 28

_CHUNK_ELEMENTS = 1 << 18


class Terms(NamedTuple):
    """Exact terms of a sum, shape ``(..., n)``: value ``(-1)**sign * sig * 2**exp``.

    Attributes
    ----------
    sign : numpy.ndarray of uint8
        Sign bit of each term (also for zero and Inf terms).
    sig : numpy.ndarray of uint64
        Integer significand of the exact term; 0 for zero, Inf and NaN terms.
    exp : numpy.ndarray of int32
        Exponent of ``sig``'s LSB.
    nan : numpy.ndarray of bool
        The term is NaN (a NaN operand, or ``Inf * 0``).
    inf : numpy.ndarray of bool
        The term is ±Inf, with its sign in ``sign``; never set together with ``nan``.
    """

    sign: np.ndarray
    sig: np.ndarray
    exp: np.ndarray
    nan: np.ndarray
    inf: np.ndarray


class Accumulator(NamedTuple):
    """An exact partial sum, as the hardware accumulator plus its special-value flags.

    Attributes
    ----------
    limbs : numpy.ndarray of int64, shape ``(..., L)``
        Little-endian two's complement fixed-point value
        ``sum(limbs[..., k] * 2**(32*k + lsb_exp))``. Normalized: limbs
        ``0 .. L-2`` are in ``[0, 2**32)``, the top limb is 0 or -1 (sign).
    lsb_exp : int
        Weight exponent of bit 0 (the accumulator LSB).
    count : int
        Number of terms accumulated per row.
    nan : numpy.ndarray of bool
        A NaN term was seen.
    pos_inf, neg_inf : numpy.ndarray of bool
        A +Inf / -Inf term was seen.
    all_neg_zero : numpy.ndarray of bool
        Every term so far was a zero with sign 1 (vacuously true when count = 0).
    """

    limbs: np.ndarray
    lsb_exp: int
    count: int
    nan: np.ndarray
    pos_inf: np.ndarray
    neg_inf: np.ndarray
    all_neg_zero: np.ndarray


@dataclass(frozen=True, kw_only=True)
class AccumulatorSpec:
    """Width of an exact fixed-point accumulator for n terms.

    Every term must be an integer multiple of ``2**lsb_exp`` with magnitude
    strictly below ``2**msb_exp``. In units of the LSB each term is then an
    integer of magnitude at most ``2**(msb_exp - lsb_exp) - 1``, a sum of n of
    them has magnitude below ``n * 2**(msb_exp - lsb_exp) <=
    2**(msb_exp - lsb_exp + ceil(log2 n))``, and a two's complement register
    holding it needs::

        width = (msb_exp - lsb_exp) + ceil(log2 n) + 1

    bits: ``msb_exp`` integer bits, ``-lsb_exp`` fraction bits (when
    ``lsb_exp < 0``), ``ceil(log2 n)`` guard bits against carries, one sign bit.

    Parameters
    ----------
    lsb_exp : int
        Exponent of the accumulator LSB (the finest term quantum).
    msb_exp : int
        Every term magnitude is < ``2**msb_exp``; must exceed ``lsb_exp``.
    n : int
        Number of terms summed into one accumulator, >= 1.
    """

    lsb_exp: int
    msb_exp: int
    n: int

    def __post_init__(self):
        check_int("AccumulatorSpec", "lsb_exp", self.lsb_exp)
        check_int("AccumulatorSpec", "msb_exp", self.msb_exp, min=self.lsb_exp + 1)
        check_int("AccumulatorSpec", "n", self.n, min=1)

    @property
    def magnitude_bits(self):
        """Bits of one term in LSB units, ``msb_exp - lsb_exp``."""
        return self.msb_exp - self.lsb_exp

    @property
    def guard_bits(self):
        """``ceil(log2 n)``: headroom for the carries of n additions."""
        return (self.n - 1).bit_length()

    @property
    def width(self):
        """Total two's complement accumulator width in bits."""
        return self.magnitude_bits + self.guard_bits + 1

    @property
    def fraction_bits(self):
        """Bits below the binary point, ``max(0, -lsb_exp)``."""
        return max(0, -self.lsb_exp)

    @property
    def integer_bits(self):
        """Bits above the binary point excluding sign, ``width - 1 - fraction_bits``."""
        return self.width - 1 - self.fraction_bits


def acc_width(*, lsb_exp, msb_exp, n):
    """Return ``AccumulatorSpec(lsb_exp=lsb_exp, msb_exp=msb_exp, n=n).width``."""
    return AccumulatorSpec(lsb_exp=lsb_exp, msb_exp=msb_exp, n=n).width


def accumulator_spec(fmt_in, n):
    """Accumulator for n exact products of two ``fmt_in`` numbers.

    The smallest nonzero product is the square of the smallest subnormal,
    ``2**(2 * (emin - man_bits))``, and every product is a multiple of it; the
    largest product magnitude is ``max_finite**2 < 2**(2 * (emax + 1))``.
    For FP16: ``lsb_exp = -48``, ``msb_exp = 32``.

    Parameters
    ----------
    fmt_in : FPFormat
        Format of both multiplicands.
    n : int
        Vector length, >= 1.

    Returns
    -------
    AccumulatorSpec
    """
    if not isinstance(fmt_in, FPFormat):
        raise TypeError(f"accumulator_spec.fmt_in must be an FPFormat, not {fmt_in!r}")
    n = check_int("accumulator_spec", "n", n, min=1)
    return AccumulatorSpec(lsb_exp=2 * (fmt_in.emin - fmt_in.man_bits),
                           msb_exp=2 * (fmt_in.emax + 1), n=n)


def product_terms(a, b, fmt_in):
    """Exact elementwise products of two ``fmt_in`` arrays (the multiplier stage).

    Parameters
    ----------
    a, b : array_like of int
        Bit patterns of ``fmt_in``, broadcast to a common shape ``(..., n)``
        with at least one dimension.
    fmt_in : FPFormat

    Returns
    -------
    Terms
        ``sig = sig_a * sig_b`` (at most 2 * precision bits, exact),
        ``exp = exp_a + exp_b``, ``sign = sign_a XOR sign_b``; ``nan`` where an
        operand is NaN or the product is ``Inf * 0``; ``inf`` where an operand
        is Inf and the term is not NaN.
    """
    if not isinstance(fmt_in, FPFormat):
        raise TypeError(f"product_terms.fmt_in must be an FPFormat, not {fmt_in!r}")
    a = _as_bits("product_terms", "a", a, fmt_in)
    b = _as_bits("product_terms", "b", b, fmt_in)
    a, b = np.broadcast_arrays(a, b)
    if a.ndim < 1:
        raise ValueError("product_terms.a and product_terms.b must broadcast to at least "
                         "one dimension (..., n)")
    sa, ma, ea, za, ia, na = _unpack(a, fmt_in)
    sb, mb, eb, zb, ib, nb = _unpack(b, fmt_in)
    nan = na | nb | (ia & zb) | (za & ib)
    return Terms(sign=sa ^ sb, sig=ma.astype(np.uint64) * mb, exp=ea + eb,
                 nan=nan, inf=(ia | ib) & ~nan)


def _check_terms(owner, terms):
    if not isinstance(terms, Terms):
        raise TypeError(f"{owner}.terms must be a Terms record, not {type(terms).__name__}")
    sign, sig, exp, nan, inf = (np.asarray(x) for x in terms)
    shape = np.broadcast_shapes(sign.shape, sig.shape, exp.shape, nan.shape, inf.shape)
    if len(shape) < 1:
        raise ValueError(f"{owner}.terms must have shape (..., n) with at least one dimension")
    bc = lambda x, dt: np.broadcast_to(x, shape).astype(dt, copy=False)  # noqa: E731
    return (bc(sign, np.uint8), bc(sig, np.uint64), bc(exp, np.int64),
            bc(nan, bool), bc(inf, bool))


def _normalize(limbs):
    """Propagate carries in place so limbs 0..L-2 lie in [0, 2**32) (value unchanged)."""
    for k in range(limbs.shape[-1] - 1):
        carry = limbs[..., k] >> LIMB_BITS   # arithmetic shift: floor division
        limbs[..., k] &= _LIMB_MASK
        limbs[..., k + 1] += carry
    return limbs


def accumulate(terms, *, lsb_exp=None):
    """Add terms exactly along the last axis into a fixed-point accumulator.

    Parameters
    ----------
    terms : Terms
        Shape ``(..., n)``.
    lsb_exp : int, optional
        Accumulator LSB exponent. Partial accumulators can only be merged when
        they share it; pass ``AccumulatorSpec.lsb_exp`` to model the RTL
        register. By default, the exponent of the finest nonzero finite term
        of the whole array (the rounded result does not depend on it).

    Returns
    -------
    Accumulator
        Batch shape ``(...)``. Enough limbs are allocated for the sum to never
        overflow (the golden model is unbounded; :class:`AccumulatorSpec`
        gives the width the RTL needs).

    Raises
    ------
    ValueError
        If a nonzero finite term lies below ``lsb_exp``, or n >= 2**28.

    Notes
    -----
    Each term is split across three 32-bit limbs at its bit offset and the
    signed pieces are scatter-added (``numpy.add.at``) into int64 limbs; one
    carry-propagation pass per limb (a loop over limbs, vectorized over the
    batch) then normalizes the two's complement value.
    """
    sign, sig, exp, nan, inf = _check_terms("accumulate", terms)
    batch, n = sig.shape[:-1], sig.shape[-1]
    check_int("accumulate", "n", n, max=_MAX_TERMS - 1)
    live = (sig != 0) & ~nan & ~inf
    if lsb_exp is None:
        lsb_exp = int(exp[live].min()) if live.any() else 0
    else:
        lsb_exp = check_int("accumulate", "lsb_exp", lsb_exp)
        if np.any(live & (exp < lsb_exp)):
            raise ValueError(f"accumulate.lsb_exp={lsb_exp} is above the LSB of a nonzero term "
                             f"(finest term exponent {int(exp[live].min())})")
    offset = np.where(live, exp - lsb_exp, 0)
    sig = np.where(live, sig, np.uint64(0))
    limb = offset // LIMB_BITS
    shift = (offset % LIMB_BITS).astype(np.uint64)
    sig_bits = int(sig.max()).bit_length() if sig.size else 0
    max_limb = int(limb.max()) if limb.size else 0
    mask = np.uint64(_LIMB_MASK)
    if sig_bits + LIMB_BITS - 1 <= 64:
        # sig << shift fits 64 bits: two limb-sized pieces (FP16 products, 22 bits).
        wide = sig << shift
        pieces = [wide & mask, wide >> np.uint64(LIMB_BITS)]
    else:
        lo = (sig & mask) << shift      # < 2**63
        hi = (sig >> np.uint64(LIMB_BITS)) << shift
        pieces = [lo & mask, (lo >> np.uint64(LIMB_BITS)) + (hi & mask), hi >> np.uint64(LIMB_BITS)]
    # |sum| < n * 2**(32 * max_limb + 31 + sig_bits); one more limb keeps the
    # top limb a pure sign limb (0 or -1) after carry propagation.
    value_bits = LIMB_BITS * max_limb + LIMB_BITS - 1 + sig_bits + n.bit_length()
    nlimbs = max(value_bits // LIMB_BITS + 2, max_limb + len(pieces))
    nrows = int(np.prod(batch, dtype=np.int64))
    # Positive and negative terms scatter into separate halves of each row
    # (magnitudes only, no negation pass); the halves are subtracted after.
    row = (np.arange(nrows, dtype=np.int64) * (2 * nlimbs)).reshape(batch + (1,))
    index = (row + limb + sign.astype(np.int64) * nlimbs).ravel()
    flat = np.zeros(nrows * 2 * nlimbs, dtype=np.int64)
    for k, piece in enumerate(pieces):
        np.add.at(flat, index + k if k else index, piece.ravel().astype(np.int64))
    halves = flat.reshape(batch + (2, nlimbs))
    limbs = _normalize(halves[..., 0, :] - halves[..., 1, :])
    return Accumulator(
        limbs=limbs, lsb_exp=lsb_exp, count=n,
        nan=nan.any(axis=-1),
        pos_inf=(inf & (sign == 0)).any(axis=-1),
        neg_inf=(inf & (sign == 1)).any(axis=-1),
        all_neg_zero=(~nan & ~inf & (sig == 0) & (sign == 1)).all(axis=-1))


def merge(x, y):
    """Exact sum of two partial accumulators (e.g. two tiles of one vector).

    Parameters
    ----------
    x, y : Accumulator
        Same ``lsb_exp``; batch shapes broadcast.

    Returns
    -------
    Accumulator
        The accumulator of the concatenated terms.
    """
    for field, acc in (("x", x), ("y", y)):
        if not isinstance(acc, Accumulator):
            raise TypeError(f"merge.{field} must be an Accumulator, not {type(acc).__name__}")
    if x.lsb_exp != y.lsb_exp:
        raise ValueError(f"merge.y.lsb_exp must equal merge.x.lsb_exp={x.lsb_exp}, "
                         f"not {y.lsb_exp}")
    # Appending zero limbs leaves sum(limb_k * 2**(32k)) unchanged; one more
    # limb than the wider operand holds the carry of the addition.
    nlimbs = max(x.limbs.shape[-1], y.limbs.shape[-1]) + 1
    pad = lambda a: np.concatenate(  # noqa: E731
        [a, np.zeros(a.shape[:-1] + (nlimbs - a.shape[-1],), np.int64)], axis=-1)
    limbs = _normalize(pad(x.limbs) + pad(y.limbs))
    return Accumulator(limbs=limbs, lsb_exp=x.lsb_exp, count=x.count + y.count,
                       nan=x.nan | y.nan, pos_inf=x.pos_inf | y.pos_inf,
                       neg_inf=x.neg_inf | y.neg_inf,
                       all_neg_zero=x.all_neg_zero & y.all_neg_zero)


def round_accumulator(acc, fmt_out):
    """Round an accumulator once to ``fmt_out`` (leading-one detect + RNE with sticky).

    Parameters
    ----------
    acc : Accumulator
    fmt_out : FPFormat

    Returns
    -------
    numpy.ndarray of ``fmt_out.dtype``
        Shape ``acc.limbs.shape[:-1]``; special values and the zero sign per
        the module rules.

    Notes
    -----
    The magnitude's highest nonzero limb h and the limb below it form a
    64-bit window with at least 33 significant bits (more than
    ``man_bits + 2`` for every :class:`FPFormat`), and the OR of all lower limbs
    is the sticky bit, which is all :func:`golden.fp.round_to` needs.
    """
    if not isinstance(acc, Accumulator):
        raise TypeError(f"round_accumulator.acc must be an Accumulator, not {type(acc).__name__}")
    if not isinstance(fmt_out, FPFormat):
        raise TypeError(f"round_accumulator.fmt_out must be an FPFormat, not {fmt_out!r}")
    limbs = acc.limbs
    negative = limbs[..., -1] < 0
    # Negating every limb negates the value; renormalizing yields the magnitude.
    mag = _normalize(np.where(negative[..., None], -limbs, limbs))
    # A zero limb below limb 0 gives every row a window (h, h - 1).
    mag = np.concatenate([np.zeros(mag.shape[:-1] + (1,), np.int64), mag], axis=-1)
    nz = mag != 0
    nlimbs = mag.shape[-1]
    h = np.where(nz.any(axis=-1), nlimbs - 1 - np.argmax(nz[..., ::-1], axis=-1), 1)
    h = np.maximum(h, 1)[..., None]
    hi = np.take_along_axis(mag, h, axis=-1)[..., 0].astype(np.uint64)
    lo = np.take_along_axis(mag, h - 1, axis=-1)[..., 0].astype(np.uint64)
    sig = (hi << np.uint64(LIMB_BITS)) | lo
    below = np.logical_or.accumulate(nz, axis=-1)
    sticky = np.where(h[..., 0] >= 2,
                      np.take_along_axis(below, np.maximum(h - 2, 0), axis=-1)[..., 0], False)
    # Padded limb i carries weight 2**(lsb_exp + 32 * (i - 1)); the window LSB is limb h - 1.
    exp = acc.lsb_exp + LIMB_BITS * (h[..., 0].astype(np.int64) - 2)
    zero_sign = acc.all_neg_zero & (acc.count > 0)
    sign = np.where(sig == 0, zero_sign, negative).astype(np.uint8)
    out = round_to(sign, sig, exp, fmt_out, sticky=sticky)
    inf = acc.pos_inf | acc.neg_inf
    out = np.where(inf, np.where(acc.neg_inf, fmt_out.sign_mask | fmt_out.inf_bits,
                                 fmt_out.inf_bits), out)
    nan = acc.nan | (acc.pos_inf & acc.neg_inf)
    out = np.where(nan, fmt_out.nan_bits, out)
    return out.astype(fmt_out.dtype)


def round_sum(terms, fmt_out):
    """Exact sum of terms along the last axis, rounded once to ``fmt_out``.

    Parameters
    ----------
    terms : Terms
        Shape ``(..., n)``; n = 0 is allowed and sums to +0.
    fmt_out : FPFormat

    Returns
    -------
    numpy.ndarray of ``fmt_out.dtype``
        Shape ``(...)``. NaN if any term is NaN or +Inf and -Inf are both
        present (canonical NaN); else ±Inf if an Inf term is present; else the
        exact sum rounded to nearest even, with an exact zero being -0 only when
        n >= 1 and every term is a zero with sign 1.
    """
    if not isinstance(terms, Terms):
        raise TypeError(f"round_sum.terms must be a Terms record, not {type(terms).__name__}")
    return round_accumulator(accumulate(terms), fmt_out)


def dot(a, b, *, fmt_in=FP16, fmt_out=FP32):
    """Exact dot product along the last axis, rounded once: the PE-array contract.

    Parameters
    ----------
    a, b : array_like of int
        Bit patterns of ``fmt_in``, broadcast to ``(..., n)``; leading
        dimensions are batch dimensions.
    fmt_in : FPFormat, default FP16
    fmt_out : FPFormat, default FP32
        FP32 and FP16 are the formats the hardware emits; any FPFormat works.

    Returns
    -------
    numpy.ndarray of ``fmt_out.dtype``
        ``round_sum(product_terms(a, b, fmt_in), fmt_out)``, shape ``(...)``.
    """
    if not isinstance(fmt_out, FPFormat):
        raise TypeError(f"dot.fmt_out must be an FPFormat, not {fmt_out!r}")
    if not isinstance(fmt_in, FPFormat):
        raise TypeError(f"dot.fmt_in must be an FPFormat, not {fmt_in!r}")
    a = _as_bits("dot", "a", a, fmt_in)
    b = _as_bits("dot", "b", b, fmt_in)
    a, b = np.broadcast_arrays(a, b)
    if a.ndim < 1:
        raise ValueError("dot.a and dot.b must broadcast to at least one dimension (..., n)")
    batch, n = a.shape[:-1], a.shape[-1]
    rows_total = int(np.prod(batch, dtype=np.int64))
    a, b = a.reshape(rows_total, n), b.reshape(rows_total, n)
    out = np.empty(a.shape[0], dtype=fmt_out.dtype)
    # Rows are independent, so blocks of about 2**18 elements give the same
    # bits while keeping the int64 temporaries in cache (measured 2x faster).
    step = max(1, _CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, a.shape[0], step):
        rows = slice(start, start + step)
        out[rows] = round_sum(product_terms(a[rows], b[rows], fmt_in), fmt_out)
    return out.reshape(batch)
