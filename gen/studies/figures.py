"""The docs' pictures that come from the design itself (``specgen figures``).

* ``accelerator-blocks.png`` (``docs/accelerator.md``): the accelerator's blocks,
  read from ``Accelerator.elaborate`` of the ``vhk158`` preset, with what each
  holds and the top level's ports;
* ``utilization-<board>.png`` (``docs/boards.md``): the estimated design
  (``docs/estimate.json``, :func:`gen.estimate.report.fit_summary`) against the
  board's device, hatched where the capacity is not from an AMD document;
* ``stream-handshake.svg`` and ``axi-lite-sequence.svg`` (``docs/accelerator.md``):
  WaveDrom timing diagrams recorded cycle by cycle from Amaranth's simulator, a
  ``RingFIFO`` write burst against a stalled reader and an AXI4-Lite write and
  read-back of ``MODE`` on the accelerator's register file;
* the performance model's plots (:func:`gen.perf.report.write_plots`,
  ``docs/perf.md``), which ``specgen bench`` also writes.

Every file is deterministic: the same design gives the same bytes.
"""

import io
import json
from collections import Counter
from pathlib import Path

__all__ = ["FIGURES", "write_figures", "accelerator_children", "block_diagram_figure",
           "capacity_sources", "estimate_results", "utilization_figure", "stream_handshake",
           "axi_lite_sequence", "render_svg", "CLIP_PCT"]

#: Boards of the utilization charts.
BOARDS = ("vck190", "vhk158")

#: Preset of the block diagram: the paper's HBM board.
DIAGRAM_PRESET = "vhk158"

#: AXI response codes (AMBA AXI4-Lite, ``BRESP``/``RRESP``).
_RESP = {0: "OKAY", 1: "EXOKAY", 2: "SLVERR", 3: "DECERR"}


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _unwrap(obj):
    """The block behind ``DomainRenamer``/``ResetInserter`` wrappers."""
    while hasattr(obj, "_elaboratable_"):
        obj = obj._elaboratable_
    return obj


def _used(*objs):
    """Mark elaboratables that are drawn, not built, as used (no UnusedElaboratable)."""
    for obj in objs:
        if hasattr(obj, "_MustUse__used"):
            obj._MustUse__used = True


def _submodules(component):
    """``{name: block}`` of the blocks ``component.elaborate`` adds, unnamed ones as
    ``#<n>``; one level, without elaborating the children."""
    m = component.elaborate(None)
    _used(component, m)
    try:
        named, anon = m._named_submodules, m._anon_submodules
    except AttributeError:  # pragma: no cover - Amaranth's Module changed
        raise RuntimeError("amaranth.hdl.Module no longer lists its submodules; "
                           "update gen's block diagram") from None
    blocks = [(name, v[0] if isinstance(v, tuple) else v) for name, v in named.items()]
    blocks += [(f"#{i}", v[0] if isinstance(v, tuple) else v) for i, v in enumerate(anon)]
    out = {}
    for name, block in blocks:
        _used(block, _unwrap(block))
        out[name] = _unwrap(block)
    return out


def accelerator_children(config):
    """The accelerator's blocks, read from its elaboration.

    Returns
    -------
    top : hw.accelerator.Accelerator
    children : list of dict
        Per block added by ``Accelerator.elaborate``: ``name``, ``kind`` (class
        name), ``module`` (its ``module_name`` or None) and ``contents`` (a
        ``Counter`` of the class names of the blocks *it* adds).
    """
    from specgen.hw.accelerator import Accelerator
    top = Accelerator(config=config)
    children = []
    for name, block in _submodules(top).items():
        contents = Counter()
        if type(block).__name__ == "Memory":
            from amaranth.hdl import Shape
            width = Shape.cast(block.shape).width
            contents = Counter({f"{block.depth} words of {width} b": 1})
        elif hasattr(block, "elaborate"):
            contents = Counter(type(b).__name__ for b in _submodules(block).values())
        children.append({"name": name, "kind": type(block).__name__,
                         "module": getattr(block, "module_name", None),
                         "contents": contents, "block": block})
    return top, children


