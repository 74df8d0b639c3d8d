"""Shared pieces of the cocotb benches (run inside the simulator process).

In the style of verilog-axis / cocotbext-axi: a :class:`TB` owns the clock and
reset, and every stream test runs under random idle cycles on its sources and
random back-pressure on its sinks, drawn from one seeded generator.
"""

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge
from cocotbext.axi.stream import StreamSink

__all__ = ["params", "seed", "TB", "ChannelStalls", "RandomResets", "pack", "field", "drive_stream", "offer",
           "reset_mid_stream"]


def params():
    """The JSON parameters :func:`sim.runner.run_bench` handed to this run."""
    return json.loads(os.environ.get("SPECGEN_PARAMS", "{}"))


def seed():
    """The run's seed (printed by the runner; ``SPECGEN_SEED`` replays it)."""
    return int(os.environ["SPECGEN_SEED"])


class ChannelStalls:
    """Random stalls of many ``cocotbext-axi`` channels on one clock, drawn by one task.

    Each channel added pauses in a cycle with its probability, independently of every
    other cycle and channel: what ``cocotbext-axi``'s ``channel.set_pause_generator`` gives
    with a 0/1 generator of such draws, but that runs a task per channel that wakes every
    cycle. In a bench of many ports those wake-ups are most of the Python time (profiled
    with ``COCOTB_ENABLE_PROFILING``: 16 M of the 24.5 M task switches of the SPEQ
    generation bench); here a cycle costs one wake-up and a draw per channel. Like
    ``set_pause_generator``, the pause of a cycle is set before its rising edge and is
    not touched by resets.

    One difference, for the same reason: a sink (AR, AW, W) whose ``valid`` is low is not
    woken when its pause changes (``cocotbext-axi`` wakes it only to redrive ``ready``,
    which no handshake reads while ``valid`` is low). A task per sink that wakes only as
    its ``valid`` rises drives ``ready`` from the current draw then, so the first cycle
    of a ``valid`` sees a draw too. (Without it the sink's ``ready`` in that cycle is the
    one it fell asleep with, mostly a "go": it sleeps only after two equal draws, so AR
    was refused 3.2 % of its valid cycles at a 10 % rate, which ``TB.check_stalls`` of
    ``sim.axi_master`` caught. Driving ``ready`` from this task at every draw instead
    doubled the SPEQ generation bench's time: 159 s against 86 s.) Every other pause
    change goes through the channel's own ``pause`` setter.

    Parameters
    ----------
    clock : cocotb handle
        The channels' clock.
    rng : random.Random
        The bench's generator (its seed replays the stalls).
    """

    def __init__(self, clock, rng):
        self.clock, self.rng = clock, rng
        self._channels, self._draws = {}, ()
        self._task, self._watched = None, set()

    def add(self, channel, probability):
        """Stall ``channel`` (a ``cocotbext-axi`` stream channel of :attr:`clock`) with
        ``probability`` in [0, 1), replacing its earlier one; 0 leaves it unstalled (no
        draw)."""
        if not 0.0 <= probability < 1.0:
            raise ValueError(f"ChannelStalls.add: probability must be in [0, 1), "
                             f"not {probability!r}")
        if not probability:
            if self._channels.pop(channel, None) is not None:
                channel.pause = False
        else:
            self._channels[channel] = probability
        # (channel, probability, its valid if it is a sink: see the class docstring)
        self._draws = tuple((ch, p, ch.valid if isinstance(ch, StreamSink) else None)
                            for ch, p in self._channels.items())
        if isinstance(channel, StreamSink) and channel not in self._watched:
            self._watched.add(channel)
            cocotb.start_soon(self._ready_on_valid(channel))
        if self._draws and self._task is None:
            self._task = cocotb.start_soon(self._run())

    @staticmethod
    async def _ready_on_valid(channel):
        # The sink wakes as valid rises but drives ready only after the next edge, which
        # samples the ready it had when it fell asleep: drive the current draw now.
        rise = RisingEdge(channel.valid)
        while True:
            await rise
            channel.ready.value = not (channel._pause or channel.full())

    async def _run(self):
        edge, draw = RisingEdge(self.clock), self.rng.random
        while True:
            for channel, probability, valid in self._draws:
                pause = draw() < probability
                if pause == channel._pause:
                    continue
                if valid is not None and str(valid.value) == "0":
                    channel._pause = pause          # asleep: ready set as valid rises
                else:
                    channel.pause = pause           # the setter wakes it
            await edge


