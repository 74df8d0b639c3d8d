"""State backtracking for speculative decoding of Mamba2: four policies, run and counted.

A speculative step runs a draft tree through a model (SPEC §4): the draft
proposes it node by node, the target verifies all of it in one pass. Each node
advances the decode state of every layer by one token, from its parent's state.
Greedy acceptance (:func:`golden.tree.accepted_path`) then picks a root-to-node
path, and each model must continue from the state *after the last node of that
path*, as if it had decoded only the path's tokens. Mamba keeps no history:
once the pass is over, that state must be restored by a backtracking policy.

The decode state of one Mamba2 layer (:class:`Mamba2Mixer`) is a pair

``conv_state``, shape ``(d_conv − 1, conv_dim)``
    The causal conv1d window: the last ``d_conv − 1`` raw ``xBC`` rows
    (``conv_dim = d_inner + 2·d_state``), a shift register.
``ssm_state``, shape ``(nheads, headdim, d_state)``
    ``h`` of :mod:`golden.mamba2`.

The policies (one model, one layer; ``n`` nodes in the tree, the root
included; ``L`` = nodes on the accepted path = tokens committed by the step,
``1 ≤ L ≤ depth + 1``):

=====================  ==========================================================  =====================
policy                 kept during the pass, per node                              restore
=====================  ==========================================================  =====================
(a) ``store``          the full state (:class:`StoreStates`)                        re-point, no copy
(b) ``replay``         light intermediates Δ, dA, x, B and the raw xBC row          replay L updates
                       (:class:`StoreIntermediates`)                                from the checkpoint
(c) ``recompute``      nothing (:class:`Recompute`); ``scope="state"`` keeps the     re-run the layer on
                       layer input                                                  the L path tokens
(d) ``hybrid``         draft: (b); target: (c) along the accepted path              both
                       (:class:`SpeculativeBacktracking`, :data:`SYSTEM_POLICIES`)
=====================  ==========================================================  =====================

The *checkpoint* is the step's start state, the committed state: it already
sits in the state memory where the previous step left it, and the pass never
overwrites it (node states live in the FIFO ring, :mod:`golden.tree`), so
keeping it costs nothing; reading it back does.

Generic API. A policy drives any *recurrence*: an object with

``step(state, token, *, meter=None) -> Stepped(state, output, light, input)``
    One token through the layer: the verification pass's work. ``light`` is
    the tuple of arrays the state update consumes, ``input`` the token in
    the layer's value format.
``replay(state, light, *, meter=None) -> state``
    The state update alone, from ``light``; bit for bit ``step(...).state``.
``update(state, token, *, meter=None) -> state``
    Only the part of ``step`` the state depends on; bit for bit
    ``step(...).state`` (needed by ``Recompute(scope="state")`` only).

``state``, ``light`` and a token are numpy arrays or tuples of them.
:class:`Mamba2Mixer` is the Mamba2 one, with the SSM step of either numerics:
:func:`golden.mamba2.ssm_step_hw` (the SSM unit, bit for bit) or
:func:`golden.mamba2.ssm_step_ref` (float64).

Instrumentation. Every byte a policy keeps or reads goes through a
:class:`BacktrackMemory`, and every multiply of the mixer through
:meth:`CostMeter.mul`, so a :class:`CostMeter` holds the *actual* traffic and
work of a run. :mod:`golden.backtrack_cost` gives the same figures in closed
form; the tests check that the two agree exactly.
"""

from collections import Counter
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np

from .mamba2 import (CANONICAL_NAN16, MAMBA2_DEFAULTS, MAMBA2_SIZES, SSMConfig, SSMParams,
                     mamba2_init_params, silu64, softplus64, ssm_step_hw, ssm_step_ref)
from .nonlinear import CANONICAL_NAN32, lut_eval
from .tree import AcceptedPath, dead_times, validate_parents
from .validate import check_choice, check_float, check_int

__all__ = [
    "NUMERICS", "WHERE", "PHASES", "COMMITTED", "MixerConfig", "MixerParams", "mixer_init_params",
    "Stepped", "Mamba2Mixer", "CostMeter", "BacktrackMemory", "StoreStates", "StoreIntermediates",
    "Recompute", "POLICIES", "SpeculativeBacktracking", "SYSTEM_POLICIES", "TreePass",
    "tree_pass", "restore", "backtrack", "sequential_run", "speculative_backtrack", "check_path",
    "check_policy",
]

#: Numerics of :class:`Mamba2Mixer`: the SSM unit (``ssm_step_hw``) or the float64 oracle.
NUMERICS = ("hw", "ref")

#: Where a policy keeps an item: on-chip RAM (BRAM/URAM) or the off-chip state memory.
WHERE = ("on_chip", "off_chip")

#: Phases of a speculative step that a :class:`CostMeter` tells apart.
PHASES = ("pass", "restore")

#: Key of the committed state (the checkpoint before restore, the result after it).
COMMITTED = "committed"


# -- the Mamba2 layer as a recurrence ----------------------------------------------

