"""The runtime's RTL engine: greedy tree speculative decoding with every target pass on a
simulated :class:`hw.decoder.DecoderCore` behind its registers
(:class:`hw.decoder_top.DecoderTop`, cocotb on Verilator).

:class:`gen.runtime.runtime.RtlEngine` builds the core for the loaded model and runs the
cocotb test :func:`generate` against it; the test reads its parameters (the design, the
model files, the prompt, the tree) and writes its result as JSON where ``result`` says.
Everything the target computes runs on the core from memory, laid out by
:class:`hw.step_program.StepPlan`:

* the prompt: one 1-node step and the commit of its node, a token at a time, from the
  zero state (the host writes no state word, ever);
* every step: the tree the draft proposed (every node's logits and argmax), then the
  commit of the accepted path (the SSM replay into the other state bank, the last
  node's conv window into the committed slot); with the draft's node flow (below), that
  commit runs in the draft's next node program, beside its pass.

With the parameter ``draft_on_core`` the draft runs on the core too, from a second plan
of its own (SPEQ: the target's weights in the draft pass, the nibble plane alone; or a
draft model of the core's widths, e.g. fewer layers): its prompt steps and commits, its
passes, and the commit of the accepted path. The parameter ``draft_flow`` says how the
passes run. ``node`` (the default): one program per expanded node, from its parent's
state, which the parent's program left in memory
(:meth:`hw.step_program.StepPlan.node_program`). ``prefix``: per depth, one tree
program over the nodes so far (a prefix of the BFS order), from the committed state.
When the path ends on the deepest level, which no draft program ran, both flows carry
that node into the next step instead of a pass of its own: the draft's commit leaves
it out, and the next step's draft numbering puts it in slot 0, in front of the root
(never expanded: its child is the target's bonus token), every node one slot up. In
the ``prefix`` flow every draft program of the step holds it, one node more in passes
the step runs anyway (where the tile ring cannot schedule the tree with it in front,
the whole tree runs first, as before); in the ``node`` flow the root's pass runs it
first, a chain of two from the committed state that keeps the root's state
(:meth:`hw.step_program.StepPlan.node_program`'s ``before``). The draft's commit is
then the SSM replay of the path (``prefix``: the carried node first, where there is
one), or (``node``) the copy of the last node's windows and the adoption of its stored
state as the committed one (:meth:`hw.step_program.StepPlan.adopt`; the last but one's
where the last is carried). The runtime picks each
expanded node's children, the ``topk`` of the softmax of its logits in memory
(:func:`golden.speculative.topk`), and applies SPEQ's early stopping (a node is
expanded only if its ``q`` reaches ``gamma``): that is
:func:`golden.speculative.draft_tree`, pass by pass.

The host is blocking code in a thread of its own (``cocotb.task.bridge``), as on a
board. It reaches the core only through the top's AXI4-Lite registers and its ``irq``
(:class:`gen.runtime.driver.CoreDriver`: the node table, the program's address and
length, ``START``, ``ABORT``, ``STATUS`` and the counters), and the memory. The
parameter ``backend`` picks the bus: ``axi-lite`` (a :class:`RegisterBus` on
``cocotbext-axi``'s ``AxiLiteMaster``, the simulation back-end) or ``mmio`` (the board
back-end's :class:`gen.runtime.regbus.MMIO`, over a mapping whose loads and stores
forward to that master: the fake device it is tested on). Every program's cycles are
the top's ``PERF_PROGRAM`` counter, and its linear, SSM and overlap cycles the
``PERF_*`` counters.

What the host does between the programs: the draft's candidate choice (above), or, without ``draft_on_core``, the whole
draft tree (:func:`golden.speculative.draft_tree` on the draft's
:class:`golden.decoder.HardwareLM`, which is bit for bit what the core's draft pass
computes, ``tests/test_decoder_core.py``); the programs (each node's embedding row is
named in its gather's descriptor), the SSM unit's node table and the tree table of
the acceptance engine. Greedy acceptance runs on the core (the step's last record): the
host reads the accepted path and its tokens from memory, and checks them against its own
walk of the core's argmax beats (:func:`golden.tree.accepted_path`). That is :func:`golden.speculative.speculative_generate`'s
greedy loop with the pure-store policy for the draft, so the tokens must be the same.

Faults (``cut_tree`` and ``cut_commit``: a step index): a reset of both domains in mid
tree program or in mid commit; the host writes the node table again and reruns the
program (both are idempotent: a step gathers its embedding rows
again, and a commit reads the committed bank and writes the other). ``abort_tree`` and
``abort_commit``: a ``CTRL.ABORT`` in mid program instead; once
the core is idle the host rolls back by running the program again (nothing to restore:
the committed state is only read until a commit is done).
"""

