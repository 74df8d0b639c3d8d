"""Gated RMSNorm of a Mamba2 layer, bit for bit: the ``GatedRMSNorm`` block's contract.

Mamba2 normalizes the SSM output after its gate (``RMSNormGated`` with
``norm_before_gate=False`` in ``state-spaces/mamba``)::

    out = RMSNorm(y ⊙ SiLU(z))·w_norm,  RMSNorm(g) = g / sqrt(mean(g²) + eps),  eps = 1e-5

Contract, for one vector of ``n`` elements (``fl`` = one binary32 operation of
the contract, :class:`golden.dsp.Binary32Ops`; ``"ieee"``: RNE with gradual
underflow, ``"dspfp32"``: the Versal DSPFP32 multiplier and adder, subnormal
operands and results flushed to the zero of their sign, AMD AM004 "Subnormals")::

    g_i  = fl(y_i · silu_lut(z_i))                 the gate (omitted when z is None)
    a_j  = −0;  a_j = fl( fl(g_i·g_i) + a_j )      lane j = 0 … L−1: i = j, j+L, …, ascending
    acc  = pairwise(a_0 … a_{L−1})                 L = 1: acc = a_0
    ms   = fl(acc · inv_n),  inv_n = fl32(1/n)     exact when n is a power of two
    t    = fl(ms + eps32),   eps32 = fl32(eps)
    r    = rsqrt_hw(t)                             below
    out_i = fl( fl(g_i · r) · w_i )

The sum of squares is ``L`` sequential folds (``lanes``, the block's elements a
beat: ``golden.config.VectorConfig``), each the single-cycle accumulation of a
DSPFP32 adder on its own ``P`` register (AM004: ``P = M + P``), so each has one
order whatever the schedule. ``−0`` is the exact identity of a lane's first add.
``pairwise`` adds neighbours level by level, ``fl(a_0 + a_1)``, ``fl(a_2 + a_3)``, …,
then the sums of those, ``log2 L`` levels of an adder tree (``L`` a power of two
dividing ``n``). The order changes the rounding: ``lanes`` is part of the contract.

``rsqrt_hw(t)``, a table and no division. For a positive normal
``t = 2**E · 1.f``: let ``p = E mod 2`` and ``q = (E − p)/2``; then
``m = 1.f · 2**p`` is in ``[1, 4)`` and ``rsqrt(t) = 2**-q · rsqrt(m)``, both
steps exact (exponent-field arithmetic). ``rsqrt(m)`` is
:func:`golden.nonlinear.lut_eval` of :data:`RSQRT_LUT`: cubic Taylor rows at
nodes ``1 + j/128`` evaluated by Horner in the contract's operations. Its error
(:func:`measure_rsqrt_error`, every node's neighbourhood and random points) is
at most :data:`RSQRT_ERROR_BOUND` ulp of the exact value; the Taylor remainder
at step 1/128 is below ``2e-9`` relative, so the error is the Horner steps'
roundings. Special arguments: NaN → NaN; ``+Inf`` → ``+0``; ``±0`` → ``±Inf``
and a negative → NaN (IEEE 754 ``rSqrt``, §9.2); a subnormal argument is read
as the zero of its sign under both contracts (no normalizer; ``t ≥ eps32`` in
RMSNorm, so this is reached only by misuse).

Special values of the whole norm: IEEE 754 through every operation. A NaN or
Inf in any ``g_i`` makes ``acc`` NaN or ``+Inf``, so every output of the
vector is NaN (``t = +Inf`` gives ``r = +0``, and ``g·0`` or ``Inf·0`` is NaN
or ``±0``: a finite ``g_i`` gives ``±0·w_i``). Every NaN output is the canonical
quiet NaN ``0x7FC00000`` (the block's last multiplier may set the sign of a
NaN; the block clears it).
"""

import numpy as np

from .dsp import Binary32Ops
from .fp import FP32
from .nonlinear import CANONICAL_NAN32, LUTSpec, lut_eval, reference64
from .validate import check_float, check_int

__all__ = ["NORM_EPS", "RSQRT_LUT", "RSQRT_ERROR_BOUND", "rsqrt_hw", "gated_rmsnorm_hw",
           "gated_rmsnorm_hw_bits", "gated_rmsnorm_ref", "measure_rsqrt_error", "inv_n32"]

