"""Table-driven exp, softplus and SiLU for the SSM unit, bit for bit.

The Mamba2 decode step needs three nonlinear functions (``Mamba2.step``):
``softplus`` on ``dt + dt_bias``, ``exp`` on ``dt·A`` (the decay ``dA``) and
``SiLU`` on the gate ``z``. LightMamba evaluates them with two-table LUTs in
fixed point (LightMamba, arXiv 2502.15260: exp over [−20, 12) in steps of 1/128). specgen keeps the
SSM datapath in IEEE binary32, so its tables hold binary32 Taylor coefficients
and the interpolation is a short Horner polynomial of binary32 operations.

Evaluation contract (:func:`lut_eval`), for a :class:`LUTSpec` with range
``[lo, hi]``, step ``h = 2**-step_log2`` and degree ``d``:

1. **Classify.** NaN → canonical quiet NaN (``0x7FC00000``). ``x < lo`` and
   ``x > hi`` (including ±Inf) saturate, see :data:`SATURATION`.
2. **Reduce.** ``u = x·2**step_log2`` (exact: a power-of-two scaling of an
   in-range value), ``i = trunc(u)`` (toward zero), ``r = (u − i)·2**-step_log2``.
   Both steps are exact, so ``r = x − i·h`` exactly, ``|r| < h``, and ``r`` has
   the sign of ``x`` (or is +0). Because the index truncates toward zero,
   node ``i·h`` serves the segment on its far side from 0:
   ``[i·h, (i+1)·h)`` for ``i ≥ 0`` and ``((i−1)·h, i·h]`` for ``i ≤ 0``.
3. **Look up** ``c_0..c_d`` at row ``i − lo/h`` of the coefficient table
   (:func:`lut_tables`), ``c_k = fl32(f^(k)(i·h) / k!)``: the Taylor
   coefficients of ``f`` at the node, computed in 40-digit decimal arithmetic
   and rounded to binary32 (via binary64), so the tables are platform independent.
4. **Horner.** ``y = c_d``; then for ``k = d−1 … 0``: ``y = fl32(fl32(y·r) + c_k)``.
   Each multiply and add is a separate binary32 operation rounded to nearest
   even; there is no fused multiply-add.

A node input (``r = 0``) returns ``c_0`` exactly. ``±0`` both give ``c_0`` of
node 0 (so ``silu(−0) = +0``). Subnormal inputs are honoured (no flush to zero).

With the ``"dspfp32"`` contract (``SSMConfig.contract``, :mod:`golden.dsp`) the
Horner steps are DSPFP32 multiplies and adds: an operand or result that is
subnormal reads or becomes the zero of its sign. Steps 1–3 are unchanged (the
fabric computes them exactly), so a subnormal residual ``r`` reaches the
multiplier and is flushed there.

Why Taylor rows instead of LightMamba's chord interpolation: the SSM state
forgets at rate ``1 − dA``, as small as ``1e−3`` (dt = 0.001, A = −1), and a
relative error ε in ``dA`` biases the steady state by about ``ε/(1 − dA)``.
Linear interpolation at step 1/128 has ε ≈ h²/8 ≈ 8e−6 (and always the same
sign, since exp is convex): an 0.8 % state bias. A cubic Taylor row at the
same step truncates at ``h⁴/24 ≈ 2e−10``, below binary32 rounding, so the
table error equals a few binary32 roundings (see :data:`ERROR_BOUNDS`).
The cost is per head, not per state element: 3 multiplies and 3 adds per
function evaluation, 80 evaluations per token for Mamba2-2.7B.
"""

import functools
import math
from dataclasses import dataclass, replace
from decimal import Decimal, localcontext

import numpy as np

from .validate import check_choice, check_float, check_int

__all__ = [
    "FUNCTIONS", "TABLE_FUNCTIONS", "SATURATION", "LUTSpec", "DEFAULT_LUTS", "COARSE_LUTS", "ERROR_BOUNDS",
    "CANONICAL_NAN32", "lut_tables", "lut_eval", "exact_fp32", "reference64",
    "measure_lut_error",
]

