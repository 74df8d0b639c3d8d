"""Timing benchmarks of the golden numerics (``golden.fp``, ``golden.dot``).

:func:`benchmarks` returns records for ``specgen bench``; running this module
prints them. Inputs are seeded random FP16 bit patterns (Inf/NaN excluded so
the full datapath is exercised); every figure is the best of three
``time.perf_counter`` runs.
"""

import platform
import sys

import numpy as np

from specgen.gen.bench.timing import best_of

from specgen.golden.dot import dot
from specgen.golden.fp import FP16, FP32, add, mul

__all__ = ["benchmarks"]

_COMMAND = "specgen bench"


def _finite_fp16(rng, shape):
    bits = rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)
    # Exponent field 31 (Inf/NaN) -> 30: keeps every operand finite.
    return np.where((bits & 0x7C00) == 0x7C00, bits & np.uint16(0xFBFF), bits).astype(np.uint16)


def benchmarks(*, seed=0, dot_vectors=100_000, dot_length=128, pairs=1_000_000):
    """Time the golden numerics.

    Parameters
    ----------
    seed : int
        Seed of the random operands.
    dot_vectors, dot_length : int
        Shape of the dot-product batch (FP16 in, FP32 out).
    pairs : int
        Operand pairs for FP16 ``mul`` and ``add``.

    Returns
    -------
    list of dict
        ``{"name", "value", "unit", "command", "note"}`` per benchmark.
    """
    rng = np.random.default_rng(seed)
    a = _finite_fp16(rng, (dot_vectors, dot_length))
    b = _finite_fp16(rng, (dot_vectors, dot_length))
    x, y = _finite_fp16(rng, pairs), _finite_fp16(rng, pairs)
    machine = f"{platform.machine()}, Python {sys.version.split()[0]}, numpy {np.__version__}"
    t_dot = best_of(lambda: dot(a, b, fmt_in=FP16, fmt_out=FP32))
    t_mul = best_of(lambda: mul(x, y, FP16))
    t_add = best_of(lambda: add(x, y, FP16))
    macs = dot_vectors * dot_length
    return [
        {"name": "golden.dot fp16->fp32", "value": t_dot, "unit": "s",
         "command": _COMMAND,
         "note": f"{dot_vectors} vectors x {dot_length}, exact accumulate + 1 rounding; "
                 f"{macs / t_dot / 1e6:.1f} M products/s; best of 3; {machine}"},
        {"name": "golden.fp.mul fp16", "value": t_mul, "unit": "s", "command": _COMMAND,
         "note": f"{pairs} pairs; {pairs / t_mul / 1e6:.1f} M ops/s; best of 3; {machine}"},
        {"name": "golden.fp.add fp16", "value": t_add, "unit": "s", "command": _COMMAND,
         "note": f"{pairs} pairs; {pairs / t_add / 1e6:.1f} M ops/s; best of 3; {machine}"},
    ]


if __name__ == "__main__":
    for record in benchmarks():
        print(f"{record['name']:24s} {record['value']:8.3f} {record['unit']}  {record['note']}")
