"""A small Mamba2 language model in float64: the target and draft of the speculative-decoding models.

One decode step of a Mamba2 LM (``MambaLMHeadModel`` with ``Mamba2``
mixers in ``state-spaces/mamba``), token in, logits out::

    h = E[token]                                              embedding
    for each layer l:
        u      = RMSNorm(h)·w_norm                            pre-norm (eps)
        zxbcdt = W_in·u;  split z (d_inner), xBC (conv_dim), dt (nheads)
        window = [the layer's last d_conv−1 xBC rows, xBC]    causal conv1d
        xBC    = SiLU(Σ_w window[w]·W_conv[:, w] + b_conv);  split x (nheads × P), B (N), C (N)
        delta  = softplus(dt + dt_bias);  dA = exp(delta·A),  A = −exp(A_log)
        s'     = dA·s + (delta·x)·B                           the SSM step, per state element
        y      = Σ_n s'·C + D·x
        y      = RMSNorm(y ⊙ SiLU(z))·w_gate                  gated RMSNorm (norm after gate)
        h      = h + W_out·y                                  residual
    logits = W_head·(RMSNorm(h)·w_f)                          W_head = E when tied

``conv_dim = d_inner + 2N`` and ``ngroups = 1``. The state of a layer is its conv
window (the last ``d_conv − 1`` pre-conv xBC rows, oldest first; zeros at the
start, which is the causal conv's zero padding) and its SSM state
``(nheads, headdim, d_state)``.

Numerics and why
----------------
Everything is float64: this model is the *behavioural* reference of speculative
decoding (acceptance, tree verification), not of the hardware's rounding, which
:func:`golden.mamba2.ssm_step_hw` and :mod:`golden.dot` specify. Its one strict
contract is **reproducibility across schedules**: a token's logits depend only
on the tokens before it, bit for bit, whether they were computed by
:meth:`MambaLM.step` along one sequence or by the FIFO tree schedule of
:func:`golden.speculative.evaluate_tree`, with any tile size. Three choices
make that hold without relying on BLAS:

* matrix-vector products are ``np.sum(W * v, axis=-1)`` on one vector at a time
  (numpy's pairwise row sum, whose order depends only on the row length; a BLAS
  ``gemv`` may change its order with alignment or batch size);
* the SSM state update is element-wise, so any split of the state into tiles
  computes the same values;
* ``Σ_n s'·C`` is a strictly sequential running sum per row, in ascending ``n``
  from ``+0`` (``np.add.accumulate``), so tiles that cut a row in two carry the
  partial sum and give the same bits, as the SSM unit's accumulator does.

The decode step is split into the stages the hardware has (:meth:`MambaLM.embed`,
:meth:`~MambaLM.layer_in`, :meth:`~MambaLM.conv`, :meth:`~MambaLM.ssm_inputs`,
:func:`ssm_tile`, :meth:`~MambaLM.layer_out`, :meth:`~MambaLM.head`) so that the
tree schedule composes the very same functions. Each layer is a
:class:`golden.mixer.Mamba2Mixer` in its float64 numerics (``"ref"``,
:attr:`MambaLM.mixers`): the layer that the backtracking policies of
:mod:`golden.backtrack` run, in binary32 too, is this one.

Weights
-------
Named as in ``mamba_ssm`` checkpoints (:func:`tensor_shapes`), drawn with
Mamba2's initialization (:meth:`MambaLM.from_seed`) or loaded from ``.npz`` or
``.safetensors`` (read and written here with the standard library: ``golden``
imports only numpy). SPEQ self-speculation (:func:`speq_pair`) makes a target
that computes with the FP16 weights reconstructed from BSFP v1 and a draft that
computes with the BSFP draft weights (the nibble plane) of the same words.
"""

import json
import math
import struct
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

import numpy as np

from .bsfp import BSFPConfig, draft_dequantize, draft_misread_mask, encode
from .mamba2 import MAMBA2_DEFAULTS, MAMBA2_SIZES, MAMBA2_VOCAB, SSMConfig, SSMParams, mamba2_init_params
from .mixer import (Mamba2Mixer, MixerConfig, MixerParams, SSMInputs, _LayerWidths, matvec, rmsnorm,
                    ssm_tile)
from .validate import check_choice, check_float, check_int

