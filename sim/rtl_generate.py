"""The runtime's RTL engine: greedy tree speculative decoding with every target pass on a
simulated :class:`hw.decoder.DecoderCore` (cocotb on Verilator).

:class:`gen.runtime.runtime.RtlEngine` builds the core for the loaded model and runs the
cocotb test :func:`generate` against it; the test reads its parameters (the design, the
model files, the prompt, the tree) and writes its result as JSON where ``result`` says.
Everything the target computes runs on the core from memory, laid out by
:class:`hw.step_program.StepPlan`:

* the prompt: one 1-node step and the commit of its node, a token at a time, from the
  zero state (the host writes no state word, ever);
* every step: the tree the draft proposed (every node's logits and argmax), then the
  commit of the accepted path (the SSM replay into the other state bank, the last
  node's conv window into the committed slot).

What the host (this test, standing in for the runtime's driver) does between the
programs: the draft's tree (:func:`golden.speculative.draft_tree` on the draft's
:class:`golden.decoder.HardwareLM`, which is bit for bit what the core's draft pass
computes, ``tests/test_decoder_core.py``), the programs (each node's embedding row is
named in its gather's descriptor), the SSM unit's node table, and greedy acceptance
from the core's argmax beats
(:func:`golden.tree.accepted_path`). That is :func:`golden.speculative.speculative_generate`'s
greedy loop with the pure-store policy for the draft, so the tokens must be the same.

Faults (``cut_tree`` and ``cut_commit``: a step index): a reset of both domains in mid
tree program or in mid commit; the host writes the node table again and reruns the
program (both are idempotent: a step gathers its embedding rows
again, and a commit reads the committed bank and writes the other). ``abort_tree`` and
``abort_commit``: an ``ABORT`` (the core's ``abort_req``) in mid program instead; once
the core is idle the host rolls back by running the program again (nothing to restore:
the committed state is only read until a commit is done).
"""

import json
import random
from pathlib import Path

import cocotb
import numpy as np

from specgen.golden.config import Config
from specgen.golden.config_io import from_dict
from specgen.golden.decoder import hardware_pair
from specgen.golden.lm import LMConfig, MambaLM
from specgen.golden.speculative import draft_tree
from specgen.golden.tree import ROOT, TreeShape, accepted_path
from specgen.hw.decoder import DecoderCore
from specgen.hw.sequencer import start_layout
from specgen.hw.step_program import StepPlan
from specgen.hw.tree_ssm import table_layout
from specgen.sim.axi_master import Memory, reset_and_attach, start_clocks
from specgen.sim.bench import pack, params
from specgen.sim.bench import seed as bench_seed
from specgen.sim.decoder_core import PROGRAM_TIMEOUT, axi_prefixes, run_program

__all__ = ["core_of", "generate"]


def core_of(p):
    """``(config, model, core)`` of the engine's parameters."""
    config = from_dict(Config, p["config"])
    model = LMConfig(**p["model"])
    core = DecoderCore(config=config, model=model, max_records=p["max_records"],
                       addr_width=p["addr_width"], max_nodes=p["max_nodes"])
    return config, model, core


