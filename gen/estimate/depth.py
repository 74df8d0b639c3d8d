"""Logic depth of a mapped netlist, in effective logic levels.

Yosys' ``ltp`` counts every cell and cannot weigh a carry-chain hop against
a LUT, so the longest path is computed here from the mapped netlist
(``write_json``), module by module:

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

import math
from dataclasses import dataclass, field

from specgen.gen.estimate.yosys import CARRY_CELLS, LUT_CELLS

__all__ = ["NS_PER_LEVEL", "OVERHEAD_NS", "level_budget", "ModuleDepth", "logic_depth"]

NS_PER_LEVEL = 0.5
OVERHEAD_NS = 0.5
_MUXF = {"MUXF7", "MUXF8", "MUXF9"}
_LUTRAM_ADDR = ("A", "ADDR", "DPRA", "RADR", "ADDRA", "ADDRB", "ADDRC", "ADDRD", "ADDRE",
                "ADDRF", "ADDRG", "ADDRH")
_LUTRAM_OUT = ("O", "SPO", "DPO", "DOA", "DOB", "DOC", "DOD", "DOE", "DOF", "DOG", "DOH")


def level_budget(clock_mhz):
    """Effective logic levels that fit one period at ``clock_mhz`` (module docstring)."""
    return math.floor((1000.0 / clock_mhz - OVERHEAD_NS) / NS_PER_LEVEL + 1e-9)


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
    if t in LUT_CELLS:
        return [(i, o, 1.0) for i in ins for o in outs]
    if t == "INV":
        return [(i, o, 0.0) for i in ins for o in outs]
    if t in _MUXF:
        return [(i, o, 0.25) for i in ins for o in outs]
    if t in CARRY_CELLS:
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
