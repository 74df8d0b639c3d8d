"""Analytical DSP58 count of a design, from its config alone."""

import math

from specgen.golden.config import Config

__all__ = ["DSP58_UNSIGNED", "dsp58_per_multiply", "analytical_dsp58"]


# --- analytical DSP58 count -----------------------------------------------------------

#: Unsigned operand bits of one DSP58 multiplier (27×24 two's complement).
DSP58_UNSIGNED = (26, 23)


def dsp58_per_multiply(a_bits, b_bits):
    """DSP58 slices for an unsigned ``a_bits × b_bits`` product, tiled on 26×23 operands."""
    x, y = DSP58_UNSIGNED
    return min(math.ceil(a_bits / x) * math.ceil(b_bits / y),
               math.ceil(b_bits / x) * math.ceil(a_bits / y))


def analytical_dsp58(config):
    """DSP58 slices the design needs, from the config alone.

    * Linear unit: every SPEQ dual-mode PE has one FP16×FP16 significand
      product (11×11 bits, one DSP58); the draft lanes are exponent adds (no
      DSP). ``rows·cols`` PEs.
    * SSM unit: per EMU lane three FP32 multiplies (``dA·h``, ``(dt·x)·B``,
      ``h·C``), plus three per unit (``dt·x``, ``x·D``, ``dt·A``); a 24×24
      significand product needs two DSP58 (26×23 unsigned per slice).

    Returns
    -------
    dict
        ``{"Linear unit": n, "SSM unit": n, "Total": n, "budget": board DSP58}``.
    """
    if not isinstance(config, Config):
        raise TypeError(f"analytical_dsp58: config must be a golden.config.Config, not {config!r}")
    lin = config.linear.rows * config.linear.cols * dsp58_per_multiply(11, 11)
    ssm = (3 * config.ssm.lanes + 3) * dsp58_per_multiply(24, 24)
    return {"Linear unit": lin, "SSM unit": ssm, "Total": lin + ssm,
            "budget": config.board.dsp58}
