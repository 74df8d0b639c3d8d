"""Calibration of the block cycle models of :mod:`gen.perf.blocks` against the RTL.

Each block is driven without idle cycles or back-pressure, the cycle of every
observable event is recorded, and the same stimulus is fed to the model:

========================  ==========================================  ==========================
block                     measured events                             model
========================  ==========================================  ==========================
``LinearUnit``            first ``y`` of every job, last ``y``        :func:`linear_schedule`
``SSMUnit``               last ``y`` of every token, first ``y``      :func:`ssm_stream`
``TreeVerifier``          last ``match``, first and last ``path``     :func:`tree_verifier_cycles`
``RingFIFO``              last read                                   :func:`ring_fifo_cycles`
========================  ==========================================  ==========================

Two simulators run the same RTL:

``amaranth``
    Amaranth's Python simulator (``amaranth.sim``), cycle accurate on the
    elaborated design. Used for every configuration: it needs no build.
``verilator``
    cocotb 2.1 on Verilator (:func:`sim.runner.run_bench` with the probes of
    :mod:`sim.perf_probes`), for the configurations whose builds are affordable.

Every record names its simulator; :func:`calibration_rows` returns the table of
``docs/perf.md``.
"""

import json
import random
import tempfile
import time
from pathlib import Path

from specgen.gen.perf.blocks import (LinearJob, SSMTiming, linear_schedule, matmul_jobs, ring_fifo_cycles,
                             ssm_stream, tree_verifier_cycles)

__all__ = [
    "TOLERANCE", "LINEAR_CONFIGS", "SSM_CONFIGS", "TREE_CONFIGS", "RING_CONFIGS",
    "linear_jobs", "measure_linear", "measure_ssm", "measure_tree", "measure_ring",
    "tree_jobs", "calibrate", "calibration_rows", "FAST", "SLOW",
]

#: Largest allowed relative deviation of the model from the measurement.
TOLERANCE = 0.05

#: LinearUnit (rows, cols, quant_lanes, max_k, fmt_out).
LINEAR_CONFIGS = [
    (1, 1, 1, 4, "fp32"),
    (1, 2, 1, 5, "fp32"),
    (3, 1, 2, 6, "fp16"),
    (2, 3, 3, 8, "fp32"),
    (2, 4, 3, 16, "fp32"),      # the sim preset's array
    (4, 4, 3, 64, "fp32"),      # LinearConfig's defaults
]

#: SSMUnit (geometry, mul_stages, add_stages, tokens); coarse 1/8 tables (timing does not
#: depend on the table step, only on its degree).
SSM_CONFIGS = [
    ({"nheads": 1, "headdim": 2, "d_state": 4, "lanes": 1}, 1, 1, 4),    # input-bound
    ({"nheads": 2, "headdim": 2, "d_state": 8, "lanes": 4}, 1, 1, 5),    # input-bound, tree of 4
    ({"nheads": 2, "headdim": 4, "d_state": 8, "lanes": 1}, 1, 1, 5),    # sweep-bound
    ({"nheads": 2, "headdim": 8, "d_state": 16, "lanes": 2}, 1, 1, 5),
    ({"nheads": 2, "headdim": 16, "d_state": 8, "lanes": 2}, 2, 2, 5),
    ({"nheads": 3, "headdim": 3, "d_state": 6, "lanes": 2}, 0, 2, 5),    # N/lanes = 3
]

#: TreeVerifier (max_nodes, fifo_depth, max_passes).
TREE_CONFIGS = [(12, 3, 4), (16, 4, 4), (24, 8, 3), (40, 12, 4), (64, 16, 4)]

#: RingFIFO (width, depth).
RING_CONFIGS = [(4, 16), (8, 1), (8, 3), (16, 64), (32, 100)]

#: Default-suite subsets (cheap) and the rest (``slow``), as indices into the lists above.
FAST = {"linear": [0, 1, 2], "ssm": [0], "tree": [0, 1, 2, 3, 4], "ring": [0, 1, 2, 3, 4]}
SLOW = {"linear": [3, 4, 5], "ssm": [1, 2, 3, 4, 5], "tree": [], "ring": []}

def _fmt(name):
    from specgen.golden.fp import FORMATS
    return FORMATS[name]


# ---------------------------------------------------------------------------------
# LinearUnit
# ---------------------------------------------------------------------------------