FUNCTIONS = ("exp", "softplus", "silu")

#: Every function a :class:`LUTSpec` may tabulate: the SSM unit's three and the
#: reciprocal square root of the RMSNorm blocks (:mod:`golden.rmsnorm`), which
#: evaluates it on a mantissa already reduced into ``[1, 4]``.
TABLE_FUNCTIONS = FUNCTIONS + ("rsqrt",)

#: Canonical quiet NaN of binary32: every NaN the SSM unit produces has these bits.
CANONICAL_NAN32 = np.uint32(0x7FC00000)

#: What each function returns outside ``[lo, hi]``.
#: ``"zero"``: +0; ``"-zero"``: −0; ``"inf"``: +Inf; ``"identity"``: ``x`` itself.
SATURATION = {
    # exp: below lo the true value is < exp(lo) (2.1e-9 for lo = −20); dA → 0
    # means "forget the state", which is what dt·A ≪ 0 means. Above hi the
    # table ends; +Inf makes an out-of-range argument visible rather than
    # silently clamped. In the SSM, dt·A ≤ 0, so hi is never exceeded.
    "exp": ("zero", "inf"),
    # softplus(x) < exp(x): below lo = −25 the value is < 1.4e-11 and dt → 0
    # freezes the head's state. Above hi = 20, softplus(x) − x = log1p(e^−x)
    # < 2.1e-9 < ulp(x)/2, so the identity is the correctly rounded result.
    "softplus": ("zero", "identity"),
    # silu(x) = x·σ(x): below lo the value is in (−3.5e-10, 0); −0 keeps the
    # sign. Above hi = 20, silu(x) = x(1 − e^−x·…) with relative gap < 2.1e-9
    # < 2^-25, so the identity is correctly rounded.
    "silu": ("-zero", "identity"),
    # rsqrt: golden.rmsnorm reduces its argument into [1, 4) before the table, so
    # neither end is reached; these values only make a misuse visible.
    "rsqrt": ("zero", "inf"),
}

_MAX_NODES = 1 << 17
_DECIMAL_DIGITS = 40


@dataclass(frozen=True, kw_only=True)
class LUTSpec:
    """Geometry of one coefficient table.

    Parameters
    ----------
    function : str
        ``"exp"``, ``"softplus"``, ``"silu"`` or ``"rsqrt"`` (:data:`TABLE_FUNCTIONS`).
    lo, hi : float
        Input range covered by the table, both multiples of the step.
        Outside it the function saturates (:data:`SATURATION`).
    step_log2 : int
        The node spacing is ``2**-step_log2`` (LightMamba: 7, i.e. 1/128).
    degree : int
        Degree of the Taylor row evaluated at each node (1 to 3). The table
        has ``degree + 1`` coefficient columns.
    """

    function: str
    lo: float
    hi: float
    step_log2: int = 7
    degree: int = 3

    def __post_init__(self):
        check_choice("LUTSpec", "function", self.function, TABLE_FUNCTIONS)
        check_float("LUTSpec", "lo", self.lo, min=-126.0, max=126.0)
        check_float("LUTSpec", "hi", self.hi, min=-126.0, max=126.0)
        check_int("LUTSpec", "step_log2", self.step_log2, min=0, max=12)
        check_int("LUTSpec", "degree", self.degree, min=1, max=3)
        if not self.lo < self.hi:
            raise ValueError(f"LUTSpec.lo must be < hi ({self.hi!r}), not {self.lo!r}")
        for name in ("lo", "hi"):
            value = getattr(self, name)
            if value * self.scale != math.floor(value * self.scale):
                raise ValueError(f"LUTSpec.{name} must be a multiple of the step "
                                 f"2**-{self.step_log2}, not {value!r}")
        if self.nodes > _MAX_NODES:
            raise ValueError(f"LUTSpec range/step gives {self.nodes} nodes; "
                             f"at most {_MAX_NODES} are allowed")

    @property
    def scale(self):
        """``2**step_log2``, the number of nodes per unit of input."""
        return 1 << self.step_log2

    @property
    def step(self):
        """Node spacing ``h``."""
        return 1.0 / self.scale

    @property
    def first_index(self):
        """Node number ``lo/h`` of table row 0."""
        return int(self.lo * self.scale)

    @property
    def nodes(self):
        """Table rows: nodes ``lo, lo+h, …, hi`` inclusive."""
        return int((self.hi - self.lo) * self.scale) + 1

    @property
    def table_bits(self):
        """Storage of the whole table in bits (binary32 coefficients)."""
        return self.nodes * (self.degree + 1) * 32


