"""Greedy argmax over a logit stream, bit for bit: the ``Argmax`` block's contract.

Greedy decoding takes the token of the largest logit (``logits.argmax(-1)``).
The contract, over ``V`` binary32 logits in index order:

* **Order.** Logits compare by value (IEEE 754 ``compareQuietGreater``):
  ``−0`` and ``+0`` are equal, ``−Inf`` is below every finite value, ``+Inf``
  above.
* **Ties** go to the lowest index (the first occurrence, as ``numpy.argmax``):
  the running best is replaced only by a strictly greater logit.
* **NaN** logits are skipped (they compare false) and reported: ``nan`` is
  set when any logit is NaN. If every logit is NaN the result is index 0
  with the canonical NaN ``0x7FC00000`` as its value. (``numpy.argmax``
  returns the first NaN instead; a NaN logit is a fault that the runtime should
  see, not a token.)

The result is ``(index, value, nan)``: ``value`` is the winning logit's bit
pattern, unchanged (so the sign of a winning zero is the first zero's).
"""

import numpy as np

from .nonlinear import CANONICAL_NAN32

__all__ = ["argmax_hw", "argmax_hw_bits"]


def argmax_hw(logits):
    """``(index, value, nan)`` of the logits' last axis (module docstring).

    Parameters
    ----------
    logits : array_like, shape (..., V)
        float32 values or ``uint32`` bit patterns; ``V >= 1``.

    Returns
    -------
    index : numpy.ndarray of int64, shape (...)
    value : numpy.ndarray of uint32, shape (...)
    nan : numpy.ndarray of bool, shape (...)
    """
    x = np.asarray(logits)
    x = x.view(np.float32) if x.dtype == np.uint32 else x.astype(np.float32)
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ValueError(f"argmax: logits must have at least one element on the last axis, "
                         f"not shape {x.shape}")
    nan = np.isnan(x)
    # NaNs below everything, then the first maximum: numpy.argmax on a NaN-free copy.
    filled = np.where(nan, np.float32(-np.inf), x)
    best = filled.max(axis=-1, keepdims=True)
    hit = (filled == best) & ~nan
    index = np.where(hit.any(axis=-1), hit.argmax(axis=-1), 0)
    value = np.take_along_axis(x.view(np.uint32), index[..., None], axis=-1)[..., 0]
    all_nan = nan.all(axis=-1)
    value = np.where(all_nan, CANONICAL_NAN32, value).astype(np.uint32)
    return index.astype(np.int64), value, nan.any(axis=-1)


def argmax_hw_bits(logits):
    """:func:`argmax_hw` on ``uint32`` bit patterns."""
    if np.asarray(logits).dtype != np.uint32:
        raise TypeError(f"logits must be a uint32 bit array, not {np.asarray(logits).dtype}")
    return argmax_hw(logits)
