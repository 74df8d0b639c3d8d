"""Vivado flow for a design with a Versal part: XDC, Tcl and IP packaging.

Amaranth's ``XilinxPlatform`` cannot target Versal, so the flow is written
here: an out-of-context synthesis and implementation in Vivado's non-project
mode, hierarchical utilization and timing reports, checkpoints after every
step, and an IP-XACT package for IP Integrator.

:func:`write_vivado_flow` writes into an existing output folder:

``settings.tcl``
    Part, top module, clock, source list and output folder: the only numbers
    the other scripts use, so a user edits them in one place.
``constraints.xdc``
    The clock constraint on ``clk`` (period from the board's clock) and zero
    input/output delays on the other ports, the out-of-context convention of
    a block registered at its neighbours' boundary.
``build.tcl``
    The flow: ``vivado -mode batch -source build.tcl [-tclargs STAGE]`` with
    STAGE ``synth``, ``impl``, ``ip`` or ``all`` (default).
``package_ip.tcl``
    IP packaging (``ipx::package_project``), sourced by ``build.tcl`` or run
    on its own. Bus interfaces are declared explicitly from the top module's
    ports: clock, active-high reset, and every AXI4-Lite and AXI4-Stream port
    group, so IP Integrator sees them whatever the packager would infer.
``README.md``
    What every file of the folder is and how to run the flow.

The ``sim`` preset has no part: :func:`write_vivado_flow` refuses it with a
``ValueError`` that names the presets that have one, and callers emitting
``sim`` skip the flow (``config.board.part is None``).
"""

import os
import re
from dataclasses import dataclass
from pathlib import Path

from specgen.golden.config import HBM_NMU_PORTS, PRESETS, Config
from specgen.hw.hierarchy import Port, verilog_ports

from specgen.gen.cli.output import specgen_version

__all__ = ["write_vivado_flow", "verilog_ports", "bus_interfaces", "share_memory_ports",
           "SHARED_PORT_PREFIX", "Port", "BusInterface",
           "FLOW_FILES", "IP_VENDOR", "IP_LIBRARY", "STAGES"]

SETTINGS_TCL = "settings.tcl"
XDC = "constraints.xdc"
BUILD_TCL = "build.tcl"
PACKAGE_TCL = "package_ip.tcl"
README = "README.md"
#: Files :func:`write_vivado_flow` writes, in the order it returns them.
FLOW_FILES = (SETTINGS_TCL, XDC, BUILD_TCL, PACKAGE_TCL, README)

#: ``build.tcl`` stages, selected with ``-tclargs STAGE``.
STAGES = ("synth", "impl", "ip", "all")

IP_VENDOR = "specgen.org"
IP_LIBRARY = "specgen"

CLOCK_PORT = "clk"
RESET_PORT = "rst"
#: The memory clock and its reset (Amaranth's ``mem`` domain): the AXI4 memory ports' clock.
MEM_CLOCK_PORT = "mem_clk"
MEM_RESET_PORT = "mem_rst"
#: A one-bit output of this name is declared as a level-high interrupt.
IRQ_PORT = "irq"

def ip_version():
    """``(major.minor, patch)`` of specgen's version: the IP's version and core revision."""
    parts = re.findall(r"\d+", specgen_version())[:3] + ["0", "0", "0"]
    return f"{int(parts[0])}.{int(parts[1])}", int(parts[2])


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*\Z")
# A module header: plain or escaped (``\\top.sub ``) identifier.
_MODULE = re.compile(r"^\s*module\s+(\\\S+|[A-Za-z_][A-Za-z0-9_$]*)", re.MULTILINE)


@dataclass(frozen=True)
class BusInterface:
    """A group of ports that forms one AXI interface of the top module.

    Attributes
    ----------
    name : str
        Interface name in IP Integrator (the ports' common prefix).
    kind : str
        ``"axi4lite"``, ``"axi4"`` (a memory master: its read or write channels) or ``"axis"``.
    mode : str
        ``"slave"`` or ``"master"``.
    port_maps : tuple of (str, str)
        ``(logical, physical)`` pairs, logical names as in the AMBA spec
        (``AWADDR``, ``TDATA``, ...).
    addr_width : int
        Address bits of an AXI4-Lite or AXI4 interface (0 for a stream).
    data_width : int
        Data bits of an AXI4 interface (0 otherwise).
    halves : tuple of str
        For an interface :func:`share_memory_ports` joined: the names of the read master
        and the write master it carries (empty otherwise).
    """

    name: str
    kind: str
    mode: str
    port_maps: tuple
    addr_width: int = 0
    data_width: int = 0
    halves: tuple = ()


_AXI_LITE_REQUIRED = ("awaddr", "awvalid", "awready", "wdata", "wvalid", "wready", "bresp",
                      "bvalid", "bready", "araddr", "arvalid", "arready", "rdata", "rresp",
                      "rvalid", "rready")