def linear_jobs(rows, cols, lanes, max_k, *, seed=0, count=12):
    """A deterministic job mix: random jobs (both modes, 1 … max_k beats, short jobs that
    stall on the result buffer) followed by the runs of a small matrix product."""
    from specgen.golden.config import LinearConfig

    rng = random.Random(seed)
    jobs = [LinearJob(mode=rng.randint(0, 1), steps=rng.randint(1, max_k),
                      n_rows=rng.randint(1, rows), n_tokens=rng.randint(1, cols))
            for _ in range(count)]
    jobs += [LinearJob(mode=1, steps=1, n_rows=rows, n_tokens=cols)] * 3
    lin = LinearConfig(rows=rows, cols=cols, quant_lanes=lanes, max_k=max_k)
    for count_, job in matmul_jobs(linear=lin, out_features=2 * rows + 1,
                                   in_features=max_k * lanes, tokens=cols + 1, mode=1):
        jobs += [job] * count_
    return jobs


def measure_linear(rows, cols, lanes, max_k, fmt_out, jobs):
    """Run ``jobs`` back to back on ``LinearUnit`` in amaranth.sim.

    Returns
    -------
    dict
        ``first_y`` (per job, the cycle of its first ``y`` transfer), ``end``
        (last ``y``), cycle 0 being the cycle in which the first command is taken;
        ``busy``, ``stall`` (the unit's counters); ``sim_seconds``.
    """
    from specgen.hw.linear_unit import LinearUnit
    from specgen.sim.perf_probes import LinearProbe, run_amaranth

    dut = LinearUnit(rows=rows, cols=cols, quant_lanes=lanes, max_k=max_k, fmt_out=_fmt(fmt_out))
    probe = LinearProbe(dut, [(j.mode, j.steps, j.n_rows, j.n_tokens) for j in jobs])
    t = time.perf_counter()
    run_amaranth(dut, [probe])
    return {**probe.result, "sim_seconds": time.perf_counter() - t}


def _linear_record(index, simulator="amaranth"):
    rows, cols, lanes, max_k, fmt = LINEAR_CONFIGS[index]
    jobs = linear_jobs(rows, cols, lanes, max_k, seed=index)
    if simulator == "amaranth":
        meas = measure_linear(rows, cols, lanes, max_k, fmt, jobs)
    else:
        meas = _verilator_linear(rows, cols, lanes, max_k, fmt, jobs)
    from specgen.hw.hierarchy import template
    from specgen.hw.linear_unit import LinearUnit
    # The model reads the PE latency of the very unit it is compared with.
    unit = template(LinearUnit(rows=rows, cols=cols, quant_lanes=lanes, max_k=max_k,
                               fmt_out=_fmt(fmt)))
    model = linear_schedule(jobs, pe_latency=unit.pe_latency)
    model_first = [c + 1 for c in model.capture]
    worst = max(abs(a - b) / max(b, 1) for a, b in zip(model_first, meas["first_y"]))
    return {
        "block": "LinearUnit", "config": f"r{rows} c{cols} q{lanes} k{max_k} {fmt}",
        "simulator": simulator, "stimulus": f"{len(jobs)} jobs, {model.beats} beats, both modes",
        "measured": meas["end"] + 1, "model": model.cycles, "metric": "cycles to last y",
        "worst_event": worst, "events_equal": model_first == meas["first_y"],
        "extra": {"stall_model": model.stall_cycles, "busy": meas.get("busy"),
                  "stall": meas.get("stall")},
    }


# ---------------------------------------------------------------------------------
# SSMUnit
# ---------------------------------------------------------------------------------

def _ssm_config(geom):
    from specgen.golden.mamba2 import SSMConfig
    from specgen.golden.nonlinear import COARSE_LUTS
    return SSMConfig(**geom, **COARSE_LUTS)


