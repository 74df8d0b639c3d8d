"""cocotb bench of :class:`hw.linear_unit.LinearUnit` against the golden BSFP dot products.

Each job is an output tile of random size (rows, tokens, beats) in full or
quantized mode. Weights are BSFP v1 encoded by :func:`golden.bsfp.encode`; the
expected results are :func:`golden.bsfp.full_dot` / :func:`golden.bsfp.draft_dot`
of every token, bit for bit. Three drivers (``cmd``, ``w``, ``x``) insert random
idle cycles, the ``y`` monitor random back-pressure, and results are checked in
order, so nothing may be lost, duplicated or reordered.
"""

import json
from collections import deque

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from specgen.golden import bsfp
from specgen.golden.fp import FORMATS
from specgen.hw.dual_mode_pe import SCALE_BITS
from specgen.hw.linear_unit import act_layout, cmd_layout, result_layout, weight_layout
from specgen.sim.bench import TB, drive_stream, field, pack, params, reset_mid_stream




def _activations(rng, shape, specials):
    """FP16 activations: Gaussian, plus (when ``specials``) NaN, ±Inf, ±0, subnormals,
    near-overflow values and cancelling pairs."""
    x = rng.standard_normal(shape).astype(np.float16).view(np.uint16)
    if specials:
        pool = np.array([0x7E00, 0x7C00, 0xFC00, 0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF, 0xFBFF,
                         0x3C00, 0xBC00], dtype=np.uint16)
        mask = rng.random(shape) < 0.15
        x[mask] = rng.choice(pool, size=int(mask.sum()))
    return x


class Job:
    """One output tile: stimulus beats and the expected result rows."""

    def __init__(self, rng, *, rows, cols, lanes, max_k, fmt_out, mode=None, steps=None,
                 n_rows=None, n_tokens=None, specials=False, group_size=None, pad_lanes=True):
        self.mode = int(rng.integers(0, 2)) if mode is None else mode
        self.steps = int(rng.integers(1, max_k + 1)) if steps is None else steps
        self.n_rows = int(rng.integers(1, rows + 1)) if n_rows is None else n_rows
        self.n_tokens = int(rng.integers(1, cols + 1)) if n_tokens is None else n_tokens
        q = lanes if self.mode else 1
        # A quantized job's last beat may be partial: its padding lanes must not count.
        k_in = self.steps * q - (int(rng.integers(0, q)) if q > 1 and pad_lanes else 0)
        self.k_in = k_in
        w = (rng.standard_normal((self.n_rows, k_in)) * 0.1).astype(np.float16)
        if rng.random() < 0.3:
            w[rng.random(w.shape) < 0.1] = 0.0
        if rng.random() < 0.3:
            w.flat[int(rng.integers(0, w.size))] = np.float16(rng.choice([3.5, -7.0, 1000.0]))
        cfg = bsfp.BSFPConfig(group_size=group_size)
        t = bsfp.encode(w.view(np.uint16), config=cfg)
        x = _activations(rng, (self.n_tokens, k_in), specials)
        dot = bsfp.draft_dot if self.mode else bsfp.full_dot
        # expected[r][c]: bits of token c's result for row r
        self.expected = np.stack([dot(t, x[c], fmt_out=fmt_out) for c in range(self.n_tokens)],
                                 axis=1)
        self.useful = self.n_rows * self.n_tokens * k_in

        scaled = bsfp.restore_stored(t.stored, config=cfg)
        weight15 = ((scaled >> 15) << 14) | (scaled & 0x3FFF)
        kk = t.scale_per_weight()
        wl, xl, cl = (weight_layout(rows, lanes), act_layout(cols, lanes),
                      cmd_layout(rows, cols, max_k))
        self.cmd = pack(cl, {"mode": self.mode, "steps": self.steps, "n_rows": self.n_rows,
                              "n_tokens": self.n_tokens})
        self.w_beats, self.x_beats = [], []
        assert int(kk.max(initial=0)) < (1 << SCALE_BITS)
        for j in range(self.steps):
            idx = [j * q + lane for lane in range(q)]
            valid = [i < k_in for i in idx]
            wb = {"weight": [0] * rows, "nibble": [[0] * lanes for _ in range(rows)],
                  "k": [[0] * lanes for _ in range(rows)]}
            xb = {"act": [[0] * lanes for _ in range(cols)],
                  "lane_valid": sum(1 << lane for lane in range(q) if valid[lane])}
            for r in range(self.n_rows):
                if self.mode:
                    for lane, i in enumerate(idx):
                        if valid[lane]:
                            wb["nibble"][r][lane] = int(t.nibbles[r, i])
                            wb["k"][r][lane] = int(kk[r, i])
                else:
                    wb["weight"][r] = int(weight15[r, idx[0]])
                    wb["k"][r][0] = int(kk[r, idx[0]])
            for c in range(self.n_tokens):
                for lane, i in enumerate(idx):
                    if valid[lane]:
                        xb["act"][c][lane] = int(x[c, i])
            self.w_beats.append(pack(wl, wb))
            self.x_beats.append(pack(xl, xb))