def _port_label(name, member):
    """``name`` and what it is: an interface's kind and data width, or a wire's width."""
    from amaranth.hdl import Shape
    if member.is_port:
        return f"{name} ({Shape.cast(member.shape).width} b)"
    sig = member.signature
    if type(sig).__name__ == "FlippedSignature":
        sig = sig.flip()
    kind = type(sig).__name__.removesuffix("Signature").replace("AXI4", "AXI4-")
    if not kind and "araddr" in sig.members:
        kind = "AXI4 read"
    elif not kind and "awaddr" in sig.members:
        kind = "AXI4 write"
    widths = {n: Shape.cast(m.shape).width for n, m in sig.members.items()
              if m.is_port and n in ("tdata", "wdata", "rdata", "payload")}
    # One data width (an AXI4-Lite port's wdata and rdata are the same).
    return f"{name}\n{kind}" + "".join(f", {w} b" for w in list(widths.values())[:1])


def _ports(top):
    """The top level's port labels, inputs and outputs. A run of ports that differ only
    in a trailing index and are alike (``m_axi_ssm_st_rd0`` ... ``m_axi_ssm_st_rd15``)
    is one label, ``first … last index`` over ``n × kind``: 16 state ports a side would
    not fit the figure's edge one a line."""
    import re
    runs = []
    for name, member in top.signature.members.items():
        label = _port_label(name, member)
        rest = label[len(name):]
        indexed = re.fullmatch(r"(.*?)(\d+)", name)
        key = (member.flow.name, indexed.group(1), rest) if indexed else None
        if key is not None and runs and runs[-1][0] == key:
            runs[-1][1].append(name)
        else:
            runs.append((key, [name], rest, member.flow.name))
    ins, outs = [], []
    for _, names, rest, flow in runs:
        if len(names) == 1:
            label = names[0] + rest
        else:
            last = re.fullmatch(r".*?(\d+)", names[-1]).group(1)
            what = rest[1:] if rest.startswith("\n") else rest.strip(" ()")
            label = f"{names[0]} … {last}\n{len(names)} × {what}"
        (ins if flow == "In" else outs).append(label)
    return ins, outs


def block_diagram_figure(config):
    """The accelerator of ``config`` as boxes: one per block its ``elaborate`` adds,
    with what each holds, and the top level's ports on its edges."""
    from matplotlib.patches import FancyBboxPatch
    plt = _plt()
    top, children = accelerator_children(config)
    ins, outs = _ports(top)
    ncol, gap, bh = 3, 0.2, 1.05
    nrow = -(-len(children) // ncol)
    # The figure grows with the rows, so every box keeps room for its text.
    x0, x1, y0 = 2.3, 9.7, 0.5
    y1 = y0 + 0.75 + (nrow + 1) * gap + nrow * bh
    fig = plt.figure(figsize=(12, y1 + 0.3))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 12)
    ax.set_ylim(0, y1 + 0.3)
    ax.axis("off")
    ax.add_patch(FancyBboxPatch((x0, y0), x1 - x0, y1 - y0, boxstyle="round,pad=0.05",
                                fc="#f4f6fa", ec="0.25", lw=1.4))
    ax.text((x0 + x1) / 2, y1 - 0.25, f"{type(top).__name__} ({top.module_name})",
            ha="center", va="top", fontsize=10, weight="bold")
    bw = (x1 - x0 - (ncol + 1) * gap) / ncol
    for i, c in enumerate(children):
        r, k = divmod(i, ncol)
        bx = x0 + gap + k * (bw + gap)
        by = y1 - 0.75 - (r + 1) * (bh + gap)
        ax.add_patch(FancyBboxPatch((bx, by), bw, bh, boxstyle="round,pad=0.03",
                                    fc="white", ec="tab:blue", lw=1.1))
        lines = [f"{c['name']}: {c['kind']}"]
        if c["module"]:
            m = c["module"]
            lines.append(m if len(m) <= 34 else m[:32] + "…")
        held = [kind if kind.endswith(" b") else f"{n}× {kind}"
                for kind, n in c["contents"].most_common()]
        # Two kinds a line, two lines at most: a box's text stays inside it.
        rows = [", ".join(held[j:j + 2]) for j in range(0, len(held), 2)]
        rows = rows[:2] if len(rows) <= 2 else [rows[0], rows[1] + ", …"]
        # A line no wider than the box (monospace at this size: about 36 characters).
        lines += [r if len(r) <= 36 else r[:35] + "…" for r in rows]
        # A long title (a counter's name) is set smaller, so it stays in its box.
        ax.text(bx + 0.1, by + bh - 0.1, lines[0], ha="left", va="top",
                fontsize=9 if len(lines[0]) <= 26 else 7, weight="bold")
        ax.text(bx + 0.1, by + bh - 0.42, "\n".join(lines[1:]), ha="left", va="top",
                fontsize=7, family="monospace", linespacing=1.35)
    for side, names in (("in", ins), ("out", outs)):
        step = (y1 - y0) / (len(names) + 1)
        for j, name in enumerate(names):
            y = y1 - (j + 1) * step
            if side == "in":
                ax.annotate("", xy=(x0, y), xytext=(x0 - 0.6, y),
                            arrowprops={"arrowstyle": "->", "lw": 1.2})
                ax.text(x0 - 0.65, y, name, ha="right", va="center", fontsize=8)
            else:
                ax.annotate("", xy=(x1 + 0.6, y), xytext=(x1, y),
                            arrowprops={"arrowstyle": "->", "lw": 1.2})
                ax.text(x1 + 0.65, y, name, ha="left", va="center", fontsize=8)
    ax.text(6, 0.12, f"Preset {config.name}, read from the elaboration of hw/accelerator.py "
            "(one level of blocks, and what each holds). Arrows: the top level's ports.",
            ha="center", va="bottom", fontsize=7.5, color="0.3")
    return fig


