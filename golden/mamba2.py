"""Mamba2 decode step: the SpecMamba SSM unit's numerical specification.

Two models of one token of the Mamba2 selective state update (SpecMamba, arXiv 2509.19873;
``Mamba2.step`` / ``selective_state_update`` in ``state-spaces/mamba``),
for all heads at once, with ``ngroups = 1`` (B and C shared by the heads):

``ssm_step_ref``
    The paper's equations in float64: the oracle.
``ssm_step_hw``
    The SSM unit bit for bit: every operation is one IEEE binary32 multiply
    or add rounded to nearest even, the nonlinear functions are the tables of
    :mod:`golden.nonlinear`, and the ``Σ_n`` reduction has a fixed tree shape.
    The ``SSMUnit`` RTL must reproduce its bits, special values included.

Hardware-numerics contract (per head ``h``, row ``p``, state column ``n``)
-------------------------------------------------------------------------
Formats. Every operand, parameter, intermediate and output is binary32. The
state is binary32 too (``state_format="fp32"``), as in Mamba, whose
``ssm_state`` is FP32 even when the model runs in FP16/BF16: the state
integrates up to ~1/(dt·|A|) ≈ 1000 tokens of contributions, and a binary16
state (option ``"fp16"``) measures 10⁻³-level errors (docs/ssm-numerics.md).
Parameters are prepared offline: ``A = −exp(A_log)`` rounded once to binary32.
Inputs from the linear unit in binary16 embed exactly in binary32.

Order of operations (``fl`` = one binary32 rounding, RNE, subnormals kept)::

    s      = fl(dt[h] + dt_bias[h])                   per head
    delta  = softplus_lut(s)                          per head
    a      = fl(delta · A[h])                         per head
    dA     = exp_lut(a)                               per head
    u      = fl(delta · x[h,p])                       per row
    h'     = fl( fl(dA · h[h,p,n]) + fl(u · B[n]) )   per state element (EMU)
    q      = fl(h' · C[n])                            per state element (EMU)
    y0     = Σ_n q  in the fixed tree/accumulator order below
    y      = fl(y0 + fl(D[h] · x[h,p]))               per row
    out    = fl(y · silu_lut(z[h,p]))                 per row, if z is given

With ``state_format="fp16"`` the EMU rounds ``h'`` to binary16 (RNE of the
binary32 sum; a double rounding, by definition) and ``q`` uses that stored value.

Reduction order. Let ``g = min(lanes, d_state)``. The EMUs produce the
products of one group of ``g`` consecutive columns of a row per cycle (columns
``k·g … k·g + g − 1``; the row's last group is partial when ``g`` does not
divide ``d_state``); a balanced binary adder tree adds them pairwise,
``(q0+q1), (q2+q3), …`` then ``((q0+q1)+(q2+q3)), …``, every adder rounding.
Where a level has an odd count its last value passes up unchanged: the tree is
that of ``2**⌈log2 g⌉`` inputs padded with −0, and ``v + (−0) = v`` exactly for
every binary32 ``v``. The row's ``⌈d_state/g⌉`` tree sums ``T_0, T_1, …`` enter
an accumulator in ascending ``n``: ``acc = T_0``, ``acc = fl(acc + T_k)`` (no +0
seed, so signed zeros are exact). ``D·x`` is added last. A row's result thus
depends on ``lanes`` but not on the order in which rows, heads or tiles are
scheduled, as long as each row's groups are accumulated in ascending ``n``; the
new state does not depend on ``lanes`` at all.

Special values. IEEE 754 semantics for every multiply and add (NaN in → NaN
out; ``Inf·0``, ``Inf − Inf`` → NaN; overflow → ±Inf; gradual underflow). The
tables follow :data:`golden.nonlinear.SATURATION` (NaN → NaN, ``softplus(+Inf) =
+Inf``, ``softplus(−Inf) = +0``, ``exp(−Inf) = +0``, ``silu(−Inf) = −0``). Every
NaN leaving the unit (``out``, ``h'``) is the canonical quiet NaN ``0x7FC00000``
(``0x7E00`` for a binary16 state), so NaN payloads never need to match.
Consequences: NaN in ``x[h,p]`` poisons row ``(h,p)`` only; NaN in ``dt[h]``
poisons head ``h``; ``dt = +Inf`` gives ``delta = +Inf``, ``dA = 0`` and
``h' = ±Inf`` (NaN where ``x·B = 0``); ``dt = −Inf`` gives ``delta = +0``,
``dA = 1``, ``h' = h + (±0)`` (the head is frozen, bit for bit except that a
−0 element may become +0); ``x = ±Inf`` with ``B[n] = 0``
gives NaN at ``(h,p,n)``.

Contract ``"dspfp32"`` (``SSMConfig.contract``; the board presets). The same
operations in the same order, each one a DSPFP32 multiply or add of the Versal
DSP58 (AMD AM004, sections "DSPFP32 Unisim Primitive" and "Subnormals";
:mod:`golden.dsp`): a subnormal operand reads as the zero of its sign and a
subnormal result is flushed to the zero of its sign, after rounding. The
tables' Horner steps flush the same way (:func:`golden.nonlinear.lut_eval`).
Nothing else changes: a result that is zero or normal under ``"ieee"`` and
whose operands were not subnormal is bit-identical. :class:`SSMStep` counts
the flushes, so a study can say how often they happen
(``docs/ssm-numerics.md``).
"""

