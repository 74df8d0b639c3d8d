"""Timing probes for :mod:`gen.perf.calibrate`: one driver per block, for both simulators.

Each probe is a participant of :mod:`sim.loop`: it drives its block without
idle cycles or back-pressure, records the cycle of every event the cycle
model predicts and leaves them in ``result``. :func:`run_amaranth` runs it on
Amaranth's simulator; the cocotb tests below run the same probe on an HDL
simulator (:func:`sim.runner.run_bench`, ``module="specgen.sim.perf_probes"``) and
write ``result`` as JSON to ``params()["result_file"]``. They check timing
only; the correctness benches are the other modules of ``sim/``.
"""

import json

import cocotb
from amaranth import Shape

from specgen.sim.bench import params
from specgen.sim.loop import run_amaranth, run_cocotb

__all__ = ["LinearProbe", "SSMProbe", "TreeProbe", "RingProbe", "run_amaranth",
           "ssm_probe_inputs"]


def _payload_layout(component, port):
    """The payload layout of stream ``port`` of ``component``."""
    return component.signature.members[port].signature.members["payload"].shape


def _field(word, layout, name):
    f = layout[name]
    return (word >> f.offset) & ((1 << f.width) - 1)


class LinearProbe:
    """Jobs back to back on :class:`hw.linear_unit.LinearUnit`, ``y`` always ready.

    ``jobs`` are :class:`gen.perf.blocks.LinearJob`-like tuples ``(mode, steps,
    n_rows, n_tokens)``. ``result``: ``first_y`` (per job, the cycle of its
    first ``y`` transfer), ``end`` (the last ``y``), cycle 0 being the cycle in
    which the first command is taken; ``busy``, ``stall`` (the unit's counters
    one cycle after the last ``y``).
    """

    def __init__(self, dut, jobs):
        self.cmd = _payload_layout(dut, "cmd")
        self.y = _payload_layout(dut, "y")
        self.jobs = [tuple(j) for j in jobs]
        self.result = None

    def _inputs(self, ci, wi, beats):
        d = {"y__ready": 1, "w__valid": int(wi < beats), "x__valid": int(wi < beats),
             "cmd__valid": int(ci < len(self.jobs))}
        if ci < len(self.jobs):
            mode, steps, n_rows, n_tokens = self.jobs[ci]
            d["cmd__payload"] = self.cmd.const({"mode": mode, "steps": steps, "n_rows": n_rows,
                                                "n_tokens": n_tokens}).as_value().value
        return d

    def run(self):
        jobs = self.jobs
        beats = sum(j[1] for j in jobs)
        total_rows = sum(j[2] for j in jobs)
        cycle = ci = wi = got = 0
        t0 = last = None
        first_y = []
        o = yield self._inputs(ci, wi, beats)
        while got < total_rows:
            assert cycle < 20 * (beats + total_rows) + 1000, "LinearUnit made no progress"
            if ci < len(jobs) and o["cmd__ready"]:
                if t0 is None:
                    t0 = cycle
                ci += 1
            if wi < beats and o["w__ready"]:
                wi += 1
            if o["y__valid"]:
                if _field(o["y__payload"], self.y, "row") == 0:
                    first_y.append(cycle - t0)
                last = cycle - t0
                got += 1
            cycle += 1
            o = yield self._inputs(ci, wi, beats)
        self.result = {"first_y": first_y, "end": last, "busy": o["busy_cycles"],
                       "stall": o["stall_cycles"]}


def ssm_probe_inputs(cfg, *, tokens, seed):
    """The inputs of an :class:`SSMProbe` run, from ``seed``: ``(prm, state0, toks, want_y)``,
    Mamba2-initialized parameters, a zero state, ``tokens`` tokens without special values
    (:func:`sim.ssm_unit.make_tokens`) and each token's ``y`` from
    :func:`golden.mamba2.ssm_step_hw_bits`, which carries the state across them."""
    import numpy as np

    from specgen.sim.ssm_unit import stream_inputs

    prm, state0, toks, want_y, _ = stream_inputs(cfg, np.random.default_rng(seed),
                                                 tokens=tokens, specials=False,
                                                 init_state=False)
    return prm, state0, toks, want_y


