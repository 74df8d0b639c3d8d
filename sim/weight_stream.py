"""cocotb bench of :class:`hw.weight_stream.WeightStream` against four AXI4 memory ports.

The memory is one byte array holding a layer's BSFP planes as
:func:`golden.weight_planes.pack_jobs` lays them out; each of the four AXI ports is a
:class:`sim.axi_master.LatencyReadSlave` on it (a read latency in ``mem`` cycles, any
number of bursts in flight, random stalls on AR and R). The weight output sees random
back-pressure. Jobs are real BSFP tiles (:func:`golden.bsfp.encode` of random weights)
cut into one weight port's beats by :func:`golden.weight_planes.column_beats`, in both
passes, mixed.

Independent checks: every sub-beat equals :func:`golden.weight_planes.expected_beats` of
its job's beats packed input by input (:func:`golden.weight_planes.pack_beats`, each job at
random up to its tile's own pack), in order (``weight_beats`` of them a transfer, element
``j`` the ``j``-th, with the job's ``pack``), none lost or duplicated, nothing after the
last; every AR is a legal INCR
burst of the bus width inside one 4 KB page; each port's AR bytes equal the bytes of the
regions its jobs name (so a draft job reads the nibble plane alone); a reset of both
domains in mid-burst drops what was in flight and the jobs after it arrive exactly.
"""

from collections import deque

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotbext.axi import AxiReadBus

from specgen.golden.bsfp import BSFPConfig, encode
from specgen.golden.weight_planes import (DRAFT_STRIPES, MODES, PACKS, PLANE_SLICES,
                                          column_beats, draft_image, draft_input_sub_beats,
                                          expected_beats, expected_draft_transfers,
                                          pack_beats, pack_factor, pack_jobs, region_bytes)
from specgen.hw.dsp_linear_unit import PACK_BITS, weight_layout
from specgen.hw.weight_stream import MODE_DRAFT, MODE_VERIFY, job_layout
from specgen.sim.axi_master import PAGE, TB, LatencyReadSlave
from specgen.sim.bench import ChannelStalls, expect_quiet, params, write_report

#: Fabric cycles without progress before a run fails instead of hanging.
STUCK = 50_000


def _fields(layout):
    return {name: (f.offset, f.width) for name, f in layout}


def beat_value(weight, nibble, k, rows):
    """One beat of ``weight_layout(rows)`` as an integer, from the golden fields."""
    slot = weight_layout(rows)["slot"].shape
    elem = _fields(slot.elem_shape)
    value = 0
    for h in range(rows):
        base = h * slot.elem_shape.size
        value |= int(weight[h]) << (base + elem["weight"][0])
        value |= int(nibble[h]) << (base + elem["nibble"][0])
        value |= int(k) << (base + elem["k"][0])
    return value


