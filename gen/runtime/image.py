"""The model image: a model's weights, states and I/O buffers laid out at the addresses of the memory map.

:func:`build_image` writes one contiguous buffer, the four region classes of
:class:`golden.memory_map.MemoryMap` back to back at their default offsets
(``MemoryMap.class_offsets``), every entry at
``class offset + region offset + layer·layer stride`` as the hardware computes it:

* each BSFP v1 matrix (SPEQ, arXiv 2510.18525; the embedding, which is also the
  tied LM head, ``in_proj`` and ``out_proj`` of every layer, an untied
  ``lm_head``), encoded with the design's :class:`golden.bsfp.BSFPConfig`
  (:func:`golden.bsfp.encode`) from its FP16 rounding, as three regions (four):

  - the **nibble plane** ``{s, c}`` and the **residue plane** ``{W, e0, m9..m0}``,
    in the linear engine's job layout (:func:`golden.weight_planes.pack_matrix`:
    the jobs the ``LinearEngine`` runs, one after another, each a nibble slice
    region and three residue slice regions);
  - the **scale exponents** ``k`` (``uint8``, one per tensor or per group,
    row-major, rows are ``out_features``);
  - with ``linear.draft_plane``, the **draft plane** (the nibble plane striped over a
    weight stream's four read masters, :func:`golden.weight_planes.pack_matrix_draft`);

* each layer's SSM parameters in binary32 (``ssm_params``): ``A = −exp(A_log)``
  (computed in float64, rounded once to binary32), ``dt_bias``, ``D``;
* each layer's other small parameters in binary32 (``layer_params``), in the
  order of :func:`golden.memory_map.layer_param_words`: conv1d weight
  ``conv_dim × d_conv``, conv1d bias, the block norm, the gated norm; then
  ``norm_f``;
* the committed states of both passes (zero: the state before any token;
  :meth:`ModelImage.write_state` writes others, into slot ``target0`` or
  ``draft0`` of ``state.ssm``) and the I/O buffers (:meth:`ModelImage.write_tokens`).

The host copies :attr:`ModelImage.data` into memory the accelerator reaches and
writes ``MEM_<CLASS>_BASE`` from :meth:`ModelImage.bases`
(:meth:`gen.runtime.regbus.Registers.set_bases`); see :mod:`gen.runtime.regbus`
for PYNQ and Versal Linux. Untested on hardware.
"""

from dataclasses import dataclass

import numpy as np

__all__ = ["MATRICES", "ImageError", "ModelImage", "build_image", "image_of",
           "check_fits"]

#: Map matrix name -> tensor name (``{i}``: the layer), in the order of the weights class.
MATRICES = {"embedding": "backbone.embedding.weight",
            "in_proj": "backbone.layers.{i}.mixer.in_proj.weight",
            "out_proj": "backbone.layers.{i}.mixer.out_proj.weight",
            "lm_head": "lm_head.weight"}

_STATE_DTYPES = {"fp32": "<f4", "fp16": "<f2"}


class ImageError(ValueError):
    """A model that cannot be laid out: one line naming the tensor and what is allowed."""