class SSMProbe:
    """Tokens back to back through :class:`hw.ssm_unit.SSMUnit`, ``y`` always ready.

    The parameters are written one a cycle, then the state through the tile port (``hold``
    high), then the producer runs ahead: per token it waits for ``fill_free``, writes the
    token's beats one a cycle and commits it (``token_valid`` until ``token_ready``).
    ``result``: ``y_cycles`` (the cycle of every ``y`` transfer) and ``y`` (its payload,
    for the caller's bit check), cycle 0 being the producer's first wait.
    """

    def __init__(self, cfg, prm, state0, toks):
        from specgen.sim.ssm_unit import param_beats, token_beats
        from specgen.sim.ssm_unit_bfm import pack_tiles

        self.setup = [{"wr_en": 1, "wr_sel": sel, "wr_addr": a, "wr_data": int(v)}
                      for sel, a, v in param_beats(cfg, prm)]
        self.setup += [{"wr_en": 0, "hold": 1, "st_we": 1, "st_addr": a, "st_wdata": int(w)}
                       for a, w in enumerate(pack_tiles(cfg, state0))]
        self.ops = []
        for x, B, C, dt in toks:
            self.ops.append(("wait",))
            self.ops += [("w", *b) for b in token_beats(cfg, x, B, C, dt)]
            self.ops.append(("commit",))
        H, P, _N = cfg.state_shape
        self.total = len(toks) * H * P
        self.result = None

    def run(self):
        for d in self.setup:
            yield {"y__ready": 0, "token_valid": 0, **d}
        o = yield {"st_we": 0, "hold": 0, "wr_en": 0, "y__ready": 1}
        cycle = pc = 0
        y_cycles, ys = [], []
        while len(ys) < self.total:
            assert cycle < 50 * self.total + 10_000, "SSMUnit made no progress"
            op = self.ops[pc] if pc < len(self.ops) else ("done",)
            if op[0] == "wait" and o["fill_free"] or op[0] == "commit" and o["token_ready"] \
                    or op[0] == "w":
                pc += 1
            if o["y__valid"]:
                ys.append(o["y__payload"])
                y_cycles.append(cycle)
            cycle += 1
            op = self.ops[pc] if pc < len(self.ops) else ("done",)
            d = {"wr_en": int(op[0] == "w"), "token_valid": int(op[0] == "commit"),
                 "y__ready": 1}
            if op[0] == "w":
                d.update({"wr_sel": op[1], "wr_addr": op[2], "wr_data": int(op[3])})
            o = yield d
        self.result = {"y_cycles": y_cycles, "y": ys}


class TreeProbe:
    """Trees one after another through :class:`hw.tree_verifier.TreeVerifier`, sinks ready.

    ``trees`` are ``(parents, match, passes)``. ``result["trees"]``: per tree,
    cycles from its first ``tree`` beat to the last ``match`` beat, the first
    and the last ``path`` beat; and its ``schedule_beats``.
    """

    def __init__(self, dut, trees):
        self.tree = _payload_layout(dut, "tree")
        self.match = _payload_layout(dut, "match")
        self.path = _payload_layout(dut, "path")
        self.trees = trees
        self.result = None

    def _inputs(self, k, ti, mi):
        parents, match, passes = self.trees[k]
        n = len(parents)
        return {"schedule__ready": 1, "path__ready": 1, "passes": passes,
                "tree__valid": int(ti < n),
                "tree__payload": self.tree.const({"parent": max(parents[min(ti, n - 1)], 0),
                                                  "last": int(ti == n - 1)}).as_value().value,
                "match__valid": int(mi < n),
                "match__payload": self.match.const({"match": match[min(mi, n - 1)],
                                                    "last": int(mi == n - 1)}).as_value().value}

    def run(self):
        cycle = 0
        results = []
        o = yield self._inputs(0, 0, 0)
        for k, (parents, _match, _passes) in enumerate(self.trees):
            n = len(parents)
            ti = mi = beats = 0
            t0 = None
            rec = {}
            while True:
                assert cycle < 10_000_000, "TreeVerifier made no progress"
                if ti < n and o["tree__ready"]:
                    if t0 is None:
                        t0 = cycle
                    ti += 1
                if mi < n and o["match__ready"]:
                    mi += 1
                    if mi == n:
                        rec["last_match"] = cycle - t0
                if o["schedule__valid"]:
                    beats += 1
                done = False
                if o["path__valid"]:
                    rec.setdefault("first_path", cycle - t0)
                    if _field(o["path__payload"], self.path, "last"):
                        rec["last_path"] = cycle - t0
                        done = True
                cycle += 1
                if done:
                    break
                o = yield self._inputs(k, ti, mi)
            rec["schedule_beats"] = beats
            results.append(rec)
            if k + 1 < len(self.trees):
                o = yield self._inputs(k + 1, 0, 0)
        self.result = {"trees": results}


