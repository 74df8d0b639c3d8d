"""One Mamba2 layer (block pre-norm and mixer): its dimensions, weights and decode step.

The layer that both the language model (:mod:`golden.lm`, one
:class:`Mamba2Mixer` per layer) and the backtracking policies
(:mod:`golden.backtrack`) run, written once (``Mamba2.step`` in
``state-spaces/mamba``), with ``ngroups = 1``. Per token ``u`` (shape
``(d_model,)``)::

    un     = RMSNorm(u)·norm_w                          layer_in
    zxbcdt = W_in·un;  split z (d_inner), xBC (conv_dim), dt (nheads)
    window = conv_state ++ xBC;  conv_state' = window[1:]             conv
    xc     = SiLU(Σ_w window[w]·conv_w[:, w] + conv_b);  split x, B, C
    Δ = softplus(dt + dt_bias);  dA = exp(Δ·A);  u_row = Δ·x          ssm_inputs
    h'     = dA·h + u_row·B;  y = (Σ_n h'·C + D·x)·SiLU(z)            the SSM step
    out    = u + W_out·(RMSNorm(y)·gate_norm_w)                        layer_out

The state is ``(conv_state, ssm_state)``: the last ``d_conv − 1`` raw xBC rows,
oldest first (zeros at the start: the causal conv's padding), and ``h``,
``(nheads, headdim, d_state)``.

Numerics
--------
``"hw"``
    binary32, one rounding per operation; SiLU, softplus and exp by the SSM
    unit's tables; the SSM step is :func:`golden.mamba2.ssm_step_hw`, the SSM
    unit bit for bit.
``"ref"``
    float64, the arithmetic of :class:`golden.lm.MambaLM`: the SSM step is
    :meth:`Mamba2Mixer.ssm_inputs` and :func:`ssm_tile` over the whole state
    (the state bits of :func:`golden.mamba2.ssm_step_ref`; ``Σ_n h'·C`` a
    sequential running sum, so any tiling gives the same bits).

In both, a matrix-vector product is ``np.sum(W * v, axis=-1)``, numpy's
pairwise row sum, whose order depends only on the row length: a row gives the
same bits whatever other rows are computed with it (so
:meth:`Mamba2Mixer.update`, a row subset of ``W_in``, matches
:meth:`Mamba2Mixer.step`) and whatever the schedule. Outside the SSM unit
this layer is a behavioural model, not the linear unit's specification (that
is :mod:`golden.dot`).

Every multiply goes through a *meter* (``meter.mul``; the uninstrumented SSM
step is charged per its contract with ``meter.charge``), so that
:class:`golden.backtrack.CostMeter` counts a run's actual work.
"""

from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from .mamba2 import (MAMBA2_DEFAULTS, MAMBA2_SIZES, SSMConfig, SSMParams, _canon, mamba2_init_params,
                     silu64, softplus64, ssm_step_hw)
from .nonlinear import lut_eval
from .validate import check_choice, check_float, check_int

__all__ = [
    "NUMERICS", "MixerConfig", "MixerParams", "mixer_init_params", "Stepped", "SSMInputs",
    "ssm_tile", "rmsnorm", "matvec", "Mamba2Mixer",
]

#: Numerics of :class:`Mamba2Mixer`: the SSM unit (``ssm_step_hw``) or float64 (``golden.lm``).
NUMERICS = ("hw", "ref")


class _LayerWidths:
    """Widths that follow from ``d_inner``, ``d_state``, ``nheads`` and ``d_conv``
    (``ngroups = 1``): one formula for every config of a Mamba2 layer."""

    @property
    def conv_dim(self):
        """Channels of the conv1d: x, B and C, ``d_inner + 2·d_state``."""
        return self.d_inner + 2 * self.d_state

    @property
    def d_in_proj(self):
        """Rows of ``in_proj``: z, xBC and dt, ``2·d_inner + 2·d_state + nheads``."""
        return 2 * self.d_inner + 2 * self.d_state + self.nheads

    @property
    def state_elems(self):
        """SSM state elements per layer: ``nheads·headdim·d_state``."""
        return self.d_inner * self.d_state

    @property
    def conv_rows(self):
        """``d_conv − 1``: raw xBC rows in the conv state."""
        return self.d_conv - 1

    @property
    def conv_elems(self):
        """Conv-window elements per layer: ``(d_conv − 1)·conv_dim``."""
        return self.conv_rows * self.conv_dim


@dataclass(frozen=True, kw_only=True)
class MixerConfig(_LayerWidths):
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


