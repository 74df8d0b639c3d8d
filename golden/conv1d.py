"""Causal conv1d with SiLU of a Mamba2 layer, bit for bit: the ``Conv1d`` block's contract.

Per token, every channel ``c`` of xBC (``conv_dim = d_inner + 2·d_state``
channels, ``ngroups = 1``) has a window of the ``d_conv − 1`` previous raw xBC
values, oldest first, and ``d_conv`` taps (``Mamba2.step`` in
``state-spaces/mamba``: ``conv_state`` rolls left, the new value enters on the
right, ``xBC = SiLU(Σ_w conv_state·W_conv + b_conv)``; ``d_conv = 4``)::

    full   = window ++ [x]                       d_conv raw values, oldest first
    acc    = fl(full[0] · w[0])
    acc    = fl( fl(full[k] · w[k]) + acc )      k = 1 … d_conv − 1, ascending
    v      = fl(acc + b)
    y      = silu_lut(v)                         golden.nonlinear.lut_eval
    window' = full[1:]                           raw values, copied bit for bit

``fl`` is one binary32 operation of the contract (:class:`golden.dsp.Binary32Ops`):
``"ieee"`` rounds to nearest even with gradual underflow (the ``sim`` preset's
fabric FP units); ``"dspfp32"`` is the Versal DSPFP32 multiplier and adder
(AMD AM004, "DSPFP32 Unisim Primitive", "Subnormals"): a subnormal operand
reads as the zero of its sign, a subnormal result is flushed to the zero of its
sign after rounding. The SiLU table's Horner steps use the same operations
(:func:`golden.nonlinear.lut_eval` with ``ops``). There is no fused
multiply-add: the product is rounded before the sum (on a DSPFP32 slice the
product ``M`` is a binary32 register and the adder adds ``M`` and ``C``).

Under ``"ieee"`` this is the arithmetic of :meth:`golden.mixer.Mamba2Mixer.conv`
in its ``"hw"`` numerics, bit for bit (``tests/test_golden_conv1d.py``).

Special values: IEEE 754 (NaN in → NaN out; ``Inf·0`` and ``Inf − Inf`` are
NaN). ``y`` is NaN exactly when ``v`` is, and every NaN ``y`` is the canonical
quiet NaN ``0x7FC00000``; ``silu(+Inf) = +Inf``, ``silu(−Inf) = −0``
(:data:`golden.nonlinear.SATURATION`). ``window'`` is a copy: its NaN payloads
and subnormals are kept under both contracts (the flush happens only where a
value meets a multiplier).

Why the window travels with the data. The conv window and the taps are per
layer (a Mamba2-2.7B layer has 5,376 channels: 16,128 window words and 26,880
tap and bias words, 64 layers), so they live in memory beside the SSM state,
and in tree verification a node's window is made of its ancestors' raw rows
(SpecMamba, arXiv 2509.19873), not of the previous token in a sequence. The
block therefore holds no state: a beat brings a channel's window, taps and
bias, and returns ``y`` and the new window, which the sequencer stores under
the node.
"""

import numpy as np

from .dsp import Binary32Ops
from .nonlinear import LUTSpec, lut_eval
from .validate import check_int

__all__ = ["D_CONV_RANGE", "conv1d_hw", "conv1d_hw_bits", "conv1d_ref"]

#: Allowed ``d_conv`` (Mamba2: 4): at least one tap beside the new value.
D_CONV_RANGE = (2, 8)


def _f32(a):
    a = np.asarray(a)
    return a.view(np.float32) if a.dtype == np.uint32 else a.astype(np.float32)


def _check(window, x, w, b):
    d = w.shape[-1]
    check_int("conv1d", "d_conv", d, min=D_CONV_RANGE[0], max=D_CONV_RANGE[1])
    c = x.shape
    for name, arr, shape in (("window", window, (d - 1,) + c), ("w", w, c + (d,)), ("b", b, c)):
        if arr.shape != shape:
            raise ValueError(f"conv1d: {name} must have shape {shape} (x is {c}, d_conv = {d}), "
                             f"not {arr.shape}")


def conv1d_hw(window, x, w, b, *, silu_lut, contract="ieee", ops=None):
    """One token of the causal conv1d and SiLU, bit for bit (module docstring).

    Parameters
    ----------
    window : array_like, shape (d_conv − 1, C)
        The previous raw values of each channel, oldest first.
    x : array_like, shape (C,)
        The new raw values (from ``in_proj``).
    w : array_like, shape (C, d_conv)
        Taps, oldest first (``conv1d.weight[:, 0, :]``).
    b : array_like, shape (C,)
        Bias.
    silu_lut : golden.nonlinear.LUTSpec
        The SiLU table (``SSMConfig.silu_lut``).
    contract : str
        ``"ieee"`` or ``"dspfp32"``.
    ops : golden.dsp.Binary32Ops, optional
        Counts the flushes; made from ``contract`` when omitted.

    All arrays are float32 values or their ``uint32`` bit patterns (other float
    dtypes are rounded to binary32 first).

    Returns
    -------
    y : numpy.ndarray of float32, shape (C,)
    window : numpy.ndarray of float32, shape (d_conv − 1, C)
    """
    if not isinstance(silu_lut, LUTSpec) or silu_lut.function != "silu":
        raise TypeError(f"conv1d.silu_lut must be a LUTSpec of 'silu', not {silu_lut!r}")
    window, x, w, b = (_f32(a) for a in (window, x, w, b))
    _check(window, x, w, b)
    ops = Binary32Ops(contract) if ops is None else ops
    full = np.concatenate((window, x[None]), axis=0)
    acc = ops.mul(full[0], w[..., 0])
    for k in range(1, full.shape[0]):
        acc = ops.add(ops.mul(full[k], w[..., k]), acc)
    v = ops.add(acc, b)
    return lut_eval(silu_lut, v, ops=ops), full[1:].copy()


def conv1d_hw_bits(window, x, w, b, *, silu_lut, contract="ieee"):
    """:func:`conv1d_hw` on ``uint32`` bit patterns; returns ``(y, window)`` as ``uint32``."""
    for name, arr in (("window", window), ("x", x), ("w", w), ("b", b)):
        if np.asarray(arr).dtype != np.uint32:
            raise TypeError(f"{name} must be a uint32 bit array, not {np.asarray(arr).dtype}")
    y, win = conv1d_hw(window, x, w, b, silu_lut=silu_lut, contract=contract)
    return y.view(np.uint32), win.view(np.uint32)


def conv1d_ref(window, x, w, b):
    """The Mamba2 equations in float64: ``SiLU(Σ_k full[k]·w[k] + b)``, the oracle."""
    full = np.concatenate((np.asarray(window, np.float64), np.asarray(x, np.float64)[None]), axis=0)
    v = np.einsum("kc,ck->c", full, np.asarray(w, np.float64)) + np.asarray(b, np.float64)
    with np.errstate(all="ignore"):
        sig = np.where(v >= 0, 1.0 / (1.0 + np.exp(-v)), np.exp(v) / (1.0 + np.exp(v)))
    return v * sig
