"""cocotb bench of :class:`hw.activation_reader.ActivationReader`: token-major vectors in a
modeled memory out as the linear unit's input-major, token-minor stream, word for word.

The memory is a :class:`sim.axi_master.LatencyReadSlave` (a fixed latency, random AR and
R stalls) over random bytes. Each job draws its tokens, inputs, start and stride (vectors
apart, overlapping, or all one vector), and the expected stream is read from the memory
bytes by the layout of the module docstring. Jobs are offered with random gaps and the
output taken under random back-pressure; every job's words must come out in order, none
lost, duplicated or moved across a job. One run is cut by a reset of both domains in
mid-stream; only the jobs offered after it may then appear.
"""

import random

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge
from specgen.hw.activation_reader import job_layout
from specgen.sim.axi_master import Memory, reset_and_attach, reset_domains, start_clocks
from specgen.sim.bench import pack, params, write_report
from specgen.sim.bench import seed as bench_seed

#: Fabric cycles without an output word before the bench calls the reader stuck.
STUCK = 20_000


class Bench:
    def __init__(self, dut, p):
        self.dut, self.p = dut, p
        self.rng = random.Random(bench_seed())
        self.memory = Memory(1 << p["addr_width"], self.rng)
        self.layout = job_layout(addr_width=p["addr_width"], max_steps=p["max_steps"],
                                 max_tokens=p["max_tokens"])
        self.got = []
        self.ready_rate = 1 - p["stall"]
        start_clocks(dut, sync_mhz=p["sync_mhz"], mem_mhz=p["mem_mhz"])

    def job(self, *, steps=None, tokens=None):
        """A random job: its descriptor and the words it must produce, in order."""
        p, r = self.p, self.rng
        steps = steps or r.choice([r.randint(1, p["max_steps"]), p["max_steps"],
                                   r.randint(1, 8)])
        tokens = tokens or r.randint(1, p["max_tokens"])
        vec = -(-2 * steps // 8) * 8
        stride = r.choice([vec, vec + 8 * r.randint(1, 40), 8 * r.randint(0, vec // 8),
                           0 if tokens > 1 else vec])
        span = (tokens - 1) * stride + vec
        addr = 8 * r.randrange(0, (len(self.memory.data) - span) // 8)
        words = np.frombuffer(bytes(self.memory.data), "<u2")
        base = np.arange(tokens)[None, :] * (stride // 2) + np.arange(steps)[:, None]
        want = words[addr // 2 + base].reshape(-1).tolist()          # k-major, t-minor
        desc = {"addr": addr, "stride": stride, "steps": steps, "n_tokens": tokens}
        return pack(self.layout, desc), want, desc

    async def drive(self, jobs, idle, stop):
        d = self.dut
        for desc, _, _ in jobs:
            while self.rng.random() < idle:
                await RisingEdge(d.clk)
            d.job__payload.value = desc
            d.job__valid.value = 1
            while True:
                await ReadOnly()
                taken = int(d.job__ready.value)
                await RisingEdge(d.clk)
                if taken or stop["now"]:
                    break
            d.job__valid.value = 0
            if stop["now"]:
                return

    async def sink(self, stop):
        """Take ``x`` words under random back-pressure into :attr:`got`; count cycles."""
        d = self.dut
        self.cycles = 0
        self.span = [None, None]
        while not stop["now"]:
            d.x__ready.value = int(self.rng.random() < self.ready_rate)
            await ReadOnly()
            if int(d.x__valid.value) and int(d.x__ready.value):
                self.got.append(int(d.x__payload.value))
                self.span = [self.span[0] or self.cycles, self.cycles]
            await RisingEdge(d.clk)
            self.cycles += 1
        d.x__ready.value = 0

    async def run(self, jobs, *, idle, cut=None):
        """Offer ``jobs``; wait for all their words (or, with ``cut``, reset after that many
        words and return). Checks the words against the jobs' in order."""
        d = self.dut
        self.got = []
        want = [w for _, ws, _ in jobs for w in ws]
        stop = {"now": False}
        drv = cocotb.start_soon(self.drive(jobs, idle, stop))
        snk = cocotb.start_soon(self.sink(stop))
        last, seen = 0, 0
        goal = cut if cut is not None else len(want)
        while len(self.got) < goal:
            await RisingEdge(d.clk)
            if len(self.got) != seen:
                seen, last = len(self.got), 0
            last += 1
            assert last < STUCK, (f"no word in {STUCK} cycles after {len(self.got)} of "
                                  f"{len(want)}")
            assert not int(d.error.value) and not int(d.overrun.value), "read error or overrun"
        stop["now"] = True
        await drv
        await snk
        if cut is not None:
            await reset_domains(d)
            return
        # A few more cycles with ready high: no word beyond the jobs'.
        d.x__ready.value = 1
        for _ in range(50):
            await ReadOnly()
            assert not int(d.x__valid.value), "a word came out that no job asked for"
            await RisingEdge(d.clk)
        d.x__ready.value = 0
        for i, (g, w) in enumerate(zip(self.got, want)):
            if g != w:
                at, job = i, 0
                while at >= len(jobs[job][1]):
                    at -= len(jobs[job][1])
                    job += 1
                dj = jobs[job][2]
                k, t = divmod(at, dj["n_tokens"])
                raise AssertionError(f"job {job} {dj}: word {at} (k {k}, token {t}) is "
                                     f"{g:#06x}, memory holds {w:#06x}")
        assert len(self.got) == len(want), f"{len(self.got)} words, {len(want)} wanted"


async def _start(dut, p):
    b = Bench(dut, p)
    dut.job__valid.value = 0
    dut.x__ready.value = 0
    await reset_and_attach(dut, b.memory, p, b.rng, reads=["axi_"])
    return b


@cocotb.test()
async def random_jobs(dut):
    """Batches of random jobs, offered with gaps, taken under back-pressure; a batch cut by
    a reset in mid-stream, then a fresh one."""
    p = params()
    b = await _start(dut, p)
    for batch in range(p["batches"]):
        jobs = [b.job() for _ in range(b.rng.randint(1, 6))]
        if p.get("corrupt") and batch == 0:
            jobs[0][1][len(jobs[0][1]) // 2] ^= 1
        if batch == p.get("cut_batch"):
            total = sum(len(w) for _, w, _ in jobs)
            await b.run(jobs, idle=0.3, cut=b.rng.randrange(1, max(total, 2)))
            continue
        await b.run(jobs, idle=0.3)


@cocotb.test()
async def rate(dut):
    """Jobs of ``max_steps`` inputs and ``tokens`` tokens back to back, output always ready:
    words a cycle from the first word to the last (the stall parameter still pauses the
    memory's AR and R channels)."""
    p = params()
    b = await _start(dut, p)
    b.ready_rate = 1.0
    jobs = [b.job(steps=p["max_steps"], tokens=p["tokens"]) for _ in range(p["rate_jobs"])]
    await b.run(jobs, idle=0.0)
    words = len(b.got)
    write_report(p, {"words": words, "span": b.span[1] - b.span[0] + 1,
                     "first": b.span[0]})
