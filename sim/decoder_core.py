"""cocotb bench of :class:`hw.decoder.DecoderCore`: whole decode steps of a Mamba2 LM from
one program in memory, against :class:`golden.decoder.HardwareLM` node by node.

The bench lays a seeded model out with :class:`hw.step_program.StepPlan` in a modeled
memory behind all of the core's AXI ports (``latency`` memory cycles a read, random stalls
on every channel), writes a committed state (the model's state after a short prompt)
and the SSM node table, and starts the step's program, which gathers every node's
embedding row itself (the copy engine, from the plan's row-major table). When
the sequencer reports the program done, it compares, for every node of the tree: the
LM head's logits and the argmax beat, bit for bit, with ``HardwareLM.step`` applied along
the node's path from the committed state, and every layer's new conv window with the
golden state's. Then it commits a path of the tree (the commit program: the SSM replay
into the other state bank, the last node's window into slot 0) and checks every layer's
committed state in memory against golden; the next step starts from that state, which
the host never writes again. One step and one commit are cut by a reset of both domains
in mid-program; the host then writes the node table again and reruns the program. One
step and one commit are aborted (``abort_req``) in mid-program; once the core is idle
the host reruns the program with nothing restored: that is its rollback, since a step
and a commit only read the committed state.
"""

import dataclasses
import random

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from specgen.hw.step_program import StepPlan
from specgen.golden.config import preset
from specgen.golden.decoder import HardwareLM
from specgen.golden.lm import LMConfig, MambaLM
from specgen.golden.tree import ROOT, greedy_acceptance, tree_depths
from specgen.hw.decoder import DecoderCore
from specgen.hw.sequencer import SeqError, start_layout
from specgen.hw.tree_ssm import table_layout
from specgen.sim.axi_master import Memory, reset_and_attach, reset_domains, start_clocks
from specgen.sim.bench import offer, pack, params
from specgen.sim.bench import seed as bench_seed

__all__ = ["make_core", "run_program", "trace_program", "ProgramTrace", "PROGRAM_TIMEOUT"]

#: Fabric cycles a step's program may take.
PROGRAM_TIMEOUT = 400_000


def make_core(p):
    """``(config, model, core)`` of a bench's parameters: the ``sim`` preset with the
    linear engine's contract DSPFP32 and ``p["linear"]``'s, ``p["ssm"]``'s and (if given)
    ``p["vector"]``'s and ``p["board"]``'s overrides, the model ``p["model"]`` (an
    :class:`golden.lm.LMConfig`'s fields)."""
    c = preset("sim")
    c = c.replace(linear=dataclasses.replace(c.linear, contract="dspfp32", **p["linear"]),
                  ssm=dataclasses.replace(c.ssm, **p["ssm"]),
                  vector=dataclasses.replace(c.vector, **p.get("vector", {})),
                  board=dataclasses.replace(c.board, **p.get("board", {})))
    model = LMConfig(**p["model"])
    core = DecoderCore(config=c, model=model, max_records=p["max_records"],
                       addr_width=p["addr_width"], max_nodes=p["max_nodes"])
    return c, model, core


def axi_prefixes(core):
    """The cocotb prefixes of the core's read and write ports."""
    def names(ports):
        out = []
        for n in ports:
            member = core.ports[n]
            count = getattr(member, "dimensions", ())
            out += ([f"m_axi_{n}__{j}_" for j in range(count[0])] if count else [f"m_axi_{n}_"])
        return out
    return names(core.read_ports()), names(core.write_ports())


class Bench:
    def __init__(self, dut, p):
        self.dut, self.p = dut, p
        self.rng = random.Random(bench_seed())
        self.config, self.model, self.core = make_core(p)
        lm = MambaLM.from_seed(self.model, seed=p["model_seed"])
        self.lm = HardwareLM(lm, config=self.config, linear_pass=p["linear_pass"])
        self.memory = Memory(1 << p["addr_width"], self.rng)
        start_clocks(dut, sync_mhz=self.config.board.clock_mhz,
                     mem_mhz=self.config.board.memory_clock_mhz)

    def load(self, plan):
        self.memory.data[:len(plan.data)] = plan.data

    async def write_table(self, table):
        d = self.dut
        lay = table_layout(self.config.tree.fifo_depth)
        for node, entry, src in table:
            d.tbl_we.value, d.tbl_node.value, d.tbl_src.value = 1, node, src
            d.tbl_entry.value = pack(lay, entry)
            await RisingEdge(d.clk)
        d.tbl_we.value = 0


