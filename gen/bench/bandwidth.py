"""The "Board bandwidth" section of ``docs/perf.md``: memory ports, the measured weight-stream
efficiency, and the SSM state's traffic per layer against the SSM unit's compute.

``make bench`` (:func:`gen.bench.suite.write_bench`) writes it from the records of the
``memory`` benchmark it has just run; ``specgen bench --only memory --section bandwidth``
runs that benchmark alone and rewrites only this section (:func:`replace_section`).

Every figure is read from the presets (``golden.config``: memory clock, port width,
bandwidth), from ``hw.ssm_engine.SSMEngine`` (the state port's width), from the
performance model (:class:`gen.perf.system.StateTraffic`, the SSM unit's cycles) or
from the benchmark's records; none is typed here.
"""

import math

from specgen.golden.config import HBM_NMU_PORTS, preset

from specgen.gen.perf.claims import SEED
from specgen.gen.perf.system import (StepConfig, accelerator, head_groups, mamba_dims,
                                     perf_board_names, seed_step, speq_step,
                                     ssm_layer_seconds, state_ports_needed, step_model)
from specgen.gen.perf.traffic import PARTS, pass_traffic

__all__ = ["HEADING", "COMMAND", "TARGET", "MAX_STATE_PORTS", "efficiencies", "port_rows",
           "layer_rows", "step_rows", "stage_rows", "split_rows", "bandwidth_section",
           "replace_section"]

HEADING = "## Board bandwidth"
#: The command that writes this section alone.
COMMAND = "specgen bench --only memory --section bandwidth"
#: The target whose layers the state rows price (SpecMamba's and SPEQ's).
TARGET = "2.7B"
#: Most state ports per direction a study tries: the HBM_NMUs of the part.
MAX_STATE_PORTS = HBM_NMU_PORTS
#: The section that follows this one when it is first inserted.
_NEXT = "## Calibration of the block cycle models"


def efficiencies(records):
    """``{(board, pass): beat efficiency}`` of the weight-stream records of the ``memory``
    benchmark (:func:`gen.bench.memory.weight_stream_benchmarks`)."""
    return {(r["board"], r["pass"]): r["value"] for r in records if "pass" in r and "board" in r}


def port_rows(records):
    """Per board: the memory ports, their peak, the measured efficiency and what it implies."""
    eff = efficiencies(records)
    rows = []
    for name in perf_board_names():
        b = preset(name).board
        measured = [eff[(name, p)] for p in ("verify", "draft") if (name, p) in eff]
        peak = min(b.mem_bw_gbs, b.memory_ports * b.memory_port_gbs)
        rows.append({"board": name, "memory": b.memory, "ports": b.memory_ports,
                     "port_bits": b.memory_port_bits, "clock_mhz": b.memory_clock_mhz,
                     "port_gbs": b.memory_port_gbs, "ports_gbs": b.memory_ports * b.memory_port_gbs,
                     "board_gbs": b.mem_bw_gbs,
                     "eff_verify": eff.get((name, "verify")), "eff_draft": eff.get((name, "draft")),
                     "sustained_gbs": peak * min(measured) if measured else None})
    return rows


def _passes():
    """``(label, dims, nodes, reads, writes)`` per layer: SpecMamba's tree pass and commit,
    a SPEQ draft node (the target's own state) and a 370M draft node."""
    tree = seed_step().tree
    path = math.ceil(SEED["tokens_per_step"])
    tgt = mamba_dims(TARGET)
    return [
        (f"tree pass, {tree.num_nodes} nodes {list(tree.branching)}", tgt, tree.num_nodes, 1, 0),
        (f"commit, path of {path}", tgt, path, 1, 1),
        ("draft node, SPEQ (the target's state)", tgt, 1, 1, 1),
        ("draft node, 370M draft", mamba_dims("370M"), 1, 1, 1),
    ]


def layer_rows():
    """Per board and pass: one layer's state bytes, their time on the design's state ports
    (``ssm.state_ports`` each way), the SSM unit's compute for the layer, and the fewest
    ports that make it compute-bound."""
    rows = []
    for name in perf_board_names():
        acc = accelerator(preset(name))
        for label, dims, nodes, reads, writes in _passes():
            st = acc.state_traffic(dims)
            t_state = st.seconds(reads=reads, writes=writes)
            t_ssm = ssm_layer_seconds(acc, dims, tokens=nodes)
            rows.append({"board": name, "pass": label, "nodes": nodes,
                         "read_bytes": reads * st.layer_bytes, "write_bytes": writes * st.layer_bytes,
                         "port_bits": st.port_bits, "ports": st.ports,
                         "read_gbs": st.read_port_bytes_per_s / 1e9,
                         "write_gbs": st.write_port_bytes_per_s / 1e9,
                         "t_state": t_state, "t_ssm": t_ssm,
                         "bound": "state" if t_state > t_ssm else "compute",
                         "ports_needed": st.ports_needed(t_ssm, reads=reads, writes=writes,
                                                         max_ports=MAX_STATE_PORTS)})
    return rows