from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from .dsp import SSM_CONTRACTS, Binary32Ops
from .nonlinear import CANONICAL_NAN32, DEFAULT_LUTS, LUTSpec, exact_fp32, lut_eval
from .validate import check_choice, check_int

__all__ = [
    "MAMBA2_SIZES", "MAMBA2_DEFAULTS", "MAMBA2_VOCAB", "STATE_FORMATS", "SSMConfig", "SSMParams",
    "SSMStep", "row_words", "ssm_preset", "ssm_preset_names", "mamba2_init_params",
    "ssm_step_ref", "ssm_step_hw", "ssm_step_hw_bits", "softplus64", "silu64",
    "CANONICAL_NAN16",
]

#: (d_model, n_layer) of the Mamba2 checkpoints (the ``state-spaces/mamba`` model cards).
MAMBA2_SIZES = {
    "130M": (768, 24),
    "370M": (1024, 48),
    "780M": (1536, 48),
    "1.3B": (2048, 48),
    "2.7B": (2560, 64),
}

#: Vocabulary of the Mamba2 checkpoints (SpecMamba arXiv 2509.19873 and the reference ``state-spaces/mamba`` ``Mamba2.step``; 50,277 tokens padded to 50,288).
MAMBA2_VOCAB = 50_288

#: Mamba2 defaults used by :meth:`SSMConfig.from_model` and
#: :func:`mamba2_init_params` (``mamba_ssm/modules/mamba2.py``).
MAMBA2_DEFAULTS = {
    "expand": 2, "headdim": 64, "d_state": 128, "d_conv": 4, "ngroups": 1,
    "A_init_range": (1.0, 16.0), "dt_min": 0.001, "dt_max": 0.1, "dt_init_floor": 1e-4,
}

STATE_FORMATS = ("fp32", "fp16")

#: Canonical quiet NaN of binary16, for a binary16 state.
CANONICAL_NAN16 = np.uint16(0x7E00)


def _is_pow2(v):
    return v > 0 and v & (v - 1) == 0