@dataclass(frozen=True, kw_only=True)
class MixerConfig:
    """Dimensions of one Mamba2 layer (block pre-norm + mixer), ``ngroups = 1``.

    Parameters
    ----------
    ssm : SSMConfig
        The SSM part: ``nheads``, ``headdim``, ``d_state``, numerics.
    d_model : int
        Residual width (Mamba2-2.7B: 2560).
    d_conv : int
        Causal conv1d taps (Mamba2: 4); the conv state keeps ``d_conv − 1`` rows.
    n_layer : int
        Layers of the model; the cost model multiplies per-layer figures by it.
    """

    ssm: SSMConfig
    d_model: int
    d_conv: int = MAMBA2_DEFAULTS["d_conv"]
    n_layer: int = 1

    def __post_init__(self):
        if not isinstance(self.ssm, SSMConfig):
            raise TypeError(f"MixerConfig.ssm must be an SSMConfig, not {self.ssm!r}")
        check_int("MixerConfig", "d_model", self.d_model, min=1)
        check_int("MixerConfig", "d_conv", self.d_conv, min=1)
        check_int("MixerConfig", "n_layer", self.n_layer, min=1)

    @classmethod
    def from_model(cls, size, **ssm_overrides):
        """The layer of a Mamba2 checkpoint (:data:`golden.mamba2.MAMBA2_SIZES`).

        ``ssm_overrides`` go to :meth:`SSMConfig.from_model` (``lanes``,
        ``state_format``, …).

        Examples
        --------
        >>> MixerConfig.from_model("2.7B").conv_dim
        5376
        """
        ssm = SSMConfig.from_model(size, **ssm_overrides)
        d_model, n_layer = MAMBA2_SIZES[size]
        return cls(ssm=ssm, d_model=d_model, n_layer=n_layer)

    @property
    def nheads(self):
        return self.ssm.nheads

    @property
    def d_state(self):
        return self.ssm.d_state

    @property
    def d_inner(self):
        """``nheads·headdim``: width of z, x and y."""
        return self.ssm.d_inner

    @property
    def conv_dim(self):
        """``d_inner + 2·d_state``: width of the xBC row that the conv filters."""
        return self.d_inner + 2 * self.d_state

    @property
    def d_in_proj(self):
        """``2·d_inner + 2·d_state + nheads``: rows of ``W_in`` (z, xBC, dt)."""
        return 2 * self.d_inner + 2 * self.d_state + self.nheads

    @property
    def conv_rows(self):
        """``d_conv − 1``: raw xBC rows in the conv state."""
        return self.d_conv - 1


@dataclass(frozen=True, kw_only=True)
class MixerParams:
    """Weights of one Mamba2 layer.

    Parameters
    ----------
    norm_w : ndarray, shape (d_model,)
        The block's RMSNorm weight, applied to the layer input.
    W_in : ndarray, shape (d_in_proj, d_model)
        Input projection; output rows in Mamba2's order z, xBC, dt.
    conv_w : ndarray, shape (conv_dim, d_conv)
        Depthwise causal conv1d taps, oldest first.
    conv_b : ndarray, shape (conv_dim,)
    ssm : SSMParams
    gate_norm_w : ndarray, shape (d_inner,)
        Weight of the gated RMSNorm before ``W_out``.
    W_out : ndarray, shape (d_model, d_inner)
    """

    norm_w: np.ndarray
    W_in: np.ndarray
    conv_w: np.ndarray
    conv_b: np.ndarray
    ssm: SSMParams
    gate_norm_w: np.ndarray
    W_out: np.ndarray

    def check(self, mix):
        """Raise ``ValueError`` unless every array has the shape ``mix`` asks for."""
        shapes = dict(norm_w=(mix.d_model,), W_in=(mix.d_in_proj, mix.d_model),
                      conv_w=(mix.conv_dim, mix.d_conv), conv_b=(mix.conv_dim,),
                      gate_norm_w=(mix.d_inner,), W_out=(mix.d_model, mix.d_inner))
        for name, shape in shapes.items():
            got = np.shape(getattr(self, name))
            if got != shape:
                raise ValueError(f"MixerParams.{name} must have shape {shape}, not {got}")
        if not isinstance(self.ssm, SSMParams):
            raise TypeError(f"MixerParams.ssm must be an SSMParams, not {self.ssm!r}")
        self.ssm.check(mix.ssm)


def mixer_init_params(mix, rng):
    """Random binary32 weights of a plausible scale (``W ~ N(0, 1/fan_in)``).

    The SSM parameters are drawn as Mamba2 initializes them
    (:func:`golden.mamba2.mamba2_init_params`).
    """
    f = lambda shape, scale: (rng.standard_normal(shape) * scale).astype(np.float32)  # noqa: E731
    return MixerParams(
        norm_w=(1.0 + f((mix.d_model,), 0.1)).astype(np.float32),
        W_in=f((mix.d_in_proj, mix.d_model), mix.d_model ** -0.5),
        conv_w=f((mix.conv_dim, mix.d_conv), mix.d_conv ** -0.5),
        conv_b=f((mix.conv_dim,), 0.1),
        ssm=mamba2_init_params(mix.ssm, rng),
        gate_norm_w=(1.0 + f((mix.d_inner,), 0.1)).astype(np.float32),
        W_out=f((mix.d_model, mix.d_inner), mix.d_inner ** -0.5))