__all__ = [
    "LMConfig", "LM_PRESETS", "lm_preset", "tensor_shapes", "LMState", "SSMInputs", "ssm_tile",
    "MambaLM", "SPEQ_KINDS", "SpeqPair", "speq_pair", "load_tensors", "save_tensors",
    "MAMBA2_VOCAB",
]

@dataclass(frozen=True, kw_only=True)
class LMConfig(_LayerWidths):
    """Dimensions of a Mamba2 language model.

    Parameters
    ----------
    vocab : int
        Vocabulary size (≥ 2).
    d_model : int
        Width of the residual stream.
    n_layer : int
        Mamba2 blocks.
    d_state : int
        SSM state columns ``N``.
    headdim : int
        Rows per head ``P``; must divide ``d_inner = expand·d_model``.
    expand : int
        ``d_inner / d_model`` (Mamba2: 2).
    d_conv : int
        Causal conv1d width (Mamba2: 4); the conv state keeps ``d_conv − 1`` rows.
    norm_eps : float
        RMSNorm epsilon (Mamba2: 1e-5).
    tie_embeddings : bool
        ``True``: the LM head is the embedding matrix (Mamba2's default); ``False``:
        a separate ``lm_head.weight``.
    """

    vocab: int = 64
    d_model: int = 32
    n_layer: int = 2
    d_state: int = 16
    headdim: int = 8
    expand: int = 2
    d_conv: int = 4
    norm_eps: float = 1e-5
    tie_embeddings: bool = True

    def __post_init__(self):
        check_int("LMConfig", "vocab", self.vocab, min=2)
        check_int("LMConfig", "d_model", self.d_model, min=1)
        check_int("LMConfig", "n_layer", self.n_layer, min=1)
        check_int("LMConfig", "d_state", self.d_state, min=1)
        check_int("LMConfig", "headdim", self.headdim, min=1)
        check_int("LMConfig", "expand", self.expand, min=1)
        check_int("LMConfig", "d_conv", self.d_conv, min=1)
        eps = self.norm_eps
        if isinstance(eps, bool) or not isinstance(eps, (int, float)):
            raise TypeError(f"LMConfig.norm_eps must be a finite number > 0, not {eps!r}")
        if not (math.isfinite(eps) and eps > 0):
            raise ValueError(f"LMConfig.norm_eps must be a finite number > 0, not {eps!r}")
        if not isinstance(self.tie_embeddings, bool):
            raise TypeError(f"LMConfig.tie_embeddings must be True or False, "
                            f"not {self.tie_embeddings!r}")
        if self.d_inner % self.headdim:
            raise ValueError(f"LMConfig.headdim must divide d_inner = expand·d_model = "
                             f"{self.d_inner}, not {self.headdim!r}")

    @classmethod
    def from_model(cls, size, **overrides):
        """The dimensions of a Mamba2 checkpoint (``"130M"`` … ``"2.7B"``, the ``state-spaces/mamba`` checkpoints)."""
        check_choice("LMConfig.from_model", "size", size, tuple(MAMBA2_SIZES))
        d_model, n_layer = MAMBA2_SIZES[size]
        base = dict(vocab=MAMBA2_VOCAB, d_model=d_model, n_layer=n_layer,
                    d_state=MAMBA2_DEFAULTS["d_state"], headdim=MAMBA2_DEFAULTS["headdim"],
                    expand=MAMBA2_DEFAULTS["expand"], d_conv=MAMBA2_DEFAULTS["d_conv"])
        return cls(**{**base, **overrides})

    @property
    def d_inner(self):
        """``expand·d_model``: the width of x, z and y."""
        return self.expand * self.d_model

    @property
    def nheads(self):
        """``d_inner / headdim``."""
        return self.d_inner // self.headdim

    # conv_dim, d_in_proj, state_elems, conv_rows and conv_elems: golden.mixer's formulas.

    @property
    def ssm_config(self):
        """The :class:`golden.mamba2.SSMConfig` of one layer (lanes: the largest
        power of two dividing ``d_state``; the float64 model does not use them)."""
        return SSMConfig(nheads=self.nheads, headdim=self.headdim, d_state=self.d_state,
                         lanes=self.d_state & -self.d_state)

    @property
    def mixer(self):
        """The :class:`golden.mixer.MixerConfig` of one layer (``n_layer`` of them)."""
        return MixerConfig(ssm=self.ssm_config, d_model=self.d_model, d_conv=self.d_conv,
                           n_layer=self.n_layer)


