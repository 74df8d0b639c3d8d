"""cocotb bench of :class:`hw.ring_fifo.RingFIFO` against
:class:`golden.ring_fifo.RingFIFOModel`, compared every cycle.

Each cycle the bench drives random inputs just after the rising edge, waits for
the outputs to settle, checks all of them against the model, and advances the
model with the same inputs. A scoreboard also checks, independently of the
model, that the items read are exactly the items written, in order.
"""

from collections import deque

import cocotb

from specgen.golden.ring_fifo import RingFIFOModel
from specgen.sim.bench import TB, RandomResets, params


def _check(dut, model, cycle):
    exp = model.outputs()
    got = {
        "w_ready": int(dut.w__ready.value),
        "r_valid": int(dut.r__valid.value),
        "level": int(dut.level.value),
        "peak_level": int(dut.peak_level.value),
    }
    for key, value in got.items():
        assert value == exp[key], f"cycle {cycle}: {key} = {value}, model says {exp[key]}"
    if exp["r_valid"]:
        payload = int(dut.r__payload.value)
        assert payload == exp["r_payload"], (
            f"cycle {cycle}: r.payload = {payload:#x}, model says {exp['r_payload']:#x}")


async def _run(dut, *, cycles, idle, stall, reset_every=None, phases=None, drain=False):
    p = params()
    width, depth = p["width"], p["depth"]
    tb = TB(dut)
    rng = tb.rng
    model = RingFIFOModel(depth=depth)
    scoreboard = deque()
    dut.w__valid.value = 0
    dut.r__ready.value = 0
    dut.w__payload.value = 0
    await tb.reset()
    counter = 0
    # pushed/popped: the model's transfers; written/read: the handshakes seen on the DUT.
    stats = {"pushed": 0, "popped": 0, "written": 0, "read": 0, "resets": 0, "full": 0,
             "empty": 0}
    resets = RandomResets(rng, reset_every)
    # With ``drain``, the writer stops after ``cycles`` and the reader takes every item left.
    for cycle in range(cycles + (depth + 2 if drain else 0)):
        if cycle >= cycles:
            idle, stall = 1.0, 0.0
        elif phases is not None:
            # Alternate fill and drain phases so both boundaries are hit often.
            idle, stall = phases[(cycle // (3 * depth + 5)) % len(phases)]
        rst = resets()
        w_valid = int(rng.random() >= idle)
        r_ready = int(rng.random() >= stall)
        # Payloads count up (mod 2**width) with random high bits, so a lost,
        # duplicated or reordered item is always visible.
        payload = (counter | (rng.getrandbits(width) & ~((1 << 8) - 1))) & ((1 << width) - 1) \
            if width else 0
        dut.rst.value = int(rst)
        dut.w__valid.value = w_valid
        dut.w__payload.value = payload
        dut.r__ready.value = r_ready
        await tb.settle()
        _check(dut, model, cycle)
        if not rst:
            stats["written"] += w_valid & int(dut.w__ready.value)
            stats["read"] += r_ready & int(dut.r__valid.value)
        stats["full"] += model.level == depth
        stats["empty"] += model.level == 0
        pushed, popped = model.clock(w_valid=w_valid, w_payload=payload, r_ready=r_ready, rst=rst)
        if rst:
            scoreboard.clear()
            stats["resets"] += 1
        if popped is not None:
            assert scoreboard, f"cycle {cycle}: read an item that was never written"
            want = scoreboard.popleft()
            assert popped == want, f"cycle {cycle}: read {popped:#x}, expected {want:#x}"
            stats["popped"] += 1
        if pushed is not None:
            scoreboard.append(pushed)
            counter += 1
            stats["pushed"] += 1
        await tb.edge()
    dut.rst.value = 0
    if drain:
        await tb.settle()
        stats["level_after"] = int(dut.level.value)
        stats["r_valid_after"] = int(dut.r__valid.value)
        await tb.edge()
    dut._log.info("stats: %s", stats)
    assert stats["popped"] > 0 and stats["pushed"] > 0, f"no traffic: {stats}"
    return stats


@cocotb.test()
async def random_traffic(dut):
    """Random idle on the writer and back-pressure on the reader."""
    p = params()
    stats = await _run(dut, cycles=p.get("cycles", 3000), idle=0.3, stall=0.3, drain=True)
    # Drained: every item the DUT accepted came out, and it reports itself empty.
    assert stats["read"] == stats["written"] > 0, stats
    assert stats["level_after"] == 0 and stats["r_valid_after"] == 0, stats


@cocotb.test()
async def boundaries(dut):
    """Fill to full and drain to empty repeatedly; both edges must be reached."""
    p = params()
    stats = await _run(dut, cycles=p.get("cycles", 3000), idle=0, stall=0,
                       phases=[(0.05, 0.9), (0.9, 0.05), (0.0, 0.0), (0.5, 0.5)])
    assert stats["full"] > 0 and stats["empty"] > 0, stats


@cocotb.test()
async def full_throughput(dut):
    """No idle, no stalls: after the first item, one push and one pop per cycle."""
    stats = await _run(dut, cycles=500, idle=0, stall=0)
    # One cycle of latency before the first pop; every other cycle moves one item each way.
    assert stats["pushed"] == 500 and stats["popped"] == 499, stats


@cocotb.test()
async def reset_mid_stream(dut):
    """Synchronous reset at random points while items are in flight."""
    p = params()
    stats = await _run(dut, cycles=p.get("cycles", 3000), idle=0.25, stall=0.4, reset_every=150)
    assert stats["resets"] > 0, stats


@cocotb.test()
async def replay_vectors(dut):
    """Replay a ``specgen golden`` ring_fifo trace: stored inputs, stored expected outputs."""
    from specgen.sim.bench import TB
    from specgen.sim.vectors import load_set

    v = load_set(params()["vectors"], "ring_fifo")
    tb = TB(dut)
    dut.rst.value = 1
    await tb.edge()
    for t in range(len(v["rst"])):
        dut.rst.value = int(v["rst"][t])
        dut.w__valid.value = int(v["w_valid"][t])
        dut.w__payload.value = int(v["w_payload"][t])
        dut.r__ready.value = int(v["r_ready"][t])
        await tb.settle()
        for port, name in (("w__ready", "w_ready"), ("r__valid", "r_valid"), ("level", "level"),
                           ("peak_level", "peak_level")):
            got = int(getattr(dut, port).value)
            assert got == v[name][t], f"cycle {t}: {port} = {got}, vectors say {v[name][t]}"
        if v["r_valid"][t]:
            got = int(dut.r__payload.value)
            assert got == v["r_payload"][t], f"cycle {t}: r.payload = {got}, vectors say {v['r_payload'][t]}"
        await tb.edge()
