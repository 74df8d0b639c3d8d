"""Reports of the performance model: the CLI table, the papers' table, the gaps, the plots.

``specgen perf`` prints :func:`format_result`; ``specgen bench`` writes
:func:`model_markdown` and :func:`calibration_markdown` into ``docs/perf.md``
and the PNGs of :func:`write_plots` into ``docs/``. Every figure here is a
model output (``gen/perf/system.py``) or a claim of the papers or their design notes
(``docs/sources.md``), and says which.
"""

from dataclasses import replace
from pathlib import Path

from specgen.golden.config import HBM_NMU_PORTS, preset
from specgen.golden.tree import TreeShape

from specgen.gen.perf.claims import SEED
from specgen.gen.perf.system import (SIZINGS, StepConfig, accelerator, expected_tokens, mamba_dims,
                             paper_rows, seed_step, speq_step, ssm_timing, state_ports_needed,
                             step_model, weight_bytes)

__all__ = ["format_result", "side_by_side_markdown", "gap_sentences", "calibration_markdown",
           "model_markdown", "write_plots", "roofline_figure", "acceptance_figure", "PLOTS",
           "PHASE_MARKERS", "BOARDS", "TREE_SHAPES"]

#: PNG files written by :func:`write_plots`, relative to the output folder.
PLOTS = {"roofline": "perf-roofline.png", "acceptance": "perf-acceptance.png",
         "tree": "perf-tree.png"}


def _ms(s):
    return f"{s * 1e3:,.2f}"


def _gb(b):
    return f"{b / 1e9:,.3f}"


def format_result(res):
    """A readable table of one :class:`gen.perf.system.StepResult` (``specgen perf``)."""
    st, acc = res.step, res.accel
    lines = [
        f"specgen perf (model, not a measurement): {acc.describe()}",
        f"target Mamba2-{st.target}, draft {st.draft}, tree {list(st.tree.branching)}, "
        f"restore {st.restore_policy}"
        + (f", draft flow {st.draft_flow}" if st.draft != "none" else "")
        + f", scheduler overlap {acc.overlap:g}, vector stages "
        f"{acc.vector_lanes} element{'s' if acc.vector_lanes > 1 else ''} a cycle "
        f"(conv1d {acc.stage_lanes('conv1d')}, argmax {acc.stage_lanes('argmax')})"
        + (", inputs and stage weights read once (what-if)" if acc.stage_reuse else ""),
        f"tokens/step {res.tokens_per_step:.3f} over {res.draft_passes:.2f} drafted depths and "
        f"{res.verify_nodes:.2f} verified nodes",
        "",
        f"{'phase':<8} {'time ms':>10} {'memory ms':>10} {'compute ms':>11} {'state ms':>9} "
        f"{'bound':>8} {'GB moved':>9} {'linear Mcyc':>12} {'SSM Mcyc':>9} {'vector Mcyc':>12}",
    ]
    for p in res.phases:
        lines.append(f"{p.name:<8} {_ms(p.time):>10} {_ms(p.t_mem):>10} {_ms(p.t_compute):>11} "
                     f"{_ms(p.t_state):>9} {p.bound:>8} {_gb(p.bytes):>9} {p.linear_cycles / 1e6:>12,.2f} "
                     f"{p.ssm_cycles / 1e6:>9,.2f} {p.vector_cycles / 1e6:>12,.2f}")
    seed_eff = res.tokens_per_j_seed_efficiency
    lines += [
        f"{'step':<8} {_ms(res.step_time):>10}",
        "",
        f"tokens/s            {res.tokens_per_s:,.1f}",
        f"roofline tokens/s   {res.roofline_tokens_per_s:,.1f}  (every pass streams its weights "
        f"once at {acc.bandwidth / 1e9:g} GB/s; ours = {100 * res.roofline_ratio:.1f} %)",
        f"power (assumed)     {res.power_w:,.1f} W  -> {res.tokens_per_j:,.3f} tokens/J",
    ]
    if seed_eff is not None:
        lines.append(f"at the SpecMamba notes' {SEED['tops_per_w'][acc.board.name]} TOPS/W: "
                     f"{seed_eff:,.2f} tokens/J")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------
# The papers' table
# ---------------------------------------------------------------------------------

def _find(rows, board, sizing, prefix):
    for r in rows:
        if r["board"] == board and r["sizing"] == sizing and r["config"].startswith(prefix):
            return r["result"]
    raise KeyError((board, sizing, prefix))


