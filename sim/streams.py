"""A checked stream pipe for cocotb benches of single-stream blocks (``i`` -> ``o``).

Used by the benches of blocks with one input and one output stream whose
output items are a pure function of the input items, in order.
"""

import random
from collections import deque

from cocotb.triggers import ReadOnly, RisingEdge, Timer

from sim.bench import TB, seed

__all__ = ["start", "run_stream"]


async def start(dut):
    """Clock and reset the DUT; return the run's seeded RNG.

    With ``stages = 0`` the block is combinational and Amaranth emits no ``clk`` or
    ``rst`` port; the bench then steps time itself (:func:`run_stream`).
    """
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    dut.i__payload.value = 0
    if not hasattr(dut, "clk"):
        return random.Random(seed())
    tb = TB(dut)
    await tb.reset()
    return tb.rng


async def run_stream(dut, rng, *, inputs, expected, stages, idle, stall, reset_every=None,
                     labels=None, max_cycles=None):
    """Stream ``inputs`` through the DUT's ``i`` port and check ``o`` against ``expected``.

    The source presents item ``n`` (holding ``valid`` and ``payload`` until it is
    taken) after random idle cycles; the sink drops ``ready`` at random. In every
    cycle, with the outputs settled: ``o.payload`` must equal the oldest item in
    flight whenever ``o.valid`` is high (so it is also stable under back-pressure),
    an output with nothing in flight fails, an item leaves no earlier than
    ``stages`` cycles after it entered, and with ``stages = 0`` valid and ready
    pass straight through. A reset cycle (probability ``1 / reset_every``) voids
    the items in flight.

    Returns
    -------
    dict
        ``sent``, ``delivered``, ``dropped`` (by resets), ``resets``, ``cycles``.
    """
    clocked = hasattr(dut, "clk")
    assert clocked or reset_every is None, "a combinational DUT has no reset"
    n = len(inputs)
    labels = labels if labels is not None else [f"item {k}" for k in range(n)]
    inflight = deque()  # (index, cycle accepted), oldest first
    stats = {"sent": 0, "delivered": 0, "dropped": 0, "resets": 0, "cycles": 0}
    i_valid, i_payload, o_ready, nxt, driven_valid, driven_rst = 0, None, 0, 0, 0, 0
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    limit = max_cycles if max_cycles is not None else 20 * n + 1000
    cycle = 0
    while nxt < n or i_valid or inflight:
        assert cycle < limit, f"cycle {cycle}: stalled with {len(inflight)} item(s) in flight"
        if not i_valid and nxt < n and (idle == 0 or rng.random() >= idle):
            i_valid, i_payload = 1, nxt
            nxt += 1
            dut.i__payload.value = inputs[i_payload]
        if i_valid != driven_valid:
            dut.i__valid.value = driven_valid = i_valid
        ready = int(stall == 0 or rng.random() >= stall)
        if ready != o_ready:
            dut.o__ready.value = o_ready = ready
        rst = int(reset_every is not None and rng.random() < 1 / reset_every)
        if rst != driven_rst:
            dut.rst.value = driven_rst = rst
        await ReadOnly()

        o_valid = int(dut.o__valid.value)
        i_ready = int(dut.i__ready.value) if i_valid or stages == 0 else 0
        if stages == 0:
            assert i_ready == o_ready and o_valid == i_valid, (
                f"cycle {cycle}: combinational pass-through broken: i.valid={i_valid} "
                f"o.valid={o_valid} o.ready={o_ready} i.ready={i_ready}")
            head = (i_payload, cycle) if i_valid else None
        else:
            head = inflight[0] if inflight else None
        if o_valid:
            assert head is not None, f"cycle {cycle}: o.valid with no item in flight"
            k, t_in = head
            got = int(dut.o__payload.value)
            assert got == expected[k], (
                f"cycle {cycle}: {labels[k]} (input 0x{inputs[k]:x}): o.payload = 0x{got:x}, "
                f"golden says 0x{expected[k]:x}")
            assert cycle - t_in >= stages, (
                f"cycle {cycle}: {labels[k]} left after {cycle - t_in} cycles, latency is {stages}")
            if o_ready:
                stats["delivered"] += 1
                if stages:
                    inflight.popleft()
        if i_valid and i_ready:
            stats["sent"] += 1
            if stages:
                inflight.append((i_payload, cycle))
            i_valid = 0
        if rst:
            stats["resets"] += 1
            stats["dropped"] += len(inflight)
            inflight.clear()
        assert len(inflight) <= stages, f"cycle {cycle}: {len(inflight)} items in {stages} stages"

        if clocked:
            await RisingEdge(dut.clk)
        else:
            await Timer(10, unit="ns")
        cycle += 1
    dut.i__valid.value = 0
    if driven_rst:
        dut.rst.value = 0
    stats["cycles"] = cycle
    assert stats["sent"] == n, stats
    assert stats["delivered"] + stats["dropped"] == n, stats
    dut._log.info("stats: %s", stats)
    return stats