#: Small named configs: ``tiny`` runs a token in about 0.1 ms, ``small`` is a
#: little wider; the Mamba2 sizes come from :meth:`LMConfig.from_model`.
LM_PRESETS = {
    # The smallest decoder that exercises every stage: its widths fit the sim preset's
    # linear.max_k (16), so the RTL engine runs it (docs/runtime.md).
    "micro": dict(vocab=16, d_model=8, n_layer=2, d_state=8, headdim=8),
    "tiny": dict(vocab=16, d_model=16, n_layer=2, d_state=8, headdim=4),
    "small": dict(vocab=64, d_model=32, n_layer=2, d_state=16, headdim=8),
}


def lm_preset(name, **overrides):
    """A named :class:`LMConfig`: ``"tiny"``, ``"small"`` or a Mamba2 size (``"130M"`` …)."""
    check_choice("lm_preset", "name", name, tuple(LM_PRESETS) + tuple(MAMBA2_SIZES))
    if name in LM_PRESETS:
        return LMConfig(**{**LM_PRESETS[name], **overrides})
    return LMConfig.from_model(name, **overrides)


def tensor_shapes(config):
    """Every weight tensor of a model: ``{name: shape}``, in ``mamba_ssm`` naming.

    ``backbone.embedding.weight`` (vocab, d_model); per layer ``i`` under
    ``backbone.layers.{i}.``: ``norm.weight`` (d_model), ``mixer.in_proj.weight``
    (d_in_proj, d_model), ``mixer.conv1d.weight`` (conv_dim, 1, d_conv),
    ``mixer.conv1d.bias`` (conv_dim), ``mixer.dt_bias``, ``mixer.A_log``,
    ``mixer.D`` (nheads), ``mixer.norm.weight`` (d_inner),
    ``mixer.out_proj.weight`` (d_model, d_inner); ``backbone.norm_f.weight``
    (d_model); and ``lm_head.weight`` (vocab, d_model) unless tied.
    """
    c = config
    shapes = {"backbone.embedding.weight": (c.vocab, c.d_model)}
    for i in range(c.n_layer):
        p = f"backbone.layers.{i}."
        shapes.update({
            p + "norm.weight": (c.d_model,),
            p + "mixer.in_proj.weight": (c.d_in_proj, c.d_model),
            p + "mixer.conv1d.weight": (c.conv_dim, 1, c.d_conv),
            p + "mixer.conv1d.bias": (c.conv_dim,),
            p + "mixer.dt_bias": (c.nheads,),
            p + "mixer.A_log": (c.nheads,),
            p + "mixer.D": (c.nheads,),
            p + "mixer.norm.weight": (c.d_inner,),
            p + "mixer.out_proj.weight": (c.d_model, c.d_inner),
        })
    shapes["backbone.norm_f.weight"] = (c.d_model,)
    if not c.tie_embeddings:
        shapes["lm_head.weight"] = (c.vocab, c.d_model)
    return shapes


def _frozen(a):
    """``a`` as a read-only float64 array nobody can write through (copied if needed)."""
    if not (isinstance(a, np.ndarray) and a.dtype == np.float64 and not a.flags.writeable
            and (a.base is None or (isinstance(a.base, np.ndarray) and a.base.base is None
                                    and not a.base.flags.writeable))):
        a = np.array(a, dtype=np.float64, copy=True)
        a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class LMState:
    """The recurrent state of a model after some tokens. Immutable.

    Arrays are read-only float64, so a state can be shared by any number of tree
    branches: :meth:`MambaLM.step` never writes into its input state, it returns
    a new one (forking is free).

    Attributes
    ----------
    conv : tuple of numpy.ndarray
        Per layer, the last ``d_conv − 1`` pre-conv xBC rows, shape
        ``(d_conv − 1, conv_dim)``, oldest first.
    ssm : tuple of numpy.ndarray
        Per layer, the SSM state, shape ``(nheads, headdim, d_state)``.
    """

    conv: tuple
    ssm: tuple

    def __post_init__(self):
        object.__setattr__(self, "conv", tuple(_frozen(a) for a in self.conv))
        object.__setattr__(self, "ssm", tuple(_frozen(a) for a in self.ssm))
        if len(self.conv) != len(self.ssm):
            raise ValueError(f"LMState needs one conv and one ssm array per layer, not "
                             f"{len(self.conv)} and {len(self.ssm)}")

    def equal(self, other):
        """Bit for bit equal (``np.array_equal`` on every array)."""
        return (len(self.ssm) == len(other.ssm)
                and all(np.array_equal(a, b) for a, b in zip(self.conv, other.conv))
                and all(np.array_equal(a, b) for a, b in zip(self.ssm, other.ssm)))


