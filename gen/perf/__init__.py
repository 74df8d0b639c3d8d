"""``specgen perf``: the analytical performance model (block cycle models and the system step
model), its calibration against the RTL, and its report (docs/perf-model.md)."""
