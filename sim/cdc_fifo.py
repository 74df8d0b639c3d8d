"""cocotb bench of :class:`hw.cdc_fifo.CDCFIFO` between two asynchronous clocks.

The write side runs on one clock and the read side on the other, at the
frequencies of ``params`` (either may be the faster). A writer and a reader task
each drive their handshake with random idle and back-pressure, in phases that fill
the FIFO and drain it; a scoreboard checks that the words read are exactly the
words written, in order, and that no word is read that was not written.

Every edge of each side also checks:

* a write is accepted only while fewer than ``depth`` words are held;
* ``r_rdy`` only with a word held, and ``r_data`` is that word;
* ``w_level`` never counts fewer words than are held, but for one written at that
  edge, and never more than are held plus those read in the last edges, which its
  read pointer may not show yet;
* ``r_written`` is a count of words the write side had accepted (since its last reset,
  modulo ``2·depth``) at one of its recent edges: never ahead of the writes, never a
  value the write pointer did not hold.

Resets in mid-stream: both domains together (the AXI masters' contract), or the
write domain alone (the FIFO empties, and the read side must not return a word
written before it). Words unread at a reset are dropped; every word written after it
is read exactly once.
"""

import random
from collections import deque

#: Write edges of history ``r_written`` may lag by: the synchronizer (2 read edges), the
#: decode (2) and the phase (1), at the benches' fastest write-to-read clock ratio (2).
WRITTEN_LAG = 16

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, Timer

from specgen.sim.axi_master import period_ps
from specgen.sim.bench import params
from specgen.sim.bench import seed as bench_seed

#: Phases of (write idle, read stall): balanced, filling (reader slow), draining.
PHASES = [(0.3, 0.3), (0.0, 0.8), (0.8, 0.0), (0.0, 0.0), (0.5, 0.5)]


class FIFOBench:
    def __init__(self, dut, p):
        self.dut, self.p = dut, p
        self.rng = random.Random(bench_seed())
        self.w_clk, self.r_clk = getattr(dut, p["w_clk"]), getattr(dut, p["r_clk"])
        self.w_rst, self.r_rst = getattr(dut, p["w_rst"]), getattr(dut, p["r_rst"])
        cocotb.start_soon(Clock(self.w_clk, period_ps(p["w_mhz"]), unit="ps").start())
        # The read clock starts at a random phase to the write clock.
        cocotb.start_soon(self._late_clock(self.r_clk, p["r_mhz"]))
        self.queue = deque()       # words written, not yet read
        self.seq = 0
        self.mask = (1 << p["width"]) - 1
        self.written = self.read = self.dropped = 0
        # words accepted since the write side's last reset, after each of its edges
        self.w_hist = deque([0], maxlen=WRITTEN_LAG)
        # words read in total, at each write edge
        self.r_hist = deque([0], maxlen=WRITTEN_LAG)
        self.resetting = False
        self.epoch = 0             # resets so far
        self.reset_end = None
        self.phase = (0.3, 0.3)

    async def _late_clock(self, clk, mhz):
        await Timer(self.rng.randrange(1, period_ps(mhz)), unit="ps")
        await Clock(clk, period_ps(mhz), unit="ps").start()

    def word(self):
        # A sequence number in the low bits and random high bits: a lost, duplicated or
        # reordered word shows in the sequence, a corrupt bit in the whole word.
        self.seq += 1
        w = self.p["width"]
        low = min(w, 16)
        return ((self.rng.getrandbits(w) << low) | (self.seq & ((1 << low) - 1))) & self.mask

    async def writer(self, stop):
        """Offer words with random idle. A transfer happens on an edge where the ``w_en``
        set after the edge before met the ``w_rdy`` seen then (both hold for the cycle:
        ``w_rdy`` comes from write-side registers)."""
        dut = self.dut
        offered, en, rdy, epoch = self.word(), 0, 0, self.epoch
        while not stop["now"]:
            await RisingEdge(self.w_clk)
            wrote = bool(en and rdy and epoch == self.epoch)
            if wrote:
                held = len(self.queue)
                assert held < self.p["depth"], f"a write accepted with {held} words held"
                self.queue.append(offered)
                self.written += 1
                offered = self.word()
                self.w_hist.append(self.w_hist[-1] + 1)
            else:
                self.w_hist.append(self.w_hist[-1])
            await ReadOnly()
            rdy = int(dut.w_rdy.value)
            self.r_hist.append(self.read)
            level, held = int(dut.w_level.value), len(self.queue)
            if not self.resetting:
                recent = self.read - self.r_hist[0]
                assert held - wrote <= level <= held + recent, (
                    f"w_level {level} with {held} words held ({int(wrote)} written at this "
                    f"edge, {recent} read in the last {len(self.r_hist)} write edges; reset "
                    f"{self.epoch} ended at {self.reset_end} ns)")
            await Timer(1, unit="ps")
            epoch = self.epoch
            en = int(self.rng.random() >= self.phase[0] and not self.resetting)
            dut.w_en.value = en
            dut.w_data.value = offered

    async def reader(self, stop):
        """Take words with random stalls; check each word shown against the scoreboard.
        A write-domain reset lowers ``r_rdy`` asynchronously, so a read planned in a
        cycle in which a reset began is not counted (the epoch)."""
        dut = self.dut
        en, rdy, epoch = 0, 0, self.epoch
        while not stop["now"]:
            await RisingEdge(self.r_clk)
            if en and rdy and epoch == self.epoch:
                self.queue.popleft()
                self.read += 1
            await ReadOnly()
            rdy = int(dut.r_rdy.value)
            if not self.resetting:
                mod = 2 * self.p["depth"]
                written = int(dut.r_written.value)
                assert written in {v % mod for v in self.w_hist}, (
                    f"r_written {written}, not one of the write side's recent counts "
                    f"{sorted(set(self.w_hist))} (mod {mod})")
            if rdy:
                assert self.queue, "r_rdy with no word held"
                got = int(dut.r_data.value)
                assert got == self.queue[0], (
                    f"read {got:#x}, expected {self.queue[0]:#x} (word {self.read})")
            await Timer(1, unit="ps")
            epoch = self.epoch
            en = int(self.rng.random() >= self.phase[1])
            dut.r_en.value = en

    async def reset(self, *, write_only):
        """Assert the write domain's reset (and the read domain's unless ``write_only``)
        just after a write edge, hold it 4 edges of each clock, release it."""
        await RisingEdge(self.w_clk)
        await Timer(1, unit="ps")
        self.resetting = True
        self.epoch += 1
        self.dut.w_en.value = 0
        self.w_rst.value = 1
        if not write_only:
            self.r_rst.value = 1
        # From here the read side sees r_rst (asserted asynchronously): nothing written
        # before the reset may be read, so the words held are dropped.
        self.dropped += len(self.queue)
        self.queue.clear()
        self.w_hist.clear()
        self.w_hist.append(0)
        await ClockCycles(self.w_clk, 4)
        await ClockCycles(self.r_clk, 4)
        self.w_rst.value = 0
        self.r_rst.value = 0
        await ClockCycles(self.w_clk, 1)
        self.resetting = False
        self.reset_end = (cocotb.utils.get_sim_time("ns"), write_only)