class Stepped(NamedTuple):
    """One token through a recurrence.

    Attributes
    ----------
    state : tuple of ndarray
        The state after the token.
    output : ndarray
        The layer output (the next layer's input).
    light : tuple of ndarray
        The light intermediates: what :meth:`Mamba2Mixer.replay` needs to
        produce ``state`` from the state before the token.
    input : ndarray
        The token as the layer consumed it (in its value format): what
        ``Recompute(scope="state")`` keeps for :meth:`Mamba2Mixer.update`.
    """

    state: tuple
    output: np.ndarray
    light: tuple
    input: np.ndarray


class CostMeter:
    """What a backtracking run did: bytes kept and read, multiplies performed.

    Counters are split by phase: ``"pass"`` (the tree pass, policies'
    ``record``) and ``"restore"``. A meter is mutable; it is an instrument,
    not a config.

    Attributes
    ----------
    phase : str
        The phase that new counts go to; set by :func:`tree_pass` and :func:`restore`.
    macs : dict
        Multiplies per phase. One elementwise product of two numbers is one
        MAC, with or without the add that follows it; additions, divisions,
        square roots and table look-ups (softplus, exp, SiLU) are not counted.
    """

    def __init__(self):
        self.phase = "pass"
        self.macs = dict.fromkeys(PHASES, 0)
        self._bytes = Counter()

    def mul(self, a, b):
        """``a·b`` (numpy broadcasting), counting one MAC per element of the product."""
        r = np.multiply(a, b)
        self.macs[self.phase] += int(np.size(r))
        return r

    def charge(self, macs):
        """Count ``macs`` multiplies done by code that is not itself instrumented."""
        self.macs[self.phase] += int(macs)

    def moved(self, op, where, item, nbytes):
        """Record ``nbytes`` of ``item`` stored (``op="store"``) or loaded at ``where``."""
        self._bytes[(self.phase, op, where, item)] += int(nbytes)

    def bytes(self, *, phase=None, op=None, where=None, item=None):
        """Bytes moved, summed over every key that matches the given fields."""
        return sum(v for (p, o, w, i), v in self._bytes.items()
                   if (phase is None or p == phase) and (op is None or o == op)
                   and (where is None or w == where) and (item is None or i == item))

    def records(self):
        """``{(phase, op, where, item): bytes}``, for printing."""
        return dict(self._bytes)


def _arrays(value):
    return value if isinstance(value, tuple) else (value,)


def _nbytes(value):
    return sum(np.asarray(a).nbytes for a in _arrays(value))


class BacktrackMemory:
    """The storage a policy may use across the pass, every access counted.

    Entries are copied on store and on load, so nothing a policy reads back
    can alias live data. Only the committed state is there before the pass
    (:meth:`hold`, free: the previous step left it there).
    """

    def __init__(self, meter):
        self.meter = meter
        self._data = {}

    def hold(self, key, value, *, where="off_chip"):
        """Place ``value`` without counting (the committed state, already in memory)."""
        self._data[key] = (where, _copy(value))

    def store(self, key, value, *, where, item):
        """Keep a copy of ``value`` (an array or a tuple of arrays) under ``key``; counted."""
        check_choice("BacktrackMemory.store", "where", where, WHERE)
        self._data[key] = (where, _copy(value))
        self.meter.moved("store", where, item, _nbytes(value))

    def load(self, key, *, item):
        """A copy of the entry under ``key``; counted at the entry's location."""
        where, value = self._data[key]
        self.meter.moved("load", where, item, _nbytes(value))
        return _copy(value)

    def rename(self, key, new_key):
        """Re-point: the entry becomes ``new_key`` with no data moved (a pointer update)."""
        self._data[new_key] = self._data.pop(key)

    def peek(self, key):
        """The entry under ``key`` without counting: what the next pass reads anyway."""
        return _copy(self._data[key][1])

    def keys(self):
        return tuple(self._data)


def _copy(value):
    if isinstance(value, tuple):
        return tuple(np.array(a, copy=True) for a in value)
    return np.array(value, copy=True)


def _canon(a):
    """Every NaN as the canonical quiet NaN of its format (the SSM unit's output rule)."""
    if a.dtype == np.float16:
        return np.where(np.isnan(a), CANONICAL_NAN16, a.view(np.uint16)).view(np.float16)
    if a.dtype == np.float32:
        return np.where(np.isnan(a), CANONICAL_NAN32, a.view(np.uint32)).view(np.float32)
    return a