class MambaLM:
    """A Mamba2 language model (module docstring): configuration and weights.

    Parameters
    ----------
    config : LMConfig
    tensors : mapping of str to array_like
        Exactly the tensors of :func:`tensor_shapes`, finite. Stored as
        read-only float64 copies.

    Attributes
    ----------
    mixers : tuple of golden.mixer.Mamba2Mixer
        The layers, in float64 (``numerics="ref"``), reading these tensors.

    Raises
    ------
    ValueError
        Naming the tensor: missing, unexpected, wrong shape, or NaN/Inf.
    """

    def __init__(self, config, tensors, *, source="MambaLM"):
        if not isinstance(config, LMConfig):
            raise TypeError(f"MambaLM.config must be an LMConfig, not {config!r}")
        self.config = config
        self.tensors = MappingProxyType(_check_tensors(config, tensors, source=source))
        t = self.tensors
        mix = config.mixer
        mixers = []
        for i in range(config.n_layer):
            p = f"backbone.layers.{i}."
            A = -np.exp(t[p + "mixer.A_log"])
            A.setflags(write=False)
            params = MixerParams(
                norm_w=t[p + "norm.weight"], W_in=t[p + "mixer.in_proj.weight"],
                conv_w=t[p + "mixer.conv1d.weight"][:, 0, :], conv_b=t[p + "mixer.conv1d.bias"],
                ssm=SSMParams(A=A, dt_bias=t[p + "mixer.dt_bias"], D=t[p + "mixer.D"]),
                gate_norm_w=t[p + "mixer.norm.weight"], W_out=t[p + "mixer.out_proj.weight"])
            mixers.append(Mamba2Mixer(mix=mix, params=params, numerics="ref", eps=config.norm_eps))
        self.mixers = tuple(mixers)
        self._embedding = t["backbone.embedding.weight"]
        self._norm_f = t["backbone.norm_f.weight"]
        self._lm_head = t["backbone.embedding.weight"] if config.tie_embeddings else t["lm_head.weight"]

    def __repr__(self):
        return f"MambaLM({self.config!r})"

    @property
    def vocab(self):
        return self.config.vocab

    # -- construction --------------------------------------------------------

    @classmethod
    def from_seed(cls, config, *, seed, init_std=0.02, head_gain=1.0):
        """Weights drawn as ``mamba_ssm`` initializes a Mamba2 LM.

        Embedding ``N(0, init_std²)``; ``in_proj``, ``conv1d`` (weight and bias)
        and an untied ``lm_head`` as torch's ``nn.Linear``/``nn.Conv1d`` default
        ``U(±1/sqrt(fan_in))``; ``out_proj`` the same divided by
        ``sqrt(n_layer)`` (``rescale_prenorm_residual``); ``A_log``, ``dt_bias``,
        ``D`` from :func:`golden.mamba2.mamba2_init_params`; norms 1.

        Parameters
        ----------
        config : LMConfig
        seed : int
            ≥ 0; the same seed gives the same weights.
        init_std : float
            Embedding standard deviation (Mamba: 0.02).
        head_gain : float
            Multiplies an untied ``lm_head``. Mamba's init gives logits of
            standard deviation about 0.6, nearly uniform over a small
            vocabulary; a gain of 5–10 makes the distributions as peaked as
            a trained model's, which is what acceptance studies need.
        """
        if not isinstance(config, LMConfig):
            raise TypeError(f"MambaLM.from_seed config must be an LMConfig, not {config!r}")
        seed = check_int("MambaLM.from_seed", "seed", seed, min=0)
        init_std = check_float("MambaLM.from_seed", "init_std", init_std, min=0.0)
        head_gain = check_float("MambaLM.from_seed", "head_gain", head_gain, min=0.0)
        rng = np.random.default_rng(seed)
        c = config

        def uniform(shape, fan_in, gain=1.0):
            bound = gain / math.sqrt(fan_in)
            return rng.uniform(-bound, bound, size=shape)

        t = {"backbone.embedding.weight": rng.normal(0.0, init_std, size=(c.vocab, c.d_model))}
        for i in range(c.n_layer):
            p = f"backbone.layers.{i}."
            ssm = mamba2_init_params(c.ssm_config, rng)
            t.update({
                p + "norm.weight": np.ones(c.d_model),
                p + "mixer.in_proj.weight": uniform((c.d_in_proj, c.d_model), c.d_model),
                p + "mixer.conv1d.weight": uniform((c.conv_dim, 1, c.d_conv), c.d_conv),
                p + "mixer.conv1d.bias": uniform((c.conv_dim,), c.d_conv),
                p + "mixer.dt_bias": ssm.dt_bias.astype(np.float64),
                p + "mixer.A_log": np.log(-ssm.A.astype(np.float64)),
                p + "mixer.D": ssm.D.astype(np.float64),
                p + "mixer.norm.weight": np.ones(c.d_inner),
                p + "mixer.out_proj.weight": uniform((c.d_model, c.d_inner), c.d_inner,
                                                     1.0 / math.sqrt(c.n_layer)),
            })
        t["backbone.norm_f.weight"] = np.ones(c.d_model)
        if not c.tie_embeddings:
            t["lm_head.weight"] = uniform((c.vocab, c.d_model), c.d_model, head_gain)
        return cls(c, t)

    @classmethod
    def load(cls, path, *, config):
        """Read weights from a ``.npz`` or ``.safetensors`` file (see :func:`load_tensors`)."""
        return cls(config, load_tensors(path), source=str(path))

    def save(self, path, *, dtype="float64"):
        """Write the weights to ``.npz`` or ``.safetensors`` (see :func:`save_tensors`)."""
        save_tensors(path, self.tensors, dtype=dtype)

    def truncated(self, n_layer):
        """A smaller draft that shares these weights: the first ``n_layer`` blocks,
        then the final norm and head (a layer-skipping self-draft)."""
        n_layer = check_int("MambaLM.truncated", "n_layer", n_layer, min=1, max=self.config.n_layer)
        cfg = replace(self.config, n_layer=n_layer)
        return MambaLM(cfg, {k: v for k, v in self.tensors.items() if k in tensor_shapes(cfg)})

    # -- the decode step, by stage ---------------------------------------------

    def initial_state(self):
        """The state before any token: all zeros."""
        c = self.config
        return LMState(conv=tuple(np.zeros((c.d_conv - 1, c.conv_dim)) for _ in range(c.n_layer)),
                       ssm=tuple(np.zeros((c.nheads, c.headdim, c.d_state)) for _ in range(c.n_layer)))

    def check_token(self, token, *, owner="MambaLM.step", field="token"):
        """``token`` as an int in ``[0, vocab)``, or raise naming ``owner.field``."""
        return check_int(owner, field, token, min=0, max=self.config.vocab - 1)

    def check_state(self, state, *, owner="MambaLM.step"):
        """Raise unless ``state`` is an :class:`LMState` of this model's shapes."""
        c = self.config
        if not isinstance(state, LMState):
            raise TypeError(f"{owner} state must be an LMState, not {type(state).__name__}")
        want_conv, want_ssm = (c.d_conv - 1, c.conv_dim), (c.nheads, c.headdim, c.d_state)
        if len(state.ssm) != c.n_layer or any(a.shape != want_conv for a in state.conv) \
                or any(a.shape != want_ssm for a in state.ssm):
            raise ValueError(f"{owner} state must hold {c.n_layer} layers of conv {want_conv} "
                             f"and ssm {want_ssm}, not {len(state.ssm)} layers of conv "
                             f"{[a.shape for a in state.conv]} and ssm "
                             f"{[a.shape for a in state.ssm]}")

    def embed(self, token):
        """The embedding row of ``token`` (a fresh array)."""
        return self._embedding[token].copy()

    def layer_in(self, layer, hidden):
        """Pre-norm and ``in_proj``: ``(z, xBC before the conv, dt)`` of one token."""
        return self.mixers[layer].layer_in(hidden)

    def conv(self, layer, window, xbc_raw):
        """Causal conv1d and SiLU: ``(xBC, the new window)``.

        ``window`` holds the previous ``d_conv − 1`` raw rows (the parent's, in
        a tree); the new window drops the oldest and appends ``xbc_raw``.
        """
        return self.mixers[layer].conv(window, xbc_raw)

    def ssm_inputs(self, layer, xbc, dt):
        """Split xBC and compute the per-head ``delta`` and ``dA`` (:class:`SSMInputs`)."""
        return self.mixers[layer].ssm_inputs(xbc, dt)

    def layer_out(self, layer, hidden, inputs, acc, z):
        """``D·x`` skip, gated RMSNorm, ``out_proj`` and the residual: the new hidden vector."""
        mixer = self.mixers[layer]
        return mixer.layer_out(hidden, mixer.ssm_output(inputs, acc, z))

    def head(self, hidden):
        """Final RMSNorm and the LM head: logits, shape (vocab,)."""
        return matvec(self._lm_head, rmsnorm(hidden, self._norm_f, self.config.norm_eps))

    def step(self, state, token):
        """One decode step: ``(logits, new_state)``; ``state`` is not modified.

        Parameters
        ----------
        state : LMState
        token : int
            In ``[0, vocab)``.

        Returns
        -------
        logits : numpy.ndarray, shape (vocab,)
        new_state : LMState
        """
        logits, state, _ = self.step_layers(state, token)
        return logits, state

    def step_layers(self, state, token, *, meter=None):
        """:meth:`step` with what each layer did: ``(logits, new_state, layers)``.

        ``layers[l]`` is layer ``l``'s :class:`golden.mixer.Stepped` (its new
        state, output, light intermediates and input): what a backtracking
        policy keeps (:class:`golden.backtrack.LMRecurrence`). ``meter``
        counts the layers' multiplies (not the embedding's or the head's).
        """
        self.check_state(state)
        token = self.check_token(token)
        hidden = self.embed(token)
        layers = []
        for layer, mixer in enumerate(self.mixers):
            stepped = mixer.step((state.conv[layer], state.ssm[layer]), hidden, meter=meter)
            layers.append(stepped)
            hidden = stepped.output
        new = LMState(conv=tuple(s.state[0] for s in layers), ssm=tuple(s.state[1] for s in layers))
        return self.head(hidden), new, tuple(layers)

    def prefill(self, tokens, *, state=None):
        """Run ``tokens`` one by one: ``(logits of every token (T, vocab), final state)``."""
        state = self.initial_state() if state is None else state
        self.check_state(state, owner="MambaLM.prefill")
        out = np.empty((len(tokens), self.config.vocab))
        for i, tok in enumerate(tokens):
            out[i], state = self.step(state, self.check_token(tok, owner="MambaLM.prefill",
                                                              field=f"tokens[{i}]"))
        return out, state


