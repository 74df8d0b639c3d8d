"""Bit-exact IEEE 754 binary floating point on raw bit patterns.

This module is the numerical specification of every floating-point operator in
specgen. All functions take and return *bit patterns* (``numpy`` unsigned integer
arrays: ``uint16`` for FP16/BF16, ``uint32`` for FP32) and are vectorized: there
is no Python loop per element. The RTL must reproduce them bit for bit.

Rules shared by every operation (IEEE 754-2019 references in brackets):

* Rounding is round-to-nearest, ties-to-even (roundTiesToEven, §4.3.1), the
  only rounding mode the hardware implements.
* Subnormals are honoured on input and output (gradual underflow, §7.5); nothing
  is flushed to zero.
* Overflow under roundTiesToEven yields ±Inf with the sign of the exact result
  (§7.4).
* Any NaN operand, ``Inf * 0`` and ``(+Inf) + (-Inf)`` give the *canonical NaN*
  of the result format (§7.2): sign 0, exponent all ones, only the most
  significant fraction bit set (``0x7E00`` for FP16, ``0x7FC00000`` for FP32,
  ``0x7FC0`` for BF16). NaN payloads and signalling NaNs are not propagated
  (§6.2 makes payload propagation a "should"); this is the RISC-V convention and
  saves the hardware a NaN multiplexer. No exception flags are produced.
* Signs of zero follow §6.3: an exact zero sum of operands of opposite sign is
  +0, ``(-0) + (-0) = -0``, and the sign of a product is the XOR of the operand
  signs, also for zero and Inf results.

Detecting tininess (before or after rounding, §7.5) only decides whether the
underflow *flag* is raised; it never changes result bits, and since no flags are
produced the choice is irrelevant here.
"""

import enum
from dataclasses import dataclass

import numpy as np

from .validate import check_int

__all__ = [
    "FPFormat", "FP16", "FP32", "BF16", "FORMATS", "FPClass",
    "classify", "decode", "round_to", "mul", "add", "convert",
]


@dataclass(frozen=True, kw_only=True)
class FPFormat:
    """An IEEE 754 binary interchange-style format with ``exp_bits`` and ``man_bits``.

    The encoding is ``sign | exponent field (exp_bits) | fraction (man_bits)``
    with a hidden leading bit for normal numbers, exactly as IEEE 754 §3.4
    defines it for binary16/binary32; the same rules are applied to any width.

    Parameters
    ----------
    exp_bits : int
        Width of the biased exponent field, in [2, 11]. The upper bound keeps
        term exponents inside ``int32`` and dot-product accumulators finite.
    man_bits : int
        Width of the stored fraction field (precision minus one), >= 1, so that
        Inf and NaN are distinguishable. ``1 + exp_bits + man_bits`` must be
        at most 32.

    Raises
    ------
    TypeError, ValueError
        If a field is not an integer in its allowed range; the message names it.
    """

    exp_bits: int
    man_bits: int

    def __post_init__(self):
        check_int("FPFormat", "exp_bits", self.exp_bits, min=2, max=11)
        check_int("FPFormat", "man_bits", self.man_bits, min=1, max=30)
        if 1 + self.exp_bits + self.man_bits > 32:
            raise ValueError(
                f"FPFormat width 1 + exp_bits + man_bits must be <= 32, "
                f"not {1 + self.exp_bits + self.man_bits} "
                f"(exp_bits={self.exp_bits!r}, man_bits={self.man_bits!r})")

    @property
    def width(self):
        """Total encoding width in bits."""
        return 1 + self.exp_bits + self.man_bits

    @property
    def precision(self):
        """Significand precision p in bits, hidden bit included."""
        return self.man_bits + 1

    @property
    def bias(self):
        """Exponent bias ``2**(exp_bits - 1) - 1``."""
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def emax(self):
        """Largest unbiased exponent of a finite number (equals the bias)."""
        return self.bias

    @property
    def emin(self):
        """Smallest unbiased exponent of a normal number, ``1 - emax``."""
        return 1 - self.emax

    @property
    def exp_mask(self):
        """All-ones exponent field value (Inf/NaN), unshifted."""
        return (1 << self.exp_bits) - 1

    @property
    def man_mask(self):
        """Mask of the fraction field."""
        return (1 << self.man_bits) - 1

    @property
    def sign_mask(self):
        """Bit pattern with only the sign bit set."""
        return 1 << (self.width - 1)

    @property
    def dtype(self):
        """Smallest numpy unsigned dtype holding one encoding."""
        for dt in (np.uint8, np.uint16, np.uint32):
            if self.width <= np.dtype(dt).itemsize * 8:
                return np.dtype(dt)
        raise AssertionError("unreachable: width <= 32 is validated")

    @property
    def inf_bits(self):
        """Encoding of +Inf; -Inf is ``inf_bits | sign_mask``."""
        return self.exp_mask << self.man_bits

    @property
    def nan_bits(self):
        """The canonical NaN: positive, quiet bit (fraction MSB) only."""
        return self.inf_bits | (1 << (self.man_bits - 1))

    @property
    def max_bits(self):
        """Encoding of the largest finite positive number."""
        return self.inf_bits - 1

    @property
    def min_subnormal_bits(self):
        """Encoding of the smallest positive subnormal, ``2**(emin - man_bits)``."""
        return 1

    @property
    def min_normal_bits(self):
        """Encoding of the smallest positive normal, ``2**emin``."""
        return 1 << self.man_bits

    @property
    def one_bits(self):
        """Encoding of +1.0."""
        return self.bias << self.man_bits

    def __str__(self):
        return f"e{self.exp_bits}m{self.man_bits}"