@dataclass(frozen=True, kw_only=True)
class Mamba2Mixer:
    """One Mamba2 layer's decode step as a recurrence for the backtracking policies.

    Per token ``u`` (shape ``(d_model,)``), with every multiply counted by the
    meter (``[MACs]``)::

        un   = RMSNorm(u)·norm_w                            [3·d_model]
        zxbcdt = W_in·un   (z, xBC, dt)                     [d_model·d_in_proj]
        window = conv_state ++ xBC;  conv_state' = window[1:]
        xc   = SiLU(conv_b + Σ_w window[w]·conv_w[:, w])    [d_conv·conv_dim]
        x, B, C = split(xc)
        y, h', Δ, dA = ssm_step(h, x, B, C, dt, z)          [nheads + 3·d_inner + 3·E]
        out  = u + W_out·(RMSNorm(y)·gate_norm_w)           [3·d_inner + d_inner·d_model]

    (``E = nheads·headdim·d_state``). ``ssm_step`` is
    :func:`golden.mamba2.ssm_step_hw` for ``numerics="hw"`` (the SSM unit bit
    for bit; its multiplies are charged per its contract: ``Δ·A`` per head,
    ``Δ·x``, ``D·x`` and the gate per row, ``dA·h``, ``u·B`` and ``h'·C`` per
    state element) or :func:`golden.mamba2.ssm_step_ref` (``"ref"``).

    Numerics outside the SSM step: ``"hw"`` computes in binary32, one rounding
    per operation, SiLU by the SSM unit's table; ``"ref"`` in float64. The
    projections accumulate sequentially over the input index, a fixed order
    per output row. This layer is a test vehicle for backtracking, not the
    linear unit's specification (that is :mod:`golden.dot`): what matters
    here is that every policy reproduces the sequential run bit for bit.

    Light intermediates (``Stepped.light``), per node: ``(xBC, x, B, Δ, dA)``,
    ``conv_dim + d_inner + d_state + 2·nheads`` values: the raw xBC row
    shifts into the conv state, and ``h' = dA·h + (Δ·x)·B`` needs the rest
    (SpecMamba's "Δ, A, B, x"; ``C`` and ``z`` only feed the output).

    Parameters
    ----------
    mix : MixerConfig
    params : MixerParams
    numerics : {"hw", "ref"}
    eps : float
        RMSNorm epsilon (Mamba2: 1e-5).
    """

    mix: MixerConfig
    params: MixerParams
    numerics: str = "hw"
    eps: float = 1e-5

    def __post_init__(self):
        if not isinstance(self.mix, MixerConfig):
            raise TypeError(f"Mamba2Mixer.mix must be a MixerConfig, not {self.mix!r}")
        if not isinstance(self.params, MixerParams):
            raise TypeError(f"Mamba2Mixer.params must be a MixerParams, not {self.params!r}")
        check_choice("Mamba2Mixer", "numerics", self.numerics, NUMERICS)
        check_float("Mamba2Mixer", "eps", self.eps, min=0.0)
        self.params.check(self.mix)

    # -- formats

    @property
    def dtype(self):
        """Values other than the SSM state: binary32 (``"hw"``) or float64 (``"ref"``)."""
        return np.dtype(np.float32 if self.numerics == "hw" else np.float64)

    @property
    def state_dtype(self):
        """SSM state: ``ssm.state_dtype`` (``"hw"``) or float64 (``"ref"``)."""
        return self.mix.ssm.state_dtype if self.numerics == "hw" else np.dtype(np.float64)

    @property
    def state_shapes(self):
        """``((d_conv − 1, conv_dim), (nheads, headdim, d_state))``."""
        return ((self.mix.conv_rows, self.mix.conv_dim), self.mix.ssm.state_shape)

    def zero_state(self):
        """The state before the first token: zeros."""
        (cs, hs) = self.state_shapes
        return (np.zeros(cs, self.dtype), np.zeros(hs, self.state_dtype))

    def random_state(self, rng, *, scale=0.3):
        """A random state of the right formats (a mid-sequence checkpoint)."""
        (cs, hs) = self.state_shapes
        return ((rng.standard_normal(cs) * scale).astype(self.dtype),
                (rng.standard_normal(hs) * scale).astype(self.state_dtype))

    def check_state(self, state, name="state"):
        """Return ``state`` as a tuple after checking shapes and dtypes."""
        if not isinstance(state, tuple) or len(state) != 2:
            raise TypeError(f"{name} must be a tuple (conv_state, ssm_state), not {type(state).__name__}")
        for part, arr, shape, dtype in zip(("conv_state", "ssm_state"), state, self.state_shapes,
                                           (self.dtype, self.state_dtype)):
            arr = np.asarray(arr)
            if arr.shape != shape or arr.dtype != dtype:
                raise ValueError(f"{name}.{part} must be a {dtype.name} array of shape {shape}, "
                                 f"not {arr.dtype.name} {arr.shape}")
        return state

    def check_token(self, token, name="token"):
        token = np.asarray(token)
        if token.shape != (self.mix.d_model,):
            raise ValueError(f"{name} must have shape ({self.mix.d_model},), not {token.shape}")
        return token.astype(self.dtype)

    # -- building blocks

    def _p(self, a):
        return np.asarray(a, dtype=self.dtype)

    def _silu(self, v):
        return lut_eval(self.mix.ssm.silu_lut, v) if self.numerics == "hw" else silu64(v)

    def _rmsnorm(self, m, v, w):
        ms = m.mul(v, v).sum(dtype=self.dtype) / self.dtype.type(v.size)
        r = self.dtype.type(1) / np.sqrt(ms + self.dtype.type(self.eps))
        return m.mul(m.mul(v, r), self._p(w))

    def _matvec(self, m, W, v):
        # Sequential accumulation over the input index: the same operations per
        # output row whatever rows are computed, so update() (a row subset of
        # W_in) matches step() bit for bit.
        W = self._p(W)
        acc = m.mul(W[:, 0], v[0])
        for k in range(1, v.size):
            acc = acc + m.mul(W[:, k], v[k])
        return acc

    def _conv(self, m, conv_state, xBC):
        window = np.concatenate((conv_state, xBC[None, :]), axis=0)
        acc = self._p(self.params.conv_b)
        conv_w = self._p(self.params.conv_w)
        for w in range(self.mix.d_conv):
            acc = acc + m.mul(window[w], conv_w[:, w])
        return self._silu(acc), window[1:]

    def _split_xc(self, xc):
        mix = self.mix
        x = xc[:mix.d_inner].reshape(mix.nheads, mix.ssm.headdim)
        B = xc[mix.d_inner:mix.d_inner + mix.d_state]
        C = xc[mix.d_inner + mix.d_state:]
        return x, B, C

    # -- the recurrence

    def step(self, state, token, *, meter=None):
        """One token through the layer; returns :class:`Stepped`."""
        m = meter if meter is not None else CostMeter()
        conv_state, h = self.check_state(state)
        u = self.check_token(token)
        mix = self.mix
        with np.errstate(all="ignore"):
            un = self._rmsnorm(m, u, self.params.norm_w)
            zxbcdt = self._matvec(m, self.params.W_in, un)
            z = zxbcdt[:mix.d_inner].reshape(mix.nheads, mix.ssm.headdim)
            xBC = zxbcdt[mix.d_inner:mix.d_inner + mix.conv_dim]
            dt = zxbcdt[mix.d_inner + mix.conv_dim:]
            xc, new_conv = self._conv(m, conv_state, xBC)
            x, B, C = self._split_xc(xc)
            ssm_step = ssm_step_hw if self.numerics == "hw" else ssm_step_ref
            out = ssm_step(mix.ssm, self.params.ssm, h, x, B, C, dt, z)
            # ssm_step_* is not instrumented; charge its multiplies per its contract.
            m.charge(dt.size + 3 * x.size + 3 * h.size)
            y = np.asarray(out.y, dtype=self.dtype).reshape(-1)
            yn = self._rmsnorm(m, y, self.params.gate_norm_w)
            output = u + self._matvec(m, self.params.W_out, yn)
        new = (new_conv, np.asarray(out.state, dtype=self.state_dtype))
        light = (xBC, x, B, np.asarray(out.delta, dtype=self.dtype), np.asarray(out.dA, dtype=self.dtype))
        return Stepped(state=new, output=output, light=light, input=u)

    def _ssm_update(self, m, h, x, B, delta, dA):
        # The state half of ssm_step_hw / ssm_step_ref, in the same order of
        # operations, so the bits agree: h' = fl(fl(dA·h) + fl(fl(Δ·x)·B)).
        u = m.mul(delta[:, None], x)
        if self.numerics == "hw":
            new = m.mul(dA[:, None, None], h.astype(np.float32)) + m.mul(u[:, :, None], B[None, None, :])
            return _canon(new.astype(self.state_dtype))
        return m.mul(dA[:, None, None], h) + m.mul(u[:, :, None], B[None, None, :])

    def replay(self, state, light, *, meter=None):
        """The state after a token, from its light intermediates ``(xBC, x, B, Δ, dA)``.

        Work: ``d_inner + 2·E`` MACs (``Δ·x``, ``dA·h``, ``u·B``); the conv
        state only shifts.
        """
        m = meter if meter is not None else CostMeter()
        conv_state, h = self.check_state(state)
        if not isinstance(light, tuple) or len(light) != 5:
            raise TypeError(f"light must be a tuple (xBC, x, B, delta, dA), not {type(light).__name__}")
        xBC, x, B, delta, dA = light
        with np.errstate(all="ignore"):
            new_h = self._ssm_update(m, h, x, B, delta, dA)
        new_conv = np.concatenate((conv_state, xBC[None, :]), axis=0)[1:]
        return (new_conv, new_h)

    def update(self, state, token, *, meter=None):
        """The state after ``token``, computing only what the state depends on.

        Dependency analysis of :meth:`step`: the state needs the block norm,
        the xBC and dt rows of ``W_in`` (not z), the conv, the dt path and the
        state update; not ``h'·C``, ``D·x``, the gate, the gated norm or
        ``W_out``. Work: ``3·d_model + d_model·(conv_dim + nheads) +
        d_conv·conv_dim + nheads + d_inner + 2·E`` MACs.
        """
        m = meter if meter is not None else CostMeter()
        conv_state, h = self.check_state(state)
        u = self.check_token(token)
        mix = self.mix
        p = self.params.ssm
        with np.errstate(all="ignore"):
            un = self._rmsnorm(m, u, self.params.norm_w)
            xbcdt = self._matvec(m, np.asarray(self.params.W_in)[mix.d_inner:], un)
            xBC, dt = xbcdt[:mix.conv_dim], xbcdt[mix.conv_dim:]
            xc, new_conv = self._conv(m, conv_state, xBC)
            x, B, _ = self._split_xc(xc)
            if self.numerics == "hw":
                delta = lut_eval(mix.ssm.softplus_lut, dt + np.asarray(p.dt_bias, np.float32))
                dA = lut_eval(mix.ssm.exp_lut, m.mul(delta, np.asarray(p.A, np.float32)))
            else:
                delta = softplus64(dt + np.asarray(p.dt_bias, np.float64))
                dA = np.exp(m.mul(delta, np.asarray(p.A, np.float64)))
            new_h = self._ssm_update(m, h, x, B, delta, dA)
        return (new_conv, new_h)