_AXI_LITE_OPTIONAL = ("awprot", "wstrb", "arprot")
# AXI4 (full) channels of a memory master: the read or the write half, or both.
_AXI4_READ_REQUIRED = ("araddr", "arlen", "arvalid", "arready", "rdata", "rlast", "rvalid",
                       "rready")
_AXI4_WRITE_REQUIRED = ("awaddr", "awlen", "awvalid", "awready", "wdata", "wlast", "wvalid",
                        "wready", "bvalid", "bready")
_AXI4_OPTIONAL = ("arid", "arsize", "arburst", "arlock", "arcache", "arprot", "arqos", "rid",
                  "rresp", "awid", "awsize", "awburst", "awlock", "awcache", "awprot", "awqos",
                  "wstrb", "bid", "bresp")
_AXIS_REQUIRED = ("tdata", "tvalid")
_AXIS_OPTIONAL = ("tready", "tlast", "tkeep", "tstrb", "tuser", "tid", "tdest")


def _split(name, signals):
    """``(prefix, signal)`` if ``name`` is ``<prefix>__<signal>`` or ``<prefix>_<signal>``."""
    low = name.lower()
    for sig in signals:
        for sep in ("__", "_"):
            if low.endswith(sep + sig) and len(low) > len(sep + sig):
                return name[:-len(sep + sig)], sig
    return None


def bus_interfaces(ports):
    """AXI4, AXI4-Lite and AXI4-Stream port groups among ``ports``.

    A group is recognised by its common prefix (``s_axi__awaddr``, ``s_axi_awaddr``);
    an AXI4 group (a memory master) needs the address, length, data, last and
    handshake signals of its read or its write channels (or both), an AXI4-Lite
    group every signal except ``awprot``, ``wstrb`` and ``arprot``, an AXI4-Stream
    group ``tdata`` and ``tvalid``. Incomplete
    groups are left out (they stay plain ports in the IP).

    Returns
    -------
    list of BusInterface
        Sorted by name.
    """
    by_dir = {p.name: p for p in ports}
    groups = {}
    for port in ports:
        hit = _split(port.name, _AXI4_READ_REQUIRED + _AXI4_WRITE_REQUIRED + _AXI4_OPTIONAL
                     + _AXI_LITE_REQUIRED + _AXI_LITE_OPTIONAL + _AXIS_REQUIRED + _AXIS_OPTIONAL)
        if hit is not None:
            groups.setdefault(hit[0], {})[hit[1]] = port.name
    out = []
    for prefix, sigs in sorted(groups.items()):
        reads = all(s in sigs for s in _AXI4_READ_REQUIRED)
        writes = all(s in sigs for s in _AXI4_WRITE_REQUIRED)
        data_width = 0
        if reads or writes:
            order = ((_AXI4_READ_REQUIRED if reads else ()) + (_AXI4_WRITE_REQUIRED if writes else ())
                     + _AXI4_OPTIONAL)
            kind, valid = "axi4", "arvalid" if reads else "awvalid"
            addr_width = by_dir[sigs["araddr" if reads else "awaddr"]].width
            data_width = by_dir[sigs["rdata" if reads else "wdata"]].width
        elif all(s in sigs for s in _AXI_LITE_REQUIRED):
            kind, order, valid = "axi4lite", _AXI_LITE_REQUIRED + _AXI_LITE_OPTIONAL, "awvalid"
            addr_width = by_dir[sigs["awaddr"]].width
        elif all(s in sigs for s in _AXIS_REQUIRED):
            kind, order, valid = "axis", _AXIS_REQUIRED + _AXIS_OPTIONAL, "tvalid"
            addr_width = 0
        else:
            continue
        mode = "slave" if by_dir[sigs[valid]].direction == "input" else "master"
        maps = tuple((s.upper(), sigs[s]) for s in order if s in sigs)
        out.append(BusInterface(prefix, kind, mode, maps, addr_width, data_width))
    return out


#: Prefix of a memory port that carries a read master and a write master (:func:`share_memory_ports`).
SHARED_PORT_PREFIX = "m_axi_nmu"


def _axi4_half(bus):
    """``"read"`` or ``"write"`` for an AXI4 master with one direction's channels, else None."""
    if bus.kind != "axi4" or bus.mode != "master":
        return None
    logical = {name for name, _ in bus.port_maps}
    reads, writes = "ARVALID" in logical, "AWVALID" in logical
    return "read" if reads and not writes else "write" if writes and not reads else None


def _id_width(bus, ports, signal):
    phys = dict(bus.port_maps).get(signal)
    return ports[phys].width if phys is not None else 0