@dataclass(frozen=True, eq=False)
class ModelImage:
    """A model laid out for the accelerator (module docstring).

    Attributes
    ----------
    memory_map : golden.memory_map.MemoryMap
    data : bytearray
        ``memory_map.total_bytes`` bytes: the classes back to back from offset 0.
    encoded : mapping of str to golden.bsfp.BSFPTensor
        The BSFP tensors, by tensor name.
    inexact : mapping of str to int
        Per tensor, weights Algorithm 1's power-of-two scaling did not keep
        exactly (:class:`golden.bsfp.ScalingReport`): reported, never hidden.
    """

    memory_map: object
    data: bytearray
    encoded: dict
    inexact: dict

    @property
    def size(self):
        return len(self.data)

    def bases(self, at=0):
        """``{class: address}`` for the base registers when the image is copied to address ``at``."""
        from specgen.golden.memory_map import ALIGN
        if isinstance(at, bool) or not isinstance(at, int) or at < 0 or at % ALIGN:
            raise ValueError(f"ModelImage.bases: at must be a multiple of {ALIGN} (>= 0), "
                             f"not {at!r}")
        return {kind: at + offset for kind, offset in self.memory_map.class_offsets}

    def offset(self, region, **index):
        """Byte offset in :attr:`data` of an entry of ``region`` (``layer``/``node`` as it has them)."""
        return self.memory_map.address(region, **index)

    def put(self, region, payload, **index):
        """Write ``payload`` (bytes) into one entry of ``region``; it must fit the entry."""
        r = self.memory_map[region]
        payload = bytes(payload)
        if len(payload) > r.size:
            raise ValueError(f"ModelImage: {len(payload)} bytes do not fit an entry of {region} "
                             f"({r.size} bytes)")
        at = self.offset(region, **index)
        self.data[at:at + len(payload)] = payload

    def write_tokens(self, tokens):
        """Token ids into ``io.tokens_in`` (``uint32``, one per tree node)."""
        t = np.asarray(tokens, dtype=np.int64)
        vocab = self.memory_map.model.vocab
        if t.ndim != 1 or (t.size and (t.min() < 0 or t.max() >= vocab)):
            raise ValueError(f"ModelImage.write_tokens: tokens must be a 1-D list of integers in "
                             f"[0, {vocab - 1}], not {tokens!r}")
        self.put("io.tokens_in", t.astype("<u4").tobytes())

    def write_state(self, who, state):
        """The committed state ``state`` (:class:`golden.lm.LMState`) of pass ``who``
        (``"target"`` or ``"draft"``), in the design's ``state_format`` and binary32:
        the SSM state into slot ``who + "0"`` of ``state.ssm`` (bank 0, as ``STATE_BANK``
        resets) in the engine's order (:func:`golden.memory_map.state_image`: the tile
        order striped over ``ssm.state_ports``) when its shape is the unit's, row-major
        otherwise (a model the SSM unit cannot run, :func:`check_fits`); the conv window
        into ``state.<who>.conv``."""
        from specgen.golden.memory_map import MODELS, SSM_SLOTS, state_image
        from specgen.golden.validate import check_choice
        check_choice("ModelImage.write_state", "who", who, MODELS)
        m = self.memory_map.model
        fmt = _STATE_DTYPES[self.memory_map.config.ssm.state_format]
        if len(state.ssm) != m.n_layer:
            raise ValueError(f"ModelImage.write_state: the state has {len(state.ssm)} layers, "
                             f"the model {m.n_layer}")
        unit = self.memory_map.config.ssm
        for i, (conv, ssm) in enumerate(zip(state.conv, state.ssm)):
            index = _layer(self.memory_map[f"state.{who}.conv"], i)
            words = _binary(ssm, fmt, f"{who} SSM state, layer {i}")
            if np.shape(ssm) == unit.state_shape and unit.lanes <= unit.d_state:
                # The engine's order: tile order, striped over its state ports.
                words = state_image(unit, np.frombuffer(words, fmt).reshape(
                    unit.state_shape)).tobytes()
            self.put("state.ssm", words, slot=SSM_SLOTS.index(f"{who}0"), **index)
            self.put(f"state.{who}.conv", _binary(conv, "<f4", f"{who} conv window, layer {i}"),
                     **index)


def _layer(region, i):
    """``{"layer": i}`` if the region has a layer index (a one-layer model's regions have none)."""
    return {"layer": i} if any(name == "layer" for name, _, _ in region.dims) else {}


def _binary(values, dtype, what):
    a = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore"):
        out = a.astype(dtype)
    if not np.isfinite(out).all():
        raise ImageError(f"{what}: values overflow {np.dtype(dtype).name}; allowed: finite values "
                         f"within its range")
    return out.tobytes()


def _check_tensors(tensors, model):
    from specgen.golden.lm import tensor_shapes
    shapes = tensor_shapes(model)
    for name in tensors:
        if name not in shapes:
            raise ImageError(f"unexpected tensor {name!r} for {model!r}; allowed: the tensors of "
                             f"golden.lm.tensor_shapes")
    for name, shape in shapes.items():
        if name not in tensors:
            raise ImageError(f"missing tensor {name!r} (shape {shape})")
        got = tuple(np.shape(tensors[name]))
        if got != shape:
            raise ImageError(f"tensor {name!r} must have shape {shape}, not {got}")