def sequential_run(rec, state, tokens):
    """The plain decode: ``rec.step`` on each token in turn. The oracle of every policy."""
    for token in tokens:
        state = rec.step(state, token).state
    return state


# -- policies ---------------------------------------------------------------------

def _need(rec, owner, *methods):
    for name in methods:
        if not callable(getattr(rec, name, None)):
            raise TypeError(f"{owner} needs a recurrence with the method {name}(), not {rec!r}")


@dataclass(frozen=True, kw_only=True)
class StoreStates:
    """(a) Store the full state of every node; restore by re-pointing.

    ============  ===========================  ==========  ==========================================
    when          what                         where       bytes per layer
    ============  ===========================  ==========  ==========================================
    each node     store the node's state       off chip    ``S = E·s + (d_conv−1)·conv_dim·v``
    restore       accepted node's slot becomes off chip    0 (a pointer update; the next pass reads
                  the committed state                      it as it would read any committed state)
    ============  ===========================  ==========  ==========================================

    ``s``, ``v``: bytes per state element and per other value (binary32: 4).
    Per step: ``n·S`` stored, nothing loaded, no MACs. Full states stay off
    chip: one Mamba2-2.7B layer state is 2.7 MB, every node of a 17-node tree
    over 64 layers 2.9 GB.
    """

    name: ClassVar[str] = "store"

    def check(self, rec):
        _need(rec, "StoreStates", "step")

    def record(self, memory, node, token, stepped):
        memory.store(("state", node), stepped.state, where="off_chip", item="state")

    def restore(self, rec, memory, path, tokens, meter):
        memory.rename(("state", path[-1]), COMMITTED)