import json
import random
from pathlib import Path

import cocotb
import numpy as np
from cocotb.task import bridge, resume
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, SimTimeoutError, with_timeout
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from specgen.golden.config import Config
from specgen.golden.config_io import from_dict
from specgen.golden.decoder import hardware_pair
from specgen.golden.lm import LMConfig, MambaLM
from specgen.golden.speculative import draft_tree, softmax, topk
from specgen.golden.tree import ROOT, TreeShape, accepted_path, behind, fits_behind
from specgen.gen.runtime.driver import CoreDriver
from specgen.gen.runtime.regbus import MMIO, WORD, RegisterBus, Registers
from specgen.hw.decoder import DecoderCore
from specgen.hw.decoder_top import DecoderTop
from specgen.hw.hierarchy import silence
from specgen.hw.step_program import StepPlan
from specgen.hw.tree_ssm import table_layout
from specgen.sim.axi_master import Memory, reset_and_attach, reset_domains, start_clocks
from specgen.sim.bench import pack, params
from specgen.sim.bench import seed as bench_seed
from specgen.sim.decoder_core import PROGRAM_TIMEOUT, axi_prefixes, trace_program

__all__ = ["core_of", "generate", "next_base", "program_areas"]

#: Alignment of a plan's base (a weight plane's AXI 4 KB boundary) and of a program area.
PLAN_ALIGN, PROGRAM_ALIGN = 4096, 128