def side_by_side_markdown(rows=None):
    """The papers' headline table with our modeled figures and the rooflines beside it."""
    rows = paper_rows() if rows is None else rows
    gpu, lm = SEED["gpu_tok_s"], SEED["lightmamba_tok_s"]
    out = [
        "| board | configuration | source | tokens/s | vs GPU 89 | vs LightMamba 169 | "
        "% of roofline | tokens/J (assumed power) | draft / verify / restore ms (bound) |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
        f"| GPU | Mamba2-2.7B, GPU baseline | claim (SpecMamba notes' table) | {gpu:g} | 1.00× | {gpu / lm:.2f}× "
        f"| – | – | – |",
        f"| FPGA | LightMamba, Mamba2-2.7B | claim (SpecMamba notes' table) | {lm:g} | {lm / gpu:.2f}× | "
        f"1.00× | – | – | – |",
        f"| VHK158 | SpecMamba, 2.7B + 370M | claim (SpecMamba notes) | {SEED['specmamba_tok_s']:g} | "
        f"{SEED['specmamba_tok_s'] / gpu:.2f}× (abstract: {SEED['speedup_vs_gpu']}×) | "
        f"{SEED['specmamba_tok_s'] / lm:.2f}× (abstract: {SEED['speedup_vs_fpga']}×) | "
        f"{100 * SEED['specmamba_tok_s'] / _find(rows, 'vhk158', 'preset', 'SpecMamba').roofline_tokens_per_s:.0f} % | – | – |",
    ]
    for board in ("vhk158", "vck190"):
        for prefix in ("SpecMamba", "SPEQ", "autoregressive"):
            first = _find(rows, board, "preset", prefix)
            name = next(r["config"] for r in rows if r["config"].startswith(prefix))
            out.append(f"| {board.upper()} | {name} | roofline (model) | "
                       f"{first.roofline_tokens_per_s:,.1f} | "
                       f"{first.roofline_tokens_per_s / gpu:.2f}× | "
                       f"{first.roofline_tokens_per_s / lm:.2f}× | 100 % | – | weights only |")
            for sizing in SIZINGS:
                res = _find(rows, board, sizing, prefix)
                split = " / ".join(f"{_ms(p.time)} ({p.bound[0].upper()})" for p in res.phases)
                lin = res.accel.linear
                out.append(f"| {board.upper()} | {name} | ours, {sizing} "
                           f"({lin.rows}×{lin.cols} PEs, {res.accel.ssm_lanes} lanes) | "
                           f"{res.tokens_per_s:,.1f} | {res.tokens_per_s / gpu:.2f}× | "
                           f"{res.tokens_per_s / lm:.2f}× | {100 * res.roofline_ratio:.1f} % | "
                           f"{res.tokens_per_j:,.3f} | {split} |")
    return "\n".join(out)


