"""Fanout of the nets of a mapped netlist: the loads of each net, for ``specgen estimate --fanout``.

A net that drives many cell inputs is slow however few logic levels it
crosses: its route spreads over many slices, and on Versal a route of more
than about 64 loads costs as much as a LUT level or two. Vivado replicates
such drivers itself only when told to (``MAX_FANOUT``, ``phys_opt_design``),
so the RTL duplicates the registers that drive them (the rule of the board
designs: no net of our own logic above :data:`FANOUT_LIMIT` loads).

Counting, per module of the Yosys netlist (``write_json``, after
``synth_xilinx``):

* a *load* is one input pin of a cell (LUT, carry, flip-flop, LUT RAM, DSP,
  a submodule instance) connected to the net bit; a module output port adds
  one load (it goes to one pin of the parent's instance);
* clock pins (``C``, ``CLK``, ``WCLK``) are not counted: the clock is on the
  global clock network, not on fabric routes;
* a bus is grouped by its name: the group's fanout is the largest of its
  bits (each bit is its own route), and ``total`` sums the bits.
"""

from dataclasses import dataclass

__all__ = ["NetFanout", "FANOUT_LIMIT", "net_fanout", "module_fanout", "fanout_markdown"]

#: Loads above which a net of our own logic is replicated in the RTL.
FANOUT_LIMIT = 64

#: Clock pins of the UltraScale+ cells ``synth_xilinx`` maps to.
_CLOCK_PINS = frozenset({"C", "CLK", "WCLK", "CLKARDCLK", "CLKBWRCLK"})


@dataclass(frozen=True)
class NetFanout:
    """One net (or bus) of a module and its loads.

    Attributes
    ----------
    net : str
        The net's name (a public Amaranth signal name where the netlist has one).
    width : int
        Bits of the bus counted under this name.
    loads : int
        Loads of its most loaded bit.
    total : int
        Loads of all its bits.
    driver : str
        What drives its most loaded bit: a cell type (``FDRE``, ``LUT6``), or
        ``"input port"`` (the parent drives it: replicate it there, not here).
    """

    net: str
    width: int
    loads: int
    total: int
    driver: str


def _preferred_names(mod):
    """``{bit: (net, index)}``, a public (non-``$``) name where the bit has one."""
    names = {}
    for net, info in mod.get("netnames", {}).items():
        for k, b in enumerate(info.get("bits", [])):
            if not isinstance(b, int):
                continue
            old = names.get(b)
            if old is None or (old[0].startswith("$") and not net.startswith("$")):
                names[b] = (net, k)
    return names


def module_fanout(mod, *, top=10):
    """The ``top`` highest-fanout nets of one netlist module, most loaded first.

    Parameters
    ----------
    mod : dict
        One entry of the netlist's ``"modules"``.
    top : int
        How many nets to return.

    Returns
    -------
    list of NetFanout
    """
    loads, driver = {}, {}
    for cell in mod.get("cells", {}).values():
        dirs = cell.get("port_directions", {})
        for port, bits in cell.get("connections", {}).items():
            d = dirs.get(port)
            for b in bits:
                if not isinstance(b, int):
                    continue  # a constant
                if d == "input" and port not in _CLOCK_PINS:
                    loads[b] = loads.get(b, 0) + 1
                elif d == "output":
                    driver[b] = cell["type"]
    for info in mod.get("ports", {}).values():
        for b in info.get("bits", []):
            if not isinstance(b, int):
                continue
            if info.get("direction") == "output":
                loads[b] = loads.get(b, 0) + 1
            elif info.get("direction") == "input":
                driver[b] = "input port"
    names = _preferred_names(mod)
    groups = {}
    for b, n in loads.items():
        net = names.get(b, (f"bit {b}", 0))[0]
        g = groups.setdefault(net, {"bits": 0, "loads": 0, "total": 0, "driver": ""})
        g["bits"] += 1
        g["total"] += n
        if n > g["loads"]:
            g["loads"], g["driver"] = n, driver.get(b, "undriven")
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1]["loads"], -kv[1]["total"], kv[0]))
    return [NetFanout(net.lstrip("\\"), g["bits"], g["loads"], g["total"], g["driver"].lstrip("\\"))
            for net, g in ranked[:top]]


def net_fanout(netlist, *, top=10):
    """``{module: [NetFanout]}`` for every non-black-box module of a mapped netlist."""
    return {name.lstrip("\\"): module_fanout(mod, top=top)
            for name, mod in netlist.get("modules", {}).items()
            if not mod.get("attributes", {}).get("blackbox")}


def fanout_markdown(blocks, *, limit=FANOUT_LIMIT):
    """The fanout tables of :class:`gen.estimate.BlockEstimate` results, one per module.

    A net above ``limit`` loads is marked **!**, except one driven by an input
    port (its driver is in the parent module).
    """
    lines = []
    seen = set()
    for b in blocks:
        for module, nets in b.fanout.items():
            if module in seen or not nets:
                continue
            seen.add(module)
            lines += [f"**`{module}`** (in `{b.block}`)", "",
                      "| net | bits | loads (worst bit) | loads (all bits) | driver |",
                      "|---|---:|---:|---:|---|"]
            for n in nets:
                n = n if isinstance(n, NetFanout) else NetFanout(**n)
                flag = " **!**" if n.loads > limit and n.driver != "input port" else ""
                lines.append(f"| `{n.net}` | {n.width} | {n.loads}{flag} | {n.total} | "
                             f"{n.driver} |")
            lines.append("")
    return "\n".join(lines)