def capacity_sources(board):
    """``{resource: (status, text)}`` of ``board.capacity_source``; status is
    ``"AMD"``, ``"assumption"``, ``"unknown"`` or ``"other"``."""
    import re
    keys = "|".join(map(re.escape, board.capacities))
    heads = list(re.finditer(rf"\b((?:{keys})(?:, (?:{keys}))*):", board.capacity_source))
    out = {}
    for h, nxt in zip(heads, heads[1:] + [None]):
        text = board.capacity_source[h.end():nxt.start() if nxt else None].strip(" .;")
        status = ("unknown" if "unknown" in text else "assumption" if "assumption" in text
                  else "AMD" if "AMD" in text else "other")
        for name in h.group(1).split(", "):
            out[name] = (status, text)
    return out


def estimate_results(report):
    """:class:`gen.estimate.BlockEstimate` objects of one board of ``docs/estimate.json``."""
    from specgen.gen.estimate.depth import ModuleDepth
    from specgen.gen.estimate.report import BlockEstimate
    return [BlockEstimate(**dict(b, depth=[ModuleDepth(**d) for d in b["depth"]]))
            for b in report["blocks"]]


#: Right end of the utilization axis, in percent of the device.
CLIP_PCT = 150


def utilization_figure(config, report):
    """Resources of the estimated design against ``config``'s device, one bar per
    resource (:func:`gen.estimate.fit_summary`); hatched bars divide by an assumed
    capacity, and a resource whose capacity is unknown gets no bar."""
    from specgen.gen.estimate.report import FIT_LIMITS, fit_summary
    plt = _plt()
    fit = fit_summary(estimate_results(report), config)
    sources = capacity_sources(config.board)
    names = list(config.board.capacities)
    fig, ax = plt.subplots(figsize=(8, 0.55 * len(names) + 1.9))
    ys = list(range(len(names)))[::-1]
    for y, name in zip(ys, names):
        f = fit[name]
        status = sources.get(name, ("unknown", ""))[0]
        if f["share"] is None:
            ax.text(1, y, f"{f['used']:,.0f} used; device capacity unknown", va="center",
                    fontsize=8, color="0.35")
            continue
        pct = 100 * f["share"]
        # Bars past the axis end at it; their label gives the real share.
        ax.barh(y, min(pct, CLIP_PCT), height=0.6, color="tab:red" if pct > 100 else "tab:blue",
                hatch="//" if status != "AMD" else None, edgecolor="white")
        note = "" if status == "AMD" else f" ({'notes' if status == 'other' else status})"
        label = f"{pct:.1f} %: {f['used']:,.0f} of {f['device']:,}{note}"
        if pct > CLIP_PCT:
            ax.text(CLIP_PCT - 1, y, label + " ▶", va="center", ha="right", fontsize=8,
                    bbox={"fc": "white", "ec": "none", "alpha": 0.9}, zorder=4)
        else:
            ax.text(pct + 1, y, label, va="center", fontsize=8,
                    bbox={"fc": "white", "ec": "none", "alpha": 0.9}, zorder=4)
        if name in FIT_LIMITS:
            ax.plot([100 * FIT_LIMITS[name]] * 2, [y - 0.4, y + 0.4], color="0.2", lw=1.2)
    ax.axvline(100, color="0.2", lw=0.8, ls="--")
    ax.set_ylim(-0.7, len(names) - 0.3)
    ax.set_yticks(ys)
    ax.set_yticklabels(names)
    ax.set_xlim(0, CLIP_PCT)
    ax.set_xlabel("share of the device (%)")
    ax.set_title(f"{config.board.name}: estimated design against {config.board.part}\n"
                 f"{fit['verdict']}", fontsize=9)
    fig.text(0.01, 0.01, "Blue: used / device (UltraScale+ proxy, docs/estimate.md). Hatched: "
             "the capacity is not from an AMD document (docs/boards.md). Tick: fit limit.",
             fontsize=7, color="0.3")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig, fit