class Host:
    """The core's memory and the host's side of the programs."""

    def __init__(self, dut, p):
        self.dut, self.p = dut, p
        self.rng = random.Random(bench_seed())
        self.config, self.model, self.core = core_of(p)
        start_clocks(dut, sync_mhz=self.config.board.clock_mhz,
                     mem_mhz=self.config.board.memory_clock_mhz)
        self.memory = Memory(1 << p["addr_width"], self.rng)
        self.start_lay = start_layout(p["addr_width"], self.core.max_records)
        self.cycles = 0
        self.programs = []

    def load(self, plan):
        self.memory.data[:len(plan.data)] = plan.data
        rb = self.core.max_records * self.core.record_bits // 8
        self.prog_at = -(-len(plan.data) // 128) * 128
        self.commit_at = self.prog_at + -(-rb // 128) * 128

    async def write_table(self, table):
        d = self.dut
        lay = table_layout(self.config.tree.fifo_depth)
        for node, entry, src in table:
            d.tbl_we.value, d.tbl_node.value, d.tbl_src.value = 1, node, src
            d.tbl_entry.value = pack(lay, entry)
            await cocotb.triggers.RisingEdge(d.clk)
        d.tbl_we.value = 0

    async def run(self, at, records, table, *, cut=False, abort=False):
        """Run a program (``records``: bytes and count) from ``at`` with the node table
        ``table`` (written again after a cut: a reset clears it). Its fabric cycles. The
        program and its cycles go to :attr:`programs` (the performance model is set
        beside them), with the parameter ``trace`` also its events
        (:func:`sim.decoder_core.run_program`)."""
        prog, n_rec = records
        self.memory.data[at:at + len(prog)] = prog
        start = pack(self.start_lay, {"addr": at, "records": n_rec})
        for attempt in ((True, False) if cut or abort else (False,)):
            await self.write_table(table)
            trace = [] if self.p.get("trace") and not attempt else None
            at_cycle = self.rng.randrange(50, 500) if attempt else None
            cycles = await run_program(self.dut, start, timeout=PROGRAM_TIMEOUT, trace=trace,
                                       cut=at_cycle if cut else None,
                                       abort=at_cycle if abort else None)
        self.programs.append({"program": prog.hex(), "records": n_rec, "cycles": cycles,
                              **({"events": trace} if trace is not None else {})})
        return cycles


@cocotb.test()
async def generate(dut):
    """Generate ``tokens`` tokens after ``prompt`` (module docstring); write the result."""
    p = params()
    h = Host(dut, p)
    dut.start__valid.value = 0
    dut.tbl_we.value = 0
    dut.abort_req.value = 0
    reads, writes = axi_prefixes(h.core)
    await reset_and_attach(dut, h.memory, p, h.rng, reads=reads, writes=writes)
    target = MambaLM.load(p["target_path"], config=h.model)
    pair = hardware_pair(target, config=h.config)
    if p["draft_path"] is None:
        draft = pair.draft                     # SPEQ: the target's nibble plane
    else:
        d_lm = MambaLM.load(p["draft_path"], config=LMConfig(**p["draft_model"]))
        draft = hardware_pair(d_lm, config=h.config).target
    shape = TreeShape(tuple(p["tree"]))
    plan = StepPlan(h.core, pair.target, nodes=shape.num_nodes)
    plan.write_state(pair.target.initial_state())
    h.load(plan)

    async def step(tokens, parents, k):
        """One tree program (its first records gather the tokens' embedding rows) and its
        argmax beats."""
        cycles = await h.run(h.prog_at, plan.program(parents, tokens), plan.table(parents),
                             cut=k is not None and k == p.get("cut_tree"),
                             abort=k is not None and k == p.get("abort_tree"))
        return cycles, [plan.argmax_of(h.memory.data, v) for v in range(len(tokens))]

    async def commit(path, k):
        cycles = await h.run(h.commit_at, plan.commit_program(path), plan.commit_table(path),
                             cut=k is not None and k == p.get("cut_commit"),
                             abort=k is not None and k == p.get("abort_commit"))
        plan.flip()
        return cycles

    prompt = [int(t) for t in p["prompt"]]
    d_state = draft.initial_state()
    prefill = 0
    for t in prompt[:-1]:
        c, _ = await step([t], [ROOT], None)
        prefill += c + await commit([0], None)
        _, d_state = draft.step(d_state, t)
    out = list(prompt)
    per_step = []
    k = 0
    while len(out) - len(prompt) < p["tokens"]:
        dt = draft_tree(draft, d_state, out[-1], branching=shape, candidates="topk",
                        gamma=p["gamma"])
        tt = dt.tree
        tokens, parents = [int(t) for t in tt.tokens], tt.parents
        t_cycles, beats = await step(tokens, parents, k)
        for v, (_, _, nan) in enumerate(beats):
            assert not nan, f"step {k}: node {v}'s logits hold a NaN (the argmax flags it)"
        best = np.array([b[0] for b in beats])
        match = np.zeros(len(tokens), dtype=bool)
        match[1:] = np.asarray(tokens)[1:] == best[parents[1:]]
        nodes = accepted_path(parents, match).nodes
        c_cycles = await commit(list(nodes), k)
        # The draft's state at the path's end: the stored node state, or (a leaf the draft
        # did not expand) its parent's stepped once.
        end = nodes[-1]
        ran = nodes if dt.states[end] is not None else nodes[:-1]
        d_state = dt.states[ran[-1]]
        if len(ran) != len(nodes):
            _, d_state = draft.step(d_state, tokens[end])
        out.extend(tokens[j] for j in nodes[1:])
        out.append(int(best[end]))
        per_step.append({"nodes": len(tokens), "accepted": len(nodes) - 1,
                         "parents": [int(x) for x in parents], "draft": tokens,
                         "path": [int(x) for x in nodes],
                         "tokens": len(nodes), "tree_cycles": t_cycles,
                         "commit_cycles": c_cycles})
        dut._log.info(f"step {k}: {len(tokens)} nodes, path {list(nodes)}, "
                      f"{t_cycles} + {c_cycles} cycles")
        k += 1
    generated = len(out) - len(prompt)
    cycles = sum(s["tree_cycles"] + s["commit_cycles"] for s in per_step)
    result = {"tokens": out[len(prompt):len(prompt) + p["tokens"]],
              "tokens_per_step": [s["tokens"] for s in per_step],
              "accepted_per_step": [s["accepted"] for s in per_step],
              "nodes_per_step": [s["nodes"] for s in per_step],
              "steps": per_step, "prefill_cycles": prefill, "cycles": cycles,
              "generated": generated, "cycles_per_token": cycles / generated,
              "clock_mhz": h.config.board.clock_mhz}
    result["programs"] = h.programs
    Path(p["result"]).write_text(json.dumps(result, indent=1))
