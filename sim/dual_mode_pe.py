"""cocotb bench of :class:`hw.dual_mode_pe.DualModePE` against :mod:`golden.bsfp`, bit for bit.

Every dot product is a one-row BSFP tensor (stored words, per-weight scales ``k``) and an
FP16 activation vector. The expected result is :func:`golden.bsfp.full_dot` (full mode)
or :func:`golden.bsfp.draft_dot` (quantized mode); the bench never computes a number
itself. Inputs: the full-mode weight is :func:`golden.bsfp.restore_stored` without its
``e4`` bit (the FP16 reconstructor's output), the draft nibble comes from
:func:`golden.bsfp.split_planes`.

A scoreboard checks that every result arrives exactly once and in order, under random
input idle cycles, random output back-pressure (the payload must hold while stalled),
mode switches between dot products, padded quantized lanes carrying garbage (NaN
activations included) and synchronous resets in the middle of dot products.
"""

import dataclasses
from collections import deque

import cocotb
import numpy as np
from amaranth import Shape

from specgen.golden.bsfp import (
    BSFPConfig,
    BSFPTensor,
    draft_dot,
    full_dot,
    restore_stored,
    split_planes,
)
from specgen.golden.dot import Terms, round_sum
from specgen.golden.fp import FP16, FPFormat
from specgen.hw.dual_mode_pe import MODE_FULL, MODE_QUANT, SCALE_BITS, WEIGHT_BITS, input_layout
from specgen.sim.bench import TB, RandomResets, params
from specgen.sim.fp_datapath import random_operands


def pack_beat(layout, fields):
    """Pack a dict of field values (lists for array fields) into the payload integer."""
    word = 0
    for name, field in layout:
        value = fields[name]
        shape = field.shape
        if isinstance(value, (list, tuple)):
            width = Shape.cast(shape.elem_shape).width
            for j, v in enumerate(value):
                word |= (int(v) & ((1 << width) - 1)) << (field.offset + j * width)
        else:
            word |= (int(value) & ((1 << field.width) - 1)) << field.offset
    return word


def _config(p):
    cfg = BSFPConfig(**p.get("config", {}))
    # One scale per weight: the tensor carries an arbitrary k for every product.
    return dataclasses.replace(cfg, group_size=1)


def _weights(rng, count):
    """Stored BSFP words: random patterns plus zeros, subnormals and the largest scaled weight."""
    stored = rng.integers(0, 1 << 16, size=count, dtype=np.uint64).astype(np.uint16)
    kind = rng.integers(0, 6, size=count)
    sign = (rng.integers(0, 2, size=count) << 15).astype(np.uint16)
    special = np.array([0, 1, FP16.man_mask, FP16.min_normal_bits, FP16.one_bits,
                        (FP16.bias << FP16.man_bits) | FP16.man_mask], dtype=np.uint16)
    pick = special[rng.integers(0, len(special), size=count)] | sign
    return np.where(kind == 0, pick, stored).astype(np.uint16)


def make_dot(rng, cfg, *, n, mode, fmt_out):
    """One dot product: stored words, scales, activations and the golden result."""
    kind = rng.integers(0, 6)
    stored = _weights(rng, n)
    k = rng.integers(0, 1 << SCALE_BITS, size=n).astype(np.uint8)
    if kind == 1:
        k[:] = (1 << SCALE_BITS) - 1           # near overflow (FP16 out)
    elif kind == 2:
        k[:] = 0
    x = random_operands(rng, FP16, n)
    if kind == 3:   # mostly finite activations: exercises the rounding, not the flags
        x = (rng.integers(0, 0x7BFF, size=n) | (rng.integers(0, 2, size=n) << 15)).astype(np.uint16)
    if kind == 4 and n >= 2:   # massive cancellation: (w, x) and (w, -x) pairs, shuffled
        half = n // 2
        x[half:2 * half] = x[:half] ^ np.uint16(FP16.sign_mask)
        stored[half:2 * half] = stored[:half]
        k[half:2 * half] = k[:half]
        x[:2 * half] &= np.uint16(0xFBFF)  # keep them finite (exponent field not all ones)
        order = rng.permutation(n)
        x, stored, k = x[order], stored[order], k[order]
    if kind == 5:   # every product a zero: the zero-sign rule
        x = (rng.integers(0, 2, size=n) << 15).astype(np.uint16)
    nib, res = split_planes(stored)
    tensor = BSFPTensor(config=cfg, scales=k.reshape(1, n), stored=stored.reshape(1, n),
                        nibbles=nib.reshape(1, n), residue=res.reshape(1, n), report=None)
    fn = draft_dot if mode == MODE_QUANT else full_dot
    want = int(fn(tensor, x, fmt_out=fmt_out)[0])
    weight = restore_stored(stored, config=cfg)
    assert not np.any(weight & np.uint16(1 << (WEIGHT_BITS - 1))), "e4 must be 0 after scaling"
    w15 = (weight & np.uint16((1 << (WEIGHT_BITS - 1)) - 1)) | ((weight >> 15) << (WEIGHT_BITS - 1))
    return {"mode": mode, "x": x, "w15": w15, "nib": nib, "k": k, "want": want}