def _wave(values, *, data=False, fmt=hex):
    """WaveDrom ``wave`` string (and ``data`` list) of per-cycle samples.

    ``values`` holds ints, or ``None`` for "no valid data" (drawn ``x``)."""
    wave, labels, prev = [], [], object()
    for v in values:
        if v == prev:
            wave.append(".")
            continue
        prev = v
        if v is None:
            wave.append("x")
        elif data:
            wave.append("=")
            labels.append(fmt(v))
        else:
            wave.append(str(int(v)))
    return "".join(wave), labels


def _signal(name, values, *, data=False, fmt=hex):
    wave, labels = _wave(values, data=data, fmt=fmt)
    sig = {"name": name, "wave": wave}
    if data:
        sig["data"] = labels
    return sig


def stream_handshake(*, width=8, depth=4):
    """WaveDrom source of a ``RingFIFO`` write burst against a stalled reader."""
    from amaranth.sim import Simulator

    from specgen.hw.ring_fifo import RingFIFO
    dut = RingFIFO(width=width, depth=depth)
    items = [0xA1, 0xB2, 0xC3]
    # Reader stalls for the first cycles, so the write side fills the ring and
    # the read side shows valid without ready before it drains.
    w_valid_plan = [0, 1, 1, 1, 0, 0, 0, 0, 0]
    r_ready_plan = [0, 0, 0, 0, 1, 0, 1, 1, 0]
    rec = {k: [] for k in ("w.valid", "w.ready", "w.payload", "r.valid", "r.ready",
                           "r.payload", "level")}

    async def bench(ctx):
        sent = 0
        for cyc, (wv, rr) in enumerate(zip(w_valid_plan, r_ready_plan)):
            ctx.set(dut.w.valid, wv and sent < len(items))
            ctx.set(dut.w.payload, items[sent] if wv and sent < len(items) else 0)
            ctx.set(dut.r.ready, rr)
            (_, _, w_valid, w_ready, r_valid, r_ready, r_payload, w_payload,
             level) = await ctx.tick().sample(dut.w.valid, dut.w.ready, dut.r.valid,
                                               dut.r.ready, dut.r.payload, dut.w.payload,
                                               dut.level)
            rec["w.valid"].append(w_valid)
            rec["w.ready"].append(w_ready)
            rec["w.payload"].append(w_payload if w_valid else None)
            rec["r.valid"].append(r_valid)
            rec["r.ready"].append(r_ready)
            rec["r.payload"].append(r_payload if r_valid else None)
            rec["level"].append(level)
            if w_valid and w_ready:
                sent += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    n = len(w_valid_plan)
    return {
        "signal": [
            {"name": "clk", "wave": "p" + "." * (n - 1)},
            ["write (w)",
             _signal("valid", rec["w.valid"]), _signal("ready", rec["w.ready"]),
             _signal("payload", rec["w.payload"], data=True)],
            ["read (r)",
             _signal("valid", rec["r.valid"]), _signal("ready", rec["r.ready"]),
             _signal("payload", rec["r.payload"], data=True)],
            _signal("level", rec["level"], data=True, fmt=str),
        ],
        "head": {"text": f"RingFIFO(width={width}, depth={depth}): a beat moves when valid "
                         "and ready are both high", "tick": 0},
        "config": {"hscale": 1},
    }