FP16 = FPFormat(exp_bits=5, man_bits=10)
"""IEEE 754 binary16."""
FP32 = FPFormat(exp_bits=8, man_bits=23)
"""IEEE 754 binary32."""
BF16 = FPFormat(exp_bits=8, man_bits=7)

#: The formats a config names by string (``LinearConfig.fmt_out``): name -> format.
FORMATS = {"fp32": FP32, "fp16": FP16}
"""bfloat16: binary32's exponent range with an 8-bit significand."""


class FPClass(enum.IntEnum):
    """Class codes returned by :func:`classify` (IEEE 754 §5.7.2, signs folded)."""

    ZERO = 0
    SUBNORMAL = 1
    NORMAL = 2
    INF = 3
    NAN = 4


def _check_fmt(owner, field, fmt):
    if not isinstance(fmt, FPFormat):
        raise TypeError(f"{owner}.{field} must be an FPFormat, not {fmt!r}")
    return fmt


def _as_bits(owner, field, bits, fmt):
    """Return ``bits`` as an array of ``fmt.dtype`` after checking it is an encoding."""
    arr = np.asarray(bits)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{owner}.{field} must be an integer array of {fmt} bit patterns, "
                        f"not dtype {arr.dtype}")
    fits = np.issubdtype(arr.dtype, np.unsignedinteger) and arr.dtype.itemsize * 8 <= fmt.width
    if not fits and arr.size and (arr.min() < 0 or int(arr.max()) >> fmt.width):
        raise ValueError(f"{owner}.{field} must hold {fmt} bit patterns in "
                         f"[0, {(1 << fmt.width) - 1:#x}]")
    return arr.astype(fmt.dtype, copy=False)


def _unpack(bits, fmt):
    """Split checked encodings into the fields every datapath starts from.

    Returns ``(sign uint8, sig uint32, exp int32, zero, inf, nan)`` with the
    :func:`decode` conventions (``sig = exp = 0`` for Inf and NaN).
    """
    b = bits.astype(np.uint32, copy=False)
    sign = (b >> np.uint32(fmt.width - 1)).astype(np.uint8)
    efield = ((b >> np.uint32(fmt.man_bits)) & np.uint32(fmt.exp_mask)).astype(np.int32)
    frac = b & np.uint32(fmt.man_mask)
    special = efield == fmt.exp_mask
    bottom = efield == 0
    fz = frac == 0
    normal = ~(bottom | special)
    sig = np.where(normal, frac | np.uint32(1 << fmt.man_bits), np.where(special, np.uint32(0), frac))
    # A subnormal has the exponent of the smallest normal (IEEE 754 §3.4 d).
    exp = np.where(normal, efield - (fmt.bias + fmt.man_bits),
                   np.where(special, 0, fmt.emin - fmt.man_bits)).astype(np.int32)
    return sign, sig, exp, bottom & fz, special & fz, special & ~fz


