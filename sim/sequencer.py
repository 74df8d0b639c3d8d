"""cocotb bench of :class:`hw.sequencer.Sequencer`: programs in a modeled memory, handed
to model engines in order, each record after its barrier.

The program memory is a :class:`sim.axi_master.LatencyReadSlave` (a fixed latency,
random AR and R stalls). Each engine is a model: it takes descriptors under random
back-pressure, queues them and finishes each after a random time, holding ``busy``
high (from the cycle after it takes one) while any is unfinished. Programs are random:
dispatches to random engines with random payloads of the engine's full width, and
random waits. Checks:

* every engine receives exactly its records' payloads, in program order (none lost,
  duplicated or moved to another engine);
* when a record is acted on, every engine it waits for has finished every descriptor
  it was handed before (and an ``END`` counts ``done`` only then);
* a bad record (opcode, engine, a misplaced ``END``) sets its error code and nothing
  after it is handed out; the next program runs clean;
* a reset of both domains in mid-program: only the next program's records appear;
* an ``abort_req`` in mid-program: nothing is handed out after the cycle it was raised in,
  what was handed out is a prefix of each engine's records, the error code is
  ``ABORTED``, ``done`` does not step, and the next program (no reset between) runs
  clean while the engines finish what they were handed.
"""

import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from specgen.hw.sequencer import OP_DISPATCH, OP_END, SeqError, encode_record, start_layout
from specgen.sim.axi_master import Memory, reset_and_attach, reset_domains, start_clocks
from specgen.sim.bench import offer, pack, params
from specgen.sim.bench import seed as bench_seed

#: Fabric cycles a program may take before the bench calls it stuck.
PROGRAM_TIMEOUT = 100_000


class Engine:
    """A model engine on port ``name``: random ready, a queue, random work times."""

    def __init__(self, index, name, width):
        self.index, self.name, self.width = index, name, width
        self.got = []              # payloads taken, in order
        self.finished = 0          # of them, finished
        self.queue = []            # cycles of work of each unfinished one

    def busy(self):
        return bool(self.queue)

    def clear(self):
        self.got, self.finished, self.queue = [], 0, []