#: The steps of :func:`step_rows`: label and step.
STEPS = (("SpecMamba: 2.7B + 370M, tree (2,2,1,1), 4.91 tok/step", seed_step),
         ("SPEQ: 2.7B nibble-plane draft, chain of 16, early stop", speq_step),
         ("autoregressive 2.7B", lambda: StepConfig(target=TARGET, draft="none", tree=())))


def step_rows():
    """Per board and step: tok/s with the state on the design's ports, on one read and one
    write port, and the fewest ports per direction with which no phase waits on its
    state."""
    rows = []
    for name in perf_board_names():
        for label, make in STEPS:
            acc = accelerator(preset(name))
            res = step_model(acc, make())
            one = step_model(accelerator(preset(name), state_ports=1), make())
            need, free = state_ports_needed(acc, make(), max_ports=MAX_STATE_PORTS)
            rows.append({"board": name, "step": label, "ports": acc.state_ports,
                         "tok_s": res.tokens_per_s, "bounds": [p.bound for p in res.phases],
                         "tok_s_one_port": one.tokens_per_s, "ports_needed": need,
                         "tok_s_needed": free.tokens_per_s if free else None})
    return rows


def stage_rows():
    """Per board: the bytes of SpecMamba's 2.7B tree pass by kind (the weight planes, the
    SSM state, each part of the stages' traffic: :data:`gen.perf.traffic.PARTS`), and
    their time at the board's bandwidth."""
    tree = seed_step().tree
    dims = mamba_dims(TARGET)
    rows = []
    for name in perf_board_names():
        acc = accelerator(preset(name))
        t = pass_traffic(acc.config, dims, tokens=tree.num_nodes,
                         groups=head_groups(acc, dims), accept=True,
                         state_elem_bytes=acc.state_bytes)
        kinds = [("weight planes", sum(t.weights)), ("SSM state", sum(t.state))]
        kinds += [(k, sum(v)) for k, v in t.parts]
        for kind, b in kinds:
            rows.append({"board": name, "kind": kind, "bytes": b,
                         "seconds": b / acc.bandwidth})
    return rows


def split_rows():
    """Per board and step (:data:`STEPS`): the step's memory time split into the weight
    planes, the SSM state and the stages' bytes, each at the board's bandwidth."""
    rows = []
    for name in perf_board_names():
        acc = accelerator(preset(name))
        for label, make in STEPS:
            res = step_model(acc, make())
            w = sum(p.weight_bytes for p in res.phases)
            sg = sum(p.stage_bytes for p in res.phases)
            st = sum(p.bytes for p in res.phases) - w - sg
            rows.append({"board": name, "step": label, "step_s": res.step_time,
                         "weights_s": w / acc.bandwidth, "state_s": st / acc.bandwidth,
                         "stage_s": sg / acc.bandwidth, "tok_s": res.tokens_per_s})
    return rows


def _us(s):
    return f"{s * 1e6:,.1f} µs"


def _mb(b):
    return f"{b / 1e6:.2f} MB" if b else "—"