@dataclass(frozen=True, kw_only=True)
class StoreIntermediates:
    """(b) Store every node's light intermediates; replay the accepted path from the checkpoint.

    ============  ===========================  ==========  ==========================================
    when          what                         where       bytes per layer
    ============  ===========================  ==========  ==========================================
    each node     store ``(xBC, x, B, Δ, dA)``  ``where``   ``ℓ = (conv_dim + d_inner + d_state
                                                           + 2·nheads)·v``
    restore       load the checkpoint          off chip    ``S``
    restore       load each path node's light  ``where``   ``L·ℓ``
    restore       store the replayed state     off chip    ``S``
    ============  ===========================  ==========  ==========================================

    Work: ``L·(d_inner + 2·E)`` MACs (:meth:`Mamba2Mixer.replay`). SpecMamba
    keeps the draft's intermediates on chip (the default ``where``).

    Parameters
    ----------
    where : {"on_chip", "off_chip"}
    """

    name: ClassVar[str] = "replay"
    where: str = "on_chip"

    def __post_init__(self):
        check_choice("StoreIntermediates", "where", self.where, WHERE)

    def check(self, rec):
        _need(rec, "StoreIntermediates", "step", "replay")

    def record(self, memory, node, token, stepped):
        memory.store(("light", node), stepped.light, where=self.where, item="intermediates")

    def restore(self, rec, memory, path, tokens, meter):
        state = memory.load(COMMITTED, item="checkpoint")
        for node in path:
            state = rec.replay(state, memory.load(("light", node), item="intermediates"), meter=meter)
        memory.store(COMMITTED, state, where="off_chip", item="committed")