async def run_program(dut, start, *, timeout, cut=None, abort=None, trace=None):
    """Offer the program ``start`` to a :class:`hw.decoder.SequencedCore` and wait for it:
    its fabric cycles to ``done``. Every cycle, no sequencer or engine error. With ``cut``
    (a cycle count while the program runs), reset both domains then and return ``None``.
    With ``abort`` (likewise), raise ``abort_req`` for a cycle then, wait for the core to
    be ``idle`` (the engines finish what they were handed), check the program stopped
    with ``ABORTED`` and did not count ``done``, and return ``None``: the host's
    rollback is to run the program again from the state it started from.

    With ``trace`` (a list), append the program's events to it, cycles counted as the
    return value counts them: ``("hand", cycle, engine index)`` for every descriptor the
    sequencer hands out, ``("idle", cycle, engine index)`` for the first cycle an
    engine's ``busy`` is low again, and ``("job", cycle, n)`` for every job the linear
    engine (engine 0 of a :class:`hw.decoder.DecoderCore`) writes back. The calibration
    of :mod:`gen.perf.program` reads them."""
    d = dut
    done0 = int(d.done.value)
    await offer(dut, "start", start)
    tracer = None if trace is None else ProgramTrace(d, trace)
    for cycle in range(timeout):
        await RisingEdge(d.clk)
        await ReadOnly()
        if tracer is not None:
            tracer.sample(cycle)
        assert not int(d.error.value), (
            f"the sequencer stopped on error code {int(d.error_code.value)}")
        assert not int(d.engine_error.value), (
            f"an engine's AXI port answered an error (bits {int(d.engine_error.value):#x})")
        if cut is not None and cycle == cut:
            assert int(d.busy.value), "the program ended before its cut"
            await RisingEdge(d.clk)
            await reset_domains(d)
            return None
        if abort is not None and cycle == abort:
            assert int(d.busy.value), "the program ended before its abort"
            await _abort(d, done0, timeout)
            return None
        if int(d.done.value) == done0 + 1 and not int(d.busy.value):
            await RisingEdge(d.clk)
            return cycle + 1
    raise AssertionError(f"the program did not end in {timeout} cycles")


class ProgramTrace:
    """:func:`run_program`'s ``trace``: append a program's events to ``trace``, sampled
    from the core ``core`` (a handle of a :class:`hw.decoder.SequencedCore`'s instance)
    once a cycle by :meth:`sample`, in ``ReadOnly``."""

    def __init__(self, core, trace):
        self.core, self.trace = core, trace
        self.n = len(core.seq.engine_busy.value)
        self.busy0, self.jobs0 = 0, int(core.linear.jobs_done.value)

    def sample(self, cycle):
        """The events of the ``cycle``-th cycle after the program was taken."""
        seq = self.core.seq
        handed, busy = int(seq.handed.value), int(seq.engine_busy.value)
        jobs = int(self.core.linear.jobs_done.value)
        for e in range(self.n):
            if handed >> e & 1:
                self.trace.append(("hand", cycle + 1, e))
            if self.busy0 >> e & 1 and not busy >> e & 1:
                self.trace.append(("idle", cycle + 1, e))
        for j in range(self.jobs0, jobs):
            self.trace.append(("job", cycle + 1, j))
        self.busy0, self.jobs0 = busy, jobs


async def trace_program(clk, core, trace):
    """Trace the next program ``core`` takes (:class:`ProgramTrace`), cycles counted from
    its start's handshake as :func:`run_program` counts them, until the sequencer is no
    longer busy. It reads the sequencer's own ports: Verilator's VPI does not update the
    output ports of a module it keeps uninlined once they only pass a child's signal
    through (the core's ``busy`` reads 0 while its sequencer's reads 1)."""
    seq = core.seq
    while True:
        await RisingEdge(clk)
        await ReadOnly()
        if int(seq.start__valid.value) and int(seq.start__ready.value):
            break
    await RisingEdge(clk)                  # the handshake's edge, where run_program starts
    tracer = ProgramTrace(core, trace)
    cycle = 0
    while True:
        await RisingEdge(clk)
        await ReadOnly()
        tracer.sample(cycle)
        if cycle and not int(seq.busy.value):
            return
        cycle += 1