class SSMInputs(NamedTuple):
    """One token's SSM-step inputs in one layer (from :meth:`Mamba2Mixer.ssm_inputs`).

    Attributes
    ----------
    x : ndarray, shape (nheads, headdim)
    B, C : ndarray, shape (d_state,)
    delta, dA : ndarray, shape (nheads,)
        ``softplus(dt + dt_bias)`` and ``exp(delta·A)``.
    u : ndarray, shape (nheads·headdim,)
        ``delta·x`` per row: the row's input scaling, shared by its ``d_state`` elements.
    """

    x: np.ndarray
    B: np.ndarray
    C: np.ndarray
    delta: np.ndarray
    dA: np.ndarray
    u: np.ndarray


@lru_cache(maxsize=256)
def _tile_index(H, P, N, lo, hi):
    """Head, row and column of the flat state elements ``lo … hi−1`` (C order)."""
    f = np.arange(lo, hi, dtype=np.int64)
    out = (f // (P * N), f // N, f % N)
    for a in out:
        a.setflags(write=False)
    return out


def _accumulate_rows(acc, q, lo, hi, N):
    """``acc[row] += q`` element by element in ascending flat index (so ascending ``n``).

    ``np.add.accumulate`` is a strictly sequential running sum; whole rows go
    in one call, a row cut by the tile boundary in its own, carrying ``acc``.
    """
    f = lo
    while f < hi:
        r = f // N
        if f % N == 0 and hi - f >= N:
            rows = (hi - f) // N
            block = q[f - lo:f - lo + rows * N].reshape(rows, N)
            run = np.concatenate((acc[r:r + rows, None], block), axis=1)
            acc[r:r + rows] = np.add.accumulate(run, axis=1)[:, -1]
            f += rows * N
        else:
            end = min(hi, (r + 1) * N)
            acc[r] = np.add.accumulate(np.concatenate((acc[r:r + 1], q[f - lo:end - lo])))[-1]
            f = end


def ssm_tile(config, inputs, state_tile, *, lo, hi, acc):
    """The float64 SSM step on the flat state elements ``lo … hi−1`` of one layer.

    ``s' = dA[h]·s + u[row]·B[n]`` per element and ``acc[row] += s'·C[n]`` in
    ascending ``n``. Any split of ``0 … state_elems`` into tiles processed in
    ascending order gives the same new state and the same ``acc`` bit for bit.

    Parameters
    ----------
    config : golden.lm.LMConfig or golden.mamba2.SSMConfig
        Anything with ``nheads``, ``headdim`` and ``d_state``.
    inputs : SSMInputs
    state_tile : numpy.ndarray, shape (hi − lo,)
        The old state elements (flat, C order of ``(nheads, headdim, d_state)``).
    lo, hi : int
        The tile.
    acc : numpy.ndarray, shape (nheads·headdim,)
        The rows' running ``Σ_n s'·C``; updated in place (it is the step's
        output, not state).

    Returns
    -------
    numpy.ndarray, shape (hi − lo,)
        The new state elements.
    """
    c = config
    hd, row, n = _tile_index(c.nheads, c.headdim, c.d_state, lo, hi)
    new = inputs.dA[hd] * state_tile + inputs.u[row] * inputs.B[n]
    _accumulate_rows(acc, new * inputs.C[n], lo, hi, c.d_state)
    return new


class _Uncounted:
    """The meter of an uninstrumented run: plain products, nothing counted."""

    mul = staticmethod(np.multiply)

    @staticmethod
    def charge(macs):
        pass


_UNCOUNTED = _Uncounted()


def _meter(meter):
    return _UNCOUNTED if meter is None else meter


def rmsnorm(v, w, eps, *, meter=_UNCOUNTED):
    """``v·(1/sqrt(mean(v²) + eps))·w`` in ``v``'s format (``mamba_ssm``'s ``rms_norm_ref``).

    ``3·len(v)`` multiplies; the mean is numpy's pairwise sum.
    """
    t = v.dtype.type
    ms = np.add.reduce(meter.mul(v, v)) / t(v.size)
    return meter.mul(meter.mul(v, t(1) / np.sqrt(ms + t(eps))), w)


def matvec(W, v, *, meter=_UNCOUNTED):
    """``W·v`` as a pairwise row sum: the same bits for a row whatever other rows
    are computed (module docstring); ``W.size`` multiplies."""
    return np.sum(meter.mul(W, v), axis=-1)


@dataclass(frozen=True, kw_only=True)
class Mamba2Mixer:
    """One Mamba2 layer's decode step, by stage and as a recurrence.

    Stages (:meth:`layer_in`, :meth:`conv`, :meth:`ssm_inputs`,
    :meth:`ssm_output`, :meth:`layer_out`; :func:`ssm_tile`) are what
    :class:`golden.lm.MambaLM` and its FIFO tree schedule compose;
    :meth:`step`, :meth:`replay` and :meth:`update` are the recurrence the
    backtracking policies drive (:mod:`golden.backtrack`). Multiplies per
    token (``[MACs]``, ``E = nheads·headdim·d_state``)::

        un   = RMSNorm(u)·norm_w                            [3·d_model]
        zxbcdt = W_in·un   (z, xBC, dt)                     [d_model·d_in_proj]
        window = conv_state ++ xBC;  conv_state' = window[1:]
        xc   = SiLU(Σ_w window[w]·conv_w[:, w] + conv_b)    [d_conv·conv_dim]
        x, B, C = split(xc)
        y, h', Δ, dA = ssm_step(h, x, B, C, dt, z)          [nheads + 3·d_inner + 3·E]
        out  = u + W_out·(RMSNorm(y)·gate_norm_w)           [3·d_inner + d_inner·d_model]

    ``ssm_step`` is not instrumented; its multiplies are charged per the SSM
    unit's contract: ``Δ·A`` per head, ``Δ·x``, ``D·x`` and the gate per row,
    ``dA·h``, ``u·B`` and ``h'·C`` per state element.

    Light intermediates (``Stepped.light``), per node: ``(xBC, x, B, Δ, dA)``,
    ``conv_dim + d_inner + d_state + 2·nheads`` values: the raw xBC row
    shifts into the conv state, and ``h' = dA·h + (Δ·x)·B`` needs the rest
    (SpecMamba's "Δ, A, B, x"; ``C`` and ``z`` only feed the output).

    Parameters
    ----------
    mix : MixerConfig
    params : MixerParams
    numerics : {"hw", "ref"}
        Module docstring.
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

    # -- stages

    def _p(self, a):
        return np.asarray(a, dtype=self.dtype)

    def _silu(self, v):
        return lut_eval(self.mix.ssm.silu_lut, v) if self.numerics == "hw" else silu64(v)

    def _in_proj(self, m, u, first_row):
        # update() starts at the xBC rows; a row's bits do not depend on the others (matvec).
        un = rmsnorm(u, self._p(self.params.norm_w), self.eps, meter=m)
        return matvec(self._p(self.params.W_in)[first_row:], un, meter=m)

    def layer_in(self, u, *, meter=None):
        """Block RMSNorm and ``W_in``: ``(z, xBC before the conv, dt)`` of one token."""
        mix = self.mix
        zxbcdt = self._in_proj(_meter(meter), u, 0)
        return (zxbcdt[:mix.d_inner], zxbcdt[mix.d_inner:mix.d_inner + mix.conv_dim],
                zxbcdt[mix.d_inner + mix.conv_dim:])

    def conv(self, window, xbc_raw, *, meter=None):
        """Causal conv1d and SiLU: ``(xBC, the new window)``.

        ``window`` holds the previous ``d_conv − 1`` raw rows (the parent's, in
        a tree); the new window drops the oldest and appends ``xbc_raw``.
        """
        m = _meter(meter)
        full = np.concatenate((window, xbc_raw[None, :]), axis=0)
        conv_w = self._p(self.params.conv_w)
        acc = m.mul(full[0], conv_w[:, 0])
        for w in range(1, full.shape[0]):
            acc = acc + m.mul(full[w], conv_w[:, w])
        return self._silu(acc + self._p(self.params.conv_b)), full[1:]

    def ssm_inputs(self, xbc, dt, *, meter=None):
        """Split xBC; ``delta``, ``dA`` per head and ``u = delta·x`` per row (:class:`SSMInputs`)."""
        m = _meter(meter)
        mix, p = self.mix, self.params.ssm
        x = xbc[:mix.d_inner].reshape(mix.nheads, mix.ssm.headdim)
        B = xbc[mix.d_inner:mix.d_inner + mix.d_state]
        C = xbc[mix.d_inner + mix.d_state:]
        if self.numerics == "hw":
            delta = lut_eval(mix.ssm.softplus_lut, dt + self._p(p.dt_bias))
            dA = lut_eval(mix.ssm.exp_lut, m.mul(delta, self._p(p.A)))
        else:
            delta = softplus64(dt + self._p(p.dt_bias))
            dA = np.exp(m.mul(delta, self._p(p.A)))
        return SSMInputs(x=x, B=B, C=C, delta=delta, dA=dA, u=m.mul(delta[:, None], x).reshape(-1))

    def ssm_output(self, inputs, acc, z, *, meter=None):
        """``(Σ_n h'·C + D·x)·SiLU(z)`` per row, from :func:`ssm_tile`'s ``acc``."""
        m = _meter(meter)
        y = acc + m.mul(self._p(self.params.ssm.D)[:, None], inputs.x).reshape(-1)
        return m.mul(y, self._silu(z))

    def layer_out(self, u, y, *, meter=None):
        """Gated RMSNorm, ``W_out`` and the residual: the layer output."""
        m = _meter(meter)
        yn = rmsnorm(y, self._p(self.params.gate_norm_w), self.eps, meter=m)
        return u + matvec(self._p(self.params.W_out), yn, meter=m)

    def _ssm_step(self, h, xc, dt, z):
        """The whole SSM step: ``(y, h', inputs)``; ``inputs.u`` is unset in ``"hw"``."""
        mix = self.mix
        if self.numerics == "hw":
            x = xc[:mix.d_inner].reshape(mix.nheads, mix.ssm.headdim)
            B = xc[mix.d_inner:mix.d_inner + mix.d_state]
            C = xc[mix.d_inner + mix.d_state:]
            out = ssm_step_hw(mix.ssm, self.params.ssm, h, x, B, C, dt, z.reshape(x.shape))
            inputs = SSMInputs(x=x, B=B, C=C, delta=out.delta, dA=out.dA, u=None)
            return np.asarray(out.y, dtype=self.dtype).reshape(-1), out.state, inputs
        inputs = self.ssm_inputs(xc, dt)
        acc = np.zeros(mix.d_inner)
        new = ssm_tile(mix.ssm, inputs, h.reshape(-1), lo=0, hi=mix.state_elems, acc=acc)
        return self.ssm_output(inputs, acc, z), new.reshape(h.shape), inputs

    def _ssm_update(self, m, h, u, B, dA):
        # The state half of ssm_step_hw / ssm_tile, in the same order of
        # operations, so the bits agree: h' = fl(fl(dA·h) + fl(u·B)).
        if self.numerics == "hw":
            new = m.mul(dA[:, None, None], h.astype(np.float32)) + m.mul(u[:, :, None], B[None, None, :])
            return _canon(new.astype(self.state_dtype))
        return m.mul(dA[:, None, None], h) + m.mul(u[:, :, None], B[None, None, :])

    # -- the recurrence

    def step(self, state, token, *, meter=None):
        """One token through the layer; returns :class:`Stepped`."""
        m = _meter(meter)
        conv_state, h = self.check_state(state)
        u = self.check_token(token)
        with np.errstate(all="ignore"):
            z, xbc_raw, dt = self.layer_in(u, meter=m)
            xc, new_conv = self.conv(conv_state, xbc_raw, meter=m)
            y, new_h, inputs = self._ssm_step(h, xc, dt, z)
            # The SSM step is not instrumented: charge its multiplies per its contract.
            m.charge(dt.size + 3 * inputs.x.size + 3 * h.size)
            output = self.layer_out(u, y, meter=m)
        light = (xbc_raw, inputs.x, inputs.B, np.asarray(inputs.delta, dtype=self.dtype),
                 np.asarray(inputs.dA, dtype=self.dtype))
        return Stepped(state=(new_conv, np.asarray(new_h, dtype=self.state_dtype)), output=output,
                       light=light, input=u)

    def replay(self, state, light, *, meter=None):
        """The state after a token, from its light intermediates ``(xBC, x, B, Δ, dA)``.

        Work: ``d_inner + 2·E`` MACs (``Δ·x``, ``dA·h``, ``u·B``); the conv
        state only shifts.
        """
        m = _meter(meter)
        conv_state, h = self.check_state(state)
        if not isinstance(light, tuple) or len(light) != 5:
            raise TypeError(f"light must be a tuple (xBC, x, B, delta, dA), not {type(light).__name__}")
        xBC, x, B, delta, dA = light
        with np.errstate(all="ignore"):
            new_h = self._ssm_update(m, h, m.mul(delta[:, None], x), B, dA)
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
        m = _meter(meter)
        conv_state, h = self.check_state(state)
        u = self.check_token(token)
        mix = self.mix
        with np.errstate(all="ignore"):
            xbcdt = self._in_proj(m, u, mix.d_inner)
            xc, new_conv = self.conv(conv_state, xbcdt[:mix.conv_dim], meter=m)
            inputs = self.ssm_inputs(xc, xbcdt[mix.conv_dim:], meter=m)
            new_h = self._ssm_update(m, h, inputs.u.reshape(inputs.x.shape), inputs.B, inputs.dA)
        return (new_conv, new_h)
