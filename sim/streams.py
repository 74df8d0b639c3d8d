"""A checked stream pipe for cocotb benches of single-stream blocks (``i`` -> ``o``).

Used by the benches of blocks with one input and one output stream whose
output items are a pure function of the input items, in order.
"""

import random
from collections import deque

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge, Timer

from specgen.golden.bsfp import BSFPConfig
from specgen.sim.bench import TB, RandomResets, params, seed

__all__ = ["start", "run_stream", "config_from", "shuffled_words", "word_stream_tests",
           "run_vectors", "abandon_and_reset"]

WORDS = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)




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
                     labels=None, max_cycles=None, capacity=None):
    """Stream ``inputs`` through the DUT's ``i`` port and check ``o`` against ``expected``.

    The source presents item ``n`` (holding ``valid`` and ``payload`` until it is
    taken) after random idle cycles; the sink drops ``ready`` at random. In every
    cycle, with the outputs settled: ``o.payload`` must equal the oldest item in
    flight whenever ``o.valid`` is high (so it is also stable under back-pressure),
    an output with nothing in flight fails, an item leaves no earlier than
    ``stages`` cycles after it entered, and with ``stages = 0`` valid and ready
    pass straight through. A reset cycle (:class:`RandomResets` of ``reset_every``) voids
    the items in flight. At most ``capacity`` items (default ``stages``) may be in
    flight: a block with an output FIFO holds more than its latency under
    back-pressure.

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
    resets = RandomResets(rng, reset_every)
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
        rst = int(resets())
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
        cap = stages if capacity is None else capacity
        assert len(inflight) <= cap, f"cycle {cycle}: {len(inflight)} items in {cap} stages"

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


def config_from(p):
    """The :class:`BSFPConfig` a bench run's JSON parameters describe."""
    return BSFPConfig(remap=tuple(tuple(pair) for pair in p["remap"]), draft=p["draft"],
                      pair_representative=p.get("pair_representative", "lower"))


def shuffled_words(rng, limit=None):
    """All 65,536 words in a random order drawn from the run's seed (or the first ``limit``)."""
    words = WORDS[np.random.default_rng(rng.getrandbits(64)).permutation(WORDS.size)]
    return words if limit is None else words[:limit]


def word_stream_tests(vectors, labels, *, module):
    """The three cocotb tests of a 16-bit-word stream block, for bench ``module``.

    ``vectors(config, words)`` gives ``(inputs, expected)``; ``labels(words)``
    names each item in failure messages. Returns ``(exhaustive, full_rate,
    reset_mid_stream)`` as cocotb tests owned by ``module``.
    """
    def _setup():
        p = params()
        return config_from(p), p["stages"]

    async def exhaustive(dut):
        """Every word, under random source idle and sink back-pressure."""
        config, stages = _setup()
        rng = await start(dut)
        words = shuffled_words(rng, params().get("limit"))
        inputs, expected = vectors(config, words)
        stats = await run_stream(dut, rng, inputs=inputs, expected=expected, stages=stages,
                                 idle=0.1, stall=0.1, labels=labels(words))
        assert stats["delivered"] == len(words), stats

    async def full_rate(dut):
        """No idle, no back-pressure: one item per cycle, each after exactly ``stages`` cycles."""
        config, stages = _setup()
        rng = await start(dut)
        words = shuffled_words(rng, 500)
        inputs, expected = vectors(config, words)
        stats = await run_stream(dut, rng, inputs=inputs, expected=expected, stages=stages,
                                 idle=0, stall=0, labels=labels(words))
        assert stats["cycles"] == len(words) + stages, stats

    async def reset_mid_stream(dut):
        """Synchronous resets at random points while items are in flight."""
        config, stages = _setup()
        rng = await start(dut)
        words = shuffled_words(rng, 3000)
        inputs, expected = vectors(config, words)
        stats = await run_stream(dut, rng, inputs=inputs, expected=expected, stages=stages,
                                 idle=0.3, stall=0.4, reset_every=60, labels=labels(words))
        assert stats["resets"] > 0, stats
        if stages:
            assert stats["dropped"] > 0, stats

    tests = []
    for fn in (exhaustive, full_rate, reset_mid_stream):
        fn.__module__ = module
        fn.__qualname__ = fn.__name__
        tests.append(cocotb.test()(fn))
    return tuple(tests)


# -- blocks whose outputs are not one per input (vectors in, results out) -------------

async def run_vectors(tb, beats, expected, *, n, idle, stall):
    """Drive ``beats`` on ``i``, check ``o`` against ``expected`` in order.

    For blocks whose outputs are not one per input (a vector in, its elements or one
    result out). The source idles with probability ``idle`` per cycle, the sink
    stalls with probability ``stall``. Whenever ``o.valid`` is high, ``o.payload``
    must be the next expected output (so it holds under back-pressure); after the
    last one, eight cycles must pass with no output. ``n`` is the outputs per
    vector, for the failure messages.

    Returns
    -------
    (t_in, t_out) : lists of int
        The cycles of every input and output transfer.
    """
    dut, rng = tb.dut, tb.rng
    sent, got, cycle = 0, 0, 0
    t_in, t_out = [], []
    offered = False
    limit = 40 * len(beats) + 2000
    while got < len(expected):
        assert cycle < limit, f"cycle {cycle}: stalled, {sent} sent, {got} received"
        if not offered and sent < len(beats) and rng.random() >= idle:
            offered = True
            dut.i__payload.value = beats[sent]
        dut.i__valid.value = int(offered)
        dut.o__ready.value = int(rng.random() >= stall)
        await ReadOnly()
        if int(dut.o__valid.value):
            # The head output, whether or not it moves (it must hold under back-pressure).
            value = int(dut.o__payload.value)
            v, j = divmod(got, n)
            assert value == expected[got], (f"cycle {cycle}: vector {v} element {j}: "
                                            f"{value:#010x}, golden says {expected[got]:#010x}")
            if int(dut.o__ready.value):
                got += 1
                t_out.append(cycle)
        if offered and int(dut.i__ready.value):
            sent += 1
            offered = False
            t_in.append(cycle)
        await RisingEdge(dut.clk)
        cycle += 1
    dut.i__valid.value = 0
    for _ in range(8):
        await ReadOnly()
        assert not int(dut.o__valid.value), "an output beyond the expected ones"
        await RisingEdge(dut.clk)
    return t_in, t_out


async def abandon_and_reset(tb, beats, cut):
    """Send up to ``cut`` of ``beats`` with the sink stalled (results pile up), let the
    pipeline run a random while, reset for one cycle, and check that no output
    survived and that the input is ready again."""
    dut = tb.dut
    dut.o__ready.value = 0
    sent = 0
    for _ in range(40 * len(beats)):
        dut.i__valid.value = int(sent < cut)
        if sent < cut:
            dut.i__payload.value = beats[sent]
        await ReadOnly()
        took = sent < cut and int(dut.i__ready.value)
        await RisingEdge(dut.clk)
        sent += int(took)
        if sent >= cut:
            break
    dut.i__valid.value = 0
    for _ in range(tb.rng.randrange(0, 60)):                # let the pipeline run on
        await RisingEdge(dut.clk)
    dut.rst.value = 1
    await RisingEdge(dut.clk)
    dut.rst.value = 0
    await ReadOnly()
    assert not int(dut.o__valid.value), "an output survived the reset"
    assert int(dut.i__ready.value), "the input is not ready after a reset"
    await RisingEdge(dut.clk)
