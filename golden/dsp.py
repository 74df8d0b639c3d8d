"""Numerics contract v2, ``"dspfp32"``: dot products as the Versal DSP58 computes them.

The DSP58 slice of Versal devices has a floating-point mode, DSPFP32 (AMD AM004
"Versal ACAP DSP Engine Architecture Manual", section "DSPFP32 Unisim Primitive"):
a multiplier ``M = A × B`` whose inputs are binary32 or binary16 (attributes
``A_FPTYPE``, ``B_D_FPTYPE``) and whose output is binary32, and a binary32
adder ``P = P0 + P1`` that can take ``M``, the ``C`` port or its own output
``P`` (accumulation, one add per cycle). This module is the bit-exact
specification of that arithmetic and of the dot products built on it:

* **Rounding** is roundTiesToEven (IEEE 754 §4.3.1), the only mode DSPFP32 has.
* **Subnormals** (AM004, section "Subnormals"): a subnormal operand is treated
  as zero with the sign of the operand; a subnormal result is flushed to zero
  with its sign kept. Here a result is "subnormal" when the IEEE 754 result
  (rounded with gradual underflow, :mod:`golden.fp`) is subnormal: the flush
  is applied *after* rounding, so a result that rounds up to ``2**-126`` is
  kept. AM004 does not say which side of the rounding the DSP decides on; the
  Vivado-side check of the emitted primitive against golden vectors is where
  a difference would show.
* **Special values** follow :mod:`golden.fp` (IEEE 754): ``Inf × 0`` and
  ``(+Inf) + (−Inf)`` are invalid, Infs keep their sign, signs of zero follow
  §6.3. NaN payloads are never propagated. The adder writes the quiet NaN
  ``0x7FC00000``; the multiplier writes it with the sign ``sign(A) XOR sign(B)``
  (``0xFFC00000`` possible). AM004 gives no NaN encoding; these two, and the
  flush after rounding, are what AMD's UNISIM simulation model of DSPFP32
  does. Any NaN product reaches a dot product's adder, so every NaN *dot
  product* is ``0x7FC00000``.
* **Flush events are counted** (:class:`FlushCounts`), never hidden.

Dot products (:func:`dot`): ``y = Σ_k w[k]·x[k]`` is the left fold, in
ascending ``k``, of one DSPFP32 multiply and one DSPFP32 add per term, starting
from ``−0`` (the exact identity of IEEE addition, so a vector of ``−0``
products keeps its sign)::

    acc = −0;  for k in 0 .. K−1:  acc = add(acc, mul(x[k], w[k]))

The order is a function of ``k`` alone: it does not depend on how many tokens
share a weight, the tile or the array, so a tree node's result is the same in
a verification batch of any size (lossless verification needs that).

Operands of the linear unit (:func:`activation_operand`, :func:`full_weight_operand`,
:func:`draft_weight_operand`): the activation enters port ``A`` as binary16, the
weight port ``B`` as binary32 with the BSFP scale ``2**k`` folded into its
exponent. Every product of such operands is exact in binary32 (at most 11 × 11
significand bits, exponents far inside the binary32 range), so the only
rounding of a dot product is in its additions.
"""

import functools
from typing import NamedTuple

import numpy as np

from . import fp as _fp
from .fp import FP16, FP32
from .validate import check_choice

__all__ = [
    "CONTRACTS", "NEG_ZERO", "FlushCounts", "flush", "mul", "add", "dot",
    "activation_operand", "full_weight_operand", "draft_weight_operand",
    "full_dot", "draft_dot", "SSM_CONTRACTS", "Binary32Ops",
]

#: The linear unit's accumulation contracts (``LinearConfig.contract``).
CONTRACTS = ("exact", "dspfp32")

#: ``−0`` in binary32: the starting value of every accumulation.
NEG_ZERO = np.uint32(0x8000_0000)


class FlushCounts(NamedTuple):
    """Subnormals flushed to zero, by where they were flushed.

    Attributes
    ----------
    activations : int
        Subnormal binary16 activations (port ``A``) read as zero.
    weights : int
        Weights whose scaled binary16 word is subnormal, read as zero.
    products : int
        Products rounded to a subnormal and flushed (none for the linear unit's
        operands; counted for the general :func:`mul`).
    sums : int
        Additions whose result was subnormal and was flushed.
    """

    activations: int = 0
    weights: int = 0
    products: int = 0
    sums: int = 0

    def __add__(self, other):
        return FlushCounts(*(a + b for a, b in zip(self, other)))

    @property
    def total(self):
        return sum(self)


@functools.lru_cache(maxsize=None)
def _masks(fmt):
    """``(dtype, exponent-field mask, fraction mask, sign mask)`` of ``fmt`` as numpy scalars:
    built once per format, since the native operations flush a few thousand times a step."""
    t = fmt.dtype.type
    return (fmt.dtype, t(fmt.exp_mask << fmt.man_bits), t(fmt.man_mask), t(1 << (fmt.width - 1)))