def share_memory_ports(buses, ports):
    """Join read-only and write-only AXI4 masters into AXI4 interfaces with both halves.

    AXI4's five channels are independent (AMBA AXI4, A1.3) and its read and write
    transactions have separate ID spaces (A5), so a master that only reads and one that
    only writes can share one AXI4 interface, and one NoC or HBM_NMU port with it: the
    VHK158's 64 HBM_NMU ports (AMD PG313) could not otherwise carry the 2.7B decoder
X only if their data, address and ID widths
    match, since an interface has one of each. A write joins the unjoined read whose
    name shares the longest prefix with it (its own engine's, where widths allow),
    ties to the first by name; writes are taken by name. Every other interface is kept
    as it is.

    Parameters
    ----------
    buses : list of BusInterface
        :func:`bus_interfaces`' result.
    ports : list of Port
        The top module's ports (the widths of the ID signals).

    Returns
    -------
    list of BusInterface
        The joined interfaces, named ``m_axi_nmu00``, ``m_axi_nmu01``... in the order
        of their reads, with the read's ports mapped first; then every other interface.
        A joined interface's ``port_maps`` hold both halves' physical ports.
    """
    by_name = {p.name: p for p in ports}

    def key(bus):
        return (bus.data_width, bus.addr_width, _id_width(bus, by_name, "ARID")
                or _id_width(bus, by_name, "AWID"))

    reads = [b for b in buses if _axi4_half(b) == "read"]
    free = list(reads)
    partner = {}
    for w in (b for b in buses if _axi4_half(b) == "write"):
        fits = [r for r in free if key(r) == key(w)]
        if not fits:
            continue
        best = max(fits, key=lambda r: (len(os.path.commonprefix([r.name, w.name])),
                                         -free.index(r)))
        free.remove(best)
        partner[best.name] = w
    joined, used = [], set()
    for r in reads:
        w = partner.get(r.name)
        if w is None:
            continue
        joined.append(BusInterface(f"{SHARED_PORT_PREFIX}{len(joined):02d}", "axi4", "master",
                                   r.port_maps + w.port_maps, r.addr_width, r.data_width,
                                   halves=(r.name, w.name)))
        used |= {r.name, w.name}
    return joined + [b for b in buses if b.name not in used]


def _tcl_word(text):
    """``text`` as one Tcl word (braced), refusing what braces cannot quote."""
    text = str(text)
    if any(c in text for c in "{}\\\n") or text == "":
        raise ValueError(f"{text!r} cannot be written as a Tcl word")
    return "{" + text + "}" if re.search(r"[\s;$\[\]\"]", text) else text


def _check_args(out_dir, config, top, sources):
    if not isinstance(config, Config):
        raise TypeError(f"write_vivado_flow: config must be a golden.config.Config, not {config!r}")
    if config.board.part is None:
        with_part = ", ".join(n for n, c in PRESETS.items() if c.board.part is not None)
        raise ValueError(f"write_vivado_flow: board {config.board.name!r} has no Vivado part "
                         f"(BoardConfig.part is None); the flow needs one of: {with_part}")
    if not isinstance(top, str) or not _IDENT.match(top):
        raise ValueError(f"write_vivado_flow: top must be a Verilog module name, not {top!r}")
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise FileNotFoundError(f"write_vivado_flow: out_dir {str(out_dir)!r} is not an existing folder")
    if isinstance(sources, (str, Path)) or not hasattr(sources, "__iter__"):
        raise TypeError(f"write_vivado_flow: sources must be a list of paths, not {sources!r}")
    root = out_dir.resolve()
    rel = []
    for src in sources:
        if not isinstance(src, (str, Path)):
            raise TypeError(f"write_vivado_flow: sources must hold paths, not {src!r}")
        path = Path(src) if Path(src).is_absolute() else out_dir / src
        if not path.is_file():
            raise FileNotFoundError(f"write_vivado_flow: source {str(src)!r} does not exist")
        if path.suffix not in (".v", ".sv"):
            raise ValueError(f"write_vivado_flow: source {str(src)!r} must be a .v or .sv file")
        try:
            name = path.resolve().relative_to(root).as_posix()
        except ValueError:
            raise ValueError(f"write_vivado_flow: source {str(src)!r} is outside out_dir "
                             f"{str(out_dir)!r}; the flow refers to its files relatively") from None
        if name in rel:
            raise ValueError(f"write_vivado_flow: source {name!r} is listed twice")
        _tcl_word(name)
        rel.append(name)
    if not rel:
        raise ValueError("write_vivado_flow: sources must list at least one Verilog file")
    modules = {}
    for n in rel:
        for mod in _MODULE.findall((root / n).read_text()):
            if mod in modules:
                raise ValueError(f"write_vivado_flow: module {mod!r} is defined in both "
                                 f"{modules[mod]!r} and {n!r}; Vivado needs one definition")
            modules[mod] = n
    defining = [modules[top]] if top in modules else []
    if not defining:
        raise ValueError(f"write_vivado_flow: top module {top!r} is not defined in any source")
    ports = verilog_ports((root / defining[0]).read_text(), top)
    if not any(p.name == CLOCK_PORT and p.direction == "input" for p in ports):
        raise ValueError(f"write_vivado_flow: top module {top!r} has no {CLOCK_PORT!r} input; "
                         "the flow constrains the clock on that port")
    return out_dir, rel, ports