async def _start(dut):
    """The bench's clocks, its inputs idle, both domains reset."""
    tb = FIFOBench(dut, params())
    dut.w_en.value = 0
    dut.r_en.value = 0
    dut.w_data.value = 0
    await tb.reset(write_only=False)
    await ClockCycles(tb.r_clk, 4)
    return tb


@cocotb.test()
async def random_traffic(dut):
    """Phases of random idle and stalls, with resets in mid-stream (both domains, and
    the write domain alone); then a drain: every word written after the last reset is
    read, in order."""
    tb = await _start(dut)
    p = tb.p
    stop = {"now": False}
    w = cocotb.start_soon(tb.writer(stop))
    r = cocotb.start_soon(tb.reader(stop))
    resets = 0
    for i in range(p["phases"]):
        tb.phase = PHASES[i % len(PHASES)] if i % 7 else (tb.rng.random(), tb.rng.random())
        await ClockCycles(tb.w_clk, tb.rng.randrange(2 * p["depth"], 8 * p["depth"] + 40))
        if p.get("resets") and i % 5 == 4:
            await tb.reset(write_only=bool(resets % 2))
            resets += 1
    tb.phase = (1.0, 0.0)           # drain
    await ClockCycles(tb.w_clk, 4)
    for _ in range(20 * p["depth"] + 100):
        await RisingEdge(tb.r_clk)
        if not tb.queue:
            break
    assert not tb.queue, f"{len(tb.queue)} words written were never read"
    stop["now"] = True
    await w
    await r
    assert tb.written > 10 * p["depth"], f"only {tb.written} words written"
    dut._log.info("%d words written, %d read, %d dropped at %d resets", tb.written, tb.read,
                  tb.dropped, resets)


@cocotb.test()
async def full_rate(dut):
    """No idle and no stalls: the FIFO carries a word every edge of the slower clock,
    at least 95 % of the time over ``rate_words`` words (a depth of 8 covers the
    pointers' round trip, ``latency`` edges each way)."""
    tb = await _start(dut)
    p = tb.p
    tb.phase = (0.0, 0.0)
    stop = {"now": False}
    w = cocotb.start_soon(tb.writer(stop))
    r = cocotb.start_soon(tb.reader(stop))
    while tb.read < p["depth"]:
        await RisingEdge(tb.r_clk)
    start = cocotb.utils.get_sim_time("ps")
    first = tb.read
    while tb.read < first + p["rate_words"]:
        await RisingEdge(tb.r_clk)
    span = cocotb.utils.get_sim_time("ps") - start
    stop["now"] = True
    await w
    await r
    slower = max(period_ps(p["w_mhz"]), period_ps(p["r_mhz"]))
    rate = p["rate_words"] * slower / span
    dut._log.info("%.3f words per edge of the slower clock", rate)
    assert rate >= 0.95, f"{rate:.3f} words per edge of the slower clock, want >= 0.95"
