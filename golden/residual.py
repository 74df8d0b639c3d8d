"""The residual add of a Mamba2 layer, bit for bit: the ``Residual`` block's contract.

``h' = h + W_out·y`` (``Mamba2`` blocks in ``state-spaces/mamba`` add the mixer's
output to the residual stream), one binary32 add per element::

    out_i = fl(h_i + d_i)

with ``fl`` one add of the contract (:class:`golden.dsp.Binary32Ops`): ``"ieee"``
(RNE, gradual underflow) or ``"dspfp32"`` (the DSPFP32 adder: subnormal
operands read, and subnormal sums become, the zero of their sign; AMD AM004
"Subnormals"). IEEE 754 special values (``+Inf + −Inf`` is NaN; ``(−0) + (−0)
= −0``, ``(+0) + (−0) = +0``); every NaN output is the canonical quiet NaN
``0x7FC00000``.
"""

import numpy as np

from .dsp import Binary32Ops
from .nonlinear import CANONICAL_NAN32

__all__ = ["residual_hw", "residual_hw_bits"]


def residual_hw(h, d, *, contract="ieee", ops=None):
    """``fl(h + d)`` element by element (module docstring); float32 values or
    ``uint32`` bit patterns of equal shapes. Returns float32, every NaN canonical."""
    h, d = (np.asarray(a) for a in (h, d))
    h, d = (a.view(np.float32) if a.dtype == np.uint32 else a.astype(np.float32) for a in (h, d))
    if h.shape != d.shape:
        raise ValueError(f"residual: h and d must have the same shape, not {h.shape} and {d.shape}")
    ops = Binary32Ops(contract) if ops is None else ops
    out = np.asarray(ops.add(h, d), np.float32)
    return np.where(np.isnan(out), CANONICAL_NAN32, out.view(np.uint32)).view(np.float32)


def residual_hw_bits(h, d, *, contract="ieee"):
    """:func:`residual_hw` on ``uint32`` bit patterns; returns ``uint32``."""
    for name, arr in (("h", h), ("d", d)):
        if np.asarray(arr).dtype != np.uint32:
            raise TypeError(f"{name} must be a uint32 bit array, not {np.asarray(arr).dtype}")
    return residual_hw(h, d, contract=contract).view(np.uint32)