def empty_result(fmt_out):
    """Golden result of a dot product with no product at all (every quantized lane padded)."""
    z = np.zeros(0)
    terms = Terms(sign=z.astype(np.uint8), sig=z.astype(np.uint64), exp=z.astype(np.int32),
                  nan=z.astype(bool), inf=z.astype(bool))
    return int(round_sum(terms, fmt_out))


def beats_of(rng, dot, lanes):
    """The input beats of one dot product; unused fields and padded lanes hold garbage."""
    def garbage(count, bits):
        return [int(v) for v in rng.integers(0, 1 << bits, size=count)]

    beats = []
    n = len(dot["x"])
    if dot["mode"] == MODE_FULL:
        for i in range(n):
            act = garbage(lanes, 16)
            act[0] = int(dot["x"][i])
            ks = garbage(lanes, SCALE_BITS)
            ks[0] = int(dot["k"][i])
            beats.append({"act": act, "nibble": garbage(lanes, 4), "k": ks,
                          "lane_valid": int(rng.integers(0, 1 << lanes)),
                          "weight": int(dot["w15"][i]), "mode": MODE_FULL, "last": 0})
    else:
        pos = 0
        while pos < n or not beats:
            mask = [int(rng.random() < 0.8) for _ in range(lanes)]
            act, nib, ks = garbage(lanes, 16), garbage(lanes, 4), garbage(lanes, SCALE_BITS)
            for j in range(lanes):
                if mask[j] and pos < n:
                    act[j], nib[j], ks[j] = int(dot["x"][pos]), int(dot["nib"][pos]), int(dot["k"][pos])
                    pos += 1
                else:
                    mask[j] = 0
                    if rng.random() < 0.3:
                        act[j] = FP16.nan_bits   # a padded NaN must not count
            beats.append({"act": act, "nibble": nib, "k": ks,
                          "lane_valid": sum(b << j for j, b in enumerate(mask)),
                          "weight": garbage(1, WEIGHT_BITS)[0], "mode": MODE_QUANT, "last": 0})
    beats[-1]["last"] = 1
    for b in beats[1:]:
        b["mode"] = int(rng.integers(0, 2))   # sampled on the first beat only
    return beats