#: RMSNorm epsilon of Mamba2 (``RMSNormGated``, ``eps=1e-5``).
NORM_EPS = 1e-5

#: The reciprocal-square-root table over the reduced mantissa ``[1, 4]``: 385 rows.
RSQRT_LUT = LUTSpec(function="rsqrt", lo=1.0, hi=4.0, step_log2=7, degree=3)

#: Bound, in ulps of the exact value, on :func:`rsqrt_hw`'s error over positive
#: normal arguments with :data:`RSQRT_LUT` (measured: see the test).
RSQRT_ERROR_BOUND = 1.5


def _canon(a):
    return np.where(np.isnan(a), CANONICAL_NAN32, a.view(np.uint32)).view(np.float32)


def _f32(a):
    a = np.asarray(a)
    return a.view(np.float32) if a.dtype == np.uint32 else a.astype(np.float32)


def inv_n32(n):
    """``fl32(1/n)``: the mean's factor (exact when ``n`` is a power of two)."""
    return np.float32(1.0 / n)


def rsqrt_hw(t, *, spec=RSQRT_LUT, ops=None):
    """``1/sqrt(t)`` by range reduction and :func:`lut_eval` (module docstring).

    Parameters
    ----------
    t : array_like of float32 (or uint32 bit patterns)
    spec : LUTSpec
        A ``"rsqrt"`` table over ``[1, 4]``.
    ops : golden.dsp.Binary32Ops, optional
        The Horner steps' arithmetic; IEEE when omitted.

    Returns
    -------
    numpy.ndarray of float32
    """
    if not isinstance(spec, LUTSpec) or spec.function != "rsqrt" or (spec.lo, spec.hi) != (1.0, 4.0):
        raise TypeError(f"rsqrt_hw.spec must be a LUTSpec of 'rsqrt' over [1.0, 4.0], not {spec!r}")
    u = _f32(t).view(np.uint32)
    sign = u >> np.uint32(31)
    efield = ((u >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int64)
    frac = u & np.uint32(FP32.man_mask)
    E = efield - 127
    p = E & 1
    q = (E - p) >> 1
    m = ((np.uint32(127) + p.astype(np.uint32)) << np.uint32(23)) | frac
    rho = lut_eval(spec, m.view(np.float32), ops=ops).view(np.uint32).astype(np.int64)
    r = (rho - (q << 23)).astype(np.uint32)
    nan = (efield == 255) & (frac != 0)
    inf = (efield == 255) & (frac == 0)
    zero = efield == 0                                  # ±0 and subnormals
    r = np.where(zero, (sign << np.uint32(31)) | np.uint32(0x7F800000), r)
    r = np.where(inf & (sign == 0), np.uint32(0), r)
    r = np.where(nan | ((sign == 1) & ~zero), CANONICAL_NAN32, r)
    return r.astype(np.uint32).view(np.float32)


def gated_rmsnorm_hw(y, z, w, *, silu_lut, eps=NORM_EPS, rsqrt_lut=RSQRT_LUT, contract="ieee",
                     lanes=1, ops=None):
    """The gated RMSNorm of one or more vectors, bit for bit (module docstring).

    Parameters
    ----------
    y : array_like, shape (..., n)
        The SSM unit's output rows (``y[h, p]`` flattened, row-major).
    z : array_like, shape (..., n), or None
        The gate; ``None`` normalizes ``y`` itself (the final norm of the LM).
    w : array_like, shape (n,)
        ``w_norm``.
    silu_lut : golden.nonlinear.LUTSpec
        The SiLU table (``SSMConfig.silu_lut``).
    eps : float
    rsqrt_lut : golden.nonlinear.LUTSpec
    contract : str
        ``"ieee"`` or ``"dspfp32"``.
    lanes : int
        Partial sums of squares, ``L`` (module docstring): a power of two dividing ``n``.

    Values are float32 or ``uint32`` bit patterns.

    Returns
    -------
    numpy.ndarray of float32, shape (..., n); every NaN canonical.
    """
    check_float("gated_rmsnorm", "eps", eps, min=0.0)
    ops = Binary32Ops(contract) if ops is None else ops
    y, w = _f32(y), _f32(w)
    if y.ndim < 1 or w.shape != y.shape[-1:]:
        raise ValueError(f"gated_rmsnorm: w must have shape {y.shape[-1:]} (the last axis of y), "
                         f"not {w.shape}")
    if z is not None:
        z = _f32(z)
        if z.shape != y.shape:
            raise ValueError(f"gated_rmsnorm: z must have the shape of y {y.shape}, not {z.shape}")
        if not isinstance(silu_lut, LUTSpec) or silu_lut.function != "silu":
            raise TypeError(f"gated_rmsnorm.silu_lut must be a LUTSpec of 'silu', not {silu_lut!r}")
    n = y.shape[-1]
    check_int("gated_rmsnorm", "lanes", lanes, min=1)
    if lanes & (lanes - 1) or n % lanes:
        raise ValueError(f"gated_rmsnorm: lanes must be a power of two dividing the vector's "
                         f"{n} elements, not {lanes}")
    with np.errstate(all="ignore"):
        g = y if z is None else ops.mul(y, lut_eval(silu_lut, z, ops=ops))
        part = np.full(y.shape[:-1] + (lanes,), -0.0, np.float32)
        for i in range(0, n, lanes):
            part = ops.add(ops.mul(g[..., i:i + lanes], g[..., i:i + lanes]), part)
        while part.shape[-1] > 1:
            part = ops.add(part[..., 0::2], part[..., 1::2])
        acc = part[..., 0]
        ms = ops.mul(acc, inv_n32(n))
        t = ops.add(ms, np.float32(eps))
        r = rsqrt_hw(t, spec=rsqrt_lut, ops=ops)
        out = ops.mul(ops.mul(g, r[..., None]), w)
    return _canon(np.asarray(out, np.float32))


def gated_rmsnorm_hw_bits(y, z, w, **kwargs):
    """:func:`gated_rmsnorm_hw` on ``uint32`` bit patterns; returns ``uint32``."""
    for name, arr in (("y", y), ("z", z), ("w", w)):
        if arr is not None and np.asarray(arr).dtype != np.uint32:
            raise TypeError(f"{name} must be a uint32 bit array, not {np.asarray(arr).dtype}")
    return gated_rmsnorm_hw(y, z, w, **kwargs).view(np.uint32)


def gated_rmsnorm_ref(y, z, w, *, eps=NORM_EPS):
    """The Mamba2 equations in float64 (``RMSNormGated``): the oracle."""
    y = np.asarray(y, np.float64)
    g = y if z is None else y * reference64("silu", z)
    r = 1.0 / np.sqrt(np.mean(g * g, axis=-1, keepdims=True) + eps)
    return g * r * np.asarray(w, np.float64)


def measure_rsqrt_error(*, spec=RSQRT_LUT, per_segment=64, seed=0, ops=None):
    """Largest error of :func:`rsqrt_hw` in ulps of the exact value.

    Inputs: ``per_segment`` points in every table segment of both binades of the
    reduced mantissa, every node and its binary32 neighbours, scaled by random
    even and odd powers of two, plus uniform random bit patterns of positive
    normal numbers.

    Returns
    -------
    dict
        ``max_ulp``, ``worst_t``, ``points``.
    """
    rng = np.random.default_rng(seed)
    segs = np.arange(spec.nodes - 1)
    frac = (np.arange(per_segment) + 0.5) / per_segment
    m = (spec.lo + (segs[:, None] + frac[None, :]) * spec.step).ravel()
    nodes = (spec.lo + np.arange(spec.nodes) * spec.step).astype(np.float32)
    edge = np.concatenate([nodes, np.nextafter(nodes, np.float32(0)),
                           np.nextafter(nodes, np.float32(np.inf))])
    base = np.concatenate([m.astype(np.float32), edge])
    base = base[(base >= 1) & (base < 4)]
    k = rng.integers(-63, 63, size=base.size) * 2                  # keep m's binade parity
    t = np.ldexp(base.astype(np.float64), k).astype(np.float32)
    rand = rng.integers(0x00800000, 0x7F800000, size=200_000, dtype=np.int64).astype(np.uint32)
    t = np.concatenate([t, base, rand.view(np.float32)])
    got = rsqrt_hw(t, spec=spec, ops=ops).astype(np.float64)
    exact = 1.0 / np.sqrt(t.astype(np.float64))
    e = np.floor(np.log2(exact))
    ulp = np.ldexp(1.0, (e - 23).astype(np.int64))
    err = np.abs(got - exact) / ulp
    i = int(np.argmax(err))
    return {"max_ulp": float(err[i]), "worst_t": float(t[i]), "points": int(t.size)}