#: The SSM unit's tables. exp keeps LightMamba's range and step (arXiv 2502.15260).
#: softplus and SiLU keep LightMamba's lower bound; their upper bound is 20
#: instead of 39/103, since above 20 the identity is already the correctly
#: rounded binary32 result (see :data:`SATURATION`), and the shorter table saves
#: 75 % of the SiLU coefficients.
DEFAULT_LUTS = {
    "exp": LUTSpec(function="exp", lo=-20.0, hi=12.0),
    "softplus": LUTSpec(function="softplus", lo=-25.0, hi=20.0),
    "silu": LUTSpec(function="silu", lo=-25.0, hi=20.0),
}

#: The default tables at step 1/8 instead of 1/128, as :class:`golden.mamba2.SSMConfig`
#: keyword arguments: the same ranges and contract, ROMs of 257-361 words instead of
#: 4097-5761, so an SSM unit builds and simulates in seconds (benches, the sim preset).
COARSE_LUTS = {f"{name}_lut": replace(spec, step_log2=3) for name, spec in DEFAULT_LUTS.items()}

#: Documented bounds on the defaults' error against float64 math over the table
#: range: max relative error (where the true value is a normal binary32) and
#: max error in binary32 ulps of the true value. Measured (per_segment=512 and
#: 4M random bit patterns): exp 1.17e-7 / 1.40 ulp, softplus 1.17e-7 / 1.41 ulp,
#: silu 1.18e-7 / 1.75 ulp (the SiLU worst case sits near 0, where c_0 = 0).
#: The tests assert measured ≤ bound. Outside the range the error is the
#: saturation's: below lo at most |f(lo)|, above hi the identity is within
#: 0.5 ulp (correctly rounded), exp returns +Inf.
ERROR_BOUNDS = {
    "exp": {"rel": 2.0e-7, "ulp": 2.0},
    "softplus": {"rel": 2.0e-7, "ulp": 2.0},
    "silu": {"rel": 2.0e-7, "ulp": 2.0},
}


# -- coefficient tables ---------------------------------------------------------

def _taylor_rows(function, x):
    """Derivatives ``f, f', f'', f'''`` at the Decimal ``x``."""
    one = Decimal(1)
    if function == "exp":
        e = x.exp()
        return (e, e, e, e)
    if function == "rsqrt":
        # x**-1/2 and its derivatives -1/2 x**-3/2, 3/4 x**-5/2, -15/8 x**-7/2 (x > 0).
        r = one / x.sqrt()
        return (r, -r / (2 * x), 3 * r / (4 * x * x), -15 * r / (8 * x * x * x))
    s = one / (one + (-x).exp())      # σ(x)
    q = one / (one + x.exp())         # 1 − σ(x), without cancellation
    s1 = s * q                        # σ'
    s2 = s1 * (q - s)                 # σ''
    s3 = s1 * (one - 6 * s * q)       # σ'''
    if function == "softplus":
        # ln(1 + e^x), written so neither branch cancels or overflows.
        f = x + (one + (-x).exp()).ln() if x >= 0 else (one + x.exp()).ln()
        return (f, s, s1, s2)
    # silu(x) = x·σ(x)
    return (x * s, s + x * s1, 2 * s1 + x * s2, 3 * s2 + x * s3)


@functools.lru_cache(maxsize=None)
def _tables_cached(spec):
    rows = np.empty((spec.degree + 1, spec.nodes), dtype=np.float32)
    factorial = (1, 1, 2, 6)
    with localcontext() as ctx:
        ctx.prec = _DECIMAL_DIGITS
        step = Decimal(1) / Decimal(spec.scale)      # exact: 2**-s is a finite decimal
        for j in range(spec.nodes):
            x = Decimal(spec.first_index + j) * step
            derivs = _taylor_rows(spec.function, x)
            for k in range(spec.degree + 1):
                rows[k, j] = np.float32(float(derivs[k] / factorial[k]))
    rows.setflags(write=False)
    return rows


