"""Timing helper shared by the benchmarks."""

import time

__all__ = ["best_of"]


def best_of(fn, repeat=3):
    """Best wall-clock time of ``repeat`` calls of ``fn``, in seconds (``time.perf_counter``)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best