class Layer:
    """Random BSFP jobs for one weight port, their plane images and expected beats."""

    def __init__(self, rng, p, n_jobs, modes):
        self.p = p
        np_rng = np.random.default_rng(rng.getrandbits(32))
        rows, cols, ports = p["rows"], p["cols"], p["ports"]
        self.jobs = []
        for n in range(n_jobs):
            # The first job is one row: packed as far as the stream allows.
            n_rows = 1 if n == 0 else int(np_rng.integers(1, rows * cols + 1))
            k_in = int(np_rng.integers(1, p["max_k"] + 1))
            if p.get("full_jobs"):
                # The efficiency runs: every job a whole tile of max_k inputs.
                n_rows, k_in = rows * cols, p["max_k"]
            w = (np_rng.standard_normal((n_rows, k_in)) * 4).astype(np.float16)
            tensor = encode(w, config=BSFPConfig())
            port = int(np_rng.integers(0, ports))
            words = column_beats(tensor.stored, rows=rows, cols=cols, ports=ports, port=port)
            mode = modes[int(np_rng.integers(0, len(modes)))]
            # With the draft plane, the second job is a draft one read wide (every run
            # then has one; the others at random).
            wide_first = bool(p.get("draft_plane") and n == 1 and "draft" in modes)
            if wide_first:
                mode = "draft"
            # Any packing up to the tile's own (pack_factor: its padding slots are zero)
            # is a valid layout; a random one exercises every unpacking the stream takes.
            most = pack_factor(n_rows, rows=rows, cols=cols)
            pack = most if n == 0 else int(np_rng.choice([q for q in PACKS
                                                          if q <= most and rows % q == 0]))
            # A draft job read from the draft plane (its four stripes on the four
            # masters), at random where the bench asks for it.
            # (Not the first, which the corrupt-byte run flips a field of.)
            wide = wide_first or bool(p.get("draft_plane") and mode == "draft" and n > 0
                                       and np_rng.random() < 0.6)
            self.jobs.append({"words": words, "mode": mode, "k": int(tensor.scales),
                              "pack": pack, "wide": wide})
        # Packed input by input (an input is the port's cols / ports columns), each input
        # a whole number of transfers (golden.weight_planes.pack_beats): what the job's
        # regions hold and the stream hands over, sub-beat by sub-beat.
        self.per_input, self.align = cols // ports, p.get("weight_beats", 1)
        for job in self.jobs:
            job["subs"] = pack_beats(job["words"], job["pack"], per_input=self.per_input,
                                     align=self.align)
        self.nibble, self.residue, offsets = pack_jobs([j["subs"] for j in self.jobs],
                                                       word_bits=p["word_bits"])
        for job, (n_off, r_off, beats) in zip(self.jobs, offsets):
            job.update(n_off=n_off, r_off=r_off, beats=beats)
        # The draft plane of the wide jobs, one after another (a third plane in memory).
        drafts, at = [], 0
        for job in self.jobs:
            if not job["wide"]:
                continue
            img = draft_image(job["words"], word_bits=p["word_bits"], pack=job["pack"],
                              per_input=self.per_input, align=self.align)
            n_k = len(job["words"]) // self.per_input
            job.update(d_off=at, stripe=len(img) // DRAFT_STRIPES,
                       beats=n_k * draft_input_sub_beats(self.per_input, job["pack"],
                                                         self.align))
            drafts.append(img)
            at += len(img)
        self.draft = b"".join(drafts)

    def place(self, memory, rng):
        """Write both planes at random beat-aligned bases (one of them just below a 4 KB
        boundary), and fill in each job's addresses."""
        size, nb = len(memory.data), self.p["data_width"] // 8
        a_len, b_len, c_len = len(self.nibble), len(self.residue), len(self.draft)
        assert a_len + b_len + c_len + 3 * PAGE < size, "memory too small for the layer"
        a = PAGE - nb * rng.randint(1, 4)
        b = a + a_len + nb * rng.randint(0, 64)
        b = min(b, size - b_len - c_len - PAGE)
        c = b + b_len + nb * rng.randint(0, 64)
        memory.data[a:a + a_len] = self.nibble
        memory.data[b:b + b_len] = self.residue
        memory.data[c:c + c_len] = self.draft
        for job in self.jobs:
            job["nibble_addr"], job["residue_addr"] = a + job["n_off"], b + job["r_off"]
            if job["wide"]:
                # A wide job's stream reads the draft plane through its nibble base.
                job["nibble_addr"] = c + job["d_off"]
        return a, b

    def expected(self, job):
        """The job's sub-beats as the stream hands them over (a wide job's transfers'
        elements: :func:`golden.weight_planes.expected_draft_transfers`), each with the
        job's ``pack`` and ``wide``."""
        rows = self.p["rows"]
        if job["wide"]:
            nibble, weight = expected_draft_transfers(job["words"], pack=job["pack"],
                                                      per_input=self.per_input,
                                                      align=self.align)
            return [(beat_value(weight[t, e], nibble[t, e], job["k"], rows), job["pack"], 1)
                    for t in range(nibble.shape[0]) for e in range(self.align)]
        weight, nibble = expected_beats(job["subs"], mode=job["mode"])
        return [(beat_value(weight[i], nibble[i], job["k"], rows), job["pack"], 0)
                for i in range(job["beats"])]

    def request_bytes(self, job):
        """Bytes each port must request for ``job``: a wide job's four stripes."""
        if job["wide"]:
            return [job["stripe"]] * PLANE_SLICES
        r = region_bytes(job["beats"], rows=self.p["rows"], word_bits=self.p["word_bits"])
        return [r] + [r if job["mode"] == "verify" else 0] * (PLANE_SLICES - 1)

    def real_field(self, job, rng):
        """A random 4-bit field of one of the job's real beats in its regions, and the
        sub-beat it lies in: beat ``c`` of input ``k`` is piece ``c mod q`` of the input's
        sub-beat ``c div q`` (padding slots and sub-beats are never picked)."""
        rows, q = self.p["rows"], job["pack"]
        used = rows // q
        n_k = len(job["words"]) // self.per_input
        per_k = len(job["subs"]) // n_k
        k, c, h = rng.randrange(n_k), rng.randrange(self.per_input), rng.randrange(used)
        sub = k * per_k + c // q
        return sub * rows + (c % q) * used + h, sub