def gap_sentences(rows=None):
    """One sentence per gap in the side-by-side table, with the numbers behind it."""
    rows = paper_rows() if rows is None else rows
    out = []
    hp = _find(rows, "vhk158", "preset", "SpecMamba")
    hd = _find(rows, "vhk158", "dsp", "SpecMamba")
    acc = hp.accel
    claimed = SEED["specmamba_tok_s"]
    tgt = mamba_dims("2.7B")
    w_cycle = acc.bandwidth / acc.clock_hz / 2
    ver = hp.phase("verify")
    out.append(
        f"**Roofline vs SpecMamba's claim.** The weight-streaming roofline of SpecMamba's step "
        f"(4 draft passes of the 370M model plus one 2.7B verify pass, "
        f"{_gb(hp.roofline_bytes)} GB at {acc.board.mem_bw_gbs:g} GB/s) is "
        f"{hp.roofline_tokens_per_s:,.0f} tok/s, so the claimed {claimed:g} tok/s is "
        f"{100 * claimed / hp.roofline_tokens_per_s:.0f} % of it; the notes "
        f"put the rest in drafting (35 % of the time) and scheduling (85 % of peak).")
    lin = acc.linear
    if lin.contract == "dspfp32":
        # Weight-stationary slots: a weight serves the job's tokens one a cycle, so the
        # unit's weight rate is what the verify pass's schedule achieved (padding included).
        per_cycle = tgt.linear_params / ver.linear_cycles
        how = (f"the DSPLinearUnit's {lin.pes:,} DSPFP32 slots each do one MAC a cycle, so a "
               f"weight serves the pass's {hp.verify_nodes:.0f} tokens in as many cycles and the "
               f"pass takes {per_cycle:,.0f} weights/cycle, tile padding included")
    else:
        per_cycle = lin.rows
        how = (f"the output-stationary LinearUnit consumes one weight per PE row per cycle, "
               f"{lin.rows} weights/cycle; its {lin.cols} token lanes only help up to the "
               f"tree's {hp.verify_nodes:.0f} nodes")
    out.append(
        f"**Ours (VHK158 preset) vs the roofline.** The verify pass is compute-bound: {how} "
        f"({per_cycle * 2 * acc.clock_hz / 1e9:,.0f} GB/s at {acc.board.clock_mhz:g} MHz, "
        f"{100 * per_cycle / w_cycle:.1f} % of what HBM delivers), so "
        f"{tgt.linear_params / 1e9:.2f} G weights take {_ms(ver.linear_cycles / acc.clock_hz)} ms "
        f"instead of {_ms(ver.t_mem)} ms.")
    if lin.contract == "dspfp32":
        dr = hp.phase("draft")
        out.append(
            f"**Weight ports.** A pass of T tokens takes max(T, feed) cycles an input, feed = "
            f"{acc.weight_feed(0)}: an input's {lin.cols} column beats on "
            f"{acc.weight_ports} weight ports (four plane ports each, "
            f"{4 * acc.weight_ports} of the part's {HBM_NMU_PORTS} HBM_NMU ports) of "
            f"{acc.beats(0)} beat(s) a transfer, so a pass of fewer tokens keeps T/feed of the "
            f"slots busy: the {hp.step.draft} draft's passes (flow {hp.step.draft_flow}) take "
            f"{dr.linear_cycles / 1e6:,.2f} M cycles of linear work "
            f"({_ms(dr.linear_cycles / acc.clock_hz)} ms of the step's "
            f"{_ms(hp.step_time)} ms). A job whose tile fills at most 1/q of the slots is "
            f"stored and handed over q column beats a sub-beat, so its feed is "
            f"{', '.join(str(acc.weight_feed(0, q)) for q in (2, 4))} cycles at q = 2, 4.")
    out.append(
        f"**DSP-sized array.** Giving the linear unit SpecMamba's {SEED['linear_dsp_vhk158']:,} "
        f"DSP58 (notes) at 16 token lanes "
        f"yields {hd.accel.linear.rows} rows and {hd.tokens_per_s:,.1f} tok/s, still "
        f"{w_cycle / hd.accel.linear.rows:.1f}× short of the {w_cycle:,.0f} rows HBM could feed "
        f"at {acc.board.clock_mhz:g} MHz.")
    steps_s = claimed / SEED["tokens_per_step"]
    need_rows = steps_s * (tgt.linear_params + 4 * mamba_dims("370M").linear_params) / acc.clock_hz
    out.append(
        f"**What {claimed:g} tok/s would take here.** {steps_s:.1f} steps/s with this dataflow needs "
        f"≥ {need_rows:,.0f} weights/cycle (PE rows) for the linear layers alone, "
        f"{need_rows * 16:,.0f} DSP58 at 16 token lanes against the VHK158's "
        f"{acc.board.dsp58:,}, i.e. {need_rows * 16 / acc.board.dsp58:.1f} FP16 MACs per DSP58 "
        f"per cycle where a DSPFP32 slot (or a DualModePE) does one.")
    ssm = hp.phase("verify").ssm_cycles / acc.clock_hz
    t = hp.accel
    st = ssm_timing(t, tgt)
    w = t.ssm_words_per_cycle
    beats = -(-st.input_words // w)
    period = st.period(words_per_cycle=w)
    bound = ("input-bound" if period > st.tiles else "the sweep, not the input, sets the pace")
    out.append(
        f"**SSM unit.** With {t.ssm_lanes} lanes a 2.7B layer sweeps in {st.tiles:,} cycles per "
        f"node; its {32 * w}-bit input port takes a node's {st.input_words:,} input words in "
        f"{beats:,} beats, so the unit runs at {period:,.0f} cycles per node ({bound}); "
        f"{hp.verify_nodes:.0f} nodes × 64 layers cost {_ms(ssm)} ms of the verify pass, "
        f"in {t.config.ssm.head_groups} head group(s) a layer (`ssm.head_groups`): a "
        f"group's conv1d and SSM pass run beside the linear unit's jobs for the next "
        f"group's rows, which hides {_ms(hp.phase('verify').overlap_cycles / acc.clock_hz)} "
        f"ms of the pass (`layer_overlap`); the rest of a layer's stages wait for the one "
        f"before.")
    vec = hp.phase("verify").vector_cycles
    # The fewest lanes (a power of two) that bring the stages under a tenth of the pass.
    lanes, fast = next(((n, r) for n in (1, 2, 4, 8, 16, 32, 64, 128)
                        for r in [step_model(replace(acc, vector_lanes=n), hp.step)]
                        if r.phase("verify").vector_cycles / acc.clock_hz
                        <= 0.1 * r.phase("verify").t_compute), (None, None))
    one = step_model(replace(acc, vector_lanes=1), hp.step)
    fix = ("" if lanes is None else
           f"; with {lanes} lanes they would fall under a tenth of the pass and the step "
           f"reach {fast.tokens_per_s:,.1f} tok/s (`--vector-lanes {lanes}`, a what-if: the "
           f"lanes must divide linear.cols)")
    out.append(
        f"**Vector stages.** The decoder core's norms, residual and moves stream "
        f"{acc.vector_lanes} elements a cycle as built (`vector.lanes`, hw.stream_engine), "
        f"the conv1d {acc.stage_lanes('conv1d')} (its windows, taps and new windows over "
        f"{acc.config.conv1d_parts(lanes=acc.vector_lanes)} port(s) each: "
        f"`Config.conv1d_parts`) and "
        f"the argmax {acc.stage_lanes('argmax')}, in series with the linear and SSM units (but "
        f"for the head groups' "
        f"conv1d, above): "
        f"{vec / 1e6:,.2f} M cycles, {_ms(vec / acc.clock_hz)} ms of the verify pass's "
        f"{_ms(hp.phase('verify').t_compute)} ms (at 1 element a cycle "
        f"{one.phase('verify').vector_cycles / 1e6:,.2f} M cycles and {one.tokens_per_s:,.1f} "
        f"tok/s){fix}.")
    st_ = acc.state_traffic(tgt)
    need, free = state_ports_needed(acc, hp.step, max_ports=HBM_NMU_PORTS)
    bound = {p.name: p for p in hp.phases}
    out.append(
        f"**SSM state ports.** The state is striped over {st_.ports} {st_.port_bits}-bit read "
        f"and as many write ports ({st_.read_port_bytes_per_s / 1e9:g} / "
        f"{st_.write_port_bytes_per_s / 1e9:g} GB/s each: the memory clock, or the masters' "
        f"slice a fabric cycle where that is slower), {st_.layer_bytes / 1e6:.2f} MB per 2.7B "
        f"layer: the {hp.step.draft} draft's passes wait {_ms(bound['draft'].t_state)} ms on "
        f"their states "
        f"({bound['draft'].bound}-bound) and the commit {_ms(bound['restore'].t_state)} ms "
        f"({bound['restore'].bound}-bound), for {hp.tokens_per_s:,.1f} tok/s; "
        + (f"{need} ports per direction, striped, make every phase compute- or memory-bound "
           f"({free.tokens_per_s:,.1f} tok/s)." if need else
           f"no count up to {HBM_NMU_PORTS} ports removes the bound."))
    sp = _find(rows, "vhk158", "preset", "SPEQ")
    d = sp.phase("draft")
    striped = lin.draft_plane
    fast = (step_model(replace(sp.accel, nibble_beats=4 * sp.accel.beats(1)), sp.step)
            if lin.contract == "dspfp32" and not striped else None)
    if d.bound == "state":
        why = (f"but each draft token reads and writes the target's whole state "
               f"({st_.layer_bytes / 1e6:.2f} MB a layer) through the state ports, so the "
               f"draft passes are state-bound")
    elif striped and acc.weight_feed(1) > 1:
        why = (f"but its one-token passes wait on the weight ports: read from the draft "
               f"plane (`linear.draft_plane`, the nibble plane again, striped over each "
               f"port's four masters), an input's {lin.cols} column beats take "
               f"{acc.weight_feed(1)} cycles, where the slots would take one")
    elif fast is not None and acc.weight_feed(1) > 1:
        why = (f"but its one-token passes wait on the weight ports: an input's "
               f"{lin.cols} column beats take {acc.weight_feed(1)} cycles, one master of "
               f"each port's four reading (the nibble plane), where the slots would take one "
               f"(with the nibble plane over all four, `--nibble-beats "
               f"{4 * sp.accel.beats(1)}`, a what-if: {fast.tokens_per_s:,.1f} tok/s)")
    else:
        why = (f"but on a compute-bound array a quantized pass still costs "
               f"1/{acc.linear.quant_lanes} of a full pass")
    out.append(
        f"**SPEQ self-speculation.** The nibble-plane draft reads 1/4 of the bytes "
        f"({_gb(weight_bytes(tgt, bits=4))} GB per pass, dense), {why}, and a chain needs "
        f"{sp.draft_passes:.1f} sequential draft passes per step (early stopping at α = 0.97), so "
        f"drafting takes {100 * d.time / sp.step_time:.0f} % of the step "
        f"({sp.tokens_per_s:,.1f} tok/s vs {sp.roofline_tokens_per_s:,.0f} roofline).")
    vp = _find(rows, "vck190", "preset", "SpecMamba")
    vd, vv = vp.phase("draft"), vp.phase("verify")
    out.append(
        f"**VCK190.** At 12 GB/s every phase is memory-bound: one 2.7B verify pass reads "
        f"{_gb(vv.weight_bytes)} GB of weight planes ({_gb(vv.dense_weight_bytes)} GB of "
        f"FP16 weights in the model), moves {_gb(vv.bytes - vv.weight_bytes - vv.stage_bytes)} "
        f"GB of SSM state and {_gb(vv.stage_bytes)} GB of the stages' operands and results "
        f"(the decoder core keeps every word in memory: every output tile's job reads its "
        f"inputs again, the conv1d reads a window, taps and bias a channel and node; "
        f"`docs/perf-model.md`, stage traffic) in {_ms(vv.t_mem)} ms, so the step reaches "
        f"{vp.tokens_per_s:,.2f} tok/s, {100 * vp.roofline_ratio:.1f} % of its roofline (draft "
        f"flow {vp.step.draft_flow}); the draft tree moves {_gb(vd.weight_bytes)} GB of planes, "
        f"{_gb(vd.bytes - vd.weight_bytes - vd.stage_bytes)} GB of state and "
        f"{_gb(vd.stage_bytes)} GB of stage bytes a step, and the restore phase takes "
        f"{_ms(vp.phase('restore').time)} ms (the commits read and write the target's and the "
        f"draft's states).")
    out.append(
        f"**The notes' ratios.** 313/89 = {313 / 89:.2f}× and 313/169 = {313 / 169:.2f}× do not "
        f"match the abstract's 2.27× and 2.85×; the notes give no baseline that reconciles them, "
        f"so both are listed as claims and our ratios use the table's 89 and 169.")
    out.append(
        "**GPU and LightMamba.** They are the notes' figures on other hardware (LightMamba: W4A4 on "
        "VCK190, 93 tok/s on U280 in its own paper); we model neither, only set ours beside them.")
    out.append(
        f"**Energy.** Our tokens/J use assumed power (static {acc.power.static_w:g} W on VHK158, "
        f"{acc.power.pj_per_byte:g} pJ/B HBM, {acc.power.pj_per_mac_full:g} pJ per FP16 MAC); "
        f"static power dominates a compute-bound step, which is why our tokens/J "
        f"({hp.tokens_per_j:.2f}) sit far below what the notes' {SEED['tops_per_w']['vhk158']} "
        f"TOPS/W would give on our operation count ({hp.tokens_per_j_seed_efficiency:.1f}).")
    return out


# ---------------------------------------------------------------------------------
# Calibration table
# ---------------------------------------------------------------------------------

def calibration_markdown(records):
    """The calibration table (model vs measured) of :func:`gen.perf.calibrate.calibration_rows`."""
    out = ["| block | config | simulator | stimulus | metric | measured | model | error | "
           "worst single event | every event equal | wall s |",
           "|---|---|---|---|---|---:|---:|---:|---:|---|---:|"]
    for r in records:
        out.append(f"| {r['block']} | {r['config']} | {r['simulator']} | {r['stimulus']} | "
                   f"{r['metric']} | {r['measured']:,} | {r['model']:,} | "
                   f"{100 * r['error']:.2f} % | {100 * r['worst_event']:.2f} % | "
                   f"{'yes' if r['events_equal'] else 'no'} | {r['wall_s']:.1f} |")
    return "\n".join(out)


def model_markdown(rows=None, *, plots=None):
    """The model section of ``docs/perf.md``: side-by-side table, gaps, time split, plots."""
    rows = paper_rows() if rows is None else rows
    out = ["## Modeled tokens/s beside the papers", "",
           "Model outputs of `gen/perf/system.py` (assumptions in `docs/perf-model.md`), "
           "command `specgen perf --board B --target 2.7B --draft D`; figures of the SpecMamba notes ([sources](sources.md#notes)) are claims. "
           "Roofline: every pass streams its weights once at the board's bandwidth (the physical "
           "limit of a decode pass, docs/perf-model.md). Bound: M memory, C compute, S the SSM state's ports "
           "(`ssm.state_ports` read and as many write ports; section Board bandwidth).", "",
           side_by_side_markdown(rows), "", "### Every gap in one sentence", ""]
    out += [f"- {s}" for s in gap_sentences(rows)]
    out += ["", "### Time split of SpecMamba's configuration", ""]
    for board in ("vhk158", "vck190"):
        res = _find(rows, board, "preset", "SpecMamba")
        out += [f"`specgen perf --board {board} --target 2.7B --draft 370M --tree 2,2,1,1 "
                f"--accept 4.91`", "", "```", format_result(res), "```", ""]
    out += ceilings_markdown() + [""] + tree_search_markdown() + [""] + sweep_markdown() + [""]
    if plots:
        out += ["### Plots", "", "Regenerated by `make bench` (`gen/perf/report.py`, "
                "`write_plots`).", ""]
        for key, title in (("roofline", "Roofline with each phase"),
                           ("acceptance", "Tokens/s against the acceptance rate"),
                           ("tree", "Tokens/s against the tree shape")):
            out += [f"![{title}]({plots[key]})", ""]
    return "\n".join(out)


# ---------------------------------------------------------------------------------
# Ceilings, tree search, sweep
# ---------------------------------------------------------------------------------

#: The review's steps (tree of 15 nodes, chain of 6, SPEQ chain of 8) and ours, with the
#: ``specgen perf`` flags that give each.
CEILING_STEPS = (
    ("tree of 15 nodes + 370M, 4.91 tok/step", "--draft 370M --tree 2,2,1,1 --accept 4.91",
     lambda: seed_step()),
    ("chain of 6 + 370M, 4.91 tok/step", "--draft 370M --tree chain5 --accept 4.91",
     lambda: seed_step(tree=(1,) * 5)),
    ("SPEQ chain of 8, α = 0.97", "--draft speq --tree chain8 --alpha 0.97 --early-stop 1",
     lambda: StepConfig(target="2.7B", draft="speq", tree=(1,) * 8, alpha=0.97)),
    ("SPEQ chain of 16, early stop at α = 0.97", "--draft speq", lambda: speq_step()),
)


def ceilings_markdown():
    """The step's ceilings on both boards (:mod:`gen.perf.roofline`), as ``specgen perf``
    prints them."""
    from specgen.gen.perf.roofline import LUT_PER_FP16_MAC, LUT_SHARE_FOR_MACS, roofline
    out = ["### The step's ceilings", "",
           "`specgen perf --board B --target 2.7B FLAGS` (model). Memory: the weights once at "
           "the board's bandwidth; compute: the linear MACs on every DSP58 at the board clock "
           "(one FP16 MAC per slice); limit: per phase the smaller of the two, summed (the "
           "independent review's table, recomputed in `tests/test_perf_roofline.py`); with state: "
           "the limit with each phase's SSM-state traffic on the design's one state read and one "
           "write port (section Board bandwidth); design: "
           "the design's own MAC slots and SSM lanes (the SSM at least its state traffic); LUT "
           "MACs: an assumption of "
           f"{LUT_PER_FP16_MAC} LUT per FP16 MAC on {100 * LUT_SHARE_FOR_MACS:g} % of the part's "
           "LUTs. Ratios are ours over the ceiling.", "",
           "| board | step | FLAGS | ours tok/s | memory | compute (all DSP58) | limit | "
           "with state | ours / limit | design limit | with LUT MACs |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for board in BOARDS:
        acc = accelerator(preset(board))
        for label, flags, make in CEILING_STEPS:
            r = roofline(step_model(acc, make()))
            out.append(f"| {board.upper()} | {label} | `{flags}` | {r.tokens_per_s:,.1f} | "
                       f"{r.memory:,.1f} | {r.compute:,.1f} | {r.limit:,.1f} | "
                       f"{r.state_limit:,.1f} | {100 * r.ratio('limit'):.1f} % | {r.design_limit:,.1f} | "
                       f"{r.lut_limit:,.1f} |")
    return out


def tree_search_markdown(*, alpha=0.8):
    """``specgen perf --tree best`` on VHK158 at a constant top-1 acceptance ``alpha``."""
    from specgen.gen.perf.tree_search import SEED_SHAPE, AcceptanceProfile, search_trees
    acc = accelerator(preset("vhk158"))
    out = ["### Tree shape chosen by the model", "",
           f"`specgen perf --board vhk158 --target 2.7B --draft D --tree best --alpha A` (model): "
           f"every non-increasing branching list within tree.max_nodes "
           f"{acc.config.tree.max_nodes} and a ring of {acc.fifo_depth} slots, priced at the "
           f"tokens/step its per-depth profile gives (`gen/perf/tree_search.py`).", "",
           "| draft | α | best tree | tokens/step | tok/s | (2,2,1,1) tok/s | chain 4 | chain 8 |"
           " chain 16 |",
           "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for draft, a in (("370M", alpha), ("speq", 0.97)):
        prof = AcceptanceProfile((a,))
        ranked = search_trees(acc, target="2.7B", draft=draft, profile=prof)
        by = {c.branching: c for c in ranked}
        best = ranked[0]
        cells = [f"{by[s].tokens_per_s:,.1f}" if s in by else "–"
                 for s in (SEED_SHAPE, (1,) * 4, (1,) * 8, (1,) * 16)]
        out.append(f"| {draft} | {a:g} | {','.join(map(str, best.branching))} | "
                   f"{best.tokens_per_step:.2f} | {best.tokens_per_s:,.1f} | {' | '.join(cells)} |")
        if draft == "370M":
            res = step_model(acc, StepConfig(target="2.7B", draft=draft, tree=best.branching,
                                             tokens_per_step=best.tokens_per_step))
            bounds = {p.name: p.bound for p in res.phases}
    out += ["", f"The model picks short chains on this design: with the 370M draft its verify "
            f"pass is {bounds['verify']}-bound and its draft passes {bounds['draft']}-bound "
            f"(compute: the linear unit's slots; state: the SSM state's ports), so every extra "
            f"node costs time at full price, while the expected tokens of a deeper level grow "
            f"by less."]
    return out


#: The documented sweep: `specgen sweep examples/sweep.toml --out docs/sweep-example.csv`.
SWEEP_EXAMPLE = ("examples/sweep.toml", "docs/sweep-example.csv")


def sweep_markdown(root=None):
    """The example sweep's best designs that fit, from its results file if it was run."""
    root = Path(__file__).resolve().parents[2] if root is None else Path(root)
    spec, results = SWEEP_EXAMPLE
    out = ["### Design-space sweep", "",
           f"`specgen sweep {spec} --out {results}` (Dask LocalCluster, 2 workers; model and "
           f"analytic fit estimate, `gen/sweep/`); Pareto plot "
           f"`{results.replace('.csv', '-pareto.png')}`.", ""]
    path = root / results
    if not path.exists():
        return out + ["Not run here: the results file is missing."]
    import csv
    # Read as text (gen.sweep reads the perf model, so the report does not import it back).
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        if r["status"] == "ok":
            r.update(tokens_per_s=float(r["tokens_per_s"]),
                     limit_tokens_per_s=float(r["limit_tokens_per_s"]), dsp58=int(r["dsp58"]),
                     lut=int(r["lut"]), fits=r["fits"] == "True")
    ok = [r for r in rows if r["status"] == "ok" and r["fits"]]
    out += [f"{len(rows)} points, {sum(r['status'] != 'ok' for r in rows)} failed, "
            f"{len(ok)} fit their board. The fastest that fit, per board:", "",
            "| board | rows × cols | SSM lanes | tree | tok/s | limit tok/s | DSP58 | LUT |",
            "|---|---|---:|---|---:|---:|---:|---:|"]
    for board in sorted({r["board"] for r in ok}):
        for r in sorted((r for r in ok if r["board"] == board),
                        key=lambda r: -r["tokens_per_s"])[:3]:
            out.append(f"| {board} | {r.get('linear.rows')} × {r.get('linear.cols')} | "
                       f"{r.get('ssm.lanes')} | {r.get('tree')} | {r['tokens_per_s']:,.1f} | "
                       f"{r['limit_tokens_per_s']:,.1f} | {r['dsp58']:,} | {r['lut']:,} |")
    return out


# ---------------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------------

#: Shapes of the tree plot: chains, a sample of the SpecMamba notes' tree shapes, full trees.
TREE_SHAPES = [(1,), (1, 1), (1, 1, 1, 1), (1,) * 8, (1,) * 16, (2, 2), (2, 2, 1, 1), (3, 1, 1, 1),
               (2, 2, 2), (1, 2, 2, 2), (3, 2, 2, 1)]


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


#: Marker of each phase of a step in the roofline plot; the step kind is the fill.
PHASE_MARKERS = {"draft": "o", "verify": "s", "restore": "^"}

#: Colour of each accelerator sizing in the roofline plot.
SIZING_COLORS = {"preset": "tab:blue", "dsp": "tab:orange"}

#: Boards of the roofline and acceptance plots, one panel each.
BOARDS = ("vhk158", "vck190")


def roofline_figure():
    """The roofline of both boards with every phase of both steps.

    Each panel has the board's memory slope, each sizing's compute roof
    (``2·rows·cols·f``), the device's roof (every DSP58 at the board clock) and the
    roof with LUT-built MACs beside them (:data:`gen.perf.roofline.LUT_PER_FP16_MAC`,
    an assumption). Each phase is a point, joined by a dotted line to the device
    roofline above it (its ceiling at its intensity). Points carry no text: the
    colour is the sizing, the marker the phase, the fill the step (filled SpecMamba,
    hollow SPEQ), all named in one legend below the panels, so no label covers another.
    A phase the step hides wholly (no time of its own) has no point.
    """
    from matplotlib.lines import Line2D
    from specgen.gen.perf.roofline import LUT_PER_FP16_MAC, lut_macs
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 5.6))
    xs = [10 ** (k / 20) for k in range(-20, 61)]
    for ax, board in zip(axes, BOARDS):
        arrays = []
        cfg = preset(board)
        bw = accelerator(cfg).bandwidth
        clk = cfg.board.clock_mhz * 1e6
        device = 2 * cfg.board.dsp58 * clk
        with_lut = 2 * (cfg.board.dsp58 + lut_macs(cfg.board)) * clk
        ax.plot(xs, [min(device, bw * x) for x in xs], color="black", lw=1.3, ls="--")
        ax.plot(xs, [min(with_lut, bw * x) for x in xs], color="0.45", lw=1.0, ls=":")
        for sizing in SIZINGS:
            color = SIZING_COLORS[sizing]
            acc = accelerator(cfg, sizing=sizing)
            arrays.append(f"{sizing} {acc.linear.rows}×{acc.linear.cols}")
            peak = 2 * acc.linear.rows * acc.linear.cols * acc.clock_hz
            ax.plot(xs, [min(peak, acc.bandwidth * x) for x in xs], color=color, lw=1)
            for filled, step in ((True, seed_step()), (False, speq_step())):
                for p in step_model(acc, step).phases:
                    if not p.time:
                        # Wholly hidden behind another phase (a node-flow commit beside
                        # the next draft pass): no time of its own, so no point.
                        continue
                    perf = 2 * p.macs / p.time
                    ceiling = min(device, bw * p.intensity)
                    ax.plot([p.intensity, p.intensity], [perf, ceiling], color=color, lw=0.7,
                            ls=":", zorder=2)
                    ax.scatter([p.intensity], [perf], marker=PHASE_MARKERS[p.name], s=42,
                               facecolors=color if filled else "white", edgecolors=color,
                               linewidths=1.3, zorder=3)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("operations per off-chip byte")
        ax.set_ylabel("useful operations/s")
        ax.set_title(f"{board.upper()}: {cfg.board.dsp58:,} DSP58 at {cfg.board.clock_mhz:g} MHz, "
                     f"{cfg.board.mem_bw_gbs:g} GB/s\n(arrays {', '.join(arrays)})", fontsize=9)
        ax.grid(True, which="both", lw=0.3)
    handles = [Line2D([], [], color=SIZING_COLORS[s], lw=1.5, label=f"roof and phases, {s} array")
               for s in SIZINGS]
    handles += [Line2D([], [], color="black", lw=1.3, ls="--",
                       label="device roof: every DSP58, one FP16 MAC a cycle"),
                Line2D([], [], color="0.45", lw=1.0, ls=":",
                       label=f"with LUT-built MACs (assumed {LUT_PER_FP16_MAC} LUT each)"),
                Line2D([], [], color="0.3", lw=0.7, ls=":",
                       label="a phase's gap to the device roofline")]
    handles += [Line2D([], [], ls="", marker=m, color="0.3", label=f"{name} phase")
                for name, m in PHASE_MARKERS.items()]
    handles += [Line2D([], [], ls="", marker="o", color="0.3",
                       label="filled: SpecMamba step (2.7B + 370M)"),
                Line2D([], [], ls="", marker="o", markerfacecolor="white", color="0.3",
                       label="hollow: SPEQ step (self-speculation)")]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=7.5, frameon=False,
               bbox_to_anchor=(0.5, 0.035))
    fig.text(0.5, 0.005, "Model. Array roof = 2·rows·cols·f; a phase sits below it when fewer "
             "than cols tokens share each weight (draft passes of 1-4 nodes, verify of the "
             "tree's nodes).", ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    return fig


def acceptance_figure(*, alphas=None):
    """Tokens/s against the per-token acceptance rate, with SpecMamba's claimed
    313 tok/s drawn on the VHK158 panel (the board it was claimed on).

    ``alphas``: the rates modelled (default 0.50, 0.51, ..., 0.99)."""
    plt = _plt()
    alphas = [0.5 + 0.01 * k for k in range(50)] if alphas is None else list(alphas)
    steps = (("2.7B + 370M, tree [2,2,1,1]", "tab:blue",
              lambda a: seed_step(tokens_per_step=None, alpha=a)),
             ("SPEQ chain 16, early stop", "tab:green",
              lambda a: speq_step(alpha=a, continue_prob=a)))
    claim = SEED["specmamba_tok_s"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 5.2))
    for ax, board in zip(axes, BOARDS):
        for sizing, ls in (("preset", "-"), ("dsp", "--")):
            acc = accelerator(preset(board), sizing=sizing)
            for label, color, make in steps:
                res = [step_model(acc, make(a)) for a in alphas]
                ax.plot(alphas, [r.tokens_per_s for r in res], ls, color=color,
                        label=f"ours {sizing}: {label}")
                if sizing == "preset":
                    ax.plot(alphas, [r.roofline_tokens_per_s for r in res], ":", color=color,
                            label=f"roofline: {label}")
        if board == "vhk158":
            ax.axhline(claim, color="tab:red", lw=1.2, ls="-.",
                       label=f"SpecMamba's claim on VHK158 (design notes): {claim:g} tok/s")
        ax.set_yscale("log")
        ax.set_xlabel("per-token acceptance rate α")
        ax.set_ylabel("tokens/s (model)")
        ax.set_title(board.upper())
        ax.grid(True, which="both", lw=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.13, 1, 1))
    return fig