@dataclass(frozen=True, kw_only=True)
class Recompute:
    """(c) Keep the checkpoint; re-run the layer on the accepted path's tokens.

    ``scope="layer"``: re-run :meth:`Mamba2Mixer.step`, the whole layer,
    ``L·F`` MACs: what a re-run of the model stack does, since each layer's
    output is the next layer's input. The path's tokens come from that re-run
    (layer 0: the embedding), so they are not counted as traffic.

    ``scope="state"``: re-run only what the state depends on
    (:meth:`Mamba2Mixer.update`, ``L·U`` MACs: no z rows, ``h'·C``, gate,
    norm or ``W_out``). Without the re-run of the layer below, the layer's
    inputs must then be kept from the pass:

    ============  ===========================  ==========  ==========================================
    when          what                         where       bytes per layer
    ============  ===========================  ==========  ==========================================
    each node     (``"state"``) store the       ``where``   ``d_model·v``
                  layer input
    restore       load the checkpoint          off chip    ``S``
    restore       (``"state"``) load each path  ``where``   ``L·d_model·v``
                  node's input
    restore       store the recomputed state   off chip    ``S``
    ============  ===========================  ==========  ==========================================

    Parameters
    ----------
    scope : {"layer", "state"}
    where : {"on_chip", "off_chip"}
        Location of the kept inputs (``scope="state"`` only).
    """

    SCOPES: ClassVar[tuple] = ("layer", "state")
    scope: str = "layer"
    where: str = "off_chip"

    def __post_init__(self):
        check_choice("Recompute", "scope", self.scope, self.SCOPES)
        check_choice("Recompute", "where", self.where, WHERE)

    @property
    def name(self):
        return "recompute" if self.scope == "layer" else "recompute-state"

    def check(self, rec):
        _need(rec, "Recompute", "step", "update" if self.scope == "state" else "step")

    def record(self, memory, node, token, stepped):
        if self.scope == "state":
            memory.store(("input", node), stepped.input, where=self.where, item="inputs")

    def restore(self, rec, memory, path, tokens, meter):
        state = memory.load(COMMITTED, item="checkpoint")
        for node in path:
            if self.scope == "layer":
                state = rec.step(state, tokens[node], meter=meter).state
            else:
                state = rec.update(state, memory.load(("input", node), item="inputs"), meter=meter)
        memory.store(COMMITTED, state, where="off_chip", item="committed")


#: One model's policies by name: (a) ``store``, (b) ``replay``, (c) ``recompute``,
#: and (c) restricted to the state's dependencies.
POLICIES = {
    "store": StoreStates(),
    "replay": StoreIntermediates(),
    "recompute": Recompute(),
    "recompute-state": Recompute(scope="state"),
}

_POLICY_TYPES = (StoreStates, StoreIntermediates, Recompute)


def check_policy(owner, field, policy):
    if not isinstance(policy, _POLICY_TYPES):
        raise TypeError(f"{owner}.{field} must be a StoreStates, StoreIntermediates or Recompute, "
                        f"not {policy!r}")
    return policy


@dataclass(frozen=True, kw_only=True)
class SpeculativeBacktracking:
    """Backtracking of a speculative step: one policy for the draft, one for the target.

    The seed's hybrid (d) is ``draft=StoreIntermediates(where="on_chip"),
    target=Recompute()``: the draft keeps Δ, A, B, x on chip, the target
    recomputes along the accepted path only (:data:`SYSTEM_POLICIES`).

    Parameters
    ----------
    draft, target : StoreStates, StoreIntermediates or Recompute
    """

    draft: object
    target: object

    def __post_init__(self):
        check_policy("SpeculativeBacktracking", "draft", self.draft)
        check_policy("SpeculativeBacktracking", "target", self.target)


#: The combinations the cost model compares. ``hybrid`` is the seed's (d);
#: ``hybrid-draft-stores`` the third-party reading in which the draft stores
#: full states (SPEC §4); ``hybrid-selective`` restricts the target's re-run to
#: the state's dependencies.
SYSTEM_POLICIES = {
    "pure-store": SpeculativeBacktracking(draft=StoreStates(), target=StoreStates()),
    "pure-recompute": SpeculativeBacktracking(draft=Recompute(), target=Recompute()),
    "hybrid": SpeculativeBacktracking(draft=StoreIntermediates(where="on_chip"), target=Recompute()),
    "hybrid-draft-stores": SpeculativeBacktracking(draft=StoreStates(), target=Recompute()),
    "hybrid-selective": SpeculativeBacktracking(draft=StoreIntermediates(where="on_chip"),
                                                target=Recompute(scope="state")),
}


# -- running a step ----------------------------------------------------------------

@dataclass(frozen=True)
class TreePass:
    """The state of a speculative step after its tree pass, before restore.

    Attributes
    ----------
    rec : recurrence
    policy : StoreStates, StoreIntermediates or Recompute
    parents : numpy.ndarray
    tokens : tuple
        One token input per node.
    outputs : tuple of ndarray
        Each node's layer output (the target's would give its logits).
    memory : BacktrackMemory
        What the policy kept, plus the committed state. The ring's node
        states are gone: restore can use only this.
    meter : CostMeter
    """

    rec: object
    policy: object
    parents: np.ndarray
    tokens: tuple
    outputs: tuple
    memory: BacktrackMemory
    meter: CostMeter


