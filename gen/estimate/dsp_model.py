"""Analytical DSP58 count of a design, from its config alone."""

import math

from specgen.golden.config import Config

__all__ = ["DSP58_UNSIGNED", "dsp58_per_multiply", "ssm_dspfp32", "analytical_dsp58"]


# --- analytical DSP58 count -----------------------------------------------------------

#: Unsigned operand bits of one DSP58 multiplier (27×24 two's complement).
DSP58_UNSIGNED = (26, 23)


def dsp58_per_multiply(a_bits, b_bits):
    """DSP58 slices for an unsigned ``a_bits × b_bits`` product, tiled on 26×23 operands."""
    x, y = DSP58_UNSIGNED
    return min(math.ceil(a_bits / x) * math.ceil(b_bits / y),
               math.ceil(b_bits / x) * math.ceil(a_bits / y))


def ssm_dspfp32(ssm):
    """DSPFP32 slices of the ``dspfp32`` SSM unit (``hw.tree_ssm.TreeSSMUnit``) of an
    :class:`golden.mamba2.SSMConfig`, as ``hw.ssm_unit.SSMDatapath`` builds it: per swept row
    (``rows_per_word`` an issue) of ``W = tree_width`` lanes, three per lane (``u·B``, the
    ``dA·h + u·B`` multiply-add, ``h'·C`` or its pair's multiply-add), ``⌈W/2⌉ − 1`` tree
    adds, the row's ``u``, ``D·x`` and ``y`` adder, and its accumulator when a row takes
    several tiles; plus the per-head prologue: the ``dt + dt_bias`` add, the ``delta·A``
    multiply and the softplus and exp tables' Horner steps, one a degree
    (``hw.ssm_nonlinear.LUTFunction``)."""
    W, K = ssm.tree_width, ssm.groups_per_row
    per_row = 3 * W + (-(-W // 2) - 1) + 3 + (1 if K > 1 else 0)
    prologue = 2 + ssm.softplus_lut.degree + ssm.exp_lut.degree
    return ssm.rows_per_word * per_row + prologue


def analytical_dsp58(config):
    """DSP58 slices the design needs, from the config alone.

    * Linear unit: one DSP58 per MAC slot (``dspfp32``: a DSPFP32 slice; ``exact``: the
      SPEQ dual-mode PE's FP16×FP16 significand product, 11×11 bits; its draft lanes are
      exponent adds). ``rows·cols`` slots.
    * SSM unit: on the ``dspfp32`` contract the DSPFP32 slices of :func:`ssm_dspfp32` (a
      binary32 multiply-add a slice, AMD AM004); on ``ieee`` per EMU lane three FP32
      multiplies (``dA·h``, ``(dt·x)·B``, ``h·C``), plus three per unit (``dt·x``,
      ``x·D``, ``dt·A``), a 24×24 significand product two DSP58 (26×23 unsigned a slice).

    Returns
    -------
    dict
        ``{"Linear unit": n, "SSM unit": n, "Total": n, "budget": board DSP58}``.
    """
    if not isinstance(config, Config):
        raise TypeError(f"analytical_dsp58: config must be a golden.config.Config, not {config!r}")
    lin = config.linear.rows * config.linear.cols * dsp58_per_multiply(11, 11)
    if config.ssm.contract == "dspfp32":
        ssm = ssm_dspfp32(config.ssm)
    else:
        ssm = (3 * config.ssm.lanes + 3) * dsp58_per_multiply(24, 24)
    return {"Linear unit": lin, "SSM unit": ssm, "Total": lin + ssm,
            "budget": config.board.dsp58}