def measure_ssm(geom, mul_stages, add_stages, *, tokens, seed=0, simulator="amaranth"):
    """Stream ``tokens`` tokens through ``SSMUnit`` with :class:`sim.perf_probes.SSMProbe`.

    No back-pressure, the producer writes each token as soon as a bank is free; every
    ``y`` is also checked bit for bit against :func:`golden.mamba2.ssm_step_hw_bits`, so
    the timing is that of a correct run.

    Returns
    -------
    dict
        ``last_y`` per token and ``first_y`` (cycles from the producer's first wait).
    """
    import numpy as np

    from specgen.hw.ssm_unit import SSMUnit
    from specgen.sim.perf_probes import SSMProbe, run_amaranth, ssm_probe_inputs

    cfg = _ssm_config(geom)
    dut = SSMUnit(cfg=cfg, mul_stages=mul_stages, add_stages=add_stages)
    prm, state0, toks, want_y = ssm_probe_inputs(cfg, tokens=tokens, seed=seed)
    t = time.perf_counter()
    if simulator == "amaranth":
        probe = SSMProbe(cfg, prm, state0, toks)
        run_amaranth(dut, [probe], max_cycles=1_000_000)
        out = probe.result
    else:
        out = _verilator_ssm(dut, geom, mul_stages, add_stages, tokens, seed)
    dt = time.perf_counter() - t
    rows = cfg.nheads * cfg.headdim
    want = np.concatenate([y.ravel() for y in want_y])
    got = np.array(out["y"], dtype=np.uint32)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (f"SSMUnit {dut.module_name} on {simulator}: y {bad[0]} (token "
                           f"{bad[0] // rows}) = {int(got[bad[0]]):#010x}, ssm_step_hw_bits "
                           f"says {int(want[bad[0]]):#010x}")
    y_cycles = out["y_cycles"]
    return {"last_y": [y_cycles[(k + 1) * rows - 1] for k in range(tokens)],
            "first_y": y_cycles[0], "sim_seconds": dt, "name": dut.module_name}


def _ssm_record(index, simulator="amaranth"):
    geom, lm, la, tokens = SSM_CONFIGS[index]
    meas = measure_ssm(geom, lm, la, tokens=tokens, simulator=simulator)
    timing = SSMTiming(cfg=_ssm_config(geom), mul_stages=lm, add_stages=la)
    model = ssm_stream(timing, tokens=tokens)
    events_m = [model.first_y] + list(model.last_y)
    events_r = [meas["first_y"]] + list(meas["last_y"])
    worst = max(abs(a - b) / max(b, 1) for a, b in zip(events_m, events_r))
    gaps = [b - a for a, b in zip(meas["last_y"], meas["last_y"][1:])]
    return {
        "block": "SSMUnit", "config": meas["name"], "simulator": simulator,
        "stimulus": f"{tokens} tokens, producer ahead, no back-pressure",
        "measured": meas["last_y"][-1] + 1, "model": model.end + 1, "metric": "cycles to last y",
        "worst_event": worst, "events_equal": events_m == events_r,
        "extra": {"period_model": timing.period(), "tiles": timing.tiles,
                  "measured_mean_gap": sum(gaps) / len(gaps)},
    }


# ---------------------------------------------------------------------------------
# TreeVerifier
# ---------------------------------------------------------------------------------

def tree_jobs(max_nodes, fifo_depth, max_passes, *, seed=0, count=6):
    """Trees that fit the ring: the SpecMamba notes' tree shapes and random irregular trees, with match bits."""
    from specgen.golden.tree import overflow_node, seed_shapes

    rng = random.Random(seed)
    out = []
    shapes = [[int(p) for p in s.parents] for s in seed_shapes() if s.num_nodes <= max_nodes]
    while len(out) < count:
        if shapes and rng.random() < 0.4:
            parents = shapes[rng.randrange(len(shapes))]
        else:
            parents = [-1]
            i = 0
            while i < len(parents) and len(parents) < max_nodes:
                for _ in range(rng.randint(1 if i == 0 else 0, 3)):
                    if len(parents) < max_nodes:
                        parents.append(i)
                i += 1
        if len(parents) < 2 or overflow_node(parents, fifo_depth=fifo_depth) is not None:
            continue
        match = [1] + [int(rng.random() < 0.8) for _ in parents[1:]]
        out.append((parents, match, rng.randint(1, max_passes)))
    return out


def measure_tree(max_nodes, fifo_depth, max_passes, trees):
    """Run ``trees`` one after another through ``TreeVerifier`` in amaranth.sim.

    Returns
    -------
    list of dict
        Per tree, cycles from its first ``tree`` beat: ``last_match``,
        ``first_path``, ``last_path``; and ``schedule_beats``.
    """
    from specgen.hw.tree_verifier import TreeVerifier
    from specgen.sim.perf_probes import TreeProbe, run_amaranth

    dut = TreeVerifier(max_nodes=max_nodes, fifo_depth=fifo_depth, max_passes=max_passes)
    probe = TreeProbe(dut, trees)
    run_amaranth(dut, [probe])
    return probe.result["trees"]