def bandwidth_section(records):
    """The markdown of the section, from the ``memory`` benchmark's ``records``."""
    out = [HEADING, "",
           f"Written by `make bench` from the `memory` benchmark's records (this section alone: "
           f"`{COMMAND}`, which runs `specgen bench --only memory --json` and the model); "
           "`gen/bench/bandwidth.py`. Ports, widths and clocks are the presets' "
           "(`golden.config`), the state port's width `hw.ssm_engine.SSMEngine`'s; efficiencies "
           "are measured on Verilator (`sim/weight_stream.py`); the rest is the performance "
           "model (`gen/perf/system.py`, `StateTraffic`).", "",
           "### Memory ports and the weight stream", "",
           "| board | memory | ports × width | memory clock | GB/s per port | ports' peak | "
           "board GB/s | weight-stream beat efficiency (verify / draft) | sustained GB/s |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|"]

    def f(x):
        return "not measured" if x is None else f"{x:g}"

    for r in port_rows(records):
        sustained = "—" if r["sustained_gbs"] is None else f"{r['sustained_gbs']:,.1f}"
        out.append(f"| {r['board']} | {r['memory']} | {r['ports']} × {r['port_bits']} bit | "
                   f"{r['clock_mhz']:g} MHz | {r['port_gbs']:g} | {r['ports_gbs']:,.1f} | "
                   f"{r['board_gbs']:g} | {f(r['eff_verify'])} / {f(r['eff_draft'])} | "
                   f"{sustained} |")
    out += ["",
            "Ports: those that carry the board's bandwidth (`BoardConfig.memory_ports`). "
            "Sustained: the smaller of the board's and the ports' peak, times the lower of the "
            "two measured efficiencies (the model's `mem_efficiency` stays 1.0 while they "
            "are 1.0).", "",
            f"### SSM state traffic per layer (Mamba2-{TARGET} layers unless named)", "",
            "The design's state ports (`ssm.state_ports` read and as many write ports, the "
            "state striped over them: 16 on vhk158, 1 on vck190), each as fast as its memory "
            "clock allows and its master's fabric side takes (a read master hands on one "
            "slice of the unit's word a fabric cycle and a write master takes one, packing "
            "and splitting the port's beats: `hw.axi_master`); per layer a tree pass "
            "reads the committed state once (the tile ring keeps the nodes' states on chip), a "
            "commit reads it and writes one new state, a draft node reads its parent's and "
            "writes its own. Reads and writes run on their own ports and share the board's "
            "bandwidth. Compute: the SSM unit's cycles for the layer at the fabric clock "
            "(`gen.perf.blocks.ssm_stream`), which is what waits for the state. Ports needed: "
            f"the fewest read (and as many write) ports, striped, that make the layer "
            f"compute-bound (at most {MAX_STATE_PORTS}, the part's HBM_NMUs; \"none\": the "
            "board's shared bandwidth binds whatever the port count).", "",
            "| board | pass | state read | state written | state ports (GB/s each, read / "
            "write) | state time | SSM compute | bound | ports needed |",
            "|---|---|---:|---:|---|---:|---:|---|---:|"]
    for r in layer_rows():
        need = "none" if r["ports_needed"] is None else str(r["ports_needed"])
        out.append(f"| {r['board']} | {r['pass']} | {_mb(r['read_bytes'])} | "
                   f"{_mb(r['write_bytes'])} | {r['ports']} × {r['port_bits']} bit, "
                   f"{r['read_gbs']:g} / {r['write_gbs']:g} | "
                   f"{_us(r['t_state'])} | {_us(r['t_ssm'])} | {r['bound']} | {need} |")
    out += ["", "### Tokens/s with the state traffic counted", "",
            "`specgen perf` (model) with the design's state ports, with one read and one write "
            "port (`--state-ports 1`, the engine before striping) and with the fewest state "
            "ports per direction for which no phase of the step is bound by its state "
            "(bounds: of each phase on the design's ports, draft / verify / restore; "
            "m = shared memory, s = state ports, c = compute).", "",
            "| board | step | state ports | tok/s | bounds | tok/s, 1 + 1 state ports | "
            "state ports needed | tok/s there |",
            "|---|---|---:|---:|---|---:|---:|---:|"]
    for r in step_rows():
        need = "none" if r["ports_needed"] is None else str(r["ports_needed"])
        there = "—" if r["tok_s_needed"] is None else f"{r['tok_s_needed']:,.1f}"
        bounds = " / ".join(b[0] for b in r["bounds"])
        out.append(f"| {r['board']} | {r['step']} | {r['ports']} | {r['tok_s']:,.1f} | "
                   f"{bounds} | {r['tok_s_one_port']:,.1f} | {need} | {there} |")
    tree = seed_step().tree
    out += ["", "### Stage traffic: every word of the decoder core in memory", "",
            "The decoder core's stages read their operands from memory and write their "
            "results there (`gen/perf/traffic.py`; the decoder-core benches hold its counts "
            "equal to the bytes the RTL's AXI ports move on Verilator). Bytes of one "
            f"Mamba2-{TARGET} tree pass of {tree.num_nodes} nodes {list(tree.branching)} by "
            "kind, and their time at the board's bandwidth:", "",
            "| board | kind | what moves it | MB | ms at the board's GB/s |",
            "|---|---|---|---:|---:|"]
    what = {"weight planes": "the linear engine's weight streams (both planes)",
            "SSM state": "the committed state, read once", **PARTS}
    for r in stage_rows():
        out.append(f"| {r['board']} | {r['kind']} | {what[r['kind']]} | "
                   f"{r['bytes'] / 1e6:,.1f} | {r['seconds'] * 1e3:,.2f} |")
    out += ["", "A step's memory time split the same way (ms at the board's bandwidth; a "
            "phase takes the longer of its memory and its compute time, so on a "
            "compute-bound board the split does not add up to the step):", "",
            "| board | step | weight planes | SSM state | stages | step ms | tok/s |",
            "|---|---|---:|---:|---:|---:|---:|"]
    for r in split_rows():
        out.append(f"| {r['board']} | {r['step']} | {r['weights_s'] * 1e3:,.1f} | "
                   f"{r['state_s'] * 1e3:,.1f} | {r['stage_s'] * 1e3:,.1f} | "
                   f"{r['step_s'] * 1e3:,.1f} | {r['tok_s']:,.2f} |")
    return "\n".join(out) + "\n"


def replace_section(text, section, *, heading=HEADING, before=_NEXT):
    """``text`` (a ``docs/perf.md``) with its section under ``heading`` (a level-2 heading;
    default Board bandwidth) replaced by ``section``, or ``section`` inserted before the
    heading ``before`` (default the calibration section) if there is none yet."""
    start = text.find(heading + "\n")
    if start < 0:
        at = text.find(before)
        if at < 0:
            raise ValueError(f"replace_section: no {heading!r} nor {before!r} in the report")
        return text[:at] + section + "\n" + text[at:]
    end = text.find("\n## ", start + len(heading))
    end = len(text) if end < 0 else end + 1
    return text[:start] + section + "\n" + text[end:]