def _subnormal(bits, fmt):
    dtype, exp_field, man, _ = _masks(fmt)
    bits = np.asarray(bits, dtype=dtype)
    return ((bits & exp_field) == 0) & ((bits & man) != 0)


def flush(bits, fmt):
    """Subnormal encodings of ``fmt`` replaced by the zero of their sign.

    Returns
    -------
    bits : numpy.ndarray of ``fmt.dtype``
    flushed : numpy.ndarray of bool
        Where a subnormal was flushed.
    """
    dtype, _, _, sign = _masks(fmt)
    bits = np.asarray(bits, dtype=dtype)
    sub = _subnormal(bits, fmt)
    return np.where(sub, bits & sign, bits), sub


def mul(a, b, *, fmt_a=FP32, fmt_b=FP32):
    """DSPFP32 multiplier ``M = A × B``: binary16 or binary32 inputs, binary32 result.

    Subnormal inputs read as signed zeros; the product is rounded once (RNE)
    and flushed if subnormal.

    Returns
    -------
    m : numpy.ndarray of uint32
    flushed_in : numpy.ndarray of bool
        An operand was flushed.
    flushed_out : numpy.ndarray of bool
        The product was flushed.
    """
    a, fa = flush(a, fmt_a)
    b, fb = flush(b, fmt_b)
    # Widening binary16 -> binary32 is exact (golden.fp.convert), so one
    # binary32 multiply rounds the exact product once.
    a32 = a if fmt_a == FP32 else _fp.convert(a, fmt_a, FP32)
    b32 = b if fmt_b == FP32 else _fp.convert(b, fmt_b, FP32)
    m, fo = flush(_fp.mul(a32, b32, FP32), FP32)
    sign = ((np.asarray(a, np.uint32) >> np.uint32(fmt_a.width - 1))
            ^ (np.asarray(b, np.uint32) >> np.uint32(fmt_b.width - 1))) << np.uint32(31)
    m = np.where(m == np.uint32(FP32.nan_bits), m | sign, m).astype(np.uint32)
    return m, fa | fb, fo


def add(a, b):
    """DSPFP32 adder ``P = P0 + P1`` in binary32: subnormal inputs read as zero, a
    subnormal sum is flushed.

    Returns
    -------
    p : numpy.ndarray of uint32
    flushed_in : numpy.ndarray of bool
    flushed_out : numpy.ndarray of bool
    """
    a, fa = flush(a, FP32)
    b, fb = flush(b, FP32)
    p, fo = flush(_fp.add(a, b, FP32), FP32)
    return p, fa | fb, fo


def _native(op, a, b, *, signed_nan):
    a, fa = flush(a, FP32)
    b, fb = flush(b, FP32)
    with np.errstate(all="ignore"):
        r = op(a.view(np.float32), b.view(np.float32))
    p, fo = flush(r.view(np.uint32), FP32)
    nan = np.uint32(FP32.nan_bits)
    if signed_nan:
        nan = nan | (((a ^ b) >> np.uint32(31)) << np.uint32(31))
    return np.where(np.isnan(r), nan, p).astype(np.uint32), fa | fb, fo


def mul_native(a, b):
    """:func:`mul` of binary32 operands from numpy's float32 multiply: the same bits.

    numpy's binary32 multiply is IEEE 754's (RNE, gradual underflow), so on operands
    flushed to signed zeros it rounds the exact product once, and the flush of a
    subnormal result after that rounding, and the signed NaN, are :func:`mul`'s
    (``tests/test_golden_dsp.py`` checks every operand class against it).
    """
    return _native(np.multiply, a, b, signed_nan=True)


def add_native(a, b):
    """:func:`add` from numpy's float32 add: the same bits (see :func:`mul_native`)."""
    return _native(np.add, a, b, signed_nan=False)