def row_words(d_state, lanes):
    """Elements of a state row in an SSM unit's tile order: ``d_state`` padded to whole
    groups of ``min(lanes, d_state)`` (``⌈N/lanes⌉·lanes`` for ``lanes ≤ d_state``; ``N``
    when a word holds several rows)."""
    width = min(lanes, d_state)
    return -(-d_state // width) * width


@dataclass(frozen=True, kw_only=True)
class SSMConfig:
    """Geometry and numerics of the SSM unit.

    Parameters
    ----------
    nheads : int
        Heads per layer (Mamba2: ``expand·d_model/headdim``; 80 for 2.7B).
    headdim : int
        Rows per head, ``P`` (Mamba2: 64).
    d_state : int
        State columns per row, ``N`` (Mamba2: 128).
    lanes : int
        Element-wise multiply units (EMUs): state elements updated per cycle.
        Any count up to ``d_state`` (a row's last group of columns is partial
        when ``lanes`` does not divide ``d_state``), or a power-of-two multiple
        of a power-of-two ``d_state`` (:attr:`rows_per_word` rows per cycle;
        the hardware takes them from one head). It fixes the adder-tree width of
        the ``Σ_n h·C`` reduction, ``min(lanes, d_state)``: several rows a cycle
        change no result.
    state_format : str
        ``"fp32"`` (the contract, as Mamba) or ``"fp16"`` (a measured alternative).
    exp_lut, softplus_lut, silu_lut : LUTSpec
        Tables of the nonlinear functions (:data:`golden.nonlinear.DEFAULT_LUTS`).
    contract : str
        Arithmetic of every binary32 multiply and add (:data:`golden.dsp.SSM_CONTRACTS`):
        ``"ieee"`` (IEEE 754, gradual underflow; fabric FP units) or ``"dspfp32"``
        (the Versal DSPFP32 multiplier and adder: subnormal operands and results
        read and become signed zeros, :mod:`golden.dsp`). The order of operations
        is the same for both.
    input_words : int
        binary32 words per beat of the unit's input port (x, B, C, dt and the
        layer parameters): a power of two that divides ``lanes``, ``d_state``,
        ``nheads`` and ``nheads·headdim``. A token's ``2·d_state + nheads·headdim
        + nheads`` input words must arrive faster than its sweep of
        :attr:`cycles_per_token` cycles (8 words, 256 bits, on the board presets).
    state_ports : int
        Memory ports the committed state streams through, each way (read and write):
        a power of two that divides ``lanes``. The unit takes ``lanes`` binary32 words
        a cycle; port ``p`` carries words ``p·lanes/state_ports …`` of each, from a
        stripe of its own (:func:`golden.memory_map.stripe_state`). The VHK158 preset
        uses 16: the 128 lanes' 4,096 bits a fabric cycle in 256-bit HBM port beats,
        one a fabric cycle per port, the rate of a write port.
    head_groups : int
        Passes of the SSM unit a layer: the unit is built for ``nheads/head_groups``
        heads (:attr:`pass_config`) and a layer's heads run as that many passes, group
        ``g`` the heads ``g·nheads/head_groups …``. Heads are independent given ``x``,
        ``B``, ``C`` and ``dt`` (Mamba2), so no result depends on it; it lets a group's
        pass start once in_proj has produced its inputs, while the linear unit computes
        the rest (SpecMamba's per-head hand-over, arXiv 2509.19873). It must divide
        ``nheads``, and ``input_words`` must divide a group's heads.
    """

    nheads: int
    headdim: int = 64
    d_state: int = 128
    lanes: int = 64
    state_format: str = "fp32"
    exp_lut: LUTSpec = field(default_factory=lambda: DEFAULT_LUTS["exp"])
    softplus_lut: LUTSpec = field(default_factory=lambda: DEFAULT_LUTS["softplus"])
    silu_lut: LUTSpec = field(default_factory=lambda: DEFAULT_LUTS["silu"])
    contract: str = "ieee"
    input_words: int = 1
    state_ports: int = 1
    head_groups: int = 1

    def __post_init__(self):
        check_int("SSMConfig", "nheads", self.nheads, min=1)
        check_int("SSMConfig", "headdim", self.headdim, min=1)
        check_int("SSMConfig", "d_state", self.d_state, min=1)
        check_int("SSMConfig", "lanes", self.lanes, min=1)
        ok = self.lanes <= self.d_state or (
            _is_pow2(self.lanes) and _is_pow2(self.d_state) and self.lanes % self.d_state == 0)
        if not ok:
            raise ValueError(f"SSMConfig.lanes must be at most d_state ({self.d_state}) or a "
                             f"power-of-two multiple of a power-of-two d_state, "
                             f"not {self.lanes!r}")
        check_choice("SSMConfig", "state_format", self.state_format, STATE_FORMATS)
        check_choice("SSMConfig", "contract", self.contract, SSM_CONTRACTS)
        check_int("SSMConfig", "input_words", self.input_words, min=1, max=64)
        counts = {"lanes": self.lanes, "d_state": self.d_state, "nheads": self.nheads,
                  "nheads*headdim": self.nheads * self.headdim}
        bad = [k for k, v in counts.items() if v % self.input_words]
        if not _is_pow2(self.input_words) or bad:
            raise ValueError(f"SSMConfig.input_words must be a power of two that divides "
                             f"lanes, d_state, nheads and nheads*headdim "
                             f"({', '.join(f'{k} = {v}' for k, v in counts.items())}), "
                             f"not {self.input_words!r}")
        check_int("SSMConfig", "head_groups", self.head_groups, min=1)
        divisors = [g for g in range(1, self.nheads + 1) if self.nheads % g == 0
                    and (self.nheads // g) % self.input_words == 0]
        if self.head_groups not in divisors:
            raise ValueError(f"SSMConfig.head_groups must divide nheads ({self.nheads}) into "
                             f"groups of a multiple of input_words ({self.input_words}) heads: "
                             f"one of {', '.join(map(str, divisors))}, not {self.head_groups!r}")
        check_int("SSMConfig", "state_ports", self.state_ports, min=1, max=64)
        if not _is_pow2(self.state_ports) or self.lanes % self.state_ports:
            raise ValueError(f"SSMConfig.state_ports must be a power of two that divides "
                             f"lanes ({self.lanes}), not {self.state_ports!r}")
        for name, function in (("exp_lut", "exp"), ("softplus_lut", "softplus"),
                               ("silu_lut", "silu")):
            spec = getattr(self, name)
            if not isinstance(spec, LUTSpec) or spec.function != function:
                raise TypeError(f"SSMConfig.{name} must be a LUTSpec with function "
                                f"{function!r}, not {spec!r}")

    @classmethod
    def from_model(cls, size, **overrides):
        """Config of one Mamba2 checkpoint's SSM layer.

        Parameters
        ----------
        size : str
            A key of :data:`MAMBA2_SIZES` (``"130M"`` … ``"2.7B"``).
        **overrides
            Any other field (``lanes``, ``state_format``, tables). ``headdim``
            and ``d_state`` default to Mamba2's 64 and 128.

        Examples
        --------
        >>> SSMConfig.from_model("2.7B").nheads
        80
        """
        check_choice("SSMConfig.from_model", "size", size, tuple(MAMBA2_SIZES))
        d_model, _ = MAMBA2_SIZES[size]
        headdim = overrides.pop("headdim", MAMBA2_DEFAULTS["headdim"])
        check_int("SSMConfig", "headdim", headdim, min=1)
        d_inner = MAMBA2_DEFAULTS["expand"] * d_model
        if d_inner % headdim:
            raise ValueError(f"SSMConfig.headdim must divide d_inner ({d_inner}), not {headdim!r}")
        overrides.setdefault("d_state", MAMBA2_DEFAULTS["d_state"])
        return cls(nheads=d_inner // headdim, headdim=headdim, **overrides)

    @property
    def d_inner(self):
        """``nheads·headdim``: the width of x, z and y."""
        return self.nheads * self.headdim

    @property
    def pass_config(self):
        """The SSM unit one pass runs: ``nheads/head_groups`` heads, everything else the
        same (``head_groups`` 1)."""
        if self.head_groups == 1:
            return self
        return replace(self, nheads=self.nheads // self.head_groups, head_groups=1)

    @property
    def state_shape(self):
        """``(nheads, headdim, d_state)``."""
        return (self.nheads, self.headdim, self.d_state)

    @property
    def state_elems(self):
        """State elements per layer (655,360 for Mamba2-2.7B)."""
        return self.nheads * self.headdim * self.d_state

    @property
    def tree_width(self):
        """Products per adder tree: ``min(lanes, d_state)``."""
        return min(self.lanes, self.d_state)

    @property
    def tree_depth(self):
        """Adder levels of the reduction tree: ``⌈log2(tree_width)⌉``."""
        return (self.tree_width - 1).bit_length()

    @property
    def groups_per_row(self):
        """Tree sums accumulated sequentially per row: ``⌈d_state/tree_width⌉``."""
        return -(-self.d_state // self.tree_width)

    @property
    def rows_per_word(self):
        """State rows one word of ``lanes`` elements holds (the unit sweeps a word a cycle):
        ``lanes/d_state`` rows of a head when ``lanes > d_state``, else 1."""
        return max(1, self.lanes // self.d_state)

    @property
    def one_row(self):
        """This unit at one row a cycle at most: ``lanes`` (and ``input_words``) capped at
        ``d_state``, everything else the same (the latencies of a row, which several rows a
        cycle share)."""
        if self.lanes <= self.d_state:
            return self
        return replace(self, lanes=self.d_state,
                       input_words=min(self.input_words, self.d_state))

    @property
    def row_words(self):
        """Elements of a row in the unit's tile order (:func:`row_words`)."""
        return row_words(self.d_state, self.lanes)

    @property
    def cycles_per_token(self):
        """EMU cycles to sweep the whole state once: one group of ``tree_width`` columns of
        a row per cycle (``lanes ≤ d_state``), or ``lanes/d_state`` rows per cycle."""
        return -(-self.nheads * self.headdim * self.groups_per_row // self.rows_per_word)

    @property
    def input_beats(self):
        """Input-port beats per token: ``(2·d_state + nheads·headdim + nheads) / input_words``."""
        return (2 * self.d_state + self.d_inner + self.nheads) // self.input_words

    @property
    def state_dtype(self):
        """numpy dtype of the stored state."""
        return np.dtype(np.float32 if self.state_format == "fp32" else np.float16)


_SIM = dict(nheads=2, headdim=4, d_state=16, lanes=4)


def ssm_preset_names():
    """Names accepted by :func:`ssm_preset`: ``"sim"`` and the Mamba2 sizes."""
    return ("sim",) + tuple(MAMBA2_SIZES)


def ssm_preset(name, **overrides):
    """Named SSM config: ``"sim"`` (2 heads × 4 × 16, 4 lanes) or a Mamba2 size.

    Raises
    ------
    ValueError
        If ``name`` is unknown; the message lists the allowed names.
    """
    check_choice("ssm_preset", "name", name, ssm_preset_names())
    if name == "sim":
        return SSMConfig(**{**_SIM, **overrides})
    return SSMConfig.from_model(name, **overrides)


@dataclass(frozen=True, kw_only=True)
class SSMParams:
    """Per-head parameters of one Mamba2 layer's SSM.

    Parameters
    ----------
    A : numpy.ndarray, shape (nheads,)
        ``−exp(A_log)``, negative.
    dt_bias : numpy.ndarray, shape (nheads,)
    D : numpy.ndarray, shape (nheads,)
        Skip connection.

    The hardware model reads them rounded to binary32; the reference reads them
    in float64. Hold binary32-representable values (as
    :func:`mamba2_init_params` does) to compare the two on equal inputs.
    """

    A: np.ndarray
    dt_bias: np.ndarray
    D: np.ndarray

    def check(self, cfg):
        """Raise ``ValueError`` unless every array has shape ``(cfg.nheads,)``."""
        for name in ("A", "dt_bias", "D"):
            shape = np.shape(getattr(self, name))
            if shape != (cfg.nheads,):
                raise ValueError(f"SSMParams.{name} must have shape ({cfg.nheads},), not {shape}")


def mamba2_init_params(cfg, rng, *, A_init_range=MAMBA2_DEFAULTS["A_init_range"],
                       dt_min=MAMBA2_DEFAULTS["dt_min"], dt_max=MAMBA2_DEFAULTS["dt_max"],
                       dt_init_floor=MAMBA2_DEFAULTS["dt_init_floor"]):
    """Draw parameters as Mamba2 initializes them, rounded to binary32.

    ``A_log = log(U(A_init_range))``; ``dt = exp(U(log dt_min, log dt_max))``
    clamped at ``dt_init_floor``, and ``dt_bias = softplus⁻¹(dt) = dt +
    log(−expm1(−dt))``; ``D = 1``.

    Parameters
    ----------
    cfg : SSMConfig
    rng : numpy.random.Generator

    Returns
    -------
    SSMParams
        float32 arrays of shape (nheads,).
    """
    H = cfg.nheads
    A_log = np.log(rng.uniform(*A_init_range, size=H))
    dt = np.exp(rng.uniform(np.log(dt_min), np.log(dt_max), size=H))
    dt = np.maximum(dt, dt_init_floor)
    dt_bias = dt + np.log(-np.expm1(-dt))
    return SSMParams(A=(-np.exp(A_log)).astype(np.float32), dt_bias=dt_bias.astype(np.float32),
                     D=np.ones(H, dtype=np.float32))


class SSMStep(NamedTuple):
    """One decode step's results.

    Attributes
    ----------
    y : ndarray, shape (nheads, headdim)
        Output (gated by ``silu(z)`` when ``z`` was given).
    state : ndarray, shape (nheads, headdim, d_state)
        The new state ``h'``.
    delta : ndarray, shape (nheads,)
        ``softplus(dt + dt_bias)``.
    dA : ndarray, shape (nheads,)
        ``exp(delta·A)``.
    flushes : tuple of int
        ``(operands, results)`` flushed to zero by the ``"dspfp32"`` contract
        (``(0, 0)`` under ``"ieee"``), counted per element and operation.
    """

    y: np.ndarray
    state: np.ndarray
    delta: np.ndarray
    dA: np.ndarray
    flushes: tuple = (0, 0)


def _check_shapes(cfg, state, x, B, C, dt, z):
    H, P, N = cfg.state_shape
    for name, arr, shape in (("state", state, (H, P, N)), ("x", x, (H, P)), ("B", B, (N,)),
                             ("C", C, (N,)), ("dt", dt, (H,)), ("z", z, (H, P))):
        if arr is not None and np.shape(arr) != shape:
            raise ValueError(f"{name} must have shape {shape}, not {np.shape(arr)}")


# -- float64 reference ----------------------------------------------------------

def softplus64(x):
    """``ln(1 + e^x)`` in float64, stable for all ``x``."""
    return np.logaddexp(0.0, np.asarray(x, dtype=np.float64))


def silu64(x):
    """``x·σ(x)`` in float64."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore"):
        return x / (1.0 + np.exp(-x))


def ssm_step_ref(cfg, params, state, x, B, C, dt, z=None):
    """The Mamba2 decode step in float64: the paper's equations (SpecMamba arXiv 2509.19873; ``Mamba2.step``).

    Parameters
    ----------
    cfg : SSMConfig
    params : SSMParams
    state : array_like, shape (nheads, headdim, d_state)
        The state before the token.
    x : array_like, shape (nheads, headdim)
    B, C : array_like, shape (d_state,)
    dt : array_like, shape (nheads,)
        Raw ``dt`` from the input projection (before ``dt_bias``).
    z : array_like, shape (nheads, headdim), optional
        Gate; the output is ``y·silu(z)`` when given.

    Returns
    -------
    SSMStep
        float64 arrays.
    """
    params.check(cfg)
    _check_shapes(cfg, state, x, B, C, dt, z)
    f = lambda a: np.asarray(a, dtype=np.float64)  # noqa: E731
    state, x, B, C, dt = f(state), f(x), f(B), f(C), f(dt)
    A, dt_bias, D = f(params.A), f(params.dt_bias), f(params.D)
    delta = softplus64(dt + dt_bias)                                     # (H,)
    dA = np.exp(delta * A)                                               # (H,)
    new = dA[:, None, None] * state + (delta[:, None] * x)[:, :, None] * B[None, None, :]
    y = np.einsum("hpn,n->hp", new, C) + D[:, None] * x
    if z is not None:
        y = y * silu64(z)
    return SSMStep(y=y, state=new, delta=delta, dA=dA)


# -- hardware-numerics model ----------------------------------------------------

def _tree_reduce(q, width, ops):
    """Σ over the last axis: balanced pairwise trees of ``width``, then ascending accumulation.

    ``q`` has shape (..., N); see the module docstring. The groups are padded
    with −0 to ``⌈N/width⌉`` groups of ``2**⌈log2 width⌉``: an exact identity
    (under ``"dspfp32"`` too: ``−0`` is not subnormal, and ``v + (−0) = v`` for
    every value the flushing adder can be given).
    """
    groups = -(-q.shape[-1] // width)
    span = 1 << (width - 1).bit_length()
    t = np.full(q.shape[:-1] + (groups, span), -0.0, dtype=q.dtype)
    for k in range(groups):
        part = q[..., k * width:(k + 1) * width]
        t[..., k, :part.shape[-1]] = part
    while t.shape[-1] > 1:
        t = ops.add(t[..., 0::2], t[..., 1::2])
    t = t[..., 0]
    acc = t[..., 0]
    for k in range(1, t.shape[-1]):
        acc = ops.add(acc, t[..., k])
    return acc


def _as_f32(a):
    """float32 view of uint32 bit patterns, or a binary32 rounding of anything else."""
    a = np.asarray(a)
    if a.dtype == np.uint32:
        return a.view(np.float32)
    return a.astype(np.float32)


def _as_state(cfg, a):
    a = np.asarray(a)
    if a.dtype == np.uint32 and cfg.state_format == "fp32":
        return a.view(np.float32)
    if a.dtype == np.uint16 and cfg.state_format == "fp16":
        return a.view(np.float16)
    return a.astype(cfg.state_dtype)


def _canon(a):
    """Replace every NaN by the canonical quiet NaN of its format."""
    if a.dtype == np.float16:
        return np.where(np.isnan(a), CANONICAL_NAN16, a.view(np.uint16)).view(np.float16)
    return np.where(np.isnan(a), CANONICAL_NAN32, a.view(np.uint32)).view(np.float32)


def ssm_step_hw(cfg, params, state, x, B, C, dt, z=None, *, nonlinear="lut"):
    """The SSM unit's decode step, bit for bit (contract in the module docstring).

    Parameters
    ----------
    cfg : SSMConfig
    params : SSMParams
        Rounded to binary32 (they are binary32 registers in hardware).
    state : array_like, shape (nheads, headdim, d_state)
        float32 (``state_format="fp32"``) or float16 (``"fp16"``) values, or
        their raw ``uint32`` / ``uint16`` bit patterns.
    x, z : array_like, shape (nheads, headdim)
    B, C : array_like, shape (d_state,)
    dt : array_like, shape (nheads,)
        float32 values or raw ``uint32`` bit patterns; other float dtypes are
        rounded to binary32 first (binary16 embeds exactly).
    nonlinear : {"lut", "exact"}
        ``"lut"`` is the hardware. ``"exact"`` replaces the tables by correctly
        rounded binary32 functions (an FP32-GPU-like baseline for error
        studies; not a hardware mode).

    Returns
    -------
    SSMStep
        ``y``, ``delta``, ``dA`` in float32; ``state`` in ``cfg.state_dtype``.
        Every NaN is canonical.
    """
    params.check(cfg)
    _check_shapes(cfg, state, x, B, C, dt, z)
    check_choice("ssm_step_hw", "nonlinear", nonlinear, ("lut", "exact"))
    ops = Binary32Ops(cfg.contract)
    if nonlinear == "lut":
        softplus = lambda v: lut_eval(cfg.softplus_lut, v, ops=ops)  # noqa: E731
        exp = lambda v: lut_eval(cfg.exp_lut, v, ops=ops)  # noqa: E731
        silu = lambda v: lut_eval(cfg.silu_lut, v, ops=ops)  # noqa: E731
    else:
        softplus = lambda v: exact_fp32("softplus", v)  # noqa: E731
        exp = lambda v: exact_fp32("exp", v)  # noqa: E731
        silu = lambda v: exact_fp32("silu", v)  # noqa: E731
    A, dt_bias, D = (np.asarray(p, dtype=np.float32) for p in (params.A, params.dt_bias, params.D))
    h = _as_state(cfg, state)
    x, B, C, dt = _as_f32(x), _as_f32(B), _as_f32(C), _as_f32(dt)
    mul, add = ops.mul, ops.add
    with np.errstate(all="ignore"):
        # Per head: the dt path. One softplus and one exp per head per token.
        delta = softplus(add(dt, dt_bias))
        dA = exp(mul(delta, A))
        # Per row: the input scaling shared by the row's d_state EMUs.
        u = mul(delta[:, None], x)
        # Per state element (EMU): two products, one sum, one rounding each.
        new = add(mul(dA[:, None, None], h.astype(np.float32)), mul(u[:, :, None], B[None, None, :]))
        new = new.astype(cfg.state_dtype)          # fp16 state: RNE to binary16
        q = mul(new.astype(np.float32), C[None, None, :])
        y = _tree_reduce(q, cfg.tree_width, ops)
        y = add(y, mul(D[:, None], x))
        if z is not None:
            y = mul(y, silu(_as_f32(z)))
    return SSMStep(y=_canon(y), state=_canon(new), delta=_canon(delta), dA=_canon(dA),
                   flushes=(ops.flushed_in, ops.flushed_out))


def ssm_step_hw_bits(cfg, params, state, x, B, C, dt, z=None):
    """:func:`ssm_step_hw` on raw bit patterns: what a bench compares.

    Parameters
    ----------
    state : numpy.ndarray of uint32 (fp32 state) or uint16 (fp16 state)
    x, B, C, dt, z : numpy.ndarray of uint32
        binary32 bit patterns; shapes as in :func:`ssm_step_hw`.

    Returns
    -------
    (y, state) : (numpy.ndarray of uint32, numpy.ndarray of uint32 or uint16)
    """
    want = np.uint32 if cfg.state_format == "fp32" else np.uint16
    for name, arr, dtype in (("state", state, want), ("x", x, np.uint32), ("B", B, np.uint32),
                             ("C", C, np.uint32), ("dt", dt, np.uint32), ("z", z, np.uint32)):
        if arr is not None and np.asarray(arr).dtype != dtype:
            raise TypeError(f"{name} must be a {np.dtype(dtype).name} bit array, "
                            f"not {np.asarray(arr).dtype}")
    out = ssm_step_hw(cfg, params, state, x, B, C, dt, z)
    return out.y.view(np.uint32), out.state.view(want)