# ----------------------------------------------------------------------------------------
# Weight files


_ST_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "bf16"}
_SAVE_DTYPES = {"float64": ("F64", "<f8"), "float32": ("F32", "<f4"), "float16": ("F16", "<f2")}


def _check_tensors(config, tensors, *, source):
    shapes = tensor_shapes(config)
    names = list(tensors)
    for name in names:
        if name not in shapes:
            raise ValueError(f"{source}: unexpected tensor {name!r} for {config!r}")
    out = {}
    for name, shape in shapes.items():
        if name not in tensors:
            raise ValueError(f"{source}: missing tensor {name!r} (shape {shape})")
        a = np.asarray(tensors[name])
        if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
            raise TypeError(f"{source}: tensor {name!r} must hold real numbers, not dtype {a.dtype}")
        if a.shape != shape:
            raise ValueError(f"{source}: tensor {name!r} must have shape {shape}, not {a.shape}")
        a = np.array(a, dtype=np.float64, copy=True)
        bad = int(np.count_nonzero(~np.isfinite(a)))
        if bad:
            raise ValueError(f"{source}: tensor {name!r} has {bad} NaN/Inf value(s)")
        a.setflags(write=False)
        out[name] = a
    return out


def _suffix(path, owner):
    suffix = Path(path).suffix
    return check_choice(owner, "path suffix", suffix, (".npz", ".safetensors"))


