"""``specgen bench`` (``make bench``): run every benchmark, rewrite ``docs/perf.md``.

Performance is measured here, never in timed tests. Each record names the
command that produced it; the report starts with the machine it ran on. The
report has four parts:

1. measured benchmarks (:data:`BENCH_MODULES`, Verilog emission time against
   preset and array size, Verilator simulation throughput);
2. the boards' bandwidth: memory ports, the measured weight-stream efficiency and the
   SSM state's traffic per layer (:mod:`gen.bench.bandwidth`, from the ``memory``
   records of part 1);
3. the calibration table of the block cycle models (:mod:`gen.perf.calibrate`:
   model against RTL cycle counts, simulator named per row), the README's
   ``specgen generate --engine rtl`` run measured (:mod:`gen.bench.generate`) and the
   whole-step model's calibration;
4. the performance model's figures beside the papers' (:mod:`gen.perf.report`),
   with the plots written next to the report.
"""

import importlib
import os
import platform
import re
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from specgen.gen.cli.errors import CLIError

__all__ = ["write_bench", "write_section", "SECTIONS", "collect", "run_named", "NAMED", "bench_rtl", "bench_emission",
           "bench_emission_sizes", "calibration_section", "step_section", "model_section", "EMISSION_SIZES", "emit_linear_unit"]

#: Modules with a ``benchmarks()`` function returning records
#: ``{"name", "value", "unit", "command", "note"}``.
BENCH_MODULES = ["specgen.gen.bench.numerics", "specgen.gen.bench.bsfp", "specgen.gen.bench.linear",
                 "specgen.gen.bench.ssm", "specgen.gen.bench.memory", "specgen.gen.bench.generate"]

#: Named benchmarks of ``specgen bench --only NAME``: each one of :data:`BENCH_MODULES`.
NAMED = {name.removeprefix("specgen.gen.bench."): name for name in BENCH_MODULES}


def run_named(names):
    """Records of the named benchmarks only (``--only``), in the order given.

    Raises
    ------
    CLIError
        If a name is not in :data:`NAMED`; the message lists the allowed names.
    """
    for name in names:
        if name not in NAMED:
            raise CLIError(f"--only {name!r} is no benchmark; allowed: {', '.join(NAMED)}")
    rows = []
    for name in dict.fromkeys(names):
        rows += importlib.import_module(NAMED[name]).benchmarks()
    return rows


#: Sections of the report that ``specgen bench --section NAME`` rewrites alone: the
#: benchmark whose records they need (None: the model alone).
SECTIONS = {"bandwidth": "memory", "generate": "generate", "step": None, "model": None}

#: The heading that opens the model's part of the report (it runs to the end).
MODEL_HEADING = "## Modeled tokens/s beside the papers"


def _stamped(section, name):
    """``section`` (Markdown, its heading first) with a line after the heading that names
    the commit it was regenerated at alone: the page's ``Commit`` line is the full run's."""
    heading, _, rest = section.partition("\n")
    return (f"{heading}\n\n_This section alone was regenerated at commit `{_git_rev()}` "
            f"(`specgen bench --section {name}`); the rest of the page is from the commit at "
            f"its top._\n{rest}")


