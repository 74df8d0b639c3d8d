"""Cycles per token of the ``SSMUnit`` RTL, measured cycle-accurately on amaranth.sim.

``benchmarks()`` returns rows ``{"name", "value", "unit", "command", "note"}``. For
each config :func:`sim.ssm_unit.run_pysim` streams tokens with no back-pressure,
the producer writing each token into the fill bank as soon as it is free, and the
cycles between the last ``y`` of consecutive tokens are measured (mean over the
second half of the run); the run is checked bit for bit against the golden model.
The ideal is ``nheads·P·N / lanes`` (:attr:`hw.ssm_unit.SSMUnit.sweep_cycles`): one state
tile per lane per cycle. The one-time pipeline latency (first ``y``) is
reported in the note.

The configs keep the token's input writes (``2N + H·P + H`` words through the
32-bit write port) plus the prologue latency below the sweep length, since the
next token's inputs can only be written while the current token sweeps (two banks).
Each config takes about a minute of Python simulation.
"""

__all__ = ["CONFIGS", "benchmarks"]

COMMAND = "specgen bench"

#: (geometry, mul_stages, add_stages)
CONFIGS = [
    ({"nheads": 2, "headdim": 8, "d_state": 16, "lanes": 2}, 1, 1),
    ({"nheads": 2, "headdim": 4, "d_state": 8, "lanes": 1}, 1, 1),
    ({"nheads": 2, "headdim": 16, "d_state": 8, "lanes": 2}, 2, 2),
]


def measure(geom, mul_stages, add_stages, *, tokens=6, seed=0):
    """Run one config on amaranth.sim (no back-pressure, producer ahead).

    Returns ``cycles_per_token`` (mean gap between the last ``y`` of consecutive
    tokens over the second half), ``min``/``max`` gap, ``first_y`` (cycles from
    the first input write to the first ``y``), ``ideal`` and the latencies. The
    run is also checked bit for bit against the golden model.
    """
    import numpy as np

    from specgen.golden.mamba2 import SSMConfig
    from specgen.golden.nonlinear import COARSE_LUTS
    from specgen.hw.ssm_unit import SSMUnit
    from specgen.sim.ssm_unit import check_pysim, run_pysim

    cfg = SSMConfig(**geom, **COARSE_LUTS)
    dut = SSMUnit(cfg=cfg, mul_stages=mul_stages, add_stages=add_stages)
    out = run_pysim(dut, cfg, tokens=tokens, seed=seed, specials=False, init_state=False)
    check_pysim(out)
    rows = cfg.nheads * cfg.headdim
    ends = np.array([out["y_cycles"][(t + 1) * rows - 1] for t in range(tokens)])
    gaps = np.diff(ends)[(tokens - 1) // 2:]
    return {"cycles_per_token": float(gaps.mean()), "min": int(gaps.min()), "max": int(gaps.max()),
            "first_y": int(out["y_cycles"][0]), "tokens": tokens, "ideal": dut.sweep_cycles,
            "row_latency": dut.latency, "prologue_latency": dut.prologue_latency,
            "name": dut.module_name}


def benchmarks():
    """Measured cycles per token vs the ideal ``nheads·P·N/lanes`` for :data:`CONFIGS`."""
    rows = []
    for geom, lm, la in CONFIGS:
        r = measure(geom, lm, la)
        ratio = r["cycles_per_token"] / r["ideal"]
        rows.append({
            "name": f"ssm_unit cycles/token {r['name']}",
            "value": r["cycles_per_token"],
            "unit": "cycles/token",
            "command": COMMAND,
            "note": (f"ideal H·P·N/lanes = {r['ideal']}, measured/ideal = {ratio:.3f}; "
                     f"min/max gap {r['min']}/{r['max']}; first y after {r['first_y']} cycles "
                     f"(row latency {r['row_latency']}, prologue {r['prologue_latency']}); "
                     f"{r['tokens']} tokens, steady-state half"),
        })
    return rows
