"""BSFP v1 encode/reconstruct throughput on a Mamba2-2.7B-sized matrix.

``benchmarks()`` returns rows ``{"name", "value", "unit", "command", "note"}`` for the
project's benchmark report. The matrix is 2560 x 10240 (Mamba2-2.7B ``in_proj``
input side: d_model = 2560 by 4 * d_model), FP16 Gaussian weights with the spread of
a trained projection (std 0.02) and one outlier of 3.0 so that Algorithm 1 picks
k = 1 and the subnormal path runs. Times are the best of 3 ``perf_counter`` runs.
"""


import numpy as np

from specgen.gen.bench.timing import best_of

from specgen.golden.bsfp import BSFPConfig, encode

__all__ = ["benchmarks", "SHAPE"]

SHAPE = (2560, 10240)
COMMAND = "specgen bench"


def _matrix(seed=0):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal(SHAPE, dtype=np.float32) * 0.02).astype(np.float16)
    w[0, 0] = 3.0
    return w.view(np.uint16)


def benchmarks():
    """Encode + reconstruct of one 2560 x 10240 FP16 matrix, per tensor and per 128-group."""
    w = _matrix()
    rows = []
    for label, config in (("per-tensor", BSFPConfig()), ("group-128", BSFPConfig(group_size=128))):
        encode(w[:4], config=config)                     # build the cached tables first
        state = {}

        def enc():
            state["t"] = encode(w, config=config)

        def rec():
            state["r"] = state["t"].reconstruct()

        t_enc = best_of(enc)
        t_rec = best_of(rec)
        t_both = best_of(lambda: (enc(), rec()))
        ok = int(np.count_nonzero(state["r"] != w)) == state["t"].report.inexact
        note = (f"{SHAPE[0]}x{SHAPE[1]} FP16, k={int(np.max(state['t'].scales))}, "
                f"{state['t'].report.inexact} counted subnormal losses, "
                f"round trip {'ok' if ok else 'FAILED'}; encode {t_enc:.3f} s, "
                f"reconstruct {t_rec:.3f} s; target < 2 s")
        rows.append({"name": f"bsfp encode+reconstruct {label}", "value": round(t_both, 3),
                     "unit": "s", "command": COMMAND, "note": note})
    return rows