def write_plots(out):
    """Write the three PNGs of :data:`PLOTS` into folder ``out``; returns their names."""
    plt = _plt()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    # 1. roofline, one panel per board
    fig = roofline_figure()
    fig.savefig(out / PLOTS["roofline"], dpi=110)
    plt.close(fig)

    # 2. tokens/s against acceptance
    fig = acceptance_figure()
    fig.savefig(out / PLOTS["acceptance"], dpi=110)
    plt.close(fig)

    # 3. tokens/s against tree shape (VHK158, α = 0.8)
    fig, ax = plt.subplots(figsize=(11, 4.5))
    labels, ours_p, ours_d, roof = [], [], [], []
    for shape in TREE_SHAPES:
        step = StepConfig(target="2.7B", draft="370M", tree=shape, alpha=0.8)
        rp = step_model(accelerator(preset("vhk158"), sizing="preset"), step)
        rd = step_model(accelerator(preset("vhk158"), sizing="dsp"), step)
        t = TreeShape(shape)
        labels.append(f"{list(shape) if len(shape) < 6 else f'chain {len(shape)}'}\n"
                      f"{t.num_nodes} nodes, {expected_tokens(t, alpha=0.8):.2f} tok")
        ours_p.append(rp.tokens_per_s)
        ours_d.append(rd.tokens_per_s)
        roof.append(rp.roofline_tokens_per_s)
    xs = range(len(labels))
    ax.bar([x - 0.27 for x in xs], ours_p, width=0.27, label="ours, preset")
    ax.bar(list(xs), ours_d, width=0.27, label="ours, DSP-sized")
    ax.bar([x + 0.27 for x in xs], roof, width=0.27, label="HBM roofline")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, fontsize=6)
    ax.set_yscale("log")
    ax.set_ylabel("tokens/s (model)")
    ax.set_title("VHK158, 2.7B target + 370M draft, α = 0.8: tokens/s against the tree shape")
    ax.grid(True, axis="y", which="both", lw=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / PLOTS["tree"], dpi=110)
    plt.close(fig)
    return dict(PLOTS)