def _tree_compare(trees, fifo_depth, meas):
    worst, equal, total_m, total_r = 0.0, True, 0, 0
    for (parents, match, passes), rec in zip(trees, meas):
        mod = tree_verifier_cycles(parents, match, fifo_depth=fifo_depth, passes=passes)
        for key in ("last_match", "first_path", "last_path", "schedule_beats"):
            worst = max(worst, abs(mod[key] - rec[key]) / max(rec[key], 1))
            equal &= mod[key] == rec[key]
        total_m += mod["cycles"]
        total_r += rec["last_path"] + 1
    return worst, equal, total_m, total_r


def _tree_record(index, simulator="amaranth"):
    max_nodes, fifo_depth, max_passes = TREE_CONFIGS[index]
    trees = tree_jobs(max_nodes, fifo_depth, max_passes, seed=index)
    if simulator == "amaranth":
        meas = measure_tree(max_nodes, fifo_depth, max_passes, trees)
    else:
        meas = _verilator_tree(max_nodes, fifo_depth, max_passes, trees)
    worst, equal, total_m, total_r = _tree_compare(trees, fifo_depth, meas)
    return {
        "block": "TreeVerifier", "config": f"n{max_nodes} d{fifo_depth} p{max_passes}",
        "simulator": simulator, "stimulus": f"{len(trees)} trees, 1-{max_passes} passes",
        "measured": total_r, "model": total_m, "metric": "cycles per tree, summed",
        "worst_event": worst, "events_equal": equal, "extra": {},
    }


# ---------------------------------------------------------------------------------
# RingFIFO
# ---------------------------------------------------------------------------------

def measure_ring(width, depth, cases):
    """Bursts ``cases`` (``(mode, items)``, each after a reset) through ``RingFIFO`` in
    amaranth.sim; per case, cycles from the first write to the last read."""
    from specgen.hw.ring_fifo import RingFIFO
    from specgen.sim.perf_probes import RingProbe, run_amaranth

    dut = RingFIFO(width=width, depth=depth)
    probe = RingProbe(dut, cases)
    run_amaranth(dut, [probe])
    return probe.result["cycles"]


def _ring_record(index, simulator="amaranth"):
    width, depth = RING_CONFIGS[index]
    cases = [("stream", 3 * depth + 5), ("fill", depth)]
    if simulator == "amaranth":
        meas = measure_ring(width, depth, cases)
    else:
        meas = _verilator_ring(width, depth, cases)
    mod = [ring_fifo_cycles(items=items, depth=depth, mode=mode) for mode, items in cases]
    return {
        "block": "RingFIFO", "config": f"w{width} d{depth}", "simulator": simulator,
        "stimulus": f"stream {cases[0][1]} items; fill then drain {depth}",
        "measured": sum(meas), "model": sum(mod), "metric": "cycles, both bursts",
        "worst_event": max(abs(a - b) / b for a, b in zip(mod, meas)), "events_equal": mod == meas,
        "extra": {},
    }


# ---------------------------------------------------------------------------------
# cocotb on Verilator
# ---------------------------------------------------------------------------------

def _run_probe(component, *, name, testcase, params):
    from specgen.sim.runner import run_bench

    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        run_bench(component, name=name, module="specgen.sim.perf_probes", testcase=testcase, seed=1,
                  params={**params, "result_file": str(result)}, test_dir=Path(tmp) / "run")
        return json.loads(result.read_text())


def _verilator_linear(rows, cols, lanes, max_k, fmt_out, jobs):
    from specgen.hw.linear_unit import LinearUnit
    from specgen.sim.runner import emit_verilog

    name = f"linear_unit_r{rows}_c{cols}_q{lanes}_k{max_k}_{fmt_out}"
    dut = LinearUnit(rows=rows, cols=cols, quant_lanes=lanes, max_k=max_k, fmt_out=_fmt(fmt_out))
    return _run_probe(emit_verilog(dut, name=name), name=name, testcase="linear_timing",
                      params={"jobs": [[j.mode, j.steps, j.n_rows, j.n_tokens] for j in jobs],
                              "rows": rows, "cols": cols, "lanes": lanes, "max_k": max_k,
                              "fmt_out": fmt_out})