class Bench:
    def __init__(self, dut, p):
        self.dut, self.p = dut, p
        self.rng = random.Random(bench_seed())
        self.memory = Memory(1 << p["addr_width"], self.rng)
        self.engines = [Engine(e, name, w) for e, (name, w) in enumerate(p["engines"])]
        self.layout = start_layout(p["addr_width"], p["max_records"])
        self.rb = p["record_bits"]
        self.violations = []
        self.top = 0
        start_clocks(dut, sync_mhz=p["sync_mhz"], mem_mhz=p["mem_mhz"])

    async def model(self):
        """Every cycle: each engine takes an offered descriptor (random ready), works on
        its queue and drives its bit of ``engine_busy``. A take is checked against
        :attr:`plan`: the right engine, and every engine its record waits for idle."""
        d = self.dut
        ready = {}
        while True:
            for e in self.engines:
                ready[e.name] = self.rng.random() < self.p["ready"]
                getattr(d, f"{e.name}__ready").value = int(ready[e.name])
            await ReadOnly()
            if int(d.rst.value):
                for e in self.engines:
                    e.queue.clear()
            else:
                for e in self.engines:
                    if int(getattr(d, f"{e.name}__valid").value) and ready[e.name]:
                        self.take(e, int(getattr(d, f"{e.name}__payload").value))
                for e in self.engines:     # the head of each queue advances one cycle
                    if e.queue and e.queue[0] == 0:
                        e.queue.pop(0)
                        e.finished += 1
                    elif e.queue:
                        e.queue[0] -= 1
            await RisingEdge(d.clk)
            d.engine_busy.value = sum(int(e.busy()) << i for i, e in enumerate(self.engines))

    def take(self, e, payload):
        i = self.handed
        if i >= len(self.plan):
            self.violations.append(f"{e.name} took a descriptor beyond the program's "
                                   f"{len(self.plan)}")
        else:
            name, wait = self.plan[i]
            if name != e.name:
                self.violations.append(f"hand-over {i} went to {e.name}, the program's "
                                       f"to {name}")
            for w in wait:
                en = self.engines[w]
                if en.finished < len(en.got):
                    self.violations.append(
                        f"hand-over {i} to {e.name} while {en.name}, which its record "
                        f"waits for, had {len(en.got) - en.finished} unfinished")
        e.got.append(payload)
        e.queue.append(self.rng.choice([0, 1, 3, self.rng.randint(0, 60)]))
        self.handed += 1

    def program(self, records, *, bad=None):
        """A random program of ``records`` records; ``bad`` plants a bad record at a
        random place: ``"op"``, ``"engine"`` or ``"end"``. Returns its start descriptor
        and the records as ``(op, engine, wait, payload)``."""
        r, n = self.rng, len(self.engines)
        recs = []
        for _ in range(records - 1):
            e = r.randrange(n)
            wait = [x for x in range(n) if r.random() < 0.25]
            recs.append((OP_DISPATCH, e, wait, r.getrandbits(self.engines[e].width)))
        recs.append((OP_END, 0, [x for x in range(n) if r.random() < 0.7], 0))
        at_bad = None
        if bad:
            at_bad = r.randrange(0, records)
            if bad == "op":
                recs[at_bad] = (r.choice([0, 3, 7, 15]), 0, [], 0)
            elif bad == "engine":
                recs[at_bad] = (OP_DISPATCH, r.randint(n, 15), [], 0)
            else:          # END early, or a last record that is not END
                recs[at_bad] = ((OP_END, 0, [], 0) if at_bad < records - 1
                                else (OP_DISPATCH, 0, [], 1))
        nbytes = self.rb // 8
        at = -(-self.top // nbytes) * nbytes + nbytes * r.randrange(0, 40)
        assert at + records * nbytes <= len(self.memory.data)
        self.top = at + records * nbytes
        blob = b"".join(encode_record(self.rb, op=op, engine=e, wait=w, payload=pl)
                        for op, e, w, pl in recs)
        self.memory.data[at:at + len(blob)] = blob
        return pack(self.layout, {"addr": at, "records": records}), recs, at_bad

    async def run(self, start, recs, *, at_bad=None, cut=None, abort=None):
        """Start a program and check it; with ``cut``, reset after that many hand-overs;
        with ``abort``, raise ``abort_req`` for a cycle after that many."""
        d = self.dut
        stop = at_bad if at_bad is not None else len(recs)
        expect = {e.name: [] for e in self.engines}
        plan = []
        for op, eng, wait, pl in recs[:stop]:
            if op == OP_DISPATCH:
                expect[self.engines[eng].name].append(pl)
                plan.append((self.engines[eng].name, wait))
        for e in self.engines:
            # Descriptors of the last program still unfinished count against this one's
            # barriers: finished starts at minus their number.
            e.got, e.finished = [], e.finished - len(e.got)
        self.plan, self.handed, self.violations = plan, 0, []
        await RisingEdge(d.clk)          # out of any ReadOnly phase the last run left
        done0, disp0 = int(d.done.value), int(d.dispatched.value)
        await offer(d, "start", start)
        for _ in range(PROGRAM_TIMEOUT):
            await RisingEdge(d.clk)
            await ReadOnly()
            assert not self.violations, self.violations[0]
            if cut is not None and self.handed >= cut:
                await RisingEdge(d.clk)
                await reset_domains(d)
                for e in self.engines:
                    e.clear()
                return
            if abort is not None and self.handed >= abort:
                await self.aborted(disp0, done0, expect)
                return
            if not int(d.busy.value):
                # The END was taken in the last cycle: the engines it waits for were idle
                # then, and nothing has been handed to them since.
                if at_bad is None:
                    for w in recs[-1][2]:
                        en = self.engines[w]
                        assert not en.queue, f"END before {en.name}, which it waits for, was idle"
                break
        else:
            raise AssertionError(f"program not finished in {PROGRAM_TIMEOUT} cycles "
                                 f"({self.handed} of {len(plan)} handed out)")
        for _ in range(5):      # nothing more is handed out after the program stops
            await RisingEdge(d.clk)
        await ReadOnly()
        assert not self.violations, self.violations[0]
        for e in self.engines:
            if e.got != expect[e.name]:
                first = next((i for i, (a, b) in enumerate(zip(e.got, expect[e.name]))
                              if a != b), min(len(e.got), len(expect[e.name])))
                raise AssertionError(f"engine {e.name} took {len(e.got)} descriptors, the "
                                     f"program gave it {len(expect[e.name])}; they differ "
                                     f"from number {first}")
        assert int(d.dispatched.value) - disp0 == len(plan), "dispatched miscounts"
        if at_bad is None:
            assert not int(d.error.value), f"error code {int(d.error_code.value)}"
            assert int(d.done.value) == done0 + 1, "END did not count the program done"
        else:
            assert int(d.error.value), "a bad record did not set error"
            op, eng, _, _ = recs[at_bad]
            want = (SeqError.OPCODE if op not in (OP_DISPATCH, OP_END) else
                    SeqError.ENGINE if op == OP_DISPATCH and eng >= len(self.engines) else
                    SeqError.END)
            assert int(d.error_code.value) == want.value, (
                f"error code {int(d.error_code.value)}, want {want.name}")
            assert int(d.done.value) == done0, "a bad program counted done"


    async def aborted(self, disp0, done0, expect):
        """Raise ``abort_req`` for one cycle, then check the program stopped (see the module
        docstring)."""
        d = self.dut
        await RisingEdge(d.clk)
        d.abort_req.value = 1                 # hand-overs of this cycle may still happen
        await RisingEdge(d.clk)
        d.abort_req.value = 0
        await RisingEdge(d.clk)
        await ReadOnly()
        # dispatched steps a cycle after its hand-over: this counts those through the
        # abort's cycle.
        allowed = int(d.dispatched.value) - disp0
        for _ in range(PROGRAM_TIMEOUT):
            if not int(d.busy.value):
                break
            await RisingEdge(d.clk)
            await ReadOnly()
        else:
            raise AssertionError("busy did not fall after an abort")
        for _ in range(5):
            await RisingEdge(d.clk)
        await ReadOnly()
        assert not self.violations, self.violations[0]
        assert int(d.error.value) and int(d.error_code.value) == SeqError.ABORTED.value, (
            f"after an abort: error {int(d.error.value)}, code {int(d.error_code.value)}")
        assert int(d.done.value) == done0, "an aborted program counted done"
        handed = int(d.dispatched.value) - disp0
        assert handed == allowed == self.handed, (
            f"{handed} handed out after the abort's cycle ({allowed} by then, the engines "
            f"took {self.handed})")
        assert self.handed < len(self.plan), "the program ended before its abort"
        for e in self.engines:
            assert e.got == expect[e.name][:len(e.got)], (
                f"engine {e.name}: an aborted program handed out no prefix of its records")


@cocotb.test()
async def programs(dut):
    """Random programs, bad ones among them, and one cut by a reset."""
    p = params()
    b = Bench(dut, p)
    dut.start__valid.value = 0
    dut.engine_busy.value = 0
    dut.abort_req.value = 0
    await reset_and_attach(dut, b.memory, p, b.rng, reads=["axi_"])
    cocotb.start_soon(b.model())
    for k in range(p["programs"]):
        if b.top > len(b.memory.data) // 2:
            b.top = 0
        records = b.rng.randint(1, p["max_records"]) if k else p["max_records"]
        bad = None
        if k % 4 == 3:
            bad = b.rng.choice(["op", "engine", "end"])
        if k == p.get("cut_program"):
            start, recs, _ = b.program(max(records, 8))
            await b.run(start, recs, cut=b.rng.randint(1, 5))
            continue
        if k in p.get("abort_programs", ()):
            start, recs, _ = b.program(max(records, 12))
            await b.run(start, recs, abort=b.rng.randint(1, 6))
            continue
        start, recs, at_bad = b.program(records, bad=bad)
        if p.get("corrupt") and k == 0:
            # The bench's own check: expect a payload the program does not hold.
            i = next(i for i, r in enumerate(recs) if r[0] == OP_DISPATCH)
            op, e, w, pl = recs[i]
            recs[i] = (op, e, w, pl ^ 1)
        await b.run(start, recs, at_bad=at_bad)