def lut_tables(spec):
    """Coefficient table of ``spec``: the data the RTL's ROMs hold.

    Parameters
    ----------
    spec : LUTSpec

    Returns
    -------
    numpy.ndarray of float32, shape (degree + 1, nodes), read-only
        ``table[k, j]`` is ``c_k`` at node ``(first_index + j)·h``.
        View it as ``uint32`` for the ROM contents.
    """
    if not isinstance(spec, LUTSpec):
        raise TypeError(f"spec must be a LUTSpec, not {spec!r}")
    return _tables_cached(spec)


# -- evaluation -----------------------------------------------------------------

def _canonicalize_nan(y):
    bits = y.view(np.uint32)
    return np.where(np.isnan(y), CANONICAL_NAN32, bits).view(np.float32)


def lut_eval(spec, x, *, ops=None):
    """Evaluate the table approximation of ``spec.function`` (the hardware result).

    Parameters
    ----------
    spec : LUTSpec
    x : array_like of float32, any shape
        Inputs; other float dtypes are first rounded to binary32.
    ops : golden.dsp.Binary32Ops, optional
        The arithmetic of the Horner steps (and where their flushes are
        counted); IEEE binary32 when omitted.

    Returns
    -------
    numpy.ndarray of float32, same shape as ``x``
        Bit-exact result of the evaluation contract in the module docstring.
    """
    table = lut_tables(spec)
    x = np.asarray(x, dtype=np.float32)
    lo, hi = np.float32(spec.lo), np.float32(spec.hi)
    with np.errstate(all="ignore"):
        inside = (x >= lo) & (x <= hi)              # False for NaN
        u = np.where(inside, x, np.float32(0)) * np.float32(spec.scale)
        i = np.trunc(u)
        r = (u - i) * np.float32(spec.step)         # both exact, see module docstring
        idx = i.astype(np.int64) - spec.first_index
        y = table[spec.degree][idx]
        for k in range(spec.degree - 1, -1, -1):
            if ops is None:
                y = y * r + table[k][idx]           # two roundings: no FMA
            else:
                y = ops.add(ops.mul(y, r), table[k][idx])
        below, above = SATURATION[spec.function]
        y = np.where(x < lo, _SAT_BELOW[below](x), y)
        y = np.where(x > hi, _SAT_ABOVE[above](x), y)
        y = np.where(np.isnan(x), np.float32(np.nan), y).astype(np.float32)
    return _canonicalize_nan(y)


_SAT_BELOW = {
    "zero": lambda x: np.float32(0.0),
    "-zero": lambda x: np.float32(-0.0),
}
_SAT_ABOVE = {
    "inf": lambda x: np.float32(np.inf),
    "identity": lambda x: x,
}


# -- oracles --------------------------------------------------------------------

def reference64(function, x):
    """The exact function in float64 math: the oracle for error measurement.

    Parameters
    ----------
    function : str
        ``"exp"``, ``"softplus"`` or ``"silu"``.
    x : array_like
        Inputs (converted to float64).

    Returns
    -------
    numpy.ndarray of float64
        ``exp``, ``logaddexp(0, x)``, ``x·σ(x)``; limits at ±Inf
        (``silu(−Inf) = −0``), NaN for NaN.
    """
    check_choice("reference64", "function", function, TABLE_FUNCTIONS)
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        if function == "exp":
            return np.exp(x)
        if function == "rsqrt":
            return 1.0 / np.sqrt(x)
        if function == "softplus":
            return np.logaddexp(0.0, x)
        sig = np.where(x >= 0, 1.0 / (1.0 + np.exp(-x)), np.exp(x) / (1.0 + np.exp(x)))
        y = x * sig
        return np.where(x == -np.inf, -0.0, y)