def write_vivado_flow(out_dir, *, config, top, sources, extra_files=None, registers=None):
    """Write the Vivado flow for ``top`` into the existing folder ``out_dir``.

    Parameters
    ----------
    out_dir : path
        Existing output folder; every source must lie inside it, because the
        scripts refer to files relative to their own location (the folder can
        be moved or copied to a Vivado machine as it is).
    config : golden.config.Config
        A preset with a part (``vck190``, ``vhk158``); its board gives the
        part and the clock.
    top : str
        Top module; it must be defined in exactly one source and have a
        ``clk`` input (Amaranth's clock; ``rst``, if present, is its
        synchronous active-high reset).
    sources : list of path
        Verilog files, absolute or relative to ``out_dir``, read in this order.
    extra_files : dict of str to str, optional
        ``{file: what it is}`` for the other files the caller writes beside
        the flow (the FuseSoC core, the register map), for the README.
    registers : hw.regmap.RegisterMap, optional
        The registers behind the AXI4-Lite slave: the IP's memory map lists
        them (a table as one register per entry), so IP Integrator's address
        editor and the exported hardware show them. With several AXI4-Lite
        slaves, the first by name gets them.

    Returns
    -------
    list of str
        Files written, relative to ``out_dir`` (:data:`FLOW_FILES`), for the
        caller's manifest.

    Raises
    ------
    ValueError
        The board has no part (the ``sim`` preset), ``top`` is not a module
        name or not defined in any source, it has no ``clk`` input, two
        sources define the same module, or a source is outside ``out_dir``,
        listed twice or not ``.v``/``.sv``; or, on an HBM board, the top has more
        AXI4 memory interfaces than the part's HBM_NMU ports once read and write
        masters are joined (:func:`share_memory_ports`).
    FileNotFoundError
        ``out_dir`` or a source does not exist.
    TypeError
        ``config`` is not a ``Config`` or ``sources`` is not a list of paths.
    """
    out_dir, rel, ports = _check_args(out_dir, config, top, sources)
    board = config.board
    period = 1000.0 / board.clock_mhz
    freq_hz = round(board.clock_mhz * 1e6)
    buses = share_memory_ports(bus_interfaces(ports), ports)
    masters = [b for b in buses if b.kind == "axi4" and b.mode == "master"]
    if board.memory == "HBM" and len(masters) > HBM_NMU_PORTS:
        raise ValueError(f"top {top!r} has {len(masters)} AXI4 memory interfaces after joining "
                         f"read and write masters, more than the {HBM_NMU_PORTS} HBM_NMU "
                         f"ports of board {board.name!r} (HBM_NMU_PORTS)")
    has_reset = any(p.name == RESET_PORT and p.direction == "input" for p in ports)
    has_irq = any(p.name == IRQ_PORT and p.direction == "output" and p.width == 1 for p in ports)
    texts = {
        SETTINGS_TCL: _settings_tcl(config, top, rel, period, freq_hz),
        XDC: _xdc(config, period, ports),
        BUILD_TCL: _build_tcl(config),
        PACKAGE_TCL: _package_tcl(top, buses, has_reset, has_irq=has_irq, registers=registers,
                                  mem_freq_hz=round(board.memory_clock_mhz * 1e6)
                                  if any(p.name == MEM_CLOCK_PORT for p in ports) else 0),
        README: _readme(config, top, rel, period, buses, has_reset, has_irq=has_irq,
                        extra_files=extra_files or {}),
    }
    for name in FLOW_FILES:
        (out_dir / name).write_text(texts[name])
    return list(FLOW_FILES)


def _settings_tcl(config, top, rel, period, freq_hz):
    board = config.board
    lines = [
        f"# specgen Vivado settings for board {board.name}: generated, edit here only.",
        "# build.tcl and package_ip.tcl source this file; paths are relative to it.",
        "set specgen_dir [file dirname [file normalize [info script]]]",
        f"set part {_tcl_word(board.part)}",
        f"set top {top}",
        f"# {board.clock_mhz:g} MHz fabric clock (board.clock_mhz); constraints.xdc holds the same "
        "period.",
        f"set clock_period_ns {period:.3f}",
        f"set clock_freq_hz {freq_hz}",
        "set sources [list \\",
        *[f"    [file join $specgen_dir {_tcl_word(n)}] \\" for n in rel],
        "]",
        f"set xdc [file join $specgen_dir {XDC}]",
        "# Checkpoints, reports and the packaged IP go here.",
        "set build_dir [file join $specgen_dir vivado]",
        "set report_dir [file join $build_dir reports]",
        "set ip_dir [file join $build_dir ip]",
        f"set ip_vendor {IP_VENDOR}",
        f"set ip_library {IP_LIBRARY}",
        f"# The IP's version is specgen's ({specgen_version()}): major.minor, and the patch",
        "# level as the core revision (IP-XACT VLNV versions are major.minor in Vivado).",
        f"set ip_version {ip_version()[0]}",
        f"set ip_revision {ip_version()[1]}",
        "",
    ]
    return "\n".join(lines)