async def _abort(d, done0, timeout):
    await RisingEdge(d.clk)
    d.abort_req.value = 1
    await RisingEdge(d.clk)
    d.abort_req.value = 0
    for _ in range(timeout):
        await RisingEdge(d.clk)
        await ReadOnly()
        if int(d.idle.value):
            break
    else:
        raise AssertionError("the core did not go idle after an abort")
    assert int(d.error.value) and int(d.error_code.value) == SeqError.ABORTED.value, (
        f"after an abort: error {int(d.error.value)}, code {int(d.error_code.value)}")
    assert int(d.done.value) == done0, "an aborted program counted done"
    await RisingEdge(d.clk)


def _expected(lm, state0, parents, tokens):
    """Per node ``(logits, state)`` of ``HardwareLM.step`` along its path."""
    out = []
    for v, t in enumerate(tokens):
        parent = state0 if parents[v] == ROOT else out[parents[v]][1]
        out.append(lm.step(parent, int(t)))
    return out


@cocotb.test()
async def steps(dut):
    """``steps`` decode steps over the tree ``parents``, one cut by a reset and rerun."""
    p = params()
    b = Bench(dut, p)
    dut.start__valid.value = 0
    dut.tbl_we.value = 0
    dut.abort_req.value = 0
    reads, writes = axi_prefixes(b.core)
    await reset_and_attach(dut, b.memory, p, b.rng, reads=reads, writes=writes)
    parents = p["parents"]
    V = len(parents)
    lm, m = b.lm, b.model
    state = lm.initial_state()
    for t in p["prompt"]:
        _, state = lm.step(state, t)
    plan = StepPlan(b.core, lm, nodes=V)
    plan.write_state(state)
    b.load(plan)
    # The tree program at one address, the commit program after it (both rewritten every
    # step: the committed bank alternates).
    prog_at = -(-len(plan.data) // 128) * 128
    commit_at = prog_at + -(-b.core.max_records * b.core.record_bits // 8 // 128) * 128
    start_lay = start_layout(p["addr_width"], b.core.max_records)
    np_rng = np.random.default_rng(b.rng.getrandbits(64))
    depth = tree_depths(parents)
    traffic = []            # (bytes read, bytes written) of each program's whole run

    async def run(at, records, table, cut, abort=None):
        prog, n_rec = records
        b.memory.data[at:at + len(prog)] = prog
        start = pack(start_lay, {"addr": at, "records": n_rec})
        await b.write_table(table)
        if cut is not None:
            await run_program(dut, start, timeout=PROGRAM_TIMEOUT, cut=b.rng.randrange(*cut))
            await b.write_table(table)       # the table does not survive a reset
        if abort is not None:
            # An abort keeps the table; the rerun is the rollback.
            await run_program(dut, start, timeout=PROGRAM_TIMEOUT,
                              abort=b.rng.randrange(*abort))
        mem = b.memory
        moved = mem.bytes_read, mem.bytes_written
        cycles = await run_program(dut, start, timeout=PROGRAM_TIMEOUT)
        traffic.append((mem.bytes_read - moved[0], mem.bytes_written - moved[1]))
        return n_rec, cycles

    for k in range(p["steps"]):
        tokens = [int(t) for t in np_rng.integers(0, m.vocab, V)]
        for v in range(1, V):
            # Draft tokens the target often accepts, so the core's greedy acceptance walks
            # paths of every length.
            if np_rng.random() < 0.6:
                logits = _expected(lm, state, parents[:v], tokens[:v])[parents[v]][0]
                tokens[v] = int(lm.greedy(logits))
        want = _expected(lm, state, parents, tokens)
        if p.get("corrupt") and k == 0:
            bad = want[0][0].copy()
            bad.view(np.uint32)[0] ^= 1
            want[0] = (bad, want[0][1])
        # The program gathers the nodes' embedding rows into h itself (so a rerun after a
        # cut starts from them again, though the residual updated h in place).
        prog = plan.program(parents, tokens)
        at, table = plan.tree_table(parents, tokens)
        b.memory.data[at:at + len(table)] = table
        n_rec, cycles = await run(prog_at, prog, plan.table(parents),
                                  (200, 3000) if k == p.get("cut_step") else None,
                                  (200, 3000) if k == p.get("abort_step") else None)
        data = b.memory.data
        for v in range(V):
            logits, st = want[v]
            got = plan.logits_of(data, v)
            gold = np.asarray(logits, np.float32).view(np.uint32)
            bad = np.flatnonzero(got != gold)
            assert bad.size == 0, (
                f"step {k}, node {v}: logit {int(bad[0])} is {int(got[bad[0]]):#010x} in "
                f"memory, golden {int(gold[bad[0]]):#010x} ({bad.size} of {m.vocab} differ)")
            index, value, nan = plan.argmax_of(data, v)
            assert (index, nan) == (lm.greedy(logits), 0), (
                f"step {k}, node {v}: argmax {index} (nan {nan}), golden {lm.greedy(logits)}")
            assert value == int(gold[index]), f"step {k}, node {v}: the argmax's value word"
            for i in range(m.n_layer):
                w = plan.window_of(data, i, v)
                g = np.asarray(st.conv[i], np.float32)
                assert np.array_equal(w.view(np.uint32), g.view(np.uint32)), (
                    f"step {k}, node {v}: layer {i}'s conv window differs from golden")
        # The acceptance engine's path against golden's, from golden's argmax.
        path_words = np.frombuffer(plan.get(plan.path, 8 * V, data), "<u8")
        gold_path = greedy_acceptance(parents, tokens, [lm.greedy(want[v][0]) for v in range(V)])
        assert np.array_equal(path_words, gold_path), (
            f"step {k}: the accepted path in memory {plan.path_of(data)}, golden "
            f"{[hex(int(w)) for w in gold_path]}")
        # Commit a path: a different leaf's each step (the deepest, then others), so the
        # replay runs paths of every length the tree has.
        leaves = sorted((v for v in range(V) if v not in set(parents)),
                        key=lambda v: (-int(depth[v]), v))
        leaf = leaves[k % len(leaves)]
        path = [leaf]
        while parents[path[-1]] != ROOT:
            path.append(int(parents[path[-1]]))
        path.reverse()
        cut = (50, 300) if k == p.get("cut_commit") else None
        abort = (50, 300) if k == p.get("abort_commit") else None
        c_rec, c_cycles = await run(commit_at, plan.commit_program(path), plan.commit_table(path),
                                    cut, abort)
        plan.flip()
        state = want[leaf][1]
        for i in range(m.n_layer):
            w, ssm = plan.committed_of(b.memory.data, i)
            gw, gs = (np.asarray(x, np.float32) for x in (state.conv[i], state.ssm[i]))
            assert np.array_equal(w.view(np.uint32), gw.view(np.uint32)), (
                f"step {k}: layer {i}'s committed conv window differs from golden after the "
                f"commit of path {path}")
            diff = np.flatnonzero(ssm.view(np.uint32) != gs.view(np.uint32))
            assert diff.size == 0, (
                f"step {k}: layer {i}'s committed SSM state differs from golden in "
                f"{diff.size} words after the commit of path {path}")
        expect = p.get("traffic")
        if expect is not None:
            # The bytes the AXI ports moved in each program's whole (uncut) run, against
            # the count the test hands in (gen.perf.traffic, the performance model's).
            want_step = tuple(expect["step"])
            want_commit = tuple(expect["commit"][str(len(path))])
            assert traffic[-2] == want_step, (
                f"step {k}: the tree pass moved {traffic[-2]} bytes (read, written), the "
                f"model counts {want_step}")
            assert traffic[-1] == want_commit, (
                f"step {k}: the commit of path {path} moved {traffic[-1]} bytes (read, "
                f"written), the model counts {want_commit}")
        dut._log.info(f"step {k}: commit of path {path}: {c_rec} records, {c_cycles} cycles, "
                      f"{traffic[-1][0]} bytes read, {traffic[-1][1]} written")
        dut._log.info(f"step {k}: {V} nodes, {n_rec} records, {cycles} cycles, "
                      f"{traffic[-2][0]} bytes read, {traffic[-2][1]} written")