def load_tensors(path):
    """Every tensor of a ``.npz`` or ``.safetensors`` file, as ``{name: ndarray}``.

    The safetensors reader is the format's definition (an 8-byte little-endian
    header length, a JSON header of ``dtype``/``shape``/``data_offsets``, then
    the data), for F64, F32, F16 and BF16; it needs no package beyond numpy.

    Raises
    ------
    ValueError
        On an unknown suffix, a malformed header (naming the tensor), or
        an unsupported dtype.
    """
    path = Path(path)
    if _suffix(path, "load_tensors") == ".npz":
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    data = path.read_bytes()
    if len(data) < 8:
        raise ValueError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"{path}: safetensors header length {n} exceeds the file ({len(data)} bytes)")
    try:
        header = json.loads(data[8:8 + n])
    except ValueError as e:
        raise ValueError(f"{path}: safetensors header is not JSON ({e})") from None
    body = memoryview(data)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info.get("dtype")
        if dtype not in _ST_DTYPES:
            raise ValueError(f"{path}: tensor {name!r} has dtype {dtype!r}; allowed: "
                             f"{', '.join(_ST_DTYPES)}")
        shape = tuple(info.get("shape", ()))
        begin, end = info.get("data_offsets", (0, -1))
        count = math.prod(shape)
        width = 2 if dtype in ("F16", "BF16") else np.dtype(_ST_DTYPES[dtype]).itemsize
        if not (0 <= begin <= end <= len(body)) or end - begin != count * width:
            raise ValueError(f"{path}: tensor {name!r} has data_offsets {[begin, end]} that do not "
                             f"hold {count} {dtype} values within {len(body)} data bytes")
        raw = np.frombuffer(body[begin:end], dtype="<u2" if dtype == "BF16" else _ST_DTYPES[dtype])
        if dtype == "BF16":
            # bfloat16 is the top half of a binary32 word: widen exactly.
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        out[name] = raw.reshape(shape).copy()
    return out