def _mem_ports(ports, buses):
    """Ports clocked by ``mem_clk``: the AXI4 groups' and ``mem_rst`` (none without ``mem_clk``)."""
    if not any(p.name == MEM_CLOCK_PORT and p.direction == "input" for p in ports):
        return set()
    names = {phys for b in buses if b.kind == "axi4" for _, phys in b.port_maps}
    return names | {p.name for p in ports if p.name == MEM_RESET_PORT}


def _xdc(config, period, ports):
    board = config.board
    buses = bus_interfaces(ports)
    mem = _mem_ports(ports, buses)
    clocks = {CLOCK_PORT, MEM_CLOCK_PORT} if mem else {CLOCK_PORT}
    lines = [
        f"# specgen clock constraints for board {board.name} ({board.part}), "
        f"{board.clock_mhz:g} MHz.",
        f"create_clock -name {CLOCK_PORT} -period {period:.3f} [get_ports {CLOCK_PORT}]",
    ]
    if mem:
        mem_period = 1000.0 / board.memory_clock_mhz
        lines += [
            f"# The memory ports' clock (board.memory_clock_mhz = {board.memory_clock_mhz:g} MHz).",
            f"create_clock -name {MEM_CLOCK_PORT} -period {mem_period:.3f} "
            f"[get_ports {MEM_CLOCK_PORT}]",
            "# The two clocks are asynchronous: every path between them goes through a",
            "# CDCFIFO (hw.cdc_fifo: Gray-coded pointers) or a reset synchronizer. Their",
            "# datapath delay is bounded by the faster period, so a Gray-coded pointer's bits",
            "# arrive within one period of each other (AMD UG903, Using Constraints).",
            f"set_max_delay -datapath_only -from [get_clocks {CLOCK_PORT}] "
            f"-to [get_clocks {MEM_CLOCK_PORT}] {min(period, mem_period):.3f}",
            f"set_max_delay -datapath_only -from [get_clocks {MEM_CLOCK_PORT}] "
            f"-to [get_clocks {CLOCK_PORT}] {min(period, mem_period):.3f}",
        ]
    lines += [
        "# Out of context, every other port is budgeted as registered at the neighbouring",
        "# block's boundary: zero external delay, the whole period for the path inside.",
    ]
    for clock, names in ((CLOCK_PORT, [p for p in ports if p.name not in mem | clocks]),
                         (MEM_CLOCK_PORT, [p for p in ports if p.name in mem])):
        ins = [_port_pattern(p) for p in names if p.direction == "input"]
        outs = [_port_pattern(p) for p in names if p.direction == "output"]
        if not mem:
            # One clock: the filters keep the file short whatever the top's ports.
            if ins:
                lines.append(f"set_input_delay -clock {CLOCK_PORT} 0.000 "
                             f"[get_ports -filter {{DIRECTION == IN && NAME != \"{CLOCK_PORT}\"}}]")
            if outs:
                lines.append(f"set_output_delay -clock {CLOCK_PORT} 0.000 "
                             "[get_ports -filter {DIRECTION == OUT}]")
            break
        for direction, group in (("input", ins), ("output", outs)):
            if group:
                lines.append(f"set_{direction}_delay -clock {clock} 0.000 [get_ports "
                             f"{{{' '.join(group)}}}]")
    return "\n".join(lines) + "\n"


def _port_pattern(port):
    """The ``get_ports`` pattern of ``port``: a bus port's bits are ``name[*]``."""
    return f"{port.name}[*]" if port.width > 1 else port.name


def _build_tcl(config):
    board = config.board
    return f"""\
# specgen Vivado flow for board {board.name} ({board.part}, {board.clock_mhz:g} MHz).
# Non-project mode, out of context:
#   vivado -mode batch -source build.tcl [-tclargs STAGE]
# STAGE: synth (synthesis and its reports), impl (synth, then opt/place/route and
# their reports), ip (IP packaging only), all (impl, then ip; the default).
source [file join [file dirname [file normalize [info script]]] {SETTINGS_TCL}]

set stage all
if {{$argc > 0}} {{ set stage [lindex $argv 0] }}
if {{[lsearch -exact {{{" ".join(STAGES)}}} $stage] < 0}} {{
    error "build.tcl: unknown stage '$stage'; allowed: {", ".join(STAGES)}"
}}
file mkdir $build_dir $report_dir

if {{$stage ne "ip"}} {{
    foreach src $sources {{ read_verilog $src }}
    read_xdc -mode out_of_context $xdc
    synth_design -mode out_of_context -part $part -top $top
    write_checkpoint -force [file join $build_dir post_synth.dcp]
    report_utilization -hierarchical -file [file join $report_dir utilization_synth_hier.rpt]
    report_timing_summary -max_paths 10 -file [file join $report_dir timing_synth.rpt]

    if {{$stage ne "synth"}} {{
        opt_design
        place_design
        write_checkpoint -force [file join $build_dir post_place.dcp]
        route_design
        write_checkpoint -force [file join $build_dir post_route.dcp]
        report_utilization -file [file join $report_dir utilization.rpt]
        report_utilization -hierarchical -file [file join $report_dir utilization_hier.rpt]
        report_timing_summary -max_paths 10 -report_unconstrained \\
            -file [file join $report_dir timing_summary.rpt]
        # Logic levels per path: the post-route counterpart of `specgen estimate`.
        report_design_analysis -logic_level_distribution \\
            -file [file join $report_dir logic_levels.rpt]
        # Sign-off checks (AMD UG906, Design Analysis and Closure Techniques): design rule
        # and methodology violations, and the vectorless power estimate of the routed design.
        report_drc -file [file join $report_dir drc.rpt]
        report_methodology -file [file join $report_dir methodology.rpt]
        report_power -file [file join $report_dir power.rpt]
    }}
    close_design
}}

if {{$stage eq "ip" || $stage eq "all"}} {{
    source [file join $specgen_dir {PACKAGE_TCL}]
}}
"""