def axi_lite_sequence(*, config, register="MODE"):
    """WaveDrom source of one AXI4-Lite write of ``register`` and its read-back.

    The register file is the accelerator's (``hw.regmap.accelerator_regmap`` of
    ``config``); the value written sets every writable field to a non-reset
    value, so the read-back shows the write took effect."""
    from amaranth.sim import Simulator

    from specgen.hw.axi_lite import AXI4LiteRegisterFile
    from specgen.hw.regmap import accelerator_regmap
    regmap = accelerator_regmap(config)
    reg = regmap[register]
    # Every RW field one above its reset value: the read-back differs from reset.
    value = sum(((f.reset + 1) % (1 << f.width)) << f.lsb for f in reg.fields
                if f.access == "RW")
    if value == 0:
        raise ValueError(f"register {register!r} has no RW field; the diagram needs one")
    dut = AXI4LiteRegisterFile(regmap=regmap)
    bus = dut.s_axi
    names = ["awvalid", "awready", "awaddr", "wvalid", "wready", "wdata", "bvalid", "bready",
             "bresp", "arvalid", "arready", "araddr", "rvalid", "rready", "rdata", "rresp"]
    sigs = [getattr(bus, n) for n in names]
    rec = {n: [] for n in names}
    n_cycles = 10

    async def bench(ctx):
        ctx.set(bus.wstrb, 0b1111)
        ctx.set(bus.awvalid, 1)
        ctx.set(bus.awaddr, reg.offset)
        ctx.set(bus.wvalid, 1)
        ctx.set(bus.wdata, value)
        state = "write"
        for _ in range(n_cycles):
            ctx.set(bus.bready, 1)
            ctx.set(bus.rready, 1)
            if state == "read":
                ctx.set(bus.arvalid, 1)
                ctx.set(bus.araddr, reg.offset)
            _, _, *vals = await ctx.tick().sample(*sigs)
            v = dict(zip(names, vals))
            for n in names:
                rec[n].append(v[n])
            if v["awvalid"] and v["awready"]:
                ctx.set(bus.awvalid, 0)
                ctx.set(bus.awaddr, 0)
            if v["wvalid"] and v["wready"]:
                ctx.set(bus.wvalid, 0)
                ctx.set(bus.wdata, 0)
            if state == "write" and v["bvalid"] and v["bready"]:
                state = "gap"
            elif state == "gap":
                state = "read"
            elif state == "read" and v["arvalid"] and v["arready"]:
                ctx.set(bus.arvalid, 0)
                ctx.set(bus.araddr, 0)
                state = "wait"
            elif state == "wait" and v["rvalid"] and v["rready"]:
                state = "done"
                rec["read_back"] = v["rdata"]
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    if rec.get("read_back") != value:
        raise AssertionError(f"read back {rec.get('read_back')!r}, wrote {value:#x}")

    def gated(name, valid):
        return [x if ok else None for x, ok in zip(rec[name], rec[valid])]
    return {
        "signal": [
            {"name": "aclk", "wave": "p" + "." * (n_cycles - 1)},
            ["write address",
             _signal("awvalid", rec["awvalid"]), _signal("awready", rec["awready"]),
             _signal("awaddr", gated("awaddr", "awvalid"), data=True)],
            ["write data",
             _signal("wvalid", rec["wvalid"]), _signal("wready", rec["wready"]),
             _signal("wdata", gated("wdata", "wvalid"), data=True)],
            ["write response",
             _signal("bvalid", rec["bvalid"]), _signal("bready", rec["bready"]),
             _signal("bresp", gated("bresp", "bvalid"), data=True, fmt=_RESP.get)],
            ["read address",
             _signal("arvalid", rec["arvalid"]), _signal("arready", rec["arready"]),
             _signal("araddr", gated("araddr", "arvalid"), data=True)],
            ["read data",
             _signal("rvalid", rec["rvalid"]), _signal("rready", rec["rready"]),
             _signal("rdata", gated("rdata", "rvalid"), data=True),
             _signal("rresp", gated("rresp", "rvalid"), data=True, fmt=_RESP.get)],
        ],
        "head": {"text": f"AXI4-Lite: write {register} ({reg.offset:#05x}) = {value:#x}, "
                         "then read it back", "tick": 0},
    }


