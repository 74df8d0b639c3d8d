"""Models for the runtime: a shipped name, a seeded preset or a weight file, checked on the way in.

A model is named by one string (:func:`load_model`):

* a shipped model, ``"target"`` or ``"draft"`` (:mod:`gen.models`: the byte-level
  Mamba2 LMs trained on CPython's standard library, ``docs/models.md``);
* a seeded preset of :data:`golden.lm.LM_PRESETS` (``"tiny"``, ``"small"``), with
  Mamba2's initialization from a seed (:meth:`golden.lm.MambaLM.from_seed`);
* a ``.npz`` or ``.safetensors`` file with the tensors of
  :func:`golden.lm.tensor_shapes` (``mamba_ssm`` naming). A file carries no
  config, so the dimensions are read off the tensors' shapes
  (:func:`infer_config`); ``norm_eps`` is Mamba2's 1e-5.

Every error is a :class:`ModelError` (a ``ValueError``) of one line naming the
file, the tensor and what is allowed.

A model whose vocabulary is 256 is byte-level (the shipped ones are): a prompt is
its UTF-8 bytes and tokens decode back to text (:func:`encode_prompt`,
:func:`decode_tokens`). Other vocabularies take token ids.
"""

import re
from pathlib import Path

import numpy as np

__all__ = ["ModelError", "BYTE_VOCAB", "FP16_MAX", "model_choices", "infer_config",
           "check_weights", "load_model", "is_byte_level", "encode_prompt", "decode_tokens"]

#: Vocabulary of a byte-level model: one token per byte value.
BYTE_VOCAB = 256
#: Largest finite binary16 magnitude: weights are stored in FP16 (BSFP v1 planes).
FP16_MAX = float(np.finfo(np.float16).max)

_LAYER = re.compile(r"backbone\.layers\.(\d+)\.")


class ModelError(ValueError):
    """A model that cannot be loaded: one line naming the file and the tensor."""


def model_choices():
    """Names :func:`load_model` takes besides paths: shipped models, then seeded presets."""
    from specgen.golden.lm import LM_PRESETS

    from specgen.gen.models import model_names
    return tuple(model_names()) + tuple(LM_PRESETS)


def _shape(tensors, name, ndim, source):
    if name not in tensors:
        raise ModelError(f"{source}: missing tensor {name!r}; a Mamba2 LM file needs the tensors "
                         f"of golden.lm.tensor_shapes (mamba_ssm naming)")
    shape = tuple(np.shape(tensors[name]))
    if len(shape) != ndim:
        raise ModelError(f"{source}: tensor {name!r} must have {ndim} dimension(s), not shape "
                         f"{shape}")
    return shape


def infer_config(tensors, *, source="model"):
    """The :class:`golden.lm.LMConfig` whose :func:`golden.lm.tensor_shapes` ``tensors`` has.

    ``vocab, d_model`` come from the embedding, ``n_layer`` from the layer
    indices, ``d_inner`` (so ``expand``) from ``out_proj``, ``nheads`` (so
    ``headdim``) from ``A_log``, ``d_conv`` and ``d_state`` from ``conv1d``
    (``conv_dim = d_inner + 2·d_state``), and the head is tied unless
    ``lm_head.weight`` is present. The full shape check is
    :class:`golden.lm.MambaLM`'s.

    Raises
    ------
    ModelError
        Naming the tensor whose shape gives no valid dimension.
    """
    from specgen.golden.lm import LMConfig

    vocab, d_model = _shape(tensors, "backbone.embedding.weight", 2, source)
    layers = sorted({int(m.group(1)) for name in tensors if (m := _LAYER.match(name))})
    if not layers:
        raise ModelError(f"{source}: no tensor 'backbone.layers.0.*'; a Mamba2 LM has at least "
                         "one layer")
    if layers != list(range(len(layers))):
        missing = sorted(set(range(layers[-1] + 1)) - set(layers))
        raise ModelError(f"{source}: layers must be numbered 0..{layers[-1]} without gaps; "
                         f"missing backbone.layers.{missing[0]}")
    p = "backbone.layers.0.mixer."
    rows, d_inner = _shape(tensors, p + "out_proj.weight", 2, source)
    (nheads,) = _shape(tensors, p + "A_log", 1, source)
    conv_dim, _, d_conv = _shape(tensors, p + "conv1d.weight", 3, source)
    if rows != d_model or d_inner % d_model or d_inner == 0:
        raise ModelError(f"{source}: tensor {p + 'out_proj.weight'!r} must have shape "
                         f"(d_model = {d_model}, a multiple of d_model), not {(rows, d_inner)}")
    if nheads == 0 or d_inner % nheads:
        raise ModelError(f"{source}: tensor {p + 'A_log'!r} must have nheads entries dividing "
                         f"d_inner = {d_inner}, not {nheads}")
    d_state2 = conv_dim - d_inner
    if d_state2 <= 0 or d_state2 % 2:
        raise ModelError(f"{source}: tensor {p + 'conv1d.weight'!r} must have conv_dim = d_inner "
                         f"+ 2·d_state rows with d_state >= 1 (d_inner = {d_inner}), not "
                         f"{conv_dim}")
    try:
        return LMConfig(vocab=vocab, d_model=d_model, n_layer=len(layers), d_state=d_state2 // 2,
                        headdim=d_inner // nheads, expand=d_inner // d_model, d_conv=d_conv,
                        tie_embeddings="lm_head.weight" not in tensors)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{source}: the tensors' shapes give no valid Mamba2 config: {exc}") \
            from None