class RingProbe:
    """Bursts through :class:`hw.ring_fifo.RingFIFO`, each after a reset.

    ``cases`` are ``(mode, items)``: ``"stream"`` reads while writing,
    ``"fill"`` writes every item before reading. ``result["cycles"]``: per
    case, cycles from the first write to the last read, both included.
    """

    def __init__(self, dut, cases):
        self.width = Shape.cast(_payload_layout(dut, "w")).width
        self.cases = [tuple(c) for c in cases]
        self.result = None

    def run(self):
        out = []
        for mode, items in self.cases:
            o = yield {"rst": 1, "w__valid": 0, "r__ready": 0}
            cycle = wrote = read = 0
            last = None
            while read < items:
                assert cycle < 10 * items + 100, "RingFIFO made no progress"
                w = wrote < items
                r = mode == "stream" or wrote == items
                o = yield {"w__valid": int(w), "w__payload": wrote & ((1 << self.width) - 1),
                           "r__ready": int(r)}
                if w and o["w__ready"]:
                    wrote += 1
                if r and o["r__valid"]:
                    read += 1
                    last = cycle
                cycle += 1
            out.append(last + 1)
        self.result = {"cycles": out}


# -- cocotb --------------------------------------------------------------------------------

async def _probe(dut, top, probe):
    await run_cocotb(dut, top, [probe])
    with open(params()["result_file"], "w") as f:
        json.dump(probe.result, f)


@cocotb.test()
async def linear_timing(dut):
    """:class:`LinearProbe` on the HDL simulator."""
    from specgen.golden.fp import FORMATS
    from specgen.hw.linear_unit import LinearUnit

    p = params()
    top = LinearUnit(rows=p["rows"], cols=p["cols"], quant_lanes=p["lanes"], max_k=p["max_k"],
                     fmt_out=FORMATS[p["fmt_out"]])
    await _probe(dut, top, LinearProbe(top, p["jobs"]))


@cocotb.test()
async def ssm_timing(dut):
    """:class:`SSMProbe` on the HDL simulator (the inputs from ``seed``)."""
    from specgen.hw.ssm_unit import SSMUnit
    from specgen.sim.ssm_unit import config_from_params

    p = params()
    cfg = config_from_params(p)
    top = SSMUnit(cfg=cfg, mul_stages=p["mul_stages"], add_stages=p["add_stages"])
    prm, state0, toks, _ = ssm_probe_inputs(cfg, tokens=p["tokens"], seed=p["inputs_seed"])
    await _probe(dut, top, SSMProbe(cfg, prm, state0, toks))


@cocotb.test()
async def tree_timing(dut):
    """:class:`TreeProbe` on the HDL simulator."""
    from specgen.hw.tree_verifier import TreeVerifier

    p = params()
    top = TreeVerifier(max_nodes=p["max_nodes"], fifo_depth=p["fifo_depth"],
                       max_passes=p["max_passes"])
    await _probe(dut, top, TreeProbe(top, p["trees"]))


@cocotb.test()
async def ring_timing(dut):
    """:class:`RingProbe` on the HDL simulator."""
    from specgen.hw.ring_fifo import RingFIFO

    p = params()
    top = RingFIFO(width=p["width"], depth=p["depth"])
    await _probe(dut, top, RingProbe(top, p["cases"]))
