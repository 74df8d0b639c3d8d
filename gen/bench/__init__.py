"""``specgen bench``: timed runs of the golden models, the RTL simulation and emission
(docs/perf.md)."""