def check_weights(tensors, *, source="model"):
    """Raise unless every tensor holds finite real values within FP16's range.

    The accelerator stores weights in FP16 (the BSFP v1 planes), so a weight
    that is NaN, infinite or above 65504 in magnitude has no stored form.

    Raises
    ------
    ModelError
        Naming the tensor, the count, the first index and the allowed values.
    """
    for name, value in tensors.items():
        a = np.asarray(value)
        if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
            raise ModelError(f"{source}: tensor {name!r} has dtype {a.dtype}; allowed: real "
                             f"numbers (float16, float32, float64 or integers)")
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(a) | (np.abs(a) > FP16_MAX)
        count = int(np.count_nonzero(bad))
        if count:
            first = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), a.shape))
            raise ModelError(f"{source}: tensor {name!r} has {count} value(s) that are NaN, "
                             f"infinite or beyond FP16, first {float(a[first])!r} at index {first}; "
                             f"allowed: finite values with |w| <= {FP16_MAX:g} (FP16)")


def _load_file(path):
    from specgen.golden.lm import MambaLM, load_tensors

    path = Path(path)
    if path.suffix not in (".npz", ".safetensors"):
        raise ModelError(f"model {str(path)!r}: not a shipped or seeded model ("
                         f"{', '.join(model_choices())}) and not a .npz or .safetensors file")
    if not path.is_file():
        raise ModelError(f"model {str(path)!r}: no such file; give a .npz or .safetensors file or "
                         f"one of {', '.join(model_choices())}")
    try:
        tensors = load_tensors(path)
    except ModelError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        # np.load and the safetensors reader raise these for a damaged file.
        raise ModelError(f"model {str(path)!r}: malformed weight file: "
                         f"{' '.join(str(exc).split())}") from None
    check_weights(tensors, source=str(path))
    config = infer_config(tensors, source=str(path))
    try:
        return MambaLM(config, tensors, source=str(path))
    except (TypeError, ValueError) as exc:
        raise ModelError(" ".join(str(exc).split())) from None


def load_model(spec, *, seed=0):
    """The :class:`golden.lm.MambaLM` named by ``spec`` (module docstring) and a label for it.

    Parameters
    ----------
    spec : str or os.PathLike
        A shipped model name, a seeded preset name or a weight file.
    seed : int
        Seed of a seeded preset (ignored otherwise).

    Returns
    -------
    lm : golden.lm.MambaLM
    label : str
        ``"target (shipped)"``, ``"tiny (seed 0)"`` or the path.

    Raises
    ------
    ModelError
    """
    from specgen.golden.lm import LM_PRESETS, MambaLM, lm_preset

    from specgen.gen.models import load_model as load_shipped
    from specgen.gen.models import model_names

    text = str(spec)
    if text in model_names():
        return load_shipped(text), f"{text} (shipped)"
    if text in LM_PRESETS:
        return MambaLM.from_seed(lm_preset(text), seed=seed), f"{text} (seed {seed})"
    return _load_file(text), text


def is_byte_level(lm):
    """Whether ``lm`` reads bytes: its vocabulary is :data:`BYTE_VOCAB`."""
    return lm.vocab == BYTE_VOCAB


def encode_prompt(text, lm):
    """The token ids of ``text`` for a byte-level ``lm``: its UTF-8 bytes.

    Raises
    ------
    ModelError
        If ``lm`` is not byte-level, or ``text`` is empty.
    """
    if not is_byte_level(lm):
        raise ModelError(f"a text prompt needs a byte-level model (vocab {BYTE_VOCAB}); this "
                         f"model has vocab {lm.vocab}: give token ids in [0, {lm.vocab - 1}]")
    data = text.encode("utf-8")
    if not data:
        raise ModelError("the prompt is empty; give at least one character")
    return list(data)


def decode_tokens(tokens, lm):
    """The text of ``tokens`` for a byte-level ``lm`` (invalid UTF-8 shown as U+FFFD), else ``None``."""
    if not is_byte_level(lm):
        return None
    return bytes(int(t) for t in tokens).decode("utf-8", errors="replace")