def _verilator_ssm(dut, geom, mul_stages, add_stages, tokens, seed):
    from specgen.golden.nonlinear import COARSE_LUTS
    from specgen.sim.ssm_unit import lut_params

    # The shipped (hierarchical) Verilog, as tests/test_ssm_unit.py builds it.
    return _run_probe(dut, name=dut.module_name, testcase="ssm_timing",
                      params={"cfg": geom, "luts": lut_params(COARSE_LUTS),
                              "mul_stages": mul_stages, "add_stages": add_stages,
                              "tokens": tokens, "inputs_seed": seed})


def _verilator_tree(max_nodes, fifo_depth, max_passes, trees):
    from specgen.hw.tree_verifier import TreeVerifier
    from specgen.sim.runner import emit_verilog

    dut = TreeVerifier(max_nodes=max_nodes, fifo_depth=fifo_depth, max_passes=max_passes)
    name = dut.module_name
    return _run_probe(emit_verilog(dut, name=name), name=name, testcase="tree_timing",
                      params={"trees": trees, "max_nodes": max_nodes, "fifo_depth": fifo_depth,
                              "max_passes": max_passes})["trees"]


def _verilator_ring(width, depth, cases):
    from specgen.hw.ring_fifo import RingFIFO

    dut = RingFIFO(width=width, depth=depth)
    return _run_probe(dut, name=dut.module_name, testcase="ring_timing",
                      params={"width": width, "depth": depth,
                              "cases": [list(c) for c in cases]})["cycles"]


# ---------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------

_RECORDS = {"linear": _linear_record, "ssm": _ssm_record, "tree": _tree_record,
            "ring": _ring_record}
_N = {"linear": len(LINEAR_CONFIGS), "ssm": len(SSM_CONFIGS), "tree": len(TREE_CONFIGS),
      "ring": len(RING_CONFIGS)}


def calibrate(block, index, *, simulator="amaranth"):
    """One calibration record: model against measurement for config ``index`` of ``block``.

    Parameters
    ----------
    block : str
        ``"linear"``, ``"ssm"``, ``"tree"`` or ``"ring"``.
    index : int
        Index into the block's config list.
    simulator : str
        ``"amaranth"`` or ``"verilator"``.

    Returns
    -------
    dict
        ``block``, ``config``, ``simulator``, ``stimulus``, ``metric``, ``measured``,
        ``model``, ``error`` (relative), ``worst_event`` (largest relative
        deviation of any single event), ``events_equal``, ``wall_s``.
    """
    if block not in _RECORDS:
        raise ValueError(f"calibrate.block must be one of {', '.join(map(repr, _RECORDS))}, "
                         f"not {block!r}")
    if not isinstance(index, int) or not 0 <= index < _N[block]:
        raise ValueError(f"calibrate.index must be an integer in [0, {_N[block] - 1}], not {index!r}")
    if simulator not in ("amaranth", "verilator"):
        raise ValueError(f"calibrate.simulator must be one of 'amaranth', 'verilator', not "
                         f"{simulator!r}")
    t = time.perf_counter()
    rec = _RECORDS[block](index, simulator)
    rec["wall_s"] = time.perf_counter() - t
    rec["error"] = abs(rec["model"] - rec["measured"]) / rec["measured"]
    return rec


#: Configurations measured on Verilator as well (cheap builds; the LinearUnit ones
#: reuse the builds of ``tests/test_linear_unit.py``).
VERILATOR = {"ring": [0, 1, 2, 3, 4], "tree": [0, 1, 4], "linear": [1, 2], "ssm": [0, 1, 2]}


def calibration_rows(*, which=None, verilator=True):
    """Every calibration record: all configs on amaranth.sim, plus :data:`VERILATOR` ones."""
    rows = []
    for block in ("linear", "ssm", "tree", "ring"):
        for i in range(_N[block]) if which is None else which.get(block, []):
            rows.append(calibrate(block, i))
    if verilator:
        for block, idx in VERILATOR.items():
            for i in idx:
                rows.append(calibrate(block, i, simulator="verilator"))
    return rows