def _up(n, align):
    return -(-n // align) * align


def next_base(plan):
    """The first free plan base after ``plan`` (a :class:`hw.step_program.StepPlan`)."""
    return _up(plan.base + len(plan.data), PLAN_ALIGN)


def program_areas(records, record_bits, at):
    """``(step program, commit program, end)`` addresses of the two program areas from
    ``at``, each room for ``records`` records of ``record_bits`` bits."""
    rb = _up(records * record_bits // 8, PROGRAM_ALIGN)
    prog = _up(at, PROGRAM_ALIGN)
    return prog, prog + rb, prog + 2 * rb


def core_of(p):
    """``(config, model, top)`` of the engine's parameters: the
    :class:`hw.decoder_top.DecoderTop` of the core."""
    config = from_dict(Config, p["config"])
    model = LMConfig(**p["model"])
    core = DecoderCore(config=config, model=model, max_records=p["max_records"],
                       addr_width=p["addr_width"], max_nodes=p["max_nodes"])
    return config, model, DecoderTop(core=core)


class AxiLiteRegisterBus(RegisterBus):
    """The simulation back-end's bus: every access one AXI4-Lite transaction of the
    bench's ``AxiLiteMaster``, from the host's thread (``cocotb.task.bridge``)."""

    def __init__(self, axil, *, span):
        super().__init__(span=span)
        self._rd, self._wr = resume(axil.read_dword), resume(axil.write_dword)

    def _read(self, offset):
        return self._rd(offset)

    def _write(self, offset, value):
        self._wr(offset, value)


class ForwardingWords:
    """A device mapping's 32-bit words as :class:`gen.runtime.regbus.MMIO` indexes them,
    each load and store one access of ``bus`` (an :class:`AxiLiteRegisterBus`): the fake
    ``/dev/uioN`` mapping the board back-end is tested on."""

    def __init__(self, bus):
        self.bus = bus

    def __getitem__(self, index):
        return self.bus.read(WORD * int(index))

    def __setitem__(self, index, value):
        self.bus.write(WORD * int(index), int(value))


class PinInterrupt:
    """The top's ``irq`` pin as :class:`gen.runtime.driver.CoreDriver` waits for it (what
    :class:`gen.runtime.regbus.UIOInterrupt` is on a board): ``wait`` returns once ``irq``
    is high, or False after ``timeout_ns`` of simulated time. It waits on the pin's edge,
    not a cycle at a time, so a waiting host costs the simulation nothing."""

    def __init__(self, dut, *, timeout_ns):
        self.dut, self.timeout_ns = dut, timeout_ns
        self._wait = resume(self._await)

    async def _await(self):
        await ReadOnly()
        if not int(self.dut.irq.value):
            try:
                await with_timeout(RisingEdge(self.dut.irq), self.timeout_ns, "ns")
            except SimTimeoutError:
                return False
        await RisingEdge(self.dut.clk)         # leave the read-only phase before returning
        return True

    def wait(self, timeout_s):
        return self._wait()


class Host:
    """The core's memory and the host's side of the programs, over the top's registers
    (:class:`gen.runtime.driver.CoreDriver`); its methods run in the host's thread."""

    def __init__(self, dut, p):
        self.dut, self.p = dut, p
        self.rng = random.Random(bench_seed())
        self.config, self.model, self.top = core_of(p)
        # Built for its layouts and descriptor formats only (the simulator runs the
        # compiled core): never elaborated here.
        silence(self.top)
        self.core = self.top.core
        start_clocks(dut, sync_mhz=self.config.board.clock_mhz,
                     mem_mhz=self.config.board.memory_clock_mhz)
        self.memory = Memory(1 << p["addr_width"], self.rng)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_"), dut.clk, dut.rst)
        self.table_layout = table_layout(self.config.tree.fifo_depth)
        self.programs = []
        self.driver = None

    def connect(self):
        """The driver, over the back-end ``p["backend"]``
        (:data:`gen.runtime.runtime.BACKENDS`); in the host's
        thread (its constructor reads the identity registers)."""
        span = self.top.regmap.span
        backend = self.p.get("backend", "axi-lite")
        bus = AxiLiteRegisterBus(self.axil, span=span)
        if backend == "mmio":
            bus = MMIO.over_words(ForwardingWords(bus), span=span)
        self.driver = CoreDriver(regs=Registers(bus=bus, regmap=self.top.regmap),
                                 irq=PinInterrupt(self.dut, timeout_ns=PROGRAM_TIMEOUT * 1e3
                                                  / self.config.board.clock_mhz))

    def load(self, plans):
        """The plans' bytes into memory; the program areas after the last."""
        for plan in plans:
            self.memory.data[plan.base:plan.base + len(plan.data)] = plan.data
        self.prog_at, self.commit_at, _ = program_areas(
            self.core.max_records, self.core.record_bits, next_base(plans[-1]))

    def run(self, at, records, table, *, kind, step=None, cut=False, abort=False):
        """Run a program (``records``: bytes and count) from ``at`` with the node table
        ``table`` (written again after a cut: a reset clears the registers). Its fabric
        cycles (``PERF_PROGRAM``). The program, its ``kind`` (``tree``, ``commit``,
        ``draft``, ``draft_commit``, or one of the prompt's ``prefill``,
        ``prefill_commit``, ``draft_prefill``, ``draft_prefill_commit``), its ``step``,
        its cycles, the engines' busy and overlap counters and the bytes its AXI ports
        moved (``bytes_read``, ``bytes_written``: the memory model counts every beat) go
        to :attr:`programs` (the performance model is set beside them), with the
        parameter ``trace`` also its events (:func:`sim.decoder_core.trace_program`)."""
        prog, n_rec = records
        self.memory.data[at:at + len(prog)] = prog
        entries = [(node, pack(self.table_layout, entry), src) for node, entry, src in table]
        for attempt in ((True, False) if cut or abort else (False,)):
            self.driver.write_table(entries)
            trace = [] if self.p.get("trace") and not attempt else None
            if trace is not None:
                tracing = resume(self._trace)(trace)
            moved = self.memory.bytes_read, self.memory.bytes_written
            self.driver.start(at, n_rec)
            if attempt:
                resume(self._fault)(self.rng.randrange(50, 500), cut=cut)
                if abort:
                    self.driver.abort()
                continue
            cycles = self.driver.wait()
            counters = self.driver.counters()
            if trace is not None:
                resume(self._join)(tracing)
        self.programs.append({"kind": kind, "step": step, "program": prog.hex(),
                              "records": n_rec, "cycles": cycles, **counters,
                              "bytes_read": self.memory.bytes_read - moved[0],
                              "bytes_written": self.memory.bytes_written - moved[1],
                              **({"events": trace} if trace is not None else {})})
        return cycles

    async def _trace(self, trace):
        return cocotb.start_soon(trace_program(self.dut.clk, self.dut.core, trace))

    async def _join(self, task):
        await with_timeout(task, PROGRAM_TIMEOUT * 10, "ns")

    async def _fault(self, at_cycle, *, cut):
        """``at_cycle`` cycles into the program (still running): with ``cut``, reset both
        domains (the host then reruns it); else return, for the host's ``ABORT``."""
        await ClockCycles(self.dut.clk, at_cycle)
        await ReadOnly()
        # EVENT.END (the irq pin) was cleared before START: low, the program still runs.
        assert not int(self.dut.irq.value), "the program ended before its fault"
        await RisingEdge(self.dut.clk)
        if cut:
            await reset_domains(self.dut)


class DraftOracle:
    """The draft's passes on the host (:class:`golden.decoder.HardwareLM` steps along each
    node's path from the committed state): the bits the core's draft programs must
    write, checked node by node."""

    def __init__(self, lm):
        self.lm, self.state, self.nodes = lm, lm.initial_state(), {}

    def logits(self, j, tokens, parents):
        """Node ``j``'s logits (``uint32`` words); its parent's first (BFS order)."""
        if j not in self.nodes:
            before = self.state if parents[j] == ROOT else self.nodes[int(parents[j])][1]
            self.nodes[j] = self.lm.step(before, int(tokens[j]))
        return np.asarray(self.nodes[j][0], np.float32).view(np.uint32)

    def commit(self, path, tokens, parents):
        for j in path:
            self.logits(j, tokens, parents)
        self.state, self.nodes = self.nodes[path[-1]][1], {}


@cocotb.test()
async def generate(dut):
    """Generate ``tokens`` tokens after ``prompt`` (module docstring); write the result."""
    p = params()
    h = Host(dut, p)
    reads, writes = axi_prefixes(h.core)
    await reset_and_attach(dut, h.memory, p, h.rng, reads=reads, writes=writes)
    # The host (the runtime's driver) is blocking code, as on a board: it runs in a
    # thread and reaches the simulation only through the top's registers and irq.
    result = await bridge(_host)(h, p)
    Path(p["result"]).write_text(json.dumps(result, indent=1))


def _host(h, p):
    """The host's side of :func:`generate`: its result."""
    h.connect()
    target = MambaLM.load(p["target_path"], config=h.model)
    pair = hardware_pair(target, config=h.config)
    if p["draft_path"] is None:
        draft = pair.draft                     # SPEQ: the target's nibble plane
    else:
        d_lm = MambaLM.load(p["draft_path"], config=LMConfig(**p["draft_model"]))
        draft = hardware_pair(d_lm, config=h.config).target
    shape = TreeShape(tuple(p["tree"]))
    V = shape.num_nodes
    on_core = bool(p.get("draft_on_core"))
    by_node = p["draft_flow"] == "node"
    plan = StepPlan(h.core, pair.target, nodes=V)
    plan.write_state(pair.target.initial_state())
    plans = [plan]
    if on_core:
        dplan = StepPlan(h.core, draft, nodes=V, base=next_base(plan), node_states=by_node)
        dplan.write_state(draft.initial_state())
        plans.append(dplan)
    h.load(plans)
    # The draft's committed state on the host: the root of every draft tree (draft on the
    # host) or the bits every draft program must write (draft on the core).
    gold = DraftOracle(draft)

    def tree(pl, tokens, parents, kind, k):
        """One tree program of ``pl`` (its first records gather the tokens' embedding
        rows); its cycles."""
        faults = {} if kind != "tree" or k is None else {
            "cut": k == p.get("cut_tree"), "abort": k == p.get("abort_tree")}
        accept = kind == "tree"      # the target's steps; a draft pass ends at its argmax
        if accept:
            at, table = pl.tree_table(parents, tokens)
            h.memory.data[at:at + len(table)] = table
        return h.run(h.prog_at, pl.program(parents, tokens, accept=accept),
                           pl.table(parents), kind=kind, step=k, **faults)

    def commit(pl, path, kind, k, nodes=None):
        faults = {} if kind != "commit" or k is None else {
            "cut": k == p.get("cut_commit"), "abort": k == p.get("abort_commit")}
        cycles = h.run(h.commit_at, pl.commit_program(path, nodes=nodes),
                       pl.commit_table(path, nodes=nodes), kind=kind, step=k, **faults)
        pl.flip()
        return cycles

    #: The target's commit waiting for the draft's next node pass: ``(path, step)``.
    pending = []
    #: Each step's commit cycles, once its commit ran.
    commit_cycles = {}

    def target_commit(path, k):
        """The target's commit of step ``k``: alone (a program of its own), or, in the node
        flow with the draft on the core, pending until the draft's next node program,
        which runs it beside its pass."""
        if on_core and by_node:
            pending.append((path, k))
        else:
            commit_cycles[k] = commit(plan, path, "commit", k)

    def flush():
        """The pending target commit alone (nothing more for the draft to run)."""
        while pending:
            path, ck = pending.pop()
            commit_cycles[ck] = commit(plan, path, "commit", ck)

    def node(j, tokens, parents, k, carry=None):
        """Node ``j``'s pass on the core, from its parent's state (the draft's ``node``
        flow); its cycles. ``j`` and ``parents`` in the step's numbering; with a node
        carried from the last step (``carry``, its token: draft slot 0, every node one
        slot up), the root's pass runs it first, from the committed state (a 2-node
        chain). With the target's commit pending, a 1-node program runs it too
        (:meth:`hw.step_program.StepPlan.node_program`'s ``beside``): then the program is
        that step's commit (its kind, faults and cycles), and the pass adds none here."""
        off = 0 if carry is None else 1
        if off and j == 0:
            return h.run(h.prog_at, dplan.node_program(1, ROOT, tokens[0], before=carry),
                         dplan.node_table(2), kind="draft", step=k)
        up = ROOT if parents[j] == ROOT else int(parents[j]) + off
        j = int(j) + off
        if not pending:
            return h.run(h.prog_at, dplan.node_program(j, up, tokens[j - off]),
                         dplan.node_table(), kind="draft", step=k)
        path, ck = pending.pop()
        layers, table = plan.commit_parts(path)
        commit_cycles[ck] = h.run(
            h.prog_at, dplan.node_program(j, up, tokens[j - off], beside=(layers, table)),
            table, kind="commit", step=ck, cut=ck == p.get("cut_commit"),
            abort=ck == p.get("abort_commit"))
        plan.flip()
        return 0

    def draft_on_core(root, k, carry=None):
        """:func:`golden.speculative.draft_tree` with every draft pass on the core, then
        each expanded node's top-k children from its logits in memory. The ``prefix`` flow:
        per depth, one tree program of the draft over the nodes so far (a prefix of the
        BFS order), with the node the last step carried (``carry``, its token) as node 0,
        the parent of the root. The ``node`` flow: one program per expanded node, from its
        parent's state. ``(tokens, parents, the nodes some program ran, cycles)`` of the
        step's tree (the root node 0), ``ran`` in the draft's numbering (the carried node
        first)."""
        off = 0 if carry is None else 1
        tokens, parents, probs = [root], [ROOT], [np.nan]
        level, ran, cycles = [0], set(), 0
        for b in shape.branching:
            # SPEQ's early stopping: a node is expanded only if q(token) >= gamma.
            grow = [j for j in level if j == 0 or probs[j] >= p["gamma"]]
            if not grow:
                break
            if not by_node:
                d_tokens, d_parents = carried(tokens, parents, carry)
                cycles += tree(dplan, d_tokens, d_parents, "draft", k)
                ran = set(range(len(d_tokens)))
            level = []
            for j in grow:
                if by_node:
                    cycles += node(j, tokens, parents, k, carry)
                    ran.add(j + off)
                # The plan's readers index a buffer laid out from its base; a node
                # program's node is node 0 of its 1-node step (node 1 of the root's
                # 2-node chain behind a carried node).
                at = (1 if off and j == 0 else 0) if by_node else j + off
                logits = dplan.logits_of(memoryview(h.memory.data)[dplan.base:], at)
                want = gold.logits(j, tokens, parents)
                assert np.array_equal(logits, want), (
                    f"step {k}: draft node {j}'s logits differ from the draft model's in "
                    f"{int(np.count_nonzero(logits != want))} of {logits.size} words")
                q = softmax(logits.view(np.float32))
                for x in topk(q, b):
                    tokens.append(x)
                    parents.append(j)
                    probs.append(q[x])
                    level.append(len(tokens) - 1)
        return tokens, parents, ran, cycles

    def carried(tokens, parents, carry):
        """The draft's tree of a step: the step's, behind the carried node (its token
        ``carry``) as node 0 where there is one."""
        if carry is None:
            return list(tokens), list(parents)
        return [int(carry)] + [int(t) for t in tokens], behind(parents)

    # A path's last node that no draft program ran is carried into the next step (module
    # docstring). Every pass fits the plan with it: the deepest level's nodes are in no
    # pass and take no slot, so the run nodes' slots, one up, stay below V. In the prefix
    # flow the tile ring must schedule the tree with the carried node in front (one level
    # deeper).
    carry_ok = on_core and (by_node or fits_behind(shape.parents,
                                                   fifo_depth=dplan.lm.config.tree.fifo_depth))
    carry = None

    prompt = [int(t) for t in p["prompt"]]
    prefill = 0
    for t in prompt[:-1]:
        for pl, who in ((plan, ""), (dplan, "draft_")) if on_core else ((plan, ""),):
            prefill += tree(pl, [t], [ROOT], f"{who}prefill", None)
            prefill += commit(pl, [0], f"{who}prefill_commit", None)
        gold.commit([0], [t], [ROOT])
    out = list(prompt)
    per_step = []
    k = 0
    while len(out) - len(prompt) < p["tokens"]:
        if on_core:
            tokens, parents, ran, d_cycles = draft_on_core(out[-1], k, carry)
            parents = np.asarray(parents)
            # The last target commit, where no 1-node draft program took it beside (the
            # root's pass behind a carried node cannot), runs alone before the tree.
            flush()
        else:
            dt = draft_tree(draft, gold.state, out[-1], branching=shape, candidates="topk",
                            gamma=p["gamma"])
            tokens, parents, d_cycles = [int(t) for t in dt.tree.tokens], dt.tree.parents, 0
        t_cycles = tree(plan, tokens, parents, "tree", k)
        beats = [plan.argmax_of(h.memory.data, v) for v in range(len(tokens))]
        for v, (_, _, nan) in enumerate(beats):
            assert not nan, f"step {k}: node {v}'s logits hold a NaN (the argmax flags it)"
        best = np.array([b[0] for b in beats])
        # Greedy acceptance ran on the core (the acceptance engine): the path and its
        # tokens are in memory. The host's walk of the argmax beats is the check.
        nodes, committed = plan.path_of(h.memory.data)
        match = np.zeros(len(tokens), dtype=bool)
        match[1:] = np.asarray(tokens)[1:] == best[parents[1:]]
        want = accepted_path(parents, match).nodes
        assert tuple(nodes) == want and committed == [int(best[v]) for v in want], (
            f"step {k}: the core accepted path {nodes} (tokens {committed}), the argmax "
            f"beats give {list(want)}")
        target_commit(list(nodes), k)
        end = nodes[-1]
        carried_in = carry
        if on_core:
            # The draft commits the path as the target did (in its numbering: a carried
            # node first); a leaf no draft program ran (the deepest level is never
            # expanded) is carried into the next step's programs and left out, or,
            # where the prefix flow's tile ring cannot take it, the whole tree runs.
            off = 0 if carry is None else 1
            d_path = [0] * off + [v + off for v in nodes]
            carry = None
            if end + off not in ran:
                if carry_ok:
                    carry, d_path = int(tokens[end]), d_path[:-1]
                else:
                    # (Nothing was carried in either: carry_ok holds for every step.)
                    d_cycles += tree(dplan, tokens, parents, "draft", k)
                    ran = set(range(len(tokens)))
            if by_node:
                # Every path node's state is stored (its node program's): the draft's
                # commit copies the last one's windows and adopts its state, no replay
                # (the last but one's where the last is carried).
                d_cycles += h.run(h.commit_at, dplan.window_program(d_path[-1]), [],
                                  kind="draft_commit", step=k)
                dplan.adopt(d_path[-1])
            else:
                # The replay reads the path's SSM inputs, which the last program wrote.
                d_cycles += commit(dplan, d_path, "draft_commit", k, nodes=len(ran))
        # The draft's state after the path (pure store: every path node stepped).
        gold.commit(list(nodes), tokens, parents)
        out.extend(committed)
        per_step.append({"nodes": len(tokens), "accepted": len(nodes) - 1,
                         "parents": [int(x) for x in parents], "draft": tokens,
                         "path": [int(x) for x in nodes],
                         "carried_in": carried_in, "carried_out": carry,
                         "tokens": len(nodes), "tree_cycles": t_cycles,
                         "commit_cycles": None, "draft_cycles": d_cycles})
        cocotb.log.info(f"step {k}: {len(tokens)} nodes, path {list(nodes)}, draft "
                      f"{d_cycles} + tree {t_cycles} cycles + commit "
                      f"{commit_cycles.get(k, '(beside the next draft pass)')}")
        k += 1
    flush()
    for i, st in enumerate(per_step):
        st["commit_cycles"] = commit_cycles[i]
    generated = len(out) - len(prompt)
    cycles = sum(s["tree_cycles"] + s["commit_cycles"] + s["draft_cycles"] for s in per_step)
    result = {"tokens": out[len(prompt):len(prompt) + p["tokens"]],
              "tokens_per_step": [s["tokens"] for s in per_step],
              "accepted_per_step": [s["accepted"] for s in per_step],
              "nodes_per_step": [s["nodes"] for s in per_step],
              "steps": per_step, "prefill_cycles": prefill, "cycles": cycles,
              "generated": generated, "cycles_per_token": cycles / generated,
              "draft_on_core": on_core, "draft_flow": p["draft_flow"],
              "clock_mhz": h.config.board.clock_mhz,
              "addr_width": p["addr_width"], "max_records": p["max_records"],
              "backend": p.get("backend", "axi-lite"), "programs": h.programs}
    return result