def _register_lines(registers):
    """``ipx::add_register`` for every register (each table entry) of ``registers``."""
    lines = ["# The register map (hw/regmap.py; regmap/ holds it as SystemRDL and IP-XACT)."]
    for reg in registers.by_offset():
        entries = [(reg.name, reg.offset)] if reg.count == 1 else [
            (f"{reg.name}_{i}", reg.offset + 4 * i) for i in range(reg.count)]
        text = " ".join(reg.description.split()) or reg.name
        text = "".join(c for c in text if c not in "{}\\")
        for name, offset in entries:
            lines += [f"set reg [ipx::add_register {name} $block]",
                      f"set_property address_offset 0x{offset:03x} $reg",
                      f"set_property size {reg.width} $reg",
                      f"set_property description {_tcl_word(text)} $reg"]
    return lines


def _package_tcl(top, buses, has_reset, *, has_irq=False, registers=None, mem_freq_hz=0):
    lines = [
        f"# Package {top} as an IP-XACT core for IP Integrator.",
        "#   vivado -mode batch -source package_ip.tcl   (or build.tcl -tclargs ip)",
        f"source [file join [file dirname [file normalize [info script]]] {SETTINGS_TCL}]",
        "",
        "file mkdir $build_dir",
        "create_project -force ip_project [file join $build_dir ip_project] -part $part",
        "add_files -norecurse $sources",
        "set_property top $top [current_fileset]",
        "update_compile_order -fileset sources_1",
        "ipx::package_project -root_dir $ip_dir -vendor $ip_vendor -library $ip_library \\",
        "    -taxonomy /UserIP -import_files -set_current true -force",
        "set core [ipx::current_core]",
        "set_property name $top $core",
        "set_property version $ip_version $core",
        "set_property core_revision $ip_revision $core",
        "set_property display_name $top $core",
        "set_property description {specgen SpecMamba/SPEQ block} $core",
        "",
        "# Bus interfaces are declared from the ports specgen found, replacing whatever",
        "# the packager inferred from the names.",
        "foreach busif [ipx::get_bus_interfaces -of_objects $core] {",
        "    ipx::remove_bus_interface [get_property NAME $busif] $core",
        "}",
        "",
        f"set busif [ipx::add_bus_interface {CLOCK_PORT} $core]",
        "set_property abstraction_type_vlnv xilinx.com:signal:clock_rtl:1.0 $busif",
        "set_property bus_type_vlnv xilinx.com:signal:clock:1.0 $busif",
        "set_property interface_mode slave $busif",
        f"set_property physical_name {CLOCK_PORT} [ipx::add_port_map CLK $busif]",
        "set_property value $clock_freq_hz [ipx::add_bus_parameter FREQ_HZ $busif]",
    ]
    mem_buses = [b for b in buses if b.kind == "axi4"] if mem_freq_hz else []
    fabric_buses = [b for b in buses if b not in mem_buses]
    if has_reset:
        lines.append(f"set_property value {RESET_PORT} "
                     "[ipx::add_bus_parameter ASSOCIATED_RESET $busif]")
    if fabric_buses:
        lines.append(f"set_property value {':'.join(b.name for b in fabric_buses)} "
                     "[ipx::add_bus_parameter ASSOCIATED_BUSIF $busif]")
    if mem_freq_hz:
        lines += [
            "",
            f"# {MEM_CLOCK_PORT}: the memory ports' clock (board.memory_clock_mhz), and its",
            "# synchronous active-high reset.",
            f"set busif [ipx::add_bus_interface {MEM_CLOCK_PORT} $core]",
            "set_property abstraction_type_vlnv xilinx.com:signal:clock_rtl:1.0 $busif",
            "set_property bus_type_vlnv xilinx.com:signal:clock:1.0 $busif",
            "set_property interface_mode slave $busif",
            f"set_property physical_name {MEM_CLOCK_PORT} [ipx::add_port_map CLK $busif]",
            f"set_property value {mem_freq_hz} [ipx::add_bus_parameter FREQ_HZ $busif]",
            f"set_property value {MEM_RESET_PORT} [ipx::add_bus_parameter ASSOCIATED_RESET $busif]",
        ]
        if mem_buses:
            lines.append(f"set_property value {':'.join(b.name for b in mem_buses)} "
                         "[ipx::add_bus_parameter ASSOCIATED_BUSIF $busif]")
        lines += [
            f"set busif [ipx::add_bus_interface {MEM_RESET_PORT} $core]",
            "set_property abstraction_type_vlnv xilinx.com:signal:reset_rtl:1.0 $busif",
            "set_property bus_type_vlnv xilinx.com:signal:reset:1.0 $busif",
            "set_property interface_mode slave $busif",
            f"set_property physical_name {MEM_RESET_PORT} [ipx::add_port_map RST $busif]",
            "set_property value ACTIVE_HIGH [ipx::add_bus_parameter POLARITY $busif]",
        ]
    if has_reset:
        lines += [
            "",
            "# Amaranth's reset is synchronous and active high.",
            f"set busif [ipx::add_bus_interface {RESET_PORT} $core]",
            "set_property abstraction_type_vlnv xilinx.com:signal:reset_rtl:1.0 $busif",
            "set_property bus_type_vlnv xilinx.com:signal:reset:1.0 $busif",
            "set_property interface_mode slave $busif",
            f"set_property physical_name {RESET_PORT} [ipx::add_port_map RST $busif]",
            "set_property value ACTIVE_HIGH [ipx::add_bus_parameter POLARITY $busif]",
        ]
    if has_irq:
        lines += [
            "",
            f"# {IRQ_PORT}: held high while an enabled event is pending (level, not edge), so",
            "# IP Integrator connects it to an interrupt controller as an interrupt.",
            f"set busif [ipx::add_bus_interface {IRQ_PORT} $core]",
            "set_property abstraction_type_vlnv xilinx.com:signal:interrupt_rtl:1.0 $busif",
            "set_property bus_type_vlnv xilinx.com:signal:interrupt:1.0 $busif",
            "set_property interface_mode master $busif",
            f"set_property physical_name {IRQ_PORT} [ipx::add_port_map INTERRUPT $busif]",
            "set_property value LEVEL_HIGH [ipx::add_bus_parameter SENSITIVITY $busif]",
        ]
    if not buses:
        lines += ["", "# The top module has no AXI4-Lite or AXI4-Stream port groups."]
    for bus in buses:
        if bus.kind in ("axi4lite", "axi4"):
            abstraction, bus_type = "xilinx.com:interface:aximm_rtl:1.0", "xilinx.com:interface:aximm:1.0"
        else:
            abstraction, bus_type = "xilinx.com:interface:axis_rtl:1.0", "xilinx.com:interface:axis:1.0"
        lines += [
            "",
            f"# {bus.kind} {bus.mode} {bus.name}",
            f"set busif [ipx::add_bus_interface {bus.name} $core]",
            f"set_property abstraction_type_vlnv {abstraction} $busif",
            f"set_property bus_type_vlnv {bus_type} $busif",
            f"set_property interface_mode {bus.mode} $busif",
        ]
        for logical, physical in bus.port_maps:
            lines.append(f"set_property physical_name {physical} "
                         f"[ipx::add_port_map {logical} $busif]")
        if bus.kind == "axi4":
            # A memory master: IP Integrator maps its address space onto the NoC / HBM.
            lines += [
                "set_property value AXI4 [ipx::add_bus_parameter PROTOCOL $busif]",
                f"set_property value {bus.data_width} [ipx::add_bus_parameter DATA_WIDTH $busif]",
                f"set aspace [ipx::add_address_space {bus.name} $core]",
                f"set_property master_address_space_ref {bus.name} $busif",
                f"set_property range {1 << bus.addr_width} $aspace",
                f"set_property width {bus.data_width} $aspace",
            ]
        if bus.kind == "axi4lite":
            lines.append("set_property value AXI4LITE [ipx::add_bus_parameter PROTOCOL $busif]")
            if bus.mode == "slave":
                # IP Integrator assigns addresses from the slave's memory map; 4 KiB is
                # the smallest range it accepts.
                span = max(4096, 1 << bus.addr_width)
                lines += [
                    f"set mmap [ipx::add_memory_map {bus.name} $core]",
                    f"set_property slave_memory_map_ref {bus.name} $busif",
                    "set block [ipx::add_address_block registers $mmap]",
                    f"set_property range {span} $block",
                    "set_property width 32 $block",
                ]
                if registers is not None:
                    lines += _register_lines(registers)
                    registers = None    # the first slave only
    lines += [
        "",
        "ipx::create_xgui_files $core",
        "ipx::update_checksums $core",
        "ipx::check_integrity $core",
        "ipx::save_core $core",
        "close_project",
        "",
    ]
    return "\n".join(lines)