def dot(w, x, *, counts=False):
    """DSPFP32 dot products: ascending-``k`` fold of multiply and add from ``−0``.

    Parameters
    ----------
    w : array_like of uint32
        Weight operands (binary32, port ``B``), shape ``(..., rows, K)``.
    x : array_like of uint16
        Activations (binary16, port ``A``), shape ``(..., tokens, K)``.
    counts : bool
        Also return the :class:`FlushCounts`.

    Returns
    -------
    numpy.ndarray of uint32
        ``y[..., r, t]``, shape ``(..., rows, tokens)``.
    """
    w = np.asarray(w, dtype=np.uint32)
    x = np.asarray(x, dtype=np.uint16)
    if w.shape[-1] != x.shape[-1]:
        raise ValueError(f"dot: weights have K = {w.shape[-1]} inputs, activations "
                         f"K = {x.shape[-1]}; they must match")
    ws, xs = w[..., :, None, :], x[..., None, :, :]
    acc = np.full(np.broadcast_shapes(ws.shape[:-1], xs.shape[:-1]), NEG_ZERO, np.uint32)
    xf, fx = flush(x, FP16)
    n_prod = n_sum = 0
    for k in range(w.shape[-1]):
        m, _, fo = mul(xf[..., None, :, k], ws[..., k], fmt_a=FP16, fmt_b=FP32)
        acc, _, fs = add(acc, m)
        n_prod += int(np.count_nonzero(fo))
        n_sum += int(np.count_nonzero(fs))
    if not counts:
        return acc
    # One flushed activation is read once per weight row it meets.
    n_act = int(np.count_nonzero(fx)) * w.shape[-2]
    return acc, FlushCounts(activations=n_act, products=n_prod, sums=n_sum)


def dot_native(w, x):
    """:func:`dot`'s bits from numpy's IEEE arithmetic: the same fold, a hundred times faster.

    Each step is one exact operation and one rounding of numpy that equals the
    DSPFP32 step, so the result is bit for bit :func:`dot`'s
    (``tests/test_golden_dsp.py`` checks them equal on random and special operands):

    * **multiply**: operands flushed to signed zeros, then multiplied in float64,
      where the product of an 11-bit and a 24-bit significand is exact, and
      rounded once to binary32 (RNE, gradual underflow, overflow to ±Inf); a
      subnormal product is then flushed (after rounding, as :func:`mul`);
    * **add**: a binary32 numpy add (IEEE RNE; both operands are normal or zero),
      its subnormal sums flushed to the zero of their sign;
    * every NaN result is the adder's ``0x7FC00000``.

    Parameters and result as :func:`dot` (``counts`` is not offered).
    """
    w = np.asarray(w, dtype=np.uint32)
    x = np.asarray(x, dtype=np.uint16)
    if w.shape[-1] != x.shape[-1]:
        raise ValueError(f"dot_native: weights have K = {w.shape[-1]} inputs, activations "
                         f"K = {x.shape[-1]}; they must match")
    wf = flush(w, FP32)[0].view(np.float32).astype(np.float64)
    xf = flush(x, FP16)[0].view(np.float16).astype(np.float64)
    ws, xs = wf[..., :, None, :], xf[..., None, :, :]
    acc = np.full(np.broadcast_shapes(ws.shape[:-1], xs.shape[:-1]), NEG_ZERO,
                  np.uint32).view(np.float32)
    tiny = np.float32(np.finfo(np.float32).tiny)
    with np.errstate(all="ignore"):
        for k in range(w.shape[-1]):
            m = (xs[..., k] * ws[..., k]).astype(np.float32)
            m = np.where(np.abs(m) < tiny, np.copysign(np.float32(0), m), m)
            acc = acc + m
            acc = np.where(np.abs(acc) < tiny, np.copysign(np.float32(0), acc), acc)
    bits = acc.view(np.uint32)
    return np.where(np.isnan(acc), np.uint32(FP32.nan_bits), bits).astype(np.uint32)


def activation_operand(x):
    """Port ``A``: the binary16 activation bits unchanged (the DSP flushes subnormals)."""
    return np.asarray(x, dtype=np.uint16)


def _fold_scale(exp16, man16, sign, k):
    """binary32 bits of ``(-1)**sign * 1.man16 * 2**(exp16 - 15 + k)`` (normal binary16 words)."""
    e32 = exp16.astype(np.uint32) + np.uint32(FP32.bias - FP16.bias) + k.astype(np.uint32)
    return ((sign.astype(np.uint32) << np.uint32(31)) | (e32 << np.uint32(23))
            | (man16.astype(np.uint32) << np.uint32(FP32.man_bits - FP16.man_bits))).astype(np.uint32)


def full_weight_operand(tensor):
    """Port ``B`` in the full pass: the scaled binary16 weight with ``2**k`` folded in.

    The nibble and residue planes merge into the scaled word (the FP16
    reconstructor, :func:`golden.bsfp.restore_stored`); its exponent plus
    ``k`` is the exponent of the original weight, written as binary32 so that
    it never overflows or goes subnormal. A scaled word that is subnormal
    reads as zero, as the DSP reads a subnormal binary16 operand.

    Returns
    -------
    w : numpy.ndarray of uint32
    flushed : numpy.ndarray of bool
    """
    from .bsfp import restore_stored
    scaled = restore_stored(tensor.stored, config=tensor.config)
    k = tensor.scale_per_weight().astype(np.uint32)
    exp16 = (scaled >> np.uint16(FP16.man_bits)) & np.uint16(FP16.exp_mask)
    man16 = scaled & np.uint16(FP16.man_mask)
    sign = scaled >> np.uint16(15)
    zero = exp16 == 0
    flushed = zero & (man16 != 0)
    w = np.where(zero, sign.astype(np.uint32) << np.uint32(31),
                 _fold_scale(exp16, man16, sign, np.broadcast_to(k, scaled.shape)))
    return w.astype(np.uint32), flushed