async def monitor_ar(tb, port, counts):
    """Check every AR of ``port`` and add its bytes to ``counts[port]``."""
    dut, nb = tb.dut, tb.bytes
    s = {n: getattr(dut, f"axi__{port}__ar{n}") for n in ("addr", "len", "size", "burst",
                                                            "valid", "ready")}
    while True:
        await RisingEdge(dut.mem_clk)
        await ReadOnly()
        if int(dut.mem_rst.value) or not (int(s["valid"].value) and int(s["ready"].value)):
            continue
        addr, beats = int(s["addr"].value), int(s["len"].value) + 1
        assert beats <= tb.p["max_burst"], f"port {port}: burst of {beats} > max_burst"
        assert 1 << int(s["size"].value) == nb, f"port {port}: ARSIZE is not the bus width"
        assert int(s["burst"].value) == 1, f"port {port}: ARBURST is not INCR"
        assert addr % nb == 0, f"port {port}: ARADDR {addr:#x} not beat-aligned"
        assert addr // PAGE == (addr + beats * nb - 1) // PAGE, (
            f"port {port}: burst {addr:#x}+{beats} crosses a 4 KB boundary")
        counts[port] += beats * nb


async def run(dut, *, n_jobs, modes, reset_at=None, corrupt=False, layer_jobs=None):
    """Stream ``n_jobs`` random jobs and check every beat; returns counters.

    ``reset_at``: reset both domains after that many beats, then stream a fresh layer.
    ``corrupt``: flip one byte of a plane in memory after placing it; mismatches are
    collected instead of failing, for the caller to check.
    """
    p = params()
    tb = TB(dut, p)
    rng = tb.rng
    dut.cmd__valid.value = 0
    dut.w__ready.value = 0
    await tb.reset()
    stalls = ChannelStalls(dut.mem_clk, rng)
    for j in range(PLANE_SLICES):
        LatencyReadSlave(AxiReadBus.from_prefix(dut, f"axi__{j}_"), dut.mem_clk, dut.mem_rst,
                         tb.memory, latency=p["latency"], rng=rng, ar_stall=p["ar_stall"],
                         r_stall=p["r_stall"], stalls=stalls)
    counts = [0] * PLANE_SLICES
    for j in range(PLANE_SLICES):
        cocotb.start_soon(monitor_ar(tb, j, counts))
    cmd_fields = _fields(job_layout(p["addr_width"], p["max_beats"]))
    expected = deque()
    per = p.get("weight_beats", 1)
    width = weight_layout(p["rows"]).size
    stats = {"beats": 0, "transfers": 0, "ready_cycles": 0, "cycles": 0, "jobs": 0, "resets": 0,
             "mismatches": [], "ar_bytes": counts, "want_bytes": [0] * PLANE_SLICES,
             "packs": {}, "wide": 0}
    state = {"streaming": False}

    async def sink():
        while True:
            ready = int(rng.random() >= p["out_stall"])
            dut.w__ready.value = ready
            await ReadOnly()
            valid = int(dut.w__valid.value)
            if not tb.in_reset:
                if valid and ready:
                    transfer = int(dut.w__payload.value)
                    got_pack = PACKS[(transfer >> (per * width)) & ((1 << PACK_BITS) - 1)]
                    got_wide = transfer >> (per * width + PACK_BITS)
                    for e in range(per):
                        got = (transfer >> (e * width)) & ((1 << width) - 1)
                        assert expected, f"beat {stats['beats']} {got:#x} no job asked for"
                        want, want_pack, want_wide = expected.popleft()
                        assert (got_pack, got_wide) == (want_pack, want_wide), (
                            f"sub-beat {stats['beats']}: pack {got_pack}, wide {got_wide}, "
                            f"the job's {want_pack}, {want_wide}")
                        if got != want:
                            msg = f"beat {stats['beats']}: {got:#x}, golden {want:#x}"
                            assert corrupt, msg
                            stats["mismatches"].append(stats["beats"])
                        stats["beats"] += 1
                    stats["transfers"] += 1
                    state["streaming"] = True
                if state["streaming"] and (expected or valid):
                    stats["cycles"] += 1
                    stats["ready_cycles"] += ready
            await RisingEdge(dut.clk)

    cocotb.start_soon(sink())

    def new_layer():
        layer = Layer(rng, p, n_jobs, modes)
        layer.place(tb.memory, rng)
        return layer

    layer = new_layer()
    if corrupt:
        # One byte of the residue plane's first job, or of its nibble plane in a draft.
        job = layer.jobs[0]
        where = job["residue_addr"] if job["mode"] == "verify" else job["nibble_addr"]
        # A random 4-bit field of one of the job's real beats (never its padding).
        f, sub = layer.real_field(job, rng)
        tb.memory.data[where + f // 2] ^= 1 << (4 * (f % 2))
        stats["corrupted_job"] = 0
        stats["corrupted_beat"] = sub

    async def issue(job):
        payload = 0
        mode = MODE_VERIFY if job["mode"] == "verify" else MODE_DRAFT
        for name, value in (("nibble_addr", job["nibble_addr"]),
                            ("residue_addr", job["residue_addr"]), ("beats", job["beats"]),
                            ("mode", mode), ("k", job["k"]),
                            ("pack", PACKS.index(job["pack"])), ("wide", int(job["wide"]))):
            payload |= value << cmd_fields[name][0]
        dut.cmd__payload.value = payload
        dut.cmd__valid.value = 1
        for _ in range(STUCK):
            await ReadOnly()
            taken = int(dut.cmd__ready.value)
            await RisingEdge(dut.clk)
            if taken:
                break
        else:
            raise AssertionError(f"job {stats['jobs']} not taken in {STUCK} cycles")
        dut.cmd__valid.value = 0
        expected.extend(layer.expected(job))
        for j, n in enumerate(layer.request_bytes(job)):
            stats["want_bytes"][j] += n
        stats["jobs"] += 1
        stats["packs"][job["pack"]] = stats["packs"].get(job["pack"], 0) + 1
        stats["wide"] += int(job["wide"])
        if rng.random() < p.get("cmd_idle", 0.0):
            await ClockCycles(dut.clk, rng.randint(1, 20))

    for job in layer.jobs:
        await issue(job)
        if reset_at is not None and stats["beats"] >= reset_at:
            break
    if reset_at is not None:
        # Reset once reset_at beats are out, with more still in flight: mid-burst.
        for _ in range(STUCK):
            if stats["beats"] >= reset_at or len(expected) <= p["rows"]:
                break
            await RisingEdge(dut.clk)
        assert expected, "the reset came after the last beat: not mid-stream"
        await tb.reset()
        expected.clear()
        stats["resets"] += 1
        for j in range(PLANE_SLICES):
            counts[j] = 0
            stats["want_bytes"][j] = 0
        for _ in range(4 * p["latency"]):
            await RisingEdge(dut.clk)
            assert not int(dut.w__valid.value), "a beat came out after the reset"
        layer = new_layer()
        for job in layer.jobs:
            await issue(job)
    waited, left = 0, len(expected)
    while expected:
        await RisingEdge(dut.clk)
        waited = 0 if len(expected) < left else waited + 1
        left = len(expected)
        assert waited < STUCK, f"{len(expected)} beats never came"
    await expect_quiet(dut, dut.w__valid, 2 * p["latency"] + 20, "job")
    assert counts == stats["want_bytes"], (
        f"AR bytes per port {counts}, the jobs' regions {stats['want_bytes']}")
    assert not int(dut.overrun.value) and not int(dut.error.value)
    # Beats against the most the stream could have given in the run: a transfer
    # (weight_beats beats) each cycle the output was ready, or what one memory port
    # delivers each cycle, a data_width beat a memory cycle (VHK158: 256 bits at 450 MHz
    # is 1.8 sub-beats of 256 bits a 250 MHz cycle), whichever is less.
    stats["port_rate"] = p["mem_mhz"] * p["data_width"] / (p["sync_mhz"] * 4 * p["rows"])
    stats["most"] = min(per * stats["ready_cycles"], stats["port_rate"] * stats["cycles"])
    stats["beats_per_cycle"] = stats["beats"] / max(1, stats["cycles"])
    stats["efficiency"] = stats["beats"] / max(1.0, stats["most"])
    dut._log.info("stats: %s", {k: v for k, v in stats.items() if k != "mismatches"})
    write_report(p, stats)
    return stats


@cocotb.test()
async def random_jobs(dut):
    """Draft and verify jobs mixed, stalls on every channel and on the output."""
    p = params()
    stats = await run(dut, n_jobs=p["jobs"], modes=MODES)
    assert stats["jobs"] == p["jobs"], stats
    # The one-row first job packs as far as the stream takes (rows ≥ 2 here).
    assert max(stats["packs"]) > 1, stats["packs"]
    # With the draft plane, some draft jobs are read wide.
    assert stats["wide"] > 0 or not p.get("draft_plane"), stats


@cocotb.test()
async def reset_mid_burst(dut):
    """Reset both domains with bursts in flight; the layer after it streams exactly."""
    p = params()
    stats = await run(dut, n_jobs=p["jobs"], modes=MODES, reset_at=p["reset_at"])
    assert stats["resets"] == 1, stats


@cocotb.test()
async def corrupt_byte_caught(dut):
    """One flipped byte of a plane in memory: the bench names the beat it lands in, and
    only that one."""
    stats = await run(dut, n_jobs=2, modes=MODES, corrupt=True)
    assert stats["mismatches"] == [stats["corrupted_beat"]], stats


@cocotb.test()
async def stream(dut):
    """One pass over long jobs (``mode`` of the parameters), for the efficiency figure."""
    p = params()
    await run(dut, n_jobs=p["jobs"], modes=(p["mode"],))


# --- the stream feeding the linear unit ---------------------------------------------------

def streamed_linear_unit(*, unit_args, stream_args):
    """A bench top: :class:`hw.weight_stream.WeightStream` driving weight port 0 of a
    one-port :class:`hw.dsp_linear_unit.DSPLinearUnit`.

    Ports: ``cmd``, ``x``, ``y`` of the unit; ``job``, ``axi``, ``error``, ``overrun`` of
    the stream.
    """
    from amaranth import Module
    from amaranth.lib import wiring
    from amaranth.lib.wiring import Out

    from specgen.hw.dsp_linear_unit import DSPLinearUnit
    from specgen.hw.weight_stream import WeightStream

    class StreamedDSPLinearUnit(wiring.Component):
        def __init__(self):
            self.unit = DSPLinearUnit(**unit_args, weight_ports=1,
                                      weight_beats=stream_args.get("weight_beats", 1))
            self.stream = WeightStream(**stream_args)
            u, s = self.unit.signature.members, self.stream.signature.members
            super().__init__({
                "cmd": u["cmd"], "x": u["x"], "y": u["y"], "job": s["cmd"], "axi": s["axi"],
                "error": Out(1), "overrun": Out(1),
            })

        @property
        def module_name(self):
            # Short: the simulator's root scope does not take the two long names joined.
            u, s = unit_args, self.stream
            return (f"StreamedDSPLinearUnit_r{u['rows']}_c{u['cols']}_t{u['max_tokens']}"
                    f"_k{u['max_k']}_b{s.max_beats}_d{s.master.data_width}x{s.weight_beats}")

        def elaborate(self, platform):
            m = Module()
            m.submodules.unit = unit = self.unit
            m.submodules.stream = stream = self.stream
            wiring.connect(m, stream.w, unit.w[0])
            for name, inner in (("cmd", unit.cmd), ("x", unit.x), ("y", unit.y),
                                ("job", stream.cmd)):
                wiring.connect(m, wiring.flipped(getattr(self, name)), inner)
            for j in range(PLANE_SLICES):
                wiring.connect(m, wiring.flipped(self.axi[j]), stream.axi[j])
            m.d.comb += [self.error.eq(stream.error), self.overrun.eq(stream.overrun)]
            return m

    return StreamedDSPLinearUnit()


@cocotb.test()
async def feeds_dsp_linear_unit(dut):
    """Random jobs of both passes with all weights in memory: every result of the linear
    unit equals ``golden.dsp`` (``sim.dsp_linear_unit``'s check), under the memory's latency
    and stalls, idle activations and back-pressure on the results."""
    from specgen.sim.bench import drive_stream, pack
    from specgen.sim.dsp_linear_unit import Job, _monitor
    from specgen.hw.dsp_linear_unit import result_layout

    p = params()
    tb = TB(dut, p)
    for port in ("cmd", "x", "job"):
        getattr(dut, f"{port}__valid").value = 0
    dut.y__ready.value = 0
    await tb.reset()
    stalls = ChannelStalls(dut.mem_clk, tb.rng)
    for j in range(PLANE_SLICES):
        LatencyReadSlave(AxiReadBus.from_prefix(dut, f"axi__{j}_"), dut.mem_clk, dut.mem_rst,
                         tb.memory, latency=p["latency"], rng=tb.rng, ar_stall=p["ar_stall"],
                         r_stall=p["r_stall"], stalls=stalls)
    rows, cols, T = p["rows"], p["cols"], p["max_tokens"]
    np_rng = np.random.default_rng(tb.rng.getrandbits(32))
    jobs = [Job(np_rng, rows=rows, cols=cols, max_tokens=T, max_k=p["max_k"])
            for _ in range(p["jobs"])]
    words = [column_beats(j.tensor.stored, rows=rows, cols=cols) for j in jobs]
    packs = [pack_factor(j.n_rows, rows=rows, cols=cols) for j in jobs]
    per = p.get("weight_beats", 1)
    subs = [pack_beats(w, q, per_input=cols, align=per) for w, q in zip(words, packs)]
    nibble, residue, offsets = pack_jobs(subs, word_bits=p["word_bits"])
    a = PAGE - tb.bytes * 3          # the nibble plane starts just below a 4 KB boundary
    b = a + len(nibble) + tb.bytes * 5
    tb.memory.data[a:a + len(nibble)] = nibble
    tb.memory.data[b:b + len(residue)] = residue
    if p.get("corrupt"):
        # Flip e0 (residue bit 10, in the last residue slice) of the first weight with a
        # nonzero exponent in the first verify job: that weight doubles or halves.
        n, job = next((n, j) for n, j in enumerate(jobs) if j.mode == 0)
        flat = subs[n].reshape(-1)
        # Its 4-bit field in the region: sub-beat b's slot h is field b·rows + h.
        i = int(np.flatnonzero(flat & 0x3C00)[0])
        region = region_bytes(subs[n].shape[0], rows=rows, word_bits=p["word_bits"])
        where = b + offsets[n][1] + 2 * region + i // 2
        tb.memory.data[where] ^= 0x04 << (4 * (i % 2))
    layout = job_layout(p["addr_width"], p["max_beats"])
    descriptors = [pack(layout, {"nibble_addr": a + n_off, "residue_addr": b + r_off,
                                 "beats": beats, "mode": job.mode, "k": int(job.tensor.scales),
                                 "pack": PACKS.index(q)})
                   for job, q, (n_off, r_off, beats) in zip(jobs, packs, offsets)]
    stop = {"now": False}
    got = []
    drivers = [cocotb.start_soon(drive_stream(tb, "cmd", [j.cmd for j in jobs], 0.2, stop)),
               cocotb.start_soon(drive_stream(tb, "x", [x for j in jobs for x in j.x_beats],
                                              0.2, stop)),
               cocotb.start_soon(drive_stream(tb, "job", descriptors, 0.2, stop))]
    caught = []

    async def monitor():
        check = _monitor(tb, jobs, 0.3, result_layout(rows, cols, T), cols, got, stop)
        if not p.get("corrupt"):
            return await check
        try:
            await check
        except AssertionError as exc:     # the run that must fail: keep its message
            caught.append(exc)

    mon = cocotb.start_soon(monitor())
    for _ in range(STUCK * 4):
        if mon.done():
            break
        await RisingEdge(dut.clk)
    stop["now"] = True
    assert mon.done(), f"timeout: {len(got)} result beats"
    if p.get("corrupt"):
        assert caught, "a flipped exponent bit in memory went unnoticed"
        dut._log.info("the flipped bit was caught: %s", caught[0])
        return
    mon.result()
    for d in drivers:
        await d
    assert not int(dut.error.value) and not int(dut.overrun.value)
    assert len(got) == sum(len(j.beats(cols)) for j in jobs)
    dut._log.info("%d jobs (%d draft), %d result beats, all equal to golden.dsp", len(jobs),
                  sum(j.mode for j in jobs), len(got))
