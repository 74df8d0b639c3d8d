"""Utilization benchmark of the LinearUnit: useful MACs ÷ (PE capacity × cycles).

Runs the ``utilization`` test of ``sim/linear_unit.py`` on the ``sim`` preset's
array: back-to-back jobs with full-height tiles, no idle and no back-pressure,
in both modes, for every token count 1 … cols. In quantized mode a PE's capacity
is ``quant_lanes`` products per cycle.
"""

import json
import tempfile
from pathlib import Path

from specgen.golden.config import preset

__all__ = ["benchmarks", "measure", "measure_dsp"]

COMMAND = "specgen bench (sim.linear_unit utilization)"


def measure(*, steps=16, jobs=8):
    from specgen.hw.linear_unit import LinearUnit
    from specgen.sim.runner import run_bench

    from specgen.golden.fp import FORMATS as FP_FORMATS

    lin = preset("sim").linear
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "utilization.json"
        run_bench(LinearUnit(rows=lin.rows, cols=lin.cols, quant_lanes=lin.quant_lanes,
                             max_k=lin.max_k, fmt_out=FP_FORMATS[lin.fmt_out]),
                  name=f"linear_unit_r{lin.rows}_c{lin.cols}_q{lin.quant_lanes}_k{lin.max_k}"
                       f"_{lin.fmt_out}",
                  module="specgen.sim.linear_unit", testcase="utilization", seed=1,
                  params={"rows": lin.rows, "cols": lin.cols, "lanes": lin.quant_lanes,
                          "max_k": lin.max_k, "fmt_out": lin.fmt_out, "steps": min(steps, lin.max_k),
                          "jobs": jobs, "tokens": list(range(1, lin.cols + 1)),
                          "report": str(report)})
        return lin, json.loads(report.read_text())


def benchmarks():
    return exact_benchmarks() + dsp_benchmarks()


def exact_benchmarks():
    lin, report = measure()
    rows = []
    for key, r in report.items():
        rows.append({"name": f"LinearUnit utilization {key}", "value": round(r["utilization"], 4),
                     "unit": "fraction", "command": COMMAND,
                     "note": f"{lin.rows}x{lin.cols} PEs, {r['busy']} busy + {r['stall']} stall "
                             f"cycles, {r['useful_macs']} useful MACs"})
    return rows


#: The DSPFP32 array measured for utilization: 16 MAC slots, every T up to 16, K = 256.
DSP_ARRAY = {"rows": 4, "cols": 4, "max_tokens": 16, "max_k": 256}
#: Token counts of the utilization target (the draft pass is T = 1; trees of 2 … 16 nodes).
DSP_TOKENS = (1, 2, 3, 4, 8, 15, 16)
DSP_COMMAND = "specgen bench (sim.dsp_linear_unit utilization)"


def measure_dsp(*, steps=256, jobs=3, tokens=DSP_TOKENS, weight_ports=None, weight_beats=1,
                n_rows=None):
    """Run the DSPLinearUnit's ``utilization`` test on Verilator; return its report with the
    cycle model's prediction of each run beside it. ``weight_ports`` (default one per
    column) below ``cols`` makes runs of fewer tokens than ``cols / weight_ports`` wait on
    the weights (the model's ``feed``), ``weight_beats`` beats a transfer shortening it;
    ``n_rows`` (default a whole tile) below half the slots feeds the jobs packed.
    ``utilization`` counts the jobs' rows' MACs against their rows' slots."""
    from specgen.golden.config import LinearConfig
    from specgen.hw.dsp_linear_unit import DSPLinearUnit
    from specgen.sim.runner import run_bench

    from specgen.gen.perf.blocks import LinearJob, dsp_linear_schedule

    a = DSP_ARRAY
    unit = DSPLinearUnit(**a, weight_ports=weight_ports, weight_beats=weight_beats)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "utilization.json"
        run_bench(unit, name=unit.module_name, module="specgen.sim.dsp_linear_unit",
                  testcase="utilization", seed=1,
                  params=dict(a, weight_ports=unit.weight_ports, weight_beats=weight_beats,
                              **({} if n_rows is None else {"n_rows": n_rows}),
                              steps=steps, jobs=jobs,
                              tokens=list(tokens), report=str(report)), cxx_opt="-O0")
        result = json.loads(report.read_text())
    lin = LinearConfig(rows=a["rows"], cols=a["cols"], max_tokens=a["max_tokens"],
                       max_k=a["max_k"], contract="dspfp32")
    for r in result.values():
        job = LinearJob(mode=r["mode"], steps=r["steps"], n_rows=r["n_rows"], n_tokens=r["n_tokens"])
        r["model_cycles"] = dsp_linear_schedule([(r["jobs"], job)], linear=lin,
                                                columns=a["cols"] // unit.weight_ports,
                                                beats=weight_beats).cycles
    return result


def dsp_benchmarks():
    rows = []
    a = DSP_ARRAY
    for key, r in measure_dsp().items():
        err = r["model_cycles"] / r["cycles"] - 1
        rows.append({"name": f"DSPLinearUnit utilization {key}",
                     "value": round(r["utilization_end_to_end"], 4), "unit": "fraction",
                     "command": DSP_COMMAND,
                     "note": f"{a['rows']}x{a['cols']} DSPFP32 slots, {r['jobs']} jobs of K = "
                             f"{r['steps']}; {r['useful_macs']} useful MACs in {r['cycles']} "
                             f"cycles from the first command to the last result "
                             f"({100 * r['utilization']:.2f} % while issuing); cycle model "
                             f"{r['model_cycles']} ({100 * err:+.2f} %)"})
    return rows
