"""Utilization benchmark of the LinearUnit: useful MACs ÷ (PE capacity × cycles).

Runs the ``utilization`` test of ``sim/linear_unit.py`` on the ``sim`` preset's
array: back-to-back jobs with full-height tiles, no idle and no back-pressure,
in both modes, for every token count 1 … cols. In quantized mode a PE's capacity
is ``quant_lanes`` products per cycle.
"""

import json
import tempfile
from pathlib import Path

from golden.config import preset

__all__ = ["benchmarks", "measure"]

COMMAND = "specgen bench (sim.linear_unit utilization)"


def measure(*, steps=16, jobs=8):
    from hw.linear_unit import LinearUnit
    from sim.runner import run_bench

    from .emit import FP_FORMATS

    lin = preset("sim").linear
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "utilization.json"
        run_bench(LinearUnit(rows=lin.rows, cols=lin.cols, quant_lanes=lin.quant_lanes,
                             max_k=lin.max_k, fmt_out=FP_FORMATS[lin.fmt_out]),
                  name=f"linear_unit_r{lin.rows}_c{lin.cols}_q{lin.quant_lanes}_k{lin.max_k}"
                       f"_{lin.fmt_out}",
                  module="sim.linear_unit", testcase="utilization", seed=1,
                  params={"rows": lin.rows, "cols": lin.cols, "lanes": lin.quant_lanes,
                          "max_k": lin.max_k, "fmt_out": lin.fmt_out, "steps": min(steps, lin.max_k),
                          "jobs": jobs, "tokens": list(range(1, lin.cols + 1)),
                          "report": str(report)})
        return lin, json.loads(report.read_text())


def benchmarks():
    lin, report = measure()
    rows = []
    for key, r in report.items():
        rows.append({"name": f"LinearUnit utilization {key}", "value": round(r["utilization"], 4),
                     "unit": "fraction", "command": COMMAND,
                     "note": f"{lin.rows}x{lin.cols} PEs, {r['busy']} busy + {r['stall']} stall "
                             f"cycles, {r['useful_macs']} useful MACs"})
    return rows