def make_workload(rng, p, fmt_out):
    cfg = _config(p)
    lanes, n_max = p["lanes"], p["n"]
    dots = []
    for d in range(p.get("dots", 60)):
        mode = int(rng.integers(0, 2)) if p.get("mode") is None else p["mode"]
        n = int(rng.choice([1, n_max, int(rng.integers(1, n_max + 1)), int(rng.integers(1, n_max + 1))]))
        dot = make_dot(rng, cfg, n=n, mode=mode, fmt_out=fmt_out)
        dot["beats"] = beats_of(rng, dot, lanes)
        dots.append(dot)
    if p.get("empty", True) and p.get("mode") in (None, MODE_QUANT):
        # A quantized dot product with no valid lane anywhere: +0 (golden n = 0).
        beat = {"act": [FP16.nan_bits] * lanes, "nibble": [0] * lanes, "k": [0] * lanes,
                "lane_valid": 0, "weight": 0, "mode": MODE_QUANT, "last": 1}
        dots.insert(len(dots) // 2, {"mode": MODE_QUANT, "beats": [beat], "want": empty_result(fmt_out)})
    return dots


async def run(dut, *, idle, stall, reset_every=None, expect_cycles=None):
    p = params()
    fmt_out = FPFormat(exp_bits=p["fmt_out"][0], man_bits=p["fmt_out"][1])
    lanes = p["lanes"]
    layout = input_layout(lanes)
    tb = TB(dut)
    rng = np.random.default_rng(tb.rng.getrandbits(64))
    dots = make_workload(rng, p, fmt_out)
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    dut.i__payload.value = 0
    await tb.reset()
    pending = deque()          # results owed, in order: (dot index, expected bits)
    d, b = 0, 0                # next dot, next beat within it
    stats = {"results": 0, "resets": 0, "stalls": 0, "beats": 0, "lost_to_reset": 0}
    held = None                # (payload) while o.valid & ~o.ready
    cycle = 0
    resets = RandomResets(tb.rng, reset_every)
    first_out = None
    while d < len(dots) or pending:
        rst = resets()
        valid = d < len(dots) and tb.rng.random() >= idle
        ready = tb.rng.random() >= stall
        dut.rst.value = int(rst)
        dut.i__valid.value = int(valid)
        if valid:
            dut.i__payload.value = pack_beat(layout, dots[d]["beats"][b])
        dut.o__ready.value = int(ready)
        await tb.settle()
        o_valid = int(dut.o__valid.value)
        if o_valid:
            payload = int(dut.o__payload.value)
            if held is not None:
                assert payload == held, f"cycle {cycle}: o.payload changed while stalled"
        if rst:
            stats["resets"] += 1
            stats["lost_to_reset"] += len(pending)
            pending.clear()
            held = None
            if d < len(dots) and b > 0:       # abandon the dot product in progress
                d, b = d + 1, 0
        else:
            if o_valid and ready:
                assert pending, f"cycle {cycle}: a result {payload:#x} nobody asked for"
                j, want = pending.popleft()
                assert payload == want, (f"dot {j} ({'quant' if dots[j]['mode'] else 'full'}, "
                                         f"{len(dots[j]['beats'])} beats): got {payload:#x}, "
                                         f"golden {want:#x}")
                stats["results"] += 1
                if first_out is None:
                    first_out = cycle
                held = None
            elif o_valid:
                held = payload
                stats["stalls"] += 1
            if valid and int(dut.i__ready.value):
                stats["beats"] += 1
                b += 1
                if b == len(dots[d]["beats"]):
                    pending.append((d, dots[d]["want"]))
                    d, b = d + 1, 0
        await tb.edge()
        cycle += 1
        assert cycle < 50 * sum(len(x["beats"]) for x in dots) + 200, f"stuck: {stats}"
    dut.rst.value = 0
    dut._log.info("stats: %s, %d cycles", stats, cycle)
    if expect_cycles is not None:
        expect_cycles(stats, cycle, first_out, dots)
    return stats


@cocotb.test()
async def random_traffic(dut):
    """Random idle on the input and back-pressure on the output; both modes mixed."""
    stats = await run(dut, idle=0.25, stall=0.35)
    assert stats["stalls"] > 0


@cocotb.test()
async def full_rate(dut):
    """No idle, no stall: one beat per cycle back to back, the first result after `latency`."""
    latency = params()["latency"]

    def check(stats, cycles, first_out, dots):
        first_len = len(dots[0]["beats"])
        assert first_out == first_len - 1 + latency, (first_out, first_len, latency)
        assert cycles == stats["beats"] + latency, (cycles, stats["beats"], latency)

    await run(dut, idle=0.0, stall=0.0, expect_cycles=check)


@cocotb.test()
async def reset_mid_stream(dut):
    """Synchronous resets at random points while dot products and results are in flight."""
    stats = await run(dut, idle=0.2, stall=0.3, reset_every=40)
    assert stats["resets"] > 0