def _readme(config, top, rel, period, buses, has_reset, *, has_irq=False, extra_files=None):
    board = config.board
    src_rows = "\n".join(f"| `{n}` | Verilog (Amaranth output) |" for n in rel)
    if buses:
        bus_text = "\n".join(f"- `{b.name}`: {b.kind} {b.mode}" +
                             (f", {max(4096, 1 << b.addr_width)}-byte address range"
                              if b.kind == "axi4lite" and b.mode == "slave" else "") +
                             (f", {b.data_width} bits: the read master `{b.halves[0]}` and the "
                              f"write master `{b.halves[1]}`" if b.halves else "")
                             for b in buses)
        n_mem = sum(b.kind == "axi4" and b.mode == "master" for b in buses)
        if n_mem:
            bus_text += (f"\n\n{n_mem} AXI4 memory interfaces, one NoC or HBM_NMU port each "
                         f"(AMD PG313). Each `{SHARED_PORT_PREFIX}NN` joins a master that only "
                         "reads and one that only writes, of the same widths: AXI4's read and "
                         "write channels are independent (AMBA AXI4, A1.3).")
    else:
        bus_text = "- none: the top module has no AXI4-Lite or AXI4-Stream port groups"
    reset_text = (f"`{RESET_PORT}` (synchronous, active high)" if has_reset
                  else "none (the top module has no reset input)")
    core_row = "".join(f"| `{name}` | {what} |\n" for name, what in (extra_files or {}).items())
    irq_text = (f"\n- interrupt `{IRQ_PORT}` (level high, `SENSITIVITY LEVEL_HIGH`)"
                if has_irq else "")
    return f"""\
# specgen output for board `{board.name}`

Generated by `specgen`; do not edit (regenerate instead). Part
`{board.part}`, {board.clock_mhz:g} MHz fabric clock ({period:.3f} ns), top module
`{top}`.

## Files

| file | what it is |
|---|---|
{src_rows}
| `manifest.json` | generator version, board, full config, module list and the sha256 of every file |
| `{SETTINGS_TCL}` | part, top, clock, source list and output folder, read by both scripts |
| `{XDC}` | clock constraint on `{CLOCK_PORT}` ({period:.3f} ns) and zero-delay I/O budget for out-of-context runs |
| `{BUILD_TCL}` | the Vivado flow: synthesis, implementation, reports, IP packaging |
| `{PACKAGE_TCL}` | IP packaging for IP Integrator (sourced by `{BUILD_TCL}`, or run alone) |
{core_row}| `README.md` | this file |

## Running

Vivado with the part's device support installed (not tested here: this folder was
checked with stub Vivado commands under tclsh only):

```sh
vivado -mode batch -source {BUILD_TCL}                 # everything
vivado -mode batch -source {BUILD_TCL} -tclargs synth  # synthesis and its reports only
vivado -mode batch -source {BUILD_TCL} -tclargs impl   # synthesis and implementation
vivado -mode batch -source {BUILD_TCL} -tclargs ip     # IP packaging only
```

The scripts find their files relative to themselves, so the folder can be
copied to a Vivado machine as it is. Everything Vivado writes goes to
`vivado/`, which `manifest.json` does not list: running `specgen verilog` into
this folder again replaces specgen's files and keeps `vivado/`:

| path | written by | content |
|---|---|---|
| `vivado/post_synth.dcp` | synth | out-of-context synthesis checkpoint |
| `vivado/post_place.dcp`, `vivado/post_route.dcp` | impl | implementation checkpoints |
| `vivado/reports/utilization_synth_hier.rpt` | synth | hierarchical utilization after synthesis |
| `vivado/reports/timing_synth.rpt` | synth | timing summary after synthesis |
| `vivado/reports/utilization.rpt`, `utilization_hier.rpt` | impl | utilization after routing, flat and hierarchical |
| `vivado/reports/timing_summary.rpt` | impl | timing summary after routing (WNS/TNS, the 10 worst paths) |
| `vivado/reports/logic_levels.rpt` | impl | logic-level distribution per clock (compare with `specgen estimate`) |
| `vivado/reports/drc.rpt` | impl | design rule checks of the routed design |
| `vivado/reports/methodology.rpt` | impl | methodology checks (constraints, clocking, timing practice) |
| `vivado/reports/power.rpt` | impl | vectorless power estimate of the routed design |
| `vivado/ip/` | ip | the packaged IP (`component.xml`); add it to IP Integrator's repository paths |
| `vivado/ip_project/` | ip | the scratch project the packager used |

## Interfaces of the packaged IP

- clock `{CLOCK_PORT}` ({board.clock_mhz:g} MHz, `FREQ_HZ` set)
- reset {reset_text}
{bus_text}{irq_text}

Out of context, inputs and outputs other than the clock carry zero external
delay: a path from a port to the first register may use the whole period, as
when the neighbouring block registers its side of the boundary.
"""
