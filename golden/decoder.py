"""The accelerator's decode step, bit for bit: a Mamba2 LM computed by its blocks' contracts.

:class:`golden.lm.MambaLM` is the behavioural reference of speculative decoding in
float64. :class:`HardwareLM` is the same model as the accelerator of a design
computes it: every stage is the golden contract of the block that runs it, in
the design's numerics, so that a whole-decoder RTL run is checked token for
token and logit for logit against this model (and this model against the
float64 one)::

    h      = E16[token]                          embedding lookup: the FP16 word the
                                                 BSFP planes encode, exact in binary32
    for each layer l:
        un     = gated_rmsnorm_hw(h, None, w_norm)          pre-norm (no gate)
        zxbcdt = linear(W_in, fp16(un))                      LinearEngine, DSPFP32 dot
        xBC, window' = conv1d_hw(window, xBC_raw, W_conv, b_conv)   Conv1d block
        y, s'  = ssm_step_hw(s, x, B, C, dt)                 SSM unit (y includes D·x)
        g      = gated_rmsnorm_hw(y, z, w_gate)              GatedRMSNorm block
        h      = residual_hw(h, linear(W_out, fp16(g)))      LinearEngine, Residual block
    logits = linear(W_head, fp16(gated_rmsnorm_hw(h, None, w_f)))   then argmax_hw

* ``linear`` is the DSPFP32 dot of :func:`golden.dsp.full_dot` (the verify pass:
  both BSFP planes merged by the FP16 reconstructor) or :func:`golden.dsp.draft_dot`
  (SPEQ's draft pass, arXiv 2510.18525: the nibble plane alone), computed by
  :func:`golden.dsp.dot_native` (the same bits), on the BSFP v1 encoding of each
  matrix's FP16 rounding with the design's :class:`golden.bsfp.BSFPConfig`: the
  words the memory image holds. The DSPFP32 contract is the only one the
  ``LinearEngine`` has.
* ``fp16`` is IEEE 754 convertFormat binary32 → binary16, roundTiesToEven with
  gradual underflow (:func:`golden.fp.convert`): the linear engine reads binary16
  activations (the DSP then reads a subnormal one as zero).
* The conv1d, both norms, the residual and the SSM unit use the design's SSM
  contract (``SSMConfig.contract``: ``"ieee"`` or ``"dspfp32"``) and its SiLU,
  softplus and exp tables, as their blocks do (``hw.conv1d.Conv1d.from_config``
  and the others). The norms fold their sums of squares in ``vector.lanes`` partial
  sums (:func:`golden.rmsnorm.gated_rmsnorm_hw`), as the core's norm engines do.
* The other parameters are binary32 roundings of the source's float64 values
  (``A = −exp(A_log)`` computed in float64, rounded once), as the memory image
  stores them.
* Greedy decoding takes :func:`golden.argmax.argmax_hw` of the logits: ties to the
  lowest index (as ``numpy.argmax``), NaN logits skipped.

The state of a layer is its conv window (binary32, ``(d_conv − 1, conv_dim)``) and
its SSM state in the design's state format, held exactly in the float64 arrays of a
:class:`golden.lm.LMState`. :class:`HardwareLM` follows the model
protocol of :mod:`golden.speculative` (``vocab``, ``initial_state``, ``step``), so
``speculative_generate(target, draft, …, verify="paths", backtrack="pure-store")``
on a pair of them gives the tokens the accelerator must produce; greedy
speculative decoding is lossless, so they are the hardware target's greedy
continuation.
"""

from dataclasses import dataclass, replace

import numpy as np

from .argmax import argmax_hw
from .bsfp import encode
from .config import Config
from .conv1d import conv1d_hw
from .dsp import dot_native, draft_weight_operand, full_weight_operand
from .fp import FP16, FP32, convert
from .lm import LMState, MambaLM
from .mamba2 import SSMParams, ssm_step_hw
from .residual import residual_hw
from .rmsnorm import gated_rmsnorm_hw
from .validate import check_choice

__all__ = ["PASSES", "HardwareLM", "HardwarePair", "hardware_pair", "to_fp16"]

#: How a :class:`HardwareLM` reads its BSFP matrices: ``"verify"`` both planes (the
#: FP16 weights), ``"draft"`` the nibble plane alone (SPEQ's draft pass).
PASSES = ("verify", "draft")

_EMBEDDING = "backbone.embedding.weight"