def classify(bits, fmt):
    """Classify encodings.

    Parameters
    ----------
    bits : array_like of int
        Bit patterns of ``fmt``.
    fmt : FPFormat

    Returns
    -------
    numpy.ndarray of uint8
        :class:`FPClass` codes, same shape as ``bits``. The sign is not part of
        the class; read it from the top bit.
    """
    fmt = _check_fmt("classify", "fmt", fmt)
    bits = _as_bits("classify", "bits", bits, fmt)
    _, _, _, zero, inf, nan = _unpack(bits, fmt)
    subnormal = ((bits.astype(np.uint32) >> np.uint32(fmt.man_bits)) & np.uint32(fmt.exp_mask)) == 0
    cls = np.full(bits.shape, FPClass.NORMAL, dtype=np.uint8)
    cls[subnormal] = FPClass.SUBNORMAL
    cls[zero] = FPClass.ZERO
    cls[inf] = FPClass.INF
    cls[nan] = FPClass.NAN
    return cls


def decode(bits, fmt):
    """Decode encodings into exact integer triples.

    Parameters
    ----------
    bits : array_like of int
        Bit patterns of ``fmt``.
    fmt : FPFormat

    Returns
    -------
    sign : numpy.ndarray of uint8
        The sign bit (also meaningful for zeros, Inf and NaN).
    sig : numpy.ndarray of uint64
        Integer significand with the hidden bit: ``2**man_bits | fraction`` for
        normals, ``fraction`` for subnormals, 0 for zeros. 0 for Inf and NaN.
    exp : numpy.ndarray of int32
        Exponent of the significand's LSB: ``efield - bias - man_bits`` for
        normals and ``emin - man_bits`` for subnormals and zeros (a subnormal has
        the exponent of the smallest normal, IEEE 754 §3.4 d). 0 for Inf and NaN.

    Notes
    -----
    For every finite input the value is exactly ``(-1)**sign * sig * 2**exp``.
    Inf and NaN decode to ``sig = 0, exp = 0``: they carry no value, and callers
    must take them from :func:`classify`.
    """
    fmt = _check_fmt("decode", "fmt", fmt)
    bits = _as_bits("decode", "bits", bits, fmt)
    sign, sig, exp, _, _, _ = _unpack(bits, fmt)
    return sign, sig.astype(np.uint64), exp