def check_path(parents, path):
    """Return ``path`` as a tuple after checking it runs from the root along tree edges.

    ``path`` is a sequence of node indices or an :class:`golden.tree.AcceptedPath`.
    """
    raw = path.nodes if isinstance(path, AcceptedPath) else path
    try:
        raw = tuple(raw)
    except TypeError:
        raise TypeError(f"path must be a sequence of node indices, not {path!r}") from None
    n = len(parents)
    nodes = []
    for k, v in enumerate(raw):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or not 0 <= v < n:
            raise ValueError(f"path[{k}] must be a node index in [0, {n - 1}], not {v!r}")
        nodes.append(int(v))
    nodes = tuple(nodes)
    if not nodes or nodes[0] != 0:
        raise ValueError(f"path must start at the root (node 0), not {nodes!r}")
    for k in range(1, len(nodes)):
        if parents[nodes[k]] != nodes[k - 1]:
            raise ValueError(f"path[{k}] must be a child of path[{k - 1}] = {nodes[k - 1]}, "
                             f"not node {nodes[k]} (child of {parents[nodes[k]]})")
    return nodes


def tree_pass(rec, policy, *, checkpoint, tokens, parents, meter=None):
    """Run every node of a draft tree through ``rec``, letting ``policy`` keep what it needs.

    Node ``i`` is processed from its parent's state (node 0 from
    ``checkpoint``) in breadth-first order, as the FIFO tree verification does
    (:mod:`golden.tree`); a node state is dropped once its last child is
    done. After each node, ``policy.record`` may store into the counted
    :class:`BacktrackMemory`.

    Parameters
    ----------
    rec : recurrence
        Has ``step`` (and ``replay`` / ``update`` if the policy needs them).
    policy : StoreStates, StoreIntermediates or Recompute
    checkpoint : state
        The committed state before the root token.
    tokens : sequence
        One token input per node, ``tokens[i]`` for node ``i``.
    parents : sequence of int
        BFS parent array (:func:`golden.tree.validate_parents`).
    meter : CostMeter, optional
        Counts go to its ``"pass"`` phase.

    Returns
    -------
    TreePass
    """
    policy = check_policy("tree_pass", "policy", policy)
    policy.check(rec)
    p = validate_parents(parents)
    tokens = tuple(tokens)
    if len(tokens) != p.size:
        raise ValueError(f"tokens must hold one input per node ({p.size}), not {len(tokens)}")
    meter = meter if meter is not None else CostMeter()
    meter.phase = "pass"
    memory = BacktrackMemory(meter)
    memory.hold(COMMITTED, checkpoint)
    dead = dead_times(p)
    live = {}
    outputs = []
    for i in range(p.size):
        parent = checkpoint if i == 0 else live[int(p[i])]
        stepped = rec.step(parent, tokens[i], meter=meter)
        outputs.append(stepped.output)
        policy.record(memory, i, tokens[i], stepped)
        live[i] = stepped.state
        for j in [j for j in live if dead[j] <= i]:
            del live[j]
    return TreePass(rec=rec, policy=policy, parents=p, tokens=tokens, outputs=tuple(outputs),
                    memory=memory, meter=meter)


def restore(tp, *, path):
    """Restore the state after the last node of ``path``; counts go to the ``"restore"`` phase.

    Parameters
    ----------
    tp : TreePass
    path : sequence of int or AcceptedPath
        Root first; ``(0,)`` when no draft token was accepted.

    Returns
    -------
    state
        The committed state for the next step.
    """
    if not isinstance(tp, TreePass):
        raise TypeError(f"restore needs a TreePass, not {tp!r}")
    nodes = check_path(tp.parents, path)
    tp.meter.phase = "restore"
    tp.policy.restore(tp.rec, tp.memory, nodes, tp.tokens, tp.meter)
    return tp.memory.peek(COMMITTED)


def backtrack(rec, policy, *, checkpoint, tokens, parents, path, meter=None):
    """:func:`tree_pass` then :func:`restore`: one model's speculative step.

    Returns
    -------
    (state, outputs)
    """
    tp = tree_pass(rec, policy, checkpoint=checkpoint, tokens=tokens, parents=parents, meter=meter)
    return restore(tp, path=path), tp.outputs


def speculative_backtrack(system, *, draft, target, draft_checkpoint, target_checkpoint,
                          draft_tokens, target_tokens, parents, path, draft_meter=None,
                          target_meter=None):
    """Both models of a speculative step, each under its policy of ``system``.

    The draft and the target see the same tree (each its own token inputs:
    the embeddings of the same token ids) and restore to the same accepted path.

    Returns
    -------
    (draft_state, target_state)
    """
    if not isinstance(system, SpeculativeBacktracking):
        raise TypeError(f"system must be a SpeculativeBacktracking, not {system!r}")
    d, _ = backtrack(draft, system.draft, checkpoint=draft_checkpoint, tokens=draft_tokens,
                     parents=parents, path=path, meter=draft_meter)
    t, _ = backtrack(target, system.target, checkpoint=target_checkpoint, tokens=target_tokens,
                     parents=parents, path=path, meter=target_meter)
    return d, t