def to_fp16(values):
    """binary32 values (float32) → binary16 bit patterns (``uint16``), RNE with gradual
    underflow, overflow to ±Inf, NaN to the canonical quiet NaN (:func:`golden.fp.convert`)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    return np.asarray(convert(bits, FP32, FP16), dtype=np.uint16)


def _f32(values):
    return np.asarray(values, dtype=np.float64).astype(np.float32)


class HardwareLM:
    """A :class:`golden.lm.MambaLM` as the accelerator of ``config`` computes it (module docstring).

    Parameters
    ----------
    lm : golden.lm.MambaLM
        The source weights (float64).
    config : golden.config.Config
        The design: its BSFP format and its SSM unit's contract, tables and state
        format. The model's ``d_state`` must suit the SSM unit's ``lanes``.
    linear_pass : {"verify", "draft"}
        How the BSFP matrices are read (:data:`PASSES`).
    encoded : mapping of str to golden.bsfp.BSFPTensor, optional
        The BSFP tensors by tensor name, to share one encoding between the two passes
        of a SPEQ pair (:func:`hardware_pair`); encoded here when omitted.

    Raises
    ------
    ValueError
        A pass not in :data:`PASSES`, a weight beyond FP16 or NaN (naming the tensor),
        or a model whose SSM dimensions the design's SSM unit cannot run.
    """

    def __init__(self, lm, *, config, linear_pass="verify", encoded=None):
        if not isinstance(lm, MambaLM):
            raise TypeError(f"HardwareLM.lm must be a golden.lm.MambaLM, not {lm!r}")
        if not isinstance(config, Config):
            raise TypeError(f"HardwareLM.config must be a golden.config.Config, not {config!r}")
        check_choice("HardwareLM", "linear_pass", linear_pass, PASSES)
        self.lm, self.config, self.linear_pass = lm, config, linear_pass
        c = lm.config
        self._c = c
        try:
            # The model's geometry on the design's numerics (ports and head groups are
            # the hardware's layout: no result depends on them).
            self.ssm = replace(config.ssm, nheads=c.nheads, headdim=c.headdim, d_state=c.d_state,
                               state_ports=1, head_groups=1)
        except ValueError as exc:
            raise ValueError(f"HardwareLM: the model's SSM (nheads {c.nheads}, headdim "
                             f"{c.headdim}, d_state {c.d_state}) does not fit the design's SSM "
                             f"unit: {exc}") from None
        self.contract = self.ssm.contract
        # The norms keep one partial sum a lane (golden.rmsnorm): the vectors they
        # normalize must split into whole beats.
        self.lanes = config.vector.lanes
        for dim in ("d_model", "d_inner"):
            if getattr(c, dim) % self.lanes:
                raise ValueError(f"HardwareLM: the model's {dim} ({getattr(c, dim)}) is not a "
                                 f"multiple of the design's vector.lanes ({self.lanes}); allowed: "
                                 f"lanes dividing d_model and d_inner")
        t = lm.tensors
        names = [_EMBEDDING] + [f"backbone.layers.{i}.mixer.{m}.weight" for i in range(c.n_layer)
                                for m in ("in_proj", "out_proj")]
        if not c.tie_embeddings:
            names.append("lm_head.weight")
        self.encoded = dict(encoded) if encoded is not None else {}
        for name in names:
            if name not in self.encoded:
                with np.errstate(over="ignore"):
                    h = np.asarray(t[name], dtype=np.float64).astype(np.float16)
                if not np.isfinite(h).all():
                    raise ValueError(f"HardwareLM: tensor {name!r} is NaN or beyond FP16 "
                                     f"(max |w| = {float(np.nanmax(np.abs(t[name])))!r}); allowed: "
                                     f"finite weights within ±65504")
                self.encoded[name] = encode(h, config=config.bsfp)
        # The lookup reads the FP16 words the planes encode (both planes: the lookup is
        # not a matrix product, so the draft pass reads it whole too).
        self._embedding = self.encoded[_EMBEDDING].reconstruct().view(np.float16).astype(np.float32)
        operand = full_weight_operand if linear_pass == "verify" else draft_weight_operand

        def weights(name):
            w = operand(self.encoded[name])
            return w[0] if linear_pass == "verify" else w

        self._head = weights(self.head_tensor)
        self._layers = []
        for i in range(c.n_layer):
            p = f"backbone.layers.{i}."
            self._layers.append(dict(
                w_in=weights(p + "mixer.in_proj.weight"),
                w_out=weights(p + "mixer.out_proj.weight"),
                norm=_f32(t[p + "norm.weight"]), gate=_f32(t[p + "mixer.norm.weight"]),
                conv_w=_f32(np.asarray(t[p + "mixer.conv1d.weight"])[:, 0, :]),
                conv_b=_f32(t[p + "mixer.conv1d.bias"]),
                params=SSMParams(A=_f32(-np.exp(np.asarray(t[p + "mixer.A_log"], np.float64))),
                                 dt_bias=_f32(t[p + "mixer.dt_bias"]), D=_f32(t[p + "mixer.D"]))))
        self._norm_f = _f32(t["backbone.norm_f.weight"])

    def __repr__(self):
        c = self._c
        return (f"HardwareLM({c.n_layer} layers, d_model {c.d_model}, vocab {c.vocab}, "
                f"{self.linear_pass} pass, SSM contract {self.contract})")

    @property
    def vocab(self):
        """Vocabulary size."""
        return self._c.vocab

    def initial_state(self):
        """The state before any token: zero windows (binary32) and zero SSM states."""
        c = self._c
        return LMState(conv=tuple(np.zeros((c.d_conv - 1, c.conv_dim), np.float32)
                                  for _ in range(c.n_layer)),
                       ssm=tuple(np.zeros((c.nheads, c.headdim, c.d_state), self.ssm.state_dtype)
                                 for _ in range(c.n_layer)))

    def parameters(self, i):
        """Layer ``i``'s parameters as the memory image stores them (binary32,
        ``float32`` copies): ``norm`` (d_model), ``gate`` (d_inner), ``conv_w``
        (conv_dim, d_conv), ``conv_b`` (conv_dim), ``A``, ``dt_bias``, ``D`` (nheads)."""
        L = self._layers[i]
        p = L["params"]
        return {"norm": L["norm"].copy(), "gate": L["gate"].copy(), "conv_w": L["conv_w"].copy(),
                "conv_b": L["conv_b"].copy(), "A": np.array(p.A, np.float32),
                "dt_bias": np.array(p.dt_bias, np.float32), "D": np.array(p.D, np.float32)}

    @property
    def norm_f(self):
        """The final norm's weights (binary32, a copy)."""
        return self._norm_f.copy()

    @property
    def head_tensor(self):
        """The name of the BSFP tensor the LM head reads (the embedding when tied)."""
        return "lm_head.weight" if not self._c.tie_embeddings else _EMBEDDING

    def _linear(self, w, x):
        """binary32 ``W·x`` of the weight operands ``w`` (rows, K) and binary32 ``x`` (K,)."""
        return dot_native(w, to_fp16(x)[None])[:, 0].view(np.float32)

    def _norm(self, y, z, w):
        return gated_rmsnorm_hw(y, z, w, silu_lut=self.ssm.silu_lut, eps=self._c.norm_eps,
                                contract=self.contract, lanes=self.lanes)

    def embed(self, token):
        """The embedding row of ``token`` (binary32, a fresh array)."""
        return self._embedding[token].copy()

    def layer(self, i, hidden, conv_state, ssm_state):
        """Layer ``i`` on ``hidden``: ``(new hidden, new window, new SSM state)``."""
        c, L = self._c, self._layers[i]
        zxbcdt = self._linear(L["w_in"], self._norm(hidden, None, L["norm"]))
        di, cd = c.d_inner, c.conv_dim
        z, xbc_raw, dt = zxbcdt[:di], zxbcdt[di:di + cd], zxbcdt[di + cd:]
        xbc, window = conv1d_hw(conv_state, xbc_raw, L["conv_w"], L["conv_b"],
                                silu_lut=self.ssm.silu_lut, contract=self.contract)
        x, B, C = xbc[:di], xbc[di:di + c.d_state], xbc[di + c.d_state:]
        step = ssm_step_hw(self.ssm, L["params"], ssm_state, x.reshape(c.nheads, c.headdim), B, C, dt)
        g = self._norm(step.y.reshape(-1), z, L["gate"])
        out = residual_hw(hidden, self._linear(L["w_out"], g), contract=self.contract)
        return out, window, step.state

    def head(self, hidden):
        """Final RMSNorm and the LM head: binary32 logits, shape (vocab,)."""
        return self._linear(self._head, self._norm(hidden, None, self._norm_f))

    def check_state(self, state, *, owner="HardwareLM.step"):
        """Raise unless ``state`` is an :class:`golden.lm.LMState` of this model's shapes."""
        self.lm.check_state(state, owner=owner)

    def step(self, state, token):
        """One decode step: ``(logits, new_state)``; ``state`` is not modified.

        Parameters
        ----------
        state : golden.lm.LMState
        token : int
            In ``[0, vocab)``.

        Returns
        -------
        logits : numpy.ndarray of float32, shape (vocab,)
        new_state : golden.lm.LMState
        """
        self.check_state(state)
        token = self.lm.check_token(token, owner="HardwareLM.step")
        hidden = self.embed(token)
        conv, ssm = [], []
        for i in range(self._c.n_layer):
            hidden, window, s = self.layer(i, hidden, state.conv[i], state.ssm[i])
            conv.append(window)
            ssm.append(s)
        return self.head(hidden), LMState(conv=tuple(conv), ssm=tuple(ssm))

    def greedy(self, logits):
        """The greedy token of ``logits``: :func:`golden.argmax.argmax_hw`'s index."""
        return int(argmax_hw(logits)[0])


@dataclass(frozen=True)
class HardwarePair:
    """SPEQ self-speculation on the accelerator: one BSFP weight copy, two passes.

    Attributes
    ----------
    target : HardwareLM
        The verify pass (both planes).
    draft : HardwareLM
        The draft pass (the nibble plane of the same words).
    """

    target: HardwareLM
    draft: HardwareLM


def hardware_pair(lm, *, config):
    """:class:`HardwarePair` of ``lm`` for the design ``config``: the target and the SPEQ
    draft read one encoding of every matrix (the embedding lookup, the norms and the
    SSM stay exact in both)."""
    target = HardwareLM(lm, config=config, linear_pass="verify")
    draft = HardwareLM(lm, config=config, linear_pass="draft", encoded=target.encoded)
    return HardwarePair(target=target, draft=draft)