def build_image(tensors, *, model, config, policy=None):
    """Lay out ``tensors`` (a model's weights) for the accelerator of ``config``.

    Parameters
    ----------
    tensors : mapping of str to array_like
        Exactly the tensors of :func:`golden.lm.tensor_shapes` of ``model``.
    model : golden.lm.LMConfig
    config : golden.config.Config
        The design: its BSFP format, state format, tree and board.
    policy : str, optional
        Backtracking layout, a key of :data:`golden.memory_map.MAP_POLICIES`
        (default :data:`golden.memory_map.DEFAULT_POLICY`).

    Returns
    -------
    ModelImage

    Raises
    ------
    ImageError
        A missing, unexpected or misshapen tensor, or a weight that is NaN,
        infinite or beyond FP16 (naming the tensor and the allowed values).
    ValueError
        A layout larger than the board's memory (:meth:`golden.memory_map.MemoryMap.build`).
    """
    from specgen.golden.bsfp import encode
    from specgen.golden.memory_map import DEFAULT_POLICY, MemoryMap
    from specgen.golden.weight_planes import layout_args, pack_matrix, pack_matrix_draft

    from specgen.gen.runtime.model import ModelError, check_weights

    _check_tensors(tensors, model)
    try:
        check_weights(tensors, source="build_image")
    except ModelError as exc:
        raise ImageError(str(exc)) from None
    mm = MemoryMap.build(config=config, model=model,
                         policy=DEFAULT_POLICY if policy is None else policy)
    image = ModelImage(memory_map=mm, data=bytearray(mm.total_bytes), encoded={}, inexact={})
    names = [n for n in MATRICES if n != "lm_head" or not model.tie_embeddings]
    for mat in names:
        per_layer = "{i}" in MATRICES[mat]
        for i in range(model.n_layer if per_layer else 1):
            tname = MATRICES[mat].format(i=i)
            t = encode(np.asarray(tensors[tname], dtype=np.float64).astype(np.float16),
                       config=config.bsfp)
            image.encoded[tname] = t
            image.inexact[tname] = t.report.inexact
            region = f"weights.{mat}"
            index = _layer(mm[f"{region}.nibble"], i)
            nibble, residue, _ = pack_matrix(t.stored, **layout_args(config))
            image.put(f"{region}.nibble", nibble, **index)
            image.put(f"{region}.residue", residue, **index)
            if config.linear.draft_plane:
                draft, _ = pack_matrix_draft(t.stored, **layout_args(config))
                image.put(f"{region}.draft", draft, **index)
            image.put(f"{region}.scales", np.asarray(t.scales, np.uint8).tobytes(), **index)
    for i in range(model.n_layer):
        p = f"backbone.layers.{i}."
        ssm = [-np.exp(np.asarray(tensors[p + "mixer.A_log"], dtype=np.float64)),
               tensors[p + "mixer.dt_bias"], tensors[p + "mixer.D"]]
        image.put("weights.ssm_params",
                  _binary(np.concatenate([np.asarray(a, np.float64).reshape(-1) for a in ssm]),
                          "<f4", f"layer {i} SSM parameters"),
                  **_layer(mm["weights.ssm_params"], i))
        parts = [np.asarray(tensors[p + "mixer.conv1d.weight"])[:, 0, :],
                 tensors[p + "mixer.conv1d.bias"], tensors[p + "norm.weight"],
                 tensors[p + "mixer.norm.weight"]]
        flat = np.concatenate([np.asarray(a, dtype=np.float64).reshape(-1) for a in parts])
        image.put("weights.layer_params", _binary(flat, "<f4", f"layer {i} parameters"),
                  **_layer(mm["weights.layer_params"], i))
    image.put("weights.norm_f", _binary(tensors["backbone.norm_f.weight"], "<f4",
                                        "backbone.norm_f.weight"))
    return image


def image_of(lm, *, config, policy=None):
    """:func:`build_image` of a :class:`golden.lm.MambaLM`'s tensors and config."""
    return build_image(lm.tensors, model=lm.config, config=config, policy=policy)


#: The model dimensions the accelerator is told (``DIM_*`` registers), the capability each must
#: not exceed (``None``: only the field's width), and the tensor whose shape gives it.
_DIMENSIONS = (
    ("nheads", "DIM_SSM", "NHEADS", ("CAPS_SSM", "NHEADS"), "backbone.layers.0.mixer.A_log"),
    ("headdim", "DIM_SSM", "HEADDIM", ("CAPS_SSM", "HEADDIM"),
     "backbone.layers.0.mixer.out_proj.weight"),
    ("d_state", "DIM_SSM", "D_STATE", ("CAPS_SSM", "D_STATE"),
     "backbone.layers.0.mixer.conv1d.weight"),
    ("d_model", "DIM_MODEL", "D_MODEL", None, "backbone.embedding.weight"),
    ("n_layer", "DIM_MODEL", "N_LAYER", None, "backbone.layers.*"),
)


def check_fits(model, *, regmap, caps=None):
    """Raise unless ``model``'s dimensions fit the accelerator built with ``regmap``.

    ``DIM_SSM`` may not exceed the SSM unit's built geometry ``CAPS_SSM`` (heads,
    rows per head, state columns), and every dimension must fit its ``DIM_*`` field.

    Parameters
    ----------
    model : golden.lm.LMConfig
    regmap : hw.regmap.RegisterMap
        The design's map (:func:`hw.regmap.accelerator_regmap`).
    caps : mapping of str to int, optional
        ``{"NHEADS": …, "HEADDIM": …, "D_STATE": …}`` as read from a device's
        ``CAPS_SSM`` (:meth:`gen.runtime.regbus.Registers.fields`); default the
        map's constants.

    Raises
    ------
    ImageError
        Naming the dimension, the tensor that gives it and the limit.
    """
    for dim, reg, fname, cap, tensor in _DIMENSIONS:
        value = getattr(model, dim)
        width = regmap[reg].field(fname).width
        limit, why = (1 << width) - 1, f"the {width}-bit field {reg}.{fname}"
        if cap is not None:
            built = (caps or {}).get(cap[1], regmap[cap[0]].field(cap[1]).reset)
            if built < limit:
                limit, why = built, f"{cap[0]}.{cap[1]}, the SSM unit's built geometry"
        if value > limit:
            raise ImageError(f"{dim} = {value} (from tensor {tensor!r}) does not fit the "
                             f"accelerator: at most {limit}, {why}")