def draft_weight_operand(tensor):
    """Port ``B`` in the draft pass: the E3M0 draft weight ``±2**(E[c] − 15 + k)`` as binary32.

    Every draft value is a normal binary32 number (:func:`golden.bsfp.draft_table`),
    so nothing is flushed. Draft formats with more than one significand bit
    (``E2M1``, ``E1M2``) are exact too.
    """
    from .bsfp import draft_terms
    sign, sig, exp = draft_terms(tensor)
    value = np.ldexp(np.asarray(sig, np.float64), np.asarray(exp, np.int64))
    bits = value.astype(np.float32).view(np.uint32)
    return (bits | (np.asarray(sign, np.uint32) << np.uint32(31))).astype(np.uint32)


def full_dot(tensor, x, *, counts=False):
    """Full-pass ``y = W @ x`` under the DSPFP32 contract, from the BSFP planes.

    ``tensor`` holds weights ``(rows, K)``; ``x`` is binary16 ``(tokens, K)``
    (or ``(K,)``). Returns ``(rows, tokens)`` (or ``(rows,)``) binary32 bits.
    """
    w, fw = full_weight_operand(tensor)
    return _dot_vector(w, x, counts, int(np.count_nonzero(fw)))


def draft_dot(tensor, x, *, counts=False):
    """Draft-pass ``y = W_draft @ x`` under the DSPFP32 contract (see :func:`full_dot`)."""
    return _dot_vector(draft_weight_operand(tensor), x, counts, 0)


def _dot_vector(w, x, counts, n_weights):
    x = np.asarray(x, dtype=np.uint16)
    vector = x.ndim == 1
    y = dot(w, x[None] if vector else x, counts=counts)
    if counts:
        y, c = y
        # A flushed weight is read once per token.
        c = c._replace(weights=n_weights * (1 if vector else x.shape[0]))
    y = y[..., 0] if vector else y
    return (y, c) if counts else y


# -- binary32 operations of the SSM unit ------------------------------------------------

#: The SSM unit's arithmetic contracts (``SSMConfig.contract``): ``"ieee"`` is IEEE 754
#: binary32 with gradual underflow (fabric FP units), ``"dspfp32"`` is the DSPFP32
#: multiplier and adder above (flush to zero of operands and results).
SSM_CONTRACTS = ("ieee", "dspfp32")


class Binary32Ops:
    """Binary32 multiply and add of one contract, on float32 arrays, counting flushes.

    The SSM unit's golden model (:func:`golden.mamba2.ssm_step_hw`) and the
    tables' Horner evaluation (:func:`golden.nonlinear.lut_eval`) run every
    operation through one of these, so the two contracts differ in exactly the
    operations, never in their order. ``"dspfp32"`` runs :func:`mul_native` and
    :func:`add_native`, the bits of :func:`mul` and :func:`add` at numpy's speed.

    Parameters
    ----------
    contract : str
        One of :data:`SSM_CONTRACTS`.

    Attributes
    ----------
    flushed_in : int
        Operand elements flushed to zero (``"dspfp32"`` only).
    flushed_out : int
        Result elements flushed to zero (``"dspfp32"`` only).
    """

    def __init__(self, contract):
        self.contract = check_choice("Binary32Ops", "contract", contract, SSM_CONTRACTS)
        self.flushed_in = 0
        self.flushed_out = 0

    def _bits(self, *arrays):
        return [a.view(np.uint32) for a in np.broadcast_arrays(
            *(np.asarray(a, dtype=np.float32) for a in arrays))]

    def _count(self, fi, fo):
        self.flushed_in += int(np.count_nonzero(fi))
        self.flushed_out += int(np.count_nonzero(fo))

    def mul(self, a, b):
        """``fl(a·b)``: a DSPFP32 multiply (binary32 operands) or an IEEE one."""
        if self.contract == "ieee":
            with np.errstate(all="ignore"):
                return np.asarray(a, np.float32) * np.asarray(b, np.float32)
        m, fi, fo = mul_native(*self._bits(a, b))
        self._count(fi, fo)
        return m.view(np.float32)

    def add(self, a, b):
        """``fl(a + b)``: a DSPFP32 add or an IEEE one."""
        if self.contract == "ieee":
            with np.errstate(all="ignore"):
                return np.asarray(a, np.float32) + np.asarray(b, np.float32)
        p, fi, fo = add_native(*self._bits(a, b))
        self._count(fi, fo)
        return p.view(np.float32)