def exact_fp32(function, x):
    """The function correctly rounded (via float64) to binary32, no tables.

    A study baseline, not hardware: it stands for an FP32 GPU's ``expf`` /
    ``log1pf`` and shows how much of the SSM error is the tables' own.
    """
    y = reference64(function, np.asarray(x, dtype=np.float32)).astype(np.float32)
    return _canonicalize_nan(y)


# -- error measurement ----------------------------------------------------------

def _ulp32(v):
    """binary32 ulp of |v| (float64 array), with the subnormal floor."""
    a = np.abs(v)
    e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    return np.ldexp(1.0, (np.maximum(e, -126) - 23).astype(np.int64))


def _test_points(spec, per_segment, rng):
    """binary32 inputs covering every segment, both range ends and the saturation."""
    segs = np.arange(spec.nodes - 1, dtype=np.float64)
    frac = (np.arange(per_segment, dtype=np.float64) + 0.5) / per_segment
    grid = spec.lo + (segs[:, None] + frac[None, :]) * spec.step
    nodes = spec.lo + np.arange(spec.nodes) * spec.step
    rand = rng.uniform(spec.lo, spec.hi, size=spec.nodes * 4)
    tiny = np.ldexp(1.0, -np.arange(0, 150))                   # down to 2^-149
    width = spec.hi - spec.lo
    outside = np.concatenate([np.linspace(spec.lo - width, spec.lo, 257),
                              np.linspace(spec.hi, spec.hi + width, 257)])
    pts = np.concatenate([grid.ravel(), nodes, rand, tiny, -tiny, outside])
    pts = pts.astype(np.float32)
    # The binary32 neighbours of the nodes exercise segment switches.
    edge = np.concatenate([np.nextafter(nodes.astype(np.float32), np.float32(np.inf)),
                           np.nextafter(nodes.astype(np.float32), np.float32(-np.inf))])
    return np.unique(np.concatenate([pts, edge]))


def measure_lut_error(spec, *, per_segment=16, seed=0):
    """Measure a table against float64 math over binary32 inputs.

    The inputs are ``per_segment`` evenly spaced points inside every segment,
    every node and both binary32 neighbours, ``4·nodes`` uniform random
    points, ``±2^-k`` for k = 0…149 (down to the smallest subnormal) and points
    beyond both ends (saturation).

    Parameters
    ----------
    spec : LUTSpec
    per_segment : int
    seed : int
        Seed of the random points.

    Returns
    -------
    dict
        Over the table range ``[lo, hi]``: ``max_rel`` (relative error, over
        inputs whose true value is a normal binary32), ``max_abs``, ``max_ulp`` (error in
        binary32 ulps of the true value) and ``worst_x`` (the input with the
        largest ulp error). Saturation: ``below_max_abs`` (largest absolute
        error below ``lo``, at most ``|f(lo)|``) and ``above_max_rel`` (largest
        relative error of the identity above ``hi``; ``None`` for exp, which
        returns +Inf there). ``points``: inputs tried.
    """
    rng = np.random.default_rng(seed)
    x = _test_points(spec, per_segment, rng)
    y = lut_eval(spec, x).astype(np.float64)
    ref = reference64(spec.function, x)
    with np.errstate(invalid="ignore"):
        err = np.abs(y - ref)
    # Relative error is meaningful only where the true value is a normal
    # binary32; below 2^-126 the ulp error says how the result rounded.
    nz = np.abs(ref) >= 2.0 ** -126
    rel = np.where(nz, err / np.where(nz, np.abs(ref), 1.0), 0.0)
    ulp = err / _ulp32(ref)
    inside = (x >= spec.lo) & (x <= spec.hi)
    below, above = x < spec.lo, x > spec.hi
    k = int(np.argmax(np.where(inside, ulp, -1.0)))
    return {
        "max_rel": float(rel[inside].max()),
        "max_abs": float(err[inside].max()),
        "max_ulp": float(ulp[inside].max()),
        "worst_x": float(x[k]),
        "points": int(x.size),
        "below_max_abs": float(err[below].max()),
        "above_max_rel": float(rel[above].max()) if SATURATION[spec.function][1] == "identity"
        else None,
    }
