"""One bench loop for Amaranth's simulator and for an HDL simulator through cocotb.

A bench is a set of *participants*: objects whose ``run()`` is a generator
that yields the inputs it drives for one cycle (a dict of port names, as
Amaranth names them: ``y__ready``) and receives every output of that cycle
(plus ``rst`` and ``cycle``). The first participant is the host: the run
ends when its generator returns. :class:`Loop` steps them; :func:`run_amaranth`
and :func:`run_cocotb` only move values between the loop and a simulator, so
the same participants run on both.

``rst`` is an input like any other: a participant that yields ``rst=1``
resets the design (the ``sync`` domain) in that cycle.
"""

from amaranth import ClockDomain, Elaboratable, Module, Signal, Value
from amaranth.lib.wiring import In

from specgen.hw.hierarchy import port_name

__all__ = ["Loop", "Sink", "ports", "run_amaranth", "run_cocotb"]


class _WithReset(Elaboratable):
    """The top in a ``sync`` domain whose reset the bench drives (``rst``)."""

    def __init__(self, top):
        self.top = top
        self.rst = Signal(name="bench_rst")

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = cd = ClockDomain("sync")
        m.d.comb += cd.rst.eq(self.rst)
        m.submodules.top = self.top
        return m


def ports(top):
    """Input and output ports of ``top`` by Verilog name: two dicts of Amaranth values."""
    ins, outs = {}, {}
    for path, member, value in top.signature.flatten(top):
        (ins if member.flow == In else outs)[port_name(path)] = Value.cast(value)
    return ins, outs


class Loop:
    """The cycle loop shared by the Amaranth and cocotb runners.

    Each cycle every participant yields the inputs it drives; the runner
    applies them, lets the design settle and hands every output (plus ``rst``
    and ``cycle``) back to every participant. The run ends with ``host``.
    """

    def __init__(self, participants, *, max_cycles):
        self.gens = [p.run() for p in participants]
        self.max_cycles = max_cycles
        self.cycle = 0
        self.merged = None

    def _merge(self, inputs):
        # rst is driven every cycle: high only in the cycles a participant asks for it.
        self.merged = {"rst": 0}
        for d in inputs:
            self.merged.update(d)
        return self.merged

    def start(self):
        return self._merge([next(g) for g in self.gens])

    def step(self, outs):
        """Outputs of this cycle in; next cycle's inputs out (``None``: the host is done)."""
        outs["rst"] = self.merged.get("rst", 0)
        outs["cycle"] = self.cycle
        try:
            inputs = [g.send(outs) for g in self.gens]
        except StopIteration:
            return None
        self.cycle += 1
        assert self.cycle < self.max_cycles, f"no end after {self.cycle} cycles"
        return self._merge(inputs)


def run_amaranth(top, participants, *, max_cycles=200_000):
    """Run participants (the host first) against ``top`` on Amaranth's simulator.

    Returns the number of cycles.
    """
    from amaranth.sim import Simulator

    wrapper = _WithReset(top)
    ins, outs = ports(top)
    ins["rst"] = wrapper.rst
    loop = Loop(participants, max_cycles=max_cycles)

    async def bench(ctx):
        inp = loop.start()
        while inp is not None:
            for k, v in inp.items():
                ctx.set(ins[k], v)
            inp = loop.step({k: ctx.get(v) for k, v in outs.items()})
            if inp is not None:
                await ctx.tick()

    sim = Simulator(wrapper)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return loop.cycle


class Sink:
    """Random ``ready`` on a stream; hands transfers to ``on_take``."""

    def __init__(self, name, rng, stall, on_take, on_valid=None):
        self.name, self.rng, self.stall = name, rng, stall
        self.on_take, self.on_valid = on_take, on_valid

    def run(self):
        ready = int(self.rng.random() >= self.stall)
        o = yield {f"{self.name}__ready": ready}
        while True:
            if not o["rst"] and o[f"{self.name}__valid"]:
                if self.on_valid:
                    self.on_valid(o)
                if ready:
                    self.on_take(o[f"{self.name}__payload"], o)
            ready = int(self.rng.random() >= self.stall)
            o = yield {f"{self.name}__ready": ready}


async def run_cocotb(dut, top, participants, *, max_cycles=500_000):
    """Run participants (the host first) against ``dut``, the Verilog of ``top``, under cocotb.

    ``top`` is the Amaranth component the Verilog was emitted from; it is
    rebuilt only to learn its port names. Inputs are applied after the clock
    edge and outputs read in the read-only phase of the same cycle, as
    :func:`run_amaranth` does. Returns the number of cycles.
    """
    from cocotb.triggers import ReadOnly, RisingEdge

    from specgen.hw.hierarchy import template
    from specgen.sim.bench import TB

    template(top)
    ins, outs = ports(top)
    tb = TB(dut)
    handles_in = {k: getattr(dut, k) for k in ins}
    handles_in["rst"] = dut.rst
    handles_out = {k: getattr(dut, k) for k in outs}
    for h in handles_in.values():
        h.value = 0
    await tb.reset()
    loop = Loop(participants, max_cycles=max_cycles)
    inp = loop.start()
    while inp is not None:
        for k, v in inp.items():
            handles_in[k].value = v
        await ReadOnly()
        inp = loop.step({k: int(h.value) for k, h in handles_out.items()})
        if inp is not None:
            await RisingEdge(dut.clk)
    return loop.cycle