async def _monitor(tb, jobs, stall, layout, fmt_width, cols, got_rows, stop):
    dut, rng = tb.dut, tb.rng
    expected = deque()
    for n, job in enumerate(jobs):
        for r in range(job.n_rows):
            expected.append((n, r, job))
    while expected and not stop["now"]:
        ready = rng.random() >= stall
        dut.y__ready.value = int(ready)
        await ReadOnly()
        if ready and int(dut.y__valid.value):
            word = int(dut.y__payload.value)
            n, r, job = expected.popleft()
            row = field(word, layout, "row")
            off_v = layout["value"].offset
            mask_t = field(word, layout, "token_valid")
            last = field(word, layout, "last")
            assert row == r, f"job {n}: got row {row}, expected row {r}"
            assert mask_t == (1 << job.n_tokens) - 1, f"job {n} row {r}: token_valid {mask_t:b}"
            assert last == (r == job.n_rows - 1), f"job {n} row {r}: last={last}"
            for c in range(job.n_tokens):
                got = (word >> (off_v + c * fmt_width)) & ((1 << fmt_width) - 1)
                want = int(job.expected[r, c])
                assert got == want, (f"job {n} (mode {job.mode}, {job.steps} beats, k_in {job.k_in}) "
                                     f"row {r} token {c}: got {got:#x}, golden {want:#x}")
            got_rows.append((n, r))
        await RisingEdge(dut.clk)
    dut.y__ready.value = 0


async def run_jobs(tb, jobs, *, idle, stall, max_cycles):
    p = params()
    rows, cols, lanes, max_k = p["rows"], p["cols"], p["lanes"], p["max_k"]
    fmt = FORMATS[p["fmt_out"]]
    stop = {"now": False}
    got = []
    drivers = [
        cocotb.start_soon(drive_stream(tb, "cmd", [j.cmd for j in jobs], idle, stop)),
        cocotb.start_soon(drive_stream(tb, "w", [b for j in jobs for b in j.w_beats], idle, stop)),
        cocotb.start_soon(drive_stream(tb, "x", [b for j in jobs for b in j.x_beats], idle, stop)),
    ]
    mon = cocotb.start_soon(_monitor(tb, jobs, stall, result_layout(rows, cols, fmt), fmt.width,
                                     cols, got, stop))
    for _ in range(max_cycles):
        if mon.done():
            break
        await RisingEdge(tb.dut.clk)
    stop["now"] = True
    assert mon.done(), f"timeout: {len(got)} result rows after {max_cycles} cycles"
    mon.result()
    for d in drivers:
        await d
    del max_k, lanes
    return got


def _config():
    p = params()
    return dict(rows=p["rows"], cols=p["cols"], lanes=p["lanes"], max_k=p["max_k"],
                fmt_out=FORMATS[p["fmt_out"]])


async def _reset(tb):
    for port in ("cmd", "w", "x"):
        getattr(tb.dut, f"{port}__valid").value = 0
    tb.dut.y__ready.value = 0
    await tb.reset()