def _bit_length(x):
    """Vectorized ``int.bit_length`` for uint64 arrays (binary search on shifts)."""
    x = np.asarray(x, dtype=np.uint64)
    n = np.zeros(x.shape, dtype=np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        big = x >= np.uint64(1 << s)
        n += np.where(big, s, 0)
        x = np.where(big, x >> np.uint64(s), x)
    return n + (x != 0)


def _shr_sticky(x, k):
    """Shift uint64 ``x`` right by int64 ``k >= 0`` (any size); also return the OR of lost bits."""
    big = k >= 64
    kc = np.minimum(k, 63).astype(np.uint64)
    q = np.where(big, np.uint64(0), x >> kc)
    lost_bits = x & ((np.uint64(1) << kc) - np.uint64(1))
    lost = np.where(big, x != 0, lost_bits != 0)
    return q, lost


def round_to(sign, sig, exp, fmt, *, sticky=None):
    """Round exact values to ``fmt`` with roundTiesToEven (IEEE 754 §4.3.1).

    The value to round is ``(-1)**sign * (sig + delta) * 2**exp`` where
    ``delta = 0`` if ``sticky`` is false and ``0 < delta < 1`` if it is true.
    The (uint64 significand, sticky bit) pair is the hardware interface of a
    rounder: wider exact values (for instance a dot-product accumulator) are
    reduced to their top bits plus the OR of everything below, which preserves
    the round-to-nearest-even decision as long as the rounding point lies
    above bit 0 of ``sig``.

    Parameters
    ----------
    sign : array_like of int
        Sign bits (0 or 1). An exact zero (``sig == 0``, no sticky) keeps it, so
        callers implement the §6.3 zero-sign rules by choosing it.
    sig : array_like of uint64
        Integer significand, any value in [0, 2**64).
    exp : array_like of int
        Exponent of ``sig``'s LSB (int64 range).
    fmt : FPFormat
        Result format.
    sticky : array_like of bool, optional
        True where nonzero bits lie below ``sig``'s LSB. Where it is true,
        ``sig`` must be at least ``2**(fmt.man_bits + 2)`` so that the guard bit
        is inside ``sig``.

    Returns
    -------
    numpy.ndarray of ``fmt.dtype``
        Encodings. Results beyond the largest finite number after rounding are
        ±Inf (§7.4); results below ``2**emin`` are rounded at the subnormal
        quantum ``2**(emin - man_bits)`` (gradual underflow, §7.5), possibly to
        ±0 or up to the smallest normal.

    Raises
    ------
    ValueError
        If ``sticky`` is set on a significand too narrow to hold the guard bit.
    """
    fmt = _check_fmt("round_to", "fmt", fmt)
    sign, sig, exp = np.broadcast_arrays(np.asarray(sign).astype(np.uint64) & np.uint64(1),
                                         np.asarray(sig, dtype=np.uint64),
                                         np.asarray(exp, dtype=np.int64))
    if sticky is None:
        sticky = np.zeros(sig.shape, dtype=bool)
    else:
        sticky = np.broadcast_to(np.asarray(sticky, dtype=bool), sig.shape)
        if np.any(sticky & (sig < np.uint64(1 << (fmt.man_bits + 2)))):
            raise ValueError(f"round_to.sig must be >= 2**{fmt.man_bits + 2} where sticky is set "
                             f"(the guard bit of {fmt} must lie inside sig)")
    m = fmt.man_bits
    # Exponent of the result's LSB: the leading bit sets it for normals, and
    # it never goes below emin - m, the subnormal quantum (gradual underflow).
    e_lead = np.maximum(exp + _bit_length(sig) - 1, fmt.emin)
    k = e_lead - m - exp
    # k <= 0: sig has fewer bits than the precision, so the value is exact.
    mant_exact = sig << np.clip(-k, 0, 63).astype(np.uint64)
    # k >= 1: keep one guard bit, OR the rest into the sticky bit, round half even.
    t, lost = _shr_sticky(sig, np.maximum(k - 1, 0))
    guard = (t & np.uint64(1)) != 0
    mant = t >> np.uint64(1)
    up = guard & (lost | sticky | ((mant & np.uint64(1)) != 0))
    mant = np.where(k <= 0, mant_exact, mant + up.astype(np.uint64))
    # Rounding up 1.11..1 carries into a new leading bit: renormalize.
    carry = (mant >> np.uint64(m + 1)) != 0
    mant = np.where(carry, mant >> np.uint64(1), mant)
    e_lead = e_lead + carry
    # A subnormal that rounds up to 2**m becomes the smallest normal naturally.
    normal = mant >= np.uint64(1 << m)
    efield = np.where(normal, e_lead + fmt.bias, 0)
    overflow = efield >= fmt.exp_mask
    efield = np.where(overflow, fmt.exp_mask, efield).astype(np.uint64)
    frac = np.where(overflow, np.uint64(0), mant & np.uint64(fmt.man_mask))
    out = (sign << np.uint64(fmt.width - 1)) | (efield << np.uint64(m)) | frac
    return out.astype(fmt.dtype)


def _finish(result, sign, nan, inf, fmt):
    """Overlay canonical NaN and signed Inf results on a rounded result."""
    inf_bits = np.asarray(sign, dtype=fmt.dtype) << fmt.dtype.type(fmt.width - 1)
    inf_bits = inf_bits | fmt.dtype.type(fmt.inf_bits)
    result = np.where(inf, inf_bits, result)
    result = np.where(nan, fmt.dtype.type(fmt.nan_bits), result)
    return result.astype(fmt.dtype)


def mul(a, b, fmt):
    """Multiply encodings elementwise, rounded once (IEEE 754 §5.4.1 multiplication).

    Parameters
    ----------
    a, b : array_like of int
        Bit patterns of ``fmt``; broadcast against each other.
    fmt : FPFormat

    Returns
    -------
    numpy.ndarray of ``fmt.dtype``
        ``round(a * b)``. NaN operands and ``Inf * 0`` give the canonical NaN
        (§7.2); otherwise Inf operands give Inf, and every non-NaN result
        (zeros and Infs included) has sign ``sign(a) XOR sign(b)`` (§6.3).

    Notes
    -----
    The product of two (man_bits + 1)-bit significands has at most 2 * 31 bits,
    so it is exact in uint64 and rounded once without a sticky bit.
    """
    fmt = _check_fmt("mul", "fmt", fmt)
    a = _as_bits("mul", "a", a, fmt)
    b = _as_bits("mul", "b", b, fmt)
    sa, ma, ea, za, ia, na = _unpack(a, fmt)
    sb, mb, eb, zb, ib, nb = _unpack(b, fmt)
    sign = sa ^ sb
    nan = na | nb | (ia & zb) | (za & ib)
    inf = ia | ib
    result = round_to(sign, ma.astype(np.uint64) * mb, ea.astype(np.int64) + eb, fmt)
    return _finish(result, sign, nan, inf, fmt)


def add(a, b, fmt):
    """Add encodings elementwise, rounded once (IEEE 754 §5.4.1 addition).

    Parameters
    ----------
    a, b : array_like of int
        Bit patterns of ``fmt``; broadcast against each other.
    fmt : FPFormat

    Returns
    -------
    numpy.ndarray of ``fmt.dtype``
        ``round(a + b)``. NaN operands and ``(+Inf) + (-Inf)`` give the
        canonical NaN (§7.2); otherwise an Inf operand gives that Inf. An exact
        zero sum is +0 unless both operands are -0 (§6.3, roundTiesToEven).

    Notes
    -----
    Both significands are shifted left by ``L = 61 - precision`` bits (at
    least 31), so the sum of two of them stays below 2**63. The operand with the
    smaller exponent is then aligned right to the other, and the bits shifted
    out are ORed into a sticky bit. The sticky bit can only be set when the
    exponent difference exceeds L, far beyond the precision; the larger operand
    then dominates, and the (sum, sticky) pair represents the exact sum for
    :func:`round_to`.
    """
    fmt = _check_fmt("add", "fmt", fmt)
    a = _as_bits("add", "a", a, fmt)
    b = _as_bits("add", "b", b, fmt)
    a, b = np.broadcast_arrays(a, b)
    sa, ma, ea, _, inf_a, nan_a = _unpack(a, fmt)
    sb, mb, eb, _, inf_b, nan_b = _unpack(b, fmt)
    ma, mb = ma.astype(np.uint64), mb.astype(np.uint64)
    ea, eb = ea.astype(np.int64), eb.astype(np.int64)
    swap = eb > ea
    sx, mx, ex = np.where(swap, sb, sa), np.where(swap, mb, ma), np.where(swap, eb, ea)
    sy, my, ey = np.where(swap, sa, sb), np.where(swap, ma, mb), np.where(swap, ea, eb)
    shift = 61 - fmt.precision
    x = mx << np.uint64(shift)
    y, sticky = _shr_sticky(my << np.uint64(shift), ex - ey)
    # Inf/NaN decode to sig = exp = 0, which may "align" a tiny finite operand;
    # their result is overridden below, so keep round_to's precondition intact.
    sticky &= ~(inf_a | inf_b | nan_a | nan_b)
    same = sx == sy
    diff = x.astype(np.int64) - y.astype(np.int64)
    # With a sticky bit the true subtrahend is y + delta, 0 < delta < 1:
    # x - y - delta = (x - y - 1) + (1 - delta), again a (sig, sticky) pair.
    mag_sub = np.where(sticky, diff - 1, np.abs(diff)).astype(np.uint64)
    # Exact cancellation gives +0 under roundTiesToEven (§6.3).
    sign_sub = np.where(diff > 0, sx, np.where(diff < 0, sy, 0)).astype(np.uint8)
    mag = np.where(same, x + y, mag_sub)
    sign = np.where(same, sx, sign_sub)
    result = round_to(sign, mag, ex - shift, fmt, sticky=sticky)
    nan = nan_a | nan_b | (inf_a & inf_b & (sa != sb))
    inf = inf_a | inf_b
    inf_sign = np.where(inf_a, sa, sb)
    return _finish(result, inf_sign, nan, inf, fmt)


def convert(bits, src_fmt, dst_fmt):
    """Convert encodings between formats, rounded once (IEEE 754 §5.4.2 convertFormat).

    Parameters
    ----------
    bits : array_like of int
        Bit patterns of ``src_fmt``.
    src_fmt, dst_fmt : FPFormat

    Returns
    -------
    numpy.ndarray of ``dst_fmt.dtype``
        Widening conversions (e.g. FP16 -> FP32) are exact; narrowing ones round
        to nearest even with overflow to ±Inf and gradual underflow. Zeros and
        Infs keep their sign; every NaN becomes ``dst_fmt``'s canonical NaN.
    """
    src_fmt = _check_fmt("convert", "src_fmt", src_fmt)
    dst_fmt = _check_fmt("convert", "dst_fmt", dst_fmt)
    bits = _as_bits("convert", "bits", bits, src_fmt)
    sign, sig, exp, _, inf, nan = _unpack(bits, src_fmt)
    result = round_to(sign, sig, exp, dst_fmt)
    return _finish(result, sign, nan, inf, dst_fmt)
