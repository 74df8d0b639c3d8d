"""cocotb timing probes for :mod:`gen.perf_calibrate` (run inside the simulator by
:func:`sim.runner.run_bench`, ``module="sim.perf_probes"``).

Each probe drives its block exactly as the Amaranth-simulator driver of
``gen/perf_calibrate.py`` does (no idle source, sinks always ready), records
the cycle of every event the cycle model predicts and writes them as JSON to
``params()["result_file"]``. They check timing only; the correctness benches
are in ``sim/``.
"""

import json

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from sim.bench import TB, params


async def _start(dut, inputs):
    tb = TB(dut)
    for name in inputs:
        getattr(dut, name).value = 0
    await tb.reset()
    return tb


def _write(result):
    with open(params()["result_file"], "w") as f:
        json.dump(result, f)


@cocotb.test()
async def linear_timing(dut):
    """Back-to-back jobs on ``LinearUnit``: the cycle of every job's first ``y``."""
    from golden.fp import FP16, FP32
    from hw.linear_unit import cmd_layout, result_layout

    p = params()
    rows, cols, max_k = p["rows"], p["cols"], p["max_k"]
    jobs = p["jobs"]
    cl = cmd_layout(rows, cols, max_k)
    # The output format is not a parameter of the probe: read it off the port width.
    width = len(dut.y__payload.value)
    yl = result_layout(rows, cols, FP32)
    if yl.size != width:
        yl = result_layout(rows, cols, FP16)
    row_off, row_w = yl["row"].offset, yl["row"].width
    await _start(dut, ["cmd__valid", "w__valid", "x__valid", "y__ready", "cmd__payload",
                            "w__payload", "x__payload"])
    beats = sum(j[1] for j in jobs)
    total_rows = sum(j[2] for j in jobs)
    cycle, ci, wi, got, t0 = 0, 0, 0, 0, None
    first_y, last_y = [], None
    dut.y__ready.value = 1
    while got < total_rows:
        assert cycle < 20 * (beats + total_rows) + 1000, "LinearUnit made no progress"
        if ci < len(jobs):
            mode, steps, n_rows, n_tokens = jobs[ci]
            dut.cmd__valid.value = 1
            dut.cmd__payload.value = cl.const({"mode": mode, "steps": steps, "n_rows": n_rows,
                                               "n_tokens": n_tokens}).as_value().value
        else:
            dut.cmd__valid.value = 0
        dut.w__valid.value = int(wi < beats)
        dut.x__valid.value = int(wi < beats)
        await ReadOnly()
        if ci < len(jobs) and int(dut.cmd__ready.value):
            if t0 is None:
                t0 = cycle
            ci += 1
        if wi < beats and int(dut.w__ready.value):
            wi += 1
        if int(dut.y__valid.value):
            if (int(dut.y__payload.value) >> row_off) & ((1 << row_w) - 1) == 0:
                first_y.append(cycle - t0)
            last_y = cycle - t0
            got += 1
        await RisingEdge(dut.clk)
        cycle += 1
    _write({"first_y": first_y, "end": last_y})


@cocotb.test()
async def tree_timing(dut):
    """Trees one after another through ``TreeVerifier``: match and path cycles per tree."""
    p = params()
    nb = max(1, (p["max_nodes"] - 1).bit_length())
    await _start(dut, ["tree__valid", "tree__payload", "match__valid", "match__payload",
                       "schedule__ready", "path__ready", "passes"])
    dut.schedule__ready.value = 1
    dut.path__ready.value = 1
    cycle = 0
    results = []
    for parents, match, passes in p["trees"]:
        n = len(parents)
        ti = mi = beats = 0
        t0 = None
        rec = {}
        while True:
            assert cycle < 10_000_000, "TreeVerifier made no progress"
            k = min(ti, n - 1)
            dut.tree__valid.value = int(ti < n)
            dut.tree__payload.value = max(parents[k], 0) | (int(k == n - 1) << nb)
            dut.passes.value = passes
            q = min(mi, n - 1)
            dut.match__valid.value = int(mi < n)
            dut.match__payload.value = match[q] | (int(q == n - 1) << 1)
            await ReadOnly()
            if ti < n and int(dut.tree__ready.value):
                if t0 is None:
                    t0 = cycle
                ti += 1
            if mi < n and int(dut.match__ready.value):
                mi += 1
                if mi == n:
                    rec["last_match"] = cycle - t0
            if int(dut.schedule__valid.value):
                beats += 1
            done = False
            if int(dut.path__valid.value):
                rec.setdefault("first_path", cycle - t0)
                if (int(dut.path__payload.value) >> (2 * nb + 1)) & 1:
                    rec["last_path"] = cycle - t0
                    done = True
            await RisingEdge(dut.clk)
            cycle += 1
            if done:
                break
        rec["schedule_beats"] = beats
        results.append(rec)
    _write({"trees": results})


@cocotb.test()
async def ring_timing(dut):
    """Bursts through ``RingFIFO`` (``cases``: ``[mode, items]``, stream or fill-then-drain),
    each after a reset: cycles from the first write to the last read."""
    p = params()
    width = p["width"]
    tb = await _start(dut, ["w__valid", "w__payload", "r__ready"])
    out = []
    for mode, items in p["cases"]:
        await tb.reset()
        cycle = wrote = read = 0
        last = None
        while read < items:
            assert cycle < 10 * items + 100, "RingFIFO made no progress"
            w = wrote < items
            r = mode == "stream" or wrote == items
            dut.w__valid.value = int(w)
            dut.w__payload.value = wrote & ((1 << width) - 1)
            dut.r__ready.value = int(r)
            await ReadOnly()
            if w and int(dut.w__ready.value):
                wrote += 1
            if r and int(dut.r__valid.value):
                read += 1
                last = cycle
            await RisingEdge(dut.clk)
            cycle += 1
        dut.w__valid.value = 0
        dut.r__ready.value = 0
        out.append(last + 1)
    _write({"cycles": out})