def save_tensors(path, tensors, *, dtype="float64"):
    """Write ``{name: array}`` to ``.npz`` or ``.safetensors``.

    Parameters
    ----------
    dtype : {"float64", "float32", "float16"}
        Storage format (``float64`` round-trips exactly).
    """
    check_choice("save_tensors", "dtype", dtype, tuple(_SAVE_DTYPES))
    st_dtype, np_dtype = _SAVE_DTYPES[dtype]
    arrays = {}
    for name, v in tensors.items():
        v = np.asarray(v)
        with np.errstate(over="ignore"):
            a = np.ascontiguousarray(v.astype(np_dtype))
        if np.isfinite(v).all() and not np.isfinite(a).all():
            raise ValueError(f"save_tensors: tensor {name!r} overflows {dtype}")
        arrays[name] = a
    path = Path(path)
    if _suffix(path, "save_tensors") == ".npz":
        with open(path, "wb") as f:
            np.savez(f, **arrays)
        return
    header, offset = {}, 0
    for name, a in arrays.items():
        header[name] = {"dtype": st_dtype, "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)   # the format aligns the data start to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for a in arrays.values():
            f.write(a.tobytes())


# ----------------------------------------------------------------------------------------
# SPEQ self-speculation


#: Weight kinds :func:`speq_pair` can encode in BSFP: the linear layers the
#: dual-mode PE runs (``in_proj``, ``out_proj``, ``lm_head``), and, as options,
#: the conv taps and the embedding table.
SPEQ_KINDS = ("in_proj", "out_proj", "lm_head", "conv1d", "embedding")

_KIND_SUFFIX = {"in_proj": "mixer.in_proj.weight", "out_proj": "mixer.out_proj.weight",
                "conv1d": "mixer.conv1d.weight"}


@dataclass(frozen=True, eq=False)
class SpeqPair:
    """A SPEQ self-speculation pair built from one set of FP16 weights.

    Attributes
    ----------
    target : MambaLM
        Computes with the FP16 weights reconstructed from the BSFP planes
        (nibble + residue); equal to the FP16 rounding of the source weights
        except the ``ScalingReport.inexact`` ones.
    draft : MambaLM
        The same model computing with the BSFP draft weights (nibble plane
        only) of the encoded kinds, and the FP16 weights elsewhere.
    encoded : mapping of str to BSFPTensor
        The BSFP tensors, by tensor name. A tied head encoded without the
        embedding is ``lm_head.weight``: both models are then untied, since the
        draft's lookup stays FP16 while its head reads the nibble plane.
    misread : mapping of str to int
        Per tensor, weights the 4-bit E3M0 draft reads as a remapped exponent
        they do not have (:func:`golden.bsfp.draft_misread_mask`).
    inexact : mapping of str to int
        Per tensor, weights Algorithm 1's scaling did not keep exactly.
    """

    target: MambaLM
    draft: MambaLM
    encoded: dict
    misread: dict
    inexact: dict


def speq_pair(lm, *, bsfp=None, kinds=("in_proj", "out_proj", "lm_head")):
    """SPEQ self-speculation: a target and a draft that share one BSFP weight copy.

    Every tensor is first rounded to FP16 (the checkpoint both read). The
    tensors of ``kinds`` are encoded in BSFP v1 (``bsfp``): the target reads
    them back from both planes (:meth:`golden.bsfp.BSFPTensor.reconstruct`), the
    draft from the nibble plane (:func:`golden.bsfp.draft_dequantize`).

    Parameters
    ----------
    lm : MambaLM
    bsfp : golden.bsfp.BSFPConfig, optional
        Default ``BSFPConfig()``: per-tensor scaling, the SPEQ notes' remap table.
    kinds : sequence of str
        A subset of :data:`SPEQ_KINDS`.

    Returns
    -------
    SpeqPair

    Raises
    ------
    ValueError
        If a kind is unknown, or a weight overflows FP16 (naming the tensor).
    """
    if not isinstance(lm, MambaLM):
        raise TypeError(f"speq_pair lm must be a MambaLM, not {lm!r}")
    bsfp = BSFPConfig() if bsfp is None else bsfp
    if not isinstance(bsfp, BSFPConfig):
        raise TypeError(f"speq_pair bsfp must be a BSFPConfig, not {bsfp!r}")
    kinds = tuple(kinds) if not isinstance(kinds, str) else (kinds,)
    for k in kinds:
        check_choice("speq_pair", "kinds", k, SPEQ_KINDS)
    kinds = tuple(dict.fromkeys(kinds))
    cfg = lm.config
    fp16 = {}
    for name, w in lm.tensors.items():
        with np.errstate(over="ignore"):
            h = w.astype(np.float16)
        if not np.isfinite(h).all():
            raise ValueError(f"speq_pair: tensor {name!r} overflows FP16 "
                             f"(max |w| = {float(np.abs(w).max())!r})")
        fp16[name] = h
    emb = "backbone.embedding.weight"
    names = []
    for k in kinds:
        if k in _KIND_SUFFIX:
            names += [f"backbone.layers.{i}.{_KIND_SUFFIX[k]}" for i in range(cfg.n_layer)]
        elif k == "embedding":
            names.append(emb)
        elif cfg.tie_embeddings and "embedding" in kinds:
            continue            # the tied head reads the encoded embedding already
        else:
            if cfg.tie_embeddings:
                # The head goes through the nibble plane while the lookup stays
                # FP16: untie, the head becomes its own (encoded) copy.
                cfg = replace(cfg, tie_embeddings=False)
                fp16["lm_head.weight"] = fp16[emb]
            names.append("lm_head.weight")
    target_t = {k: v.astype(np.float64) for k, v in fp16.items()}
    draft_t = dict(target_t)
    encoded, misread, inexact = {}, {}, {}
    for name in names:
        t = encode(fp16[name], config=bsfp)
        encoded[name] = t
        misread[name] = int(np.count_nonzero(draft_misread_mask(t)))
        inexact[name] = t.report.inexact
        target_t[name] = t.reconstruct().view(np.float16).astype(np.float64)
        draft_t[name] = draft_dequantize(t).value
    target = MambaLM(cfg, target_t, source="speq_pair target")
    draft = MambaLM(cfg, draft_t, source="speq_pair draft")
    return SpeqPair(target=target, draft=draft, encoded=MappingProxyType(encoded),
                    misread=MappingProxyType(misread), inexact=MappingProxyType(inexact))