@cocotb.test()
async def random_jobs(dut):
    """Random jobs in both modes under random idle and back-pressure; counters checked."""
    tb = TB(dut)
    rng = np.random.default_rng(tb.rng.getrandbits(32))
    await _reset(tb)
    jobs = [Job(rng, **_config(), group_size=128 if i % 2 else None)
            for i in range(params().get("jobs", 12))]
    await run_jobs(tb, jobs, idle=0.3, stall=0.3, max_cycles=200_000)
    await RisingEdge(dut.clk)
    assert int(dut.useful_macs.value) == sum(j.useful for j in jobs)
    assert int(dut.busy_cycles.value) == sum(j.steps for j in jobs)


@cocotb.test()
async def special_values(dut):
    """NaN, ±Inf, ±0, subnormals, near-overflow activations; both modes."""
    tb = TB(dut)
    rng = np.random.default_rng(tb.rng.getrandbits(32))
    await _reset(tb)
    jobs = [Job(rng, **_config(), mode=i % 2, specials=True) for i in range(8)]
    await run_jobs(tb, jobs, idle=0.2, stall=0.2, max_cycles=100_000)


@cocotb.test()
async def boundary_jobs(dut):
    """One-beat jobs, full-size jobs, one row, one token, back to back with mode switches."""
    tb = TB(dut)
    rng = np.random.default_rng(tb.rng.getrandbits(32))
    c = _config()
    await _reset(tb)
    jobs = []
    for mode in (0, 1, 0, 1):
        jobs.append(Job(rng, **c, mode=mode, steps=1, n_rows=1, n_tokens=1))
        jobs.append(Job(rng, **c, mode=mode, steps=c["max_k"], n_rows=c["rows"],
                        n_tokens=c["cols"]))
    await run_jobs(tb, jobs, idle=0.0, stall=0.0, max_cycles=100_000)


@cocotb.test()
async def reset_mid_job(dut):
    """Reset while beats and results are in flight; afterwards only new jobs appear."""
    tb = TB(dut)
    rng = np.random.default_rng(tb.rng.getrandbits(32))
    c = _config()
    await _reset(tb)

    def drivers(js, stop):
        return [cocotb.start_soon(drive_stream(tb, "cmd", [j.cmd for j in js], 0.2, stop)),
                cocotb.start_soon(drive_stream(tb, "w", [b for j in js for b in j.w_beats], 0.2, stop)),
                cocotb.start_soon(drive_stream(tb, "x", [b for j in js for b in j.x_beats], 0.2, stop))]
    await reset_mid_stream(
        tb, new_job=lambda: Job(rng, **c), drivers=drivers, reset=lambda: _reset(tb),
        hold_cycles=int(rng.integers(3, 3 * c["max_k"])),
        run=lambda js: run_jobs(tb, js, idle=0.2, stall=0.2, max_cycles=100_000))


@cocotb.test()
async def utilization(dut):
    """Steady state without idle or back-pressure: report measured utilization."""
    p = params()
    if "report" not in p:
        return
    tb = TB(dut)
    rng = np.random.default_rng(1)
    c = _config()
    await _reset(tb)
    report = {}
    for mode in (0, 1):
        for n_tokens in p["tokens"]:
            await _reset(tb)
            jobs = [Job(rng, **c, mode=mode, steps=p["steps"], n_rows=c["rows"],
                        n_tokens=n_tokens, pad_lanes=False) for _ in range(p["jobs"])]
            await run_jobs(tb, jobs, idle=0.0, stall=0.0, max_cycles=1_000_000)
            busy, stall = int(dut.busy_cycles.value), int(dut.stall_cycles.value)
            macs = int(dut.useful_macs.value)
            capacity = c["rows"] * c["cols"] * (c["lanes"] if mode else 1)
            report[f"{'quant' if mode else 'full'}-T{n_tokens}"] = {
                "busy": busy, "stall": stall, "useful_macs": macs,
                "utilization": macs / (capacity * (busy + stall))}
    with open(p["report"], "w") as f:
        json.dump(report, f, indent=1)