def render_svg(source):
    """SVG text of a WaveDrom ``source`` (a dict), through the ``wavedrom`` package."""
    try:
        import wavedrom
    except ImportError:
        from specgen.gen.cli.errors import CLIError
        raise CLIError("the timing diagrams need the wavedrom package: "
                       "pip install 'wavedrom==2.0.3.post3' (make env installs it)") from None
    buf = io.StringIO()
    wavedrom.render(json.dumps(source)).write(buf, pretty=True)
    return buf.getvalue()


def _png(fig):
    buf = io.BytesIO()
    # No "Software" or date chunks: the same figure gives the same bytes.
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    _plt().close(fig)
    return buf.getvalue()


def _figures(estimates):
    """``{file name: bytes}`` of every figure but the performance plots."""
    from specgen.golden.config import preset
    out = {"accelerator-blocks.png": _png(block_diagram_figure(preset(DIAGRAM_PRESET)))}
    for board in BOARDS:
        out[f"utilization-{board}.png"] = _png(utilization_figure(preset(board),
                                                                  estimates[board])[0])
    out["stream-handshake.svg"] = render_svg(stream_handshake()).encode()
    out["axi-lite-sequence.svg"] = render_svg(axi_lite_sequence(config=preset("sim"))).encode()
    return out


#: Files :func:`write_figures` writes.
FIGURES = (["accelerator-blocks.png"] + [f"utilization-{b}.png" for b in BOARDS]
           + ["stream-handshake.svg", "axi-lite-sequence.svg"])


def write_figures(*, out, estimates=None, perf_plots=True):
    """Write :data:`FIGURES` and the performance plots into folder ``out``.

    Parameters
    ----------
    out : str or pathlib.Path
        Output folder (created if missing); each file is written atomically.
    estimates : str or pathlib.Path, optional
        The estimate JSON the utilization charts read (default
        ``docs/estimate.json`` of this checkout, written by ``specgen docs estimate``).
    perf_plots : bool
        Also write the performance model's plots (:data:`gen.perf.report.PLOTS`;
        minutes: every point is a step of the model).

    Returns
    -------
    list of pathlib.Path
        The files written.
    """
    from specgen.gen.cli.errors import CLIError
    from specgen.gen.cli.output import check_out, write_files
    from specgen.gen.perf.report import write_plots
    path = Path(estimates) if estimates is not None else (
        Path(__file__).resolve().parents[2] / "docs" / "estimate.json")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CLIError(f"cannot read the estimate {str(path)!r}: {exc}") from None
    missing = [b for b in BOARDS if b not in data]
    if missing:
        raise CLIError(f"the estimate {str(path)!r} has no board {missing[0]!r}; "
                       f"it needs {', '.join(BOARDS)}")
    out = check_out(out, folder=False)
    files = _figures(data)
    paths = write_files(out, files)
    if perf_plots:
        paths += [out / n for n in write_plots(out).values()]
    return paths