class RandomResets:
    """Per-cycle reset draws: the first reset at a uniform cycle in ``[1, every]``,
    then each cycle with probability ``1 / every``.

    The first is placed rather than drawn because a geometric draw alone gives a
    run of ``n`` cycles no reset at all with probability about ``exp(-n / every)``
    (2 % for a 450-cycle run at ``every = 120``), and a bench that asserts it saw a
    reset would then fail on a good design. ``every=None`` never resets and draws
    nothing from ``rng``.
    """

    def __init__(self, rng, every):
        if every is not None and every < 1:
            raise ValueError(f"RandomResets: every must be None or >= 1, got {every!r}")
        self.rng, self.every = rng, every
        self._first = None if every is None else rng.randint(1, every)
        self._cycle = 0

    def __call__(self):
        """Whether to assert ``rst`` in the next cycle."""
        if self.every is None:
            return False
        self._cycle += 1
        draw = self.rng.random() < 1 / self.every
        return draw or self._cycle == self._first


class TB:
    """Clock, reset and a seeded RNG for one DUT.

    The DUT's clock and reset are Amaranth's ``clk`` and ``rst`` (synchronous,
    active high).
    """

    def __init__(self, dut, *, period_ns=10):
        self.dut = dut
        self.rng = random.Random(seed())
        self.period_ns = period_ns
        self.cycle = 0
        cocotb.start_soon(Clock(dut.clk, period_ns, unit="ns").start())

    async def reset(self, cycles=2):
        """Hold ``rst`` for ``cycles`` rising edges, then release it."""
        self.dut.rst.value = 1
        for _ in range(cycles):
            await RisingEdge(self.dut.clk)
        self.dut.rst.value = 0

    async def edge(self):
        """Wait for the next rising edge."""
        await RisingEdge(self.dut.clk)
        self.cycle += 1

    async def settle(self):
        """Wait until combinational outputs of this cycle are stable."""
        await ReadOnly()


def pack(layout, value):
    """The integer of a ``lib.data`` layout's constant ``value`` (a dict of fields)."""
    return layout.const(value).as_value().value


def field(word, layout, name):
    """Field ``name`` of ``layout`` in the integer ``word``."""
    f = layout[name]
    return (word >> f.offset) & ((1 << f.width) - 1)


async def offer(dut, port, payload):
    """Hold ``payload`` valid on stream ``port`` of ``dut`` until the cycle it is taken;
    then put junk on the payload (a block must not read a descriptor's port after the
    handshake, as a sequencer moves on to its next record)."""
    data = getattr(dut, port + "__payload")
    data.value = payload
    getattr(dut, port + "__valid").value = 1
    while True:
        await ReadOnly()
        taken = int(getattr(dut, port + "__ready").value)
        await RisingEdge(dut.clk)
        if taken:
            break
    getattr(dut, port + "__valid").value = 0
    data.value = random.Random(payload).getrandbits(len(data))


async def expect_quiet(dut, valid, cycles, what):
    """``cycles`` clock edges after the last expected beat with ``valid`` low throughout:
    a beat then would be one ``what`` did not ask for."""
    for _ in range(cycles):
        await RisingEdge(dut.clk)
        await ReadOnly()
        assert not int(valid.value), f"a beat came out that no {what} asked for"


def write_report(p, stats):
    """Write ``stats`` as JSON to the file the bench parameter ``report`` names, if any."""
    if p.get("report"):
        with open(p["report"], "w") as f:
            json.dump(stats, f)


async def drive_stream(tb, port, beats, idle, stop):
    """Offer ``beats`` in order on the ``lib.stream`` port ``port`` (``<port>__valid``,
    ``__payload``, ``__ready``), idle with probability ``idle`` per cycle; stop early
    when ``stop["now"]``. A beat moves in a cycle with valid and ready."""
    dut, rng = tb.dut, tb.rng
    valid = getattr(dut, f"{port}__valid")
    payload = getattr(dut, f"{port}__payload")
    ready = getattr(dut, f"{port}__ready")
    i = 0
    while i < len(beats) and not stop["now"]:
        go = rng.random() >= idle
        valid.value = int(go)
        payload.value = beats[i] if go else 0
        await ReadOnly()
        taken = go and int(ready.value)
        await RisingEdge(dut.clk)
        i += taken
    valid.value = 0


async def reset_mid_stream(tb, *, new_job, drivers, reset, run, hold_cycles, jobs=4):
    """Reset a unit while jobs, beats and results are in flight, then run fresh jobs.

    ``drivers(jobs, stop)`` starts the stream drivers of ``jobs`` and returns their
    tasks; ``y`` is held (not ready) for ``hold_cycles`` cycles, the drivers stop,
    ``reset()`` resets the unit, which must then show no result and no busy cycle;
    ``run(jobs)`` checks ``jobs`` new ones (only they may appear).
    """
    from cocotb.triggers import RisingEdge
    stop = {"now": False}
    tasks = drivers([new_job() for _ in range(jobs)], stop)
    tb.dut.y__ready.value = 0
    for _ in range(hold_cycles):
        await RisingEdge(tb.dut.clk)
    stop["now"] = True
    for t in tasks:
        await t
    await reset()
    assert int(tb.dut.y__valid.value) == 0 and int(tb.dut.busy_cycles.value) == 0
    await run([new_job() for _ in range(jobs)])