def write_section(name, records, *, out="docs/perf.md"):
    """Rewrite only section ``name`` of the report ``out`` from ``records`` (the records of
    ``SECTIONS[name]``), leaving the rest as it is; ``model`` rewrites the plots too.

    Raises
    ------
    CLIError
        If ``name`` is no section, or ``out`` is missing or cannot be written.
    """
    from specgen.gen.bench.bandwidth import bandwidth_section, replace_section
    if name not in SECTIONS:
        raise CLIError(f"--section {name!r} is no section; allowed: {', '.join(SECTIONS)}")
    out = Path(out)
    try:
        text = out.read_text()
        if name == "bandwidth":
            text = replace_section(text, _stamped(bandwidth_section(records), name))
        elif name == "generate":
            from specgen.gen.bench.generate import HEADING, generate_section
            from specgen.gen.perf.program_calibration import STEP_HEADING
            text = replace_section(text, _stamped(generate_section(records), name),
                                   heading=HEADING, before=STEP_HEADING)
        elif name == "step":
            from specgen.gen.perf.program_calibration import STEP_HEADING
            text = replace_section(text, _stamped(step_section(), name), heading=STEP_HEADING,
                                   before=MODEL_HEADING)
        else:
            at = text.find(MODEL_HEADING)
            if at < 0:
                raise ValueError(f"no {MODEL_HEADING!r} in the report")
            text = text[:at] + _stamped(model_section(out.parent), name) + "\n"
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, out)
    except OSError as exc:
        raise CLIError(f"cannot rewrite --out {str(out)!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CLIError(f"cannot rewrite --out {str(out)!r}: {exc}") from None


def _machine():
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    import numpy
    return (f"{cpu}, {os.cpu_count()} cores{mem}; Python {platform.python_version()}, "
            f"numpy {numpy.__version__}, {platform.system()} {platform.release()}")


def _throughput(results, *, period_ns=10):
    """``(cycles, wall seconds)`` of the one test case in a cocotb results file."""
    case = ET.parse(results).getroot().find(".//testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    return float(props["sim_time_duration"]) / period_ns, float(case.get("time"))


def bench_rtl(cycles=50_000):
    """Verilator simulation throughput of the cocotb benches, in cycles/s.

    The figure includes cocotb's Python per-cycle work (driving, checking
    against the golden model), which dominates for small blocks. Blocks whose
    Verilator build is affordable on this machine: ``RingFIFO``,
    ``TreeVerifier``, the smallest ``LinearUnit``, and the ``sim`` preset's
    top level (``Accelerator``, built at ``-O0`` as its tests build it). Every
    note names the C++ optimization level of the build.
    """
    from specgen.golden.config import preset
    from specgen.hw.accelerator import Accelerator
    from specgen.hw.linear_unit import LinearUnit
    from specgen.hw.ring_fifo import RingFIFO
    from specgen.hw.tree_verifier import TreeVerifier
    from specgen.sim.runner import emit_verilog, run_bench

    from specgen.golden.fp import FORMATS as FP_FORMATS

    rows = []
    for width, depth in ((4, 16), (32, 1024)):
        dut = RingFIFO(width=width, depth=depth)
        name = dut.module_name
        with tempfile.TemporaryDirectory() as tmp:
            results = run_bench(dut, name=name,
                                module="specgen.sim.ring_fifo", testcase="random_traffic",
                                params={"width": width, "depth": depth, "cycles": cycles},
                                seed=1, test_dir=tmp)
            n, wall = _throughput(results)
        rows.append({"name": f"Verilator+cocotb {name}", "value": round(n / wall),
                     "unit": "cycles/s",
                     "command": "specgen bench (sim.ring_fifo random_traffic, 50,000 cycles, seed 1)",
                     "note": "every cycle driven and checked against the golden model in Python"})
    dut = TreeVerifier(max_nodes=64, fifo_depth=16, max_passes=4)
    name = dut.module_name
    with tempfile.TemporaryDirectory() as tmp:
        results = run_bench(emit_verilog(dut, name=name), name=name, module="specgen.sim.tree_verifier",
                            testcase="random_trees", seed=1, test_dir=tmp,
                            params={"max_nodes": 64, "fifo_depth": 16, "max_passes": 4,
                                    "trees": 200})
        n, wall = _throughput(results)
    rows.append({"name": f"Verilator+cocotb {name}", "value": round(n / wall), "unit": "cycles/s",
                 "command": "specgen bench (sim.tree_verifier random_trees, 200 trees, seed 1)",
                 "note": f"{n:,.0f} cycles; every schedule beat and path checked against golden"})
    rows_, cols, lanes, max_k, fmt = 1, 2, 1, 5, "fp32"
    name = f"linear_unit_r{rows_}_c{cols}_q{lanes}_k{max_k}_{fmt}"
    with tempfile.TemporaryDirectory() as tmp:
        results = run_bench(LinearUnit(rows=rows_, cols=cols, quant_lanes=lanes, max_k=max_k,
                                       fmt_out=FP_FORMATS[fmt]), name=name,
                            module="specgen.sim.linear_unit", testcase="random_jobs", seed=1, test_dir=tmp,
                            params={"rows": rows_, "cols": cols, "lanes": lanes, "max_k": max_k,
                                    "fmt_out": fmt, "jobs": 100})
        n, wall = _throughput(results)
    rows.append({"name": f"Verilator+cocotb {name}", "value": round(n / wall), "unit": "cycles/s",
                 "command": "specgen bench (sim.linear_unit random_jobs, 100 jobs, seed 1)",
                 "note": f"{n:,.0f} cycles under 30 % idle and back-pressure; the wall time "
                         f"includes computing every job's golden BSFP dot products in Python, "
                         f"which dominates; 2 PEs (larger arrays take minutes to build)"})
    # The top level: draft tokens, a ROLLBACK, a draft commit and verify steps through AXI4-Lite,
    # every port on the modeled memory (sim/accelerator.py), 20 address bits as its tests.
    dut = Accelerator(config=preset("sim"), addr_width=20)
    name = dut.module_name
    with tempfile.TemporaryDirectory() as tmp:
        results = run_bench(dut, name=name, module="specgen.sim.accelerator",
                            testcase="draft_verify_step", seed=1, test_dir=tmp, cxx_opt="-O0",
                            params={"preset": "sim"})
        n, wall = _throughput(results)
    rows.append({"name": f"Verilator+cocotb {name}", "value": round(n / wall), "unit": "cycles/s",
                 "command": "specgen bench (sim.accelerator draft_verify_step, seed 1)",
                 "note": f"{n:,.0f} cycles: draft tokens, ROLLBACK, DRAFT_COMMIT and verify steps "
                         f"over 2 layers through AXI4-Lite, every memory word checked; C++ -O0"})
    opt = os.environ.get("SPECGEN_VERILATOR_OPT") or "-Os"
    for row in rows[:-1]:
        row["note"] += f"; C++ {opt}"
    return rows


# Runs in the child: its own peak resident set (VmHWM of /proc/self/status, which
# starts afresh at exec; ru_maxrss does not, it keeps the forking parent's size).
_CHILD = """
import os, runpy, sys
try:
    args = sys.argv[1:]
    if args[0] == "-m":
        sys.argv = [args[1], *args[2:]]
        try:
            runpy.run_module(args[1], run_name="__main__")
        except SystemExit as exc:
            if exc.code:
                raise
    else:
        exec(args[1], {"__name__": "__main__"})
finally:
    with open("/proc/self/status") as f:
        hwm = [line.split()[1] for line in f if line.startswith("VmHWM:")][0]
    with open(os.environ["SPECGEN_PEAK_FILE"], "w") as f:
        f.write(hwm)
"""


def _child(args):
    """Run ``python args...`` in a fresh interpreter: ``(wall seconds, peak RSS in bytes)``.

    A fresh process per measurement, so imports, Amaranth's caches and one
    run's garbage do not flatter or burden the next; the peak resident set is
    the child's own ``VmHWM`` (Linux, kibibytes).
    """
    import sys

    with tempfile.TemporaryDirectory() as tmp:
        peak_file = Path(tmp) / "peak"
        env = dict(os.environ, SPECGEN_PEAK_FILE=str(peak_file))
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", _CHILD, *args], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=env)
        dt = time.perf_counter() - t0
        if proc.returncode:
            raise CLIError(f"benchmark child {' '.join(args)!r} failed: "
                           f"{proc.stderr.decode(errors='replace')[-2000:]}")
        peak = int(peak_file.read_text()) * 1024
    return dt, peak


def _module_count(verilog_text):
    return len(re.findall(r"^module ", verilog_text, re.M))


def bench_emission():
    """Verilog emission time and peak memory of each preset (``specgen verilog``)."""
    from specgen.golden.config import preset_names

    rows = []
    for board in preset_names():
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / board
            dt, peak = _child(["-m", "gen", "verilog", "--board", board, "--out", str(out)])
            texts = [p.read_text() for p in sorted(out.glob("*.v"))]
            size = sum(len(t.encode()) for t in texts)
            modules = sum(_module_count(t) for t in texts)
        command = f"specgen verilog --board {board} --out DIR"
        rows.append({"name": f"emit {board}", "value": round(dt, 1), "unit": "s",
                     "command": command,
                     "note": f"{len(texts)} files, {modules} module definitions, {size:,} bytes "
                             f"of Verilog; fresh process, one run"})
        rows.append({"name": f"emit {board} peak memory", "value": round(peak / 2**20),
                     "unit": "MiB", "command": command,
                     "note": "peak resident set of the emitting process (its VmHWM); "
                             "Python process only (Yosys runs as a child)"})
    return rows


#: LinearUnit arrays timed by :func:`bench_emission_sizes` (rows, cols).
EMISSION_SIZES = ((1, 1), (2, 2), (4, 4), (8, 8), (16, 16), (64, 16), (64, 64))


def emit_linear_unit(rows, cols, out):
    """Write the Verilog of a ``rows × cols`` ``LinearUnit`` (q3, max_k 8192) to ``out``."""
    from specgen.hw.hierarchy import convert
    from specgen.hw.linear_unit import LinearUnit

    text, _ = convert(LinearUnit(rows=rows, cols=cols, quant_lanes=3, max_k=8192),
                      name=f"linear_unit_r{rows}_c{cols}")
    Path(out).write_text(text)


def bench_emission_sizes(*, budget_s=120.0):
    """Verilog emission time, size and peak memory of ``LinearUnit`` against the array size.

    Each size is emitted by :func:`emit_linear_unit` in a fresh process
    (:func:`hw.hierarchy.convert`: each distinct block once); stops growing the
    array once one emission takes longer than ``budget_s``.
    """
    rows = []
    for r, c in EMISSION_SIZES:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "lu.v"
            dt, peak = _child(["-c", f"from gen.bench.suite import emit_linear_unit; "
                                     f"emit_linear_unit({r}, {c}, {str(out)!r})"])
            text = out.read_text()
        rows.append({"name": f"emit LinearUnit {r}x{c}", "value": round(dt, 2), "unit": "s",
                     "command": "specgen bench",
                     "note": f"{r * c} PEs, q3, max_k 8192, hw.hierarchy.convert; "
                             f"{len(text):,} bytes, {_module_count(text):,} modules; "
                             f"peak {peak / 2**20:,.0f} MiB; fresh process, one run"})
        if dt > budget_s:
            break
    return rows


def collect():
    rows = []
    for name in BENCH_MODULES:
        rows += importlib.import_module(name).benchmarks()
    rows += bench_emission()
    rows += bench_emission_sizes()
    rows += bench_rtl()
    return rows


def _git_rev():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def calibration_section():
    """Markdown of the calibration table (every config; Verilator where builds are cheap)."""
    from specgen.gen.perf.calibrate import TOLERANCE, calibration_rows
    from specgen.gen.perf.report import calibration_markdown

    records = calibration_rows()
    worst = max(r["error"] for r in records)
    return "\n".join([
        "## Calibration of the block cycle models", "",
        "`gen/perf/blocks.py` against cycle counts measured on the RTL by `gen/perf/calibrate.py` "
        "(`specgen bench`; "
        "tests: `tests/test_perf_calibration.py`, which fails above "
        f"{100 * TOLERANCE:.0f} %). Simulator `amaranth`: Amaranth's Python simulator, cycle "
        "accurate on the elaborated RTL; `verilator`: cocotb 2.1 on Verilator "
        "(`sim/perf_probes.py`). Each stimulus runs without idle cycles or back-pressure; "
        "\"worst single event\" is the largest relative deviation of any one predicted event "
        "(a job's first result, a token's last `y`, a tree's last match and path beats, a "
        f"FIFO's last read). Largest total error: {100 * worst:.2f} %.", "",
        calibration_markdown(records), ""])


def step_section():
    """Markdown of the whole-step calibration (:func:`gen.perf.program_calibration.step_markdown`:
    read from the shipped calibration, which ``python -m
    specgen.gen.perf.program_calibration`` remakes on the RTL)."""
    from specgen.gen.perf.program_calibration import step_markdown
    return step_markdown()


def model_section(plot_dir):
    """Markdown of the performance model beside the papers; writes the plots into ``plot_dir``."""
    from specgen.gen.perf.system import paper_rows
    from specgen.gen.perf.report import model_markdown, write_plots

    plots = write_plots(plot_dir)
    return model_markdown(paper_rows(), plots=plots) + "\n"


def write_bench(*, out="docs/perf.md", echo=True):
    """Run every benchmark and write the report ``out`` atomically; print it if ``echo``."""
    out = Path(out)
    if out.exists() and out.is_dir():
        raise CLIError(f"--out {str(out)!r} is a folder; give a file path")
    rows = collect()
    lines = [
        "# Measured performance",
        "",
        "Regenerated by `make bench` (`specgen bench --out docs/perf.md`); do not edit by hand. "
        "The plots alone: `specgen docs figures` (`make figures`).",
        "",
        f"- Machine: {_machine()}",
        f"- Commit: `{_git_rev()}`",
        "- Timings are the best of three `time.perf_counter` runs unless the note says otherwise.",
        "- The performance model's assumptions and every gap: `docs/perf-model.md`.",
        "",
        "## Benchmarks",
        "",
        "| benchmark | figure | unit | command | note |",
        "|---|---:|---|---|---|",
    ]
    for r in rows:
        value = f"{r['value']:,}" if isinstance(r["value"], int) else f"{r['value']:g}"
        lines.append(f"| {r['name']} | {value} | {r['unit']} | `{r['command']}` | {r['note']} |")
    from specgen.gen.bench.bandwidth import bandwidth_section
    from specgen.gen.bench.generate import generate_section
    lines += ["", bandwidth_section(rows), calibration_section(), generate_section(rows),
              step_section(), model_section(out.parent)]
    text = "\n".join(lines) + "\n"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, out)
    except OSError as exc:
        raise CLIError(f"cannot write --out {str(out)!r}: {exc.strerror or exc}") from None
    if echo:
        print(text)
    return rows
