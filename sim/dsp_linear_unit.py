"""cocotb bench of :class:`hw.dsp_linear_unit.DSPLinearUnit` against :mod:`golden.dsp`.

Each job is an output tile of random size (rows, tokens T, inputs K) in the full
or the draft pass. Weights are BSFP v1 encoded by :func:`golden.bsfp.encode`;
the expected results are :func:`golden.dsp.full_dot` / :func:`golden.dsp.draft_dot`
of every token, bit for bit. The ``cmd``, ``w`` and ``x`` drivers insert random
idle cycles and the ``y`` monitor random back-pressure; beats are checked in
order, so nothing may be lost, duplicated or reordered.
"""

import json
from collections import deque

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from specgen.golden import bsfp, dsp
from specgen.golden.weight_planes import (DRAFT_STRIPES, PACKS, draft_input_sub_beats,
                                          input_sub_beats, job_images, pack_factor)
from specgen.hw.dsp_linear_unit import (PACK_BITS, act_layout, cmd_layout, result_layout,
                                        weight_layout)
from specgen.sim.bench import TB, drive_stream, field, pack, params, reset_mid_stream

#: FP16 activations that exercise the contract's edges: NaN, ±Inf, ±0, the
#: subnormals the DSP flushes, the smallest normal, the largest finite.
SPECIALS = np.array([0x7E00, 0x7C00, 0xFC00, 0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x7BFF,
                     0xFBFF, 0x3C00, 0xBC00], dtype=np.uint16)




class Job:
    """One output tile: its stimulus beats and the expected result beats."""

    def __init__(self, rng, *, rows, cols, max_tokens, max_k, mode=None, steps=None,
                 n_rows=None, n_tokens=None, specials=False, group_size=None):
        slots = rows * cols
        self.mode = int(rng.integers(0, 2)) if mode is None else mode
        self.steps = int(rng.integers(1, max_k + 1)) if steps is None else steps
        self.n_rows = int(rng.integers(1, slots + 1)) if n_rows is None else n_rows
        self.n_tokens = int(rng.integers(1, max_tokens + 1)) if n_tokens is None else n_tokens
        K, R, T = self.steps, self.n_rows, self.n_tokens
        w = (rng.standard_normal((R, K)) * 0.1).astype(np.float16)
        if rng.random() < 0.3:
            w[rng.random(w.shape) < 0.1] = 0.0
        if rng.random() < 0.3:
            w.flat[int(rng.integers(0, w.size))] = np.float16(rng.choice([3.5, -7.0, 1000.0]))
        if rng.random() < 0.3:        # subnormal weights: flushed by the weight path
            w.flat[int(rng.integers(0, w.size))] = np.float16(3e-6)
        t = bsfp.encode(w.view(np.uint16), config=bsfp.BSFPConfig(group_size=group_size))
        self.tensor = t          # the stored words, for benches that place them in memory
        x = rng.standard_normal((T, K)).astype(np.float16).view(np.uint16)
        if specials:
            mask = rng.random(x.shape) < 0.15
            x[mask] = rng.choice(SPECIALS, size=int(mask.sum()))
        if rng.random() < 0.3 and K >= 2:
            # Cancellation: partial sums through the flush range.
            x[:, 1] = x[:, 0] ^ np.uint16(0x8000)
        golden = dsp.draft_dot if self.mode else dsp.full_dot
        self.expected = golden(t, x)                           # (R, T) binary32 bits
        self.useful = R * T * K
        scaled = bsfp.restore_stored(t.stored, config=t.config)
        weight15 = ((scaled >> 15) << 14) | (scaled & 0x3FFF)
        kk = t.scale_per_weight()
        self.cmd = pack(cmd_layout(slots, max_tokens, max_k),
                         {"mode": self.mode, "steps": K, "n_rows": R, "n_tokens": T})
        wl, xl = weight_layout(rows), act_layout()
        self.rows, self.cols = rows, cols
        # col_slots[k][g]: column g's beat of input k (rows h * cols + g), slot by slot;
        # col_beats[k][g]: the same as the unit's integer.
        self.col_slots, self.col_beats = [], []
        for j in range(K):
            slots_k, beats = [], []
            for g in range(cols):
                slot = [{"weight": 0, "nibble": 0, "k": 0} for _ in range(rows)]
                for h in range(rows):
                    r = h * cols + g
                    if r < R:
                        slot[h] = {"weight": int(weight15[r, j]), "nibble": int(t.nibbles[r, j]),
                                   "k": int(kk[r, j])}
                slots_k.append(slot)
                beats.append(pack(wl, {"slot": slot}))
            self.col_slots.append(slots_k)
            self.col_beats.append(beats)
        # The pack of the job's transfers: the largest the tile allows, as the engine
        # takes it (golden.weight_planes.pack_factor); a bench may set a smaller one. A
        # draft job of per-tensor scale may be fed wide (the draft plane's transfers).
        self.pack = pack_factor(R, rows=rows, cols=cols)
        self.wide = False
        self.per_tensor = group_size is None
        self.k_tensor = int(np.max(kk))
        self.x = x                                             # (T, K) binary16
        self.x_beats = [pack(xl, {"act": int(x[tt, j])}) for j in range(K) for tt in range(T)]

    def w_beats(self, port, ports):
        """Beats of weight port ``port``: its columns ``g ≡ port (mod ports)``, per input."""
        return [b[g] for b in self.col_beats for g in range(port, len(b), ports)]

    def w_transfers(self, port, ports, per):
        """Transfers of weight port ``port``, ``per`` sub-beats each
        (:func:`hw.dsp_linear_unit.weight_port_layout`): per input, its columns' beats
        packed :attr:`pack` to a sub-beat (:func:`golden.weight_planes.pack_beats`, built
        here slot by slot), with the transfer's ``pack``. With :attr:`wide` (a draft job),
        as the draft plane's transfers (:func:`golden.weight_planes.draft_image`): an
        input's sub-beats padded to whole transfers of ``4 · per``, in each transfer
        element ``e``'s slot ``h`` holding the nibble of sub-beat ``e`` in ``nibble`` and
        those of sub-beats ``per + e``, ``2·per + e``, ``3·per + e`` in ``weight`` bits
        3..0, 7..4, 11..8."""
        rows, q = self.rows, self.pack
        wl = weight_layout(rows)
        width, used = wl.size, rows // q
        zero = {"weight": 0, "nibble": 0, "k": 0}
        out = []
        for slots_k in self.col_slots:
            beats = slots_k[port::ports]
            n = input_sub_beats(len(beats), q, per)
            subs = []
            for s in range(n):
                slot = [zero] * rows
                for i in range(q):
                    if s * q + i < len(beats):
                        slot[i * used:(i + 1) * used] = beats[s * q + i][:used]
                subs.append(slot)
            tail = PACKS.index(q) << (per * width)
            if not self.wide:
                for a in range(0, n, per):
                    out.append(sum(pack(wl, {"slot": b}) << (j * width)
                                   for j, b in enumerate(subs[a:a + per])) | tail)
                continue
            subs += [[zero] * rows] * (draft_input_sub_beats(len(beats), q, per) - n)
            span = DRAFT_STRIPES * per
            for a in range(0, len(subs), span):
                group = subs[a:a + span]
                elems = []
                for e in range(per):
                    first = group[e]
                    elems.append(pack(wl, {"slot": [
                        {"weight": sum(group[m * per + e][h]["nibble"] << (4 * (m - 1))
                                       for m in range(1, DRAFT_STRIPES)),
                         "nibble": first[h]["nibble"],
                         # The stream puts the job's k in every slot.
                         "k": self.k_tensor}
                        for h in range(rows)]}))
                out.append(sum(b << (j * width) for j, b in enumerate(elems)) | tail
                           | 1 << (per * width + PACK_BITS))
        return out

    def memory_images(self, *, rows, cols, word_bits, ports=1, x_stride=None, rng=None,
                      weight_beats=1):
        """The job in the ``LinearEngine``'s memory layout: ``{"w_nibble", "w_residue", "x"}``
        byte images (:func:`golden.weight_planes.job_images` for ``ports`` weight ports;
        x token-major, :class:`hw.activation_reader.ActivationReader`: token ``t``'s
        binary16 vector at ``t·x_stride`` bytes, the gaps between vectors random bytes of
        ``rng``). ``x_stride`` (default: a vector rounded up to 8 bytes) is kept as
        :attr:`x_stride`."""
        nibble, residue = job_images(self.tensor.stored, rows=rows, cols=cols, ports=ports,
                                     word_bits=word_bits, weight_beats=weight_beats)
        vec = 2 * self.steps
        self.x_stride = -(-vec // 8) * 8 if x_stride is None else x_stride
        assert self.x_stride >= vec and self.x_stride % 8 == 0, self.x_stride
        size = (self.n_tokens - 1) * self.x_stride + vec
        x = bytearray(rng.bytes(size) if rng is not None else bytes(size))
        for t in range(self.n_tokens):
            x[t * self.x_stride:t * self.x_stride + vec] = self.x[t].astype("<u2").tobytes()
        return {"w_nibble": nibble, "w_residue": residue, "x": bytes(x)}

    def y_bytes(self, cols, record_bytes):
        """Bytes of the job's result region: one record per row group and token."""
        return -(-self.n_rows // cols) * self.n_tokens * record_bytes

    def check_memory(self, get_words, y_addr, *, cols, record_bytes, what):
        """Check every result word in memory (``get_words(addr, n)``) against golden: row
        ``h·cols + g`` of token ``t`` at ``y_addr + (h·T + t)·record_bytes + 4g``."""
        for h, t, _, vals in self.beats(cols):
            words = get_words(y_addr + (h * self.n_tokens + t) * record_bytes, record_bytes // 4)
            for g, want in vals.items():
                assert int(words[g]) == want, (
                    f"{what} (mode {self.mode}, K {self.steps}, rows {self.n_rows}, T "
                    f"{self.n_tokens}) row {h * cols + g} token {t}: got {int(words[g]):#010x} in "
                    f"memory, golden {'draft_dot' if self.mode else 'full_dot'} {want:#010x}")

    def beats(self, cols):
        """Expected ``(h, t, last, {g: bits})`` in drain order."""
        groups = -(-self.n_rows // cols)
        out = []
        for h in range(groups):
            for tt in range(self.n_tokens):
                vals = {g: int(self.expected[h * cols + g, tt]) for g in range(cols)
                        if h * cols + g < self.n_rows}
                out.append((h, tt, h == groups - 1 and tt == self.n_tokens - 1, vals))
        return out


def _widen(jobs, rng):
    """With ``params()["draft_plane"]``, most draft jobs of a per-tensor scale fed wide (a
    slot's four nibbles share its ``k``: the draft plane carries none of its own)."""
    if not params().get("draft_plane"):
        return
    eligible = [job for job in jobs if job.mode == 1 and job.per_tensor]
    for i, job in enumerate(eligible):
        # The first always (every run feeds the unit some), the others at random.
        job.wide = bool(i == 0 or rng.random() < 0.75)


def _drivers(tb, jobs, idle, stop):
    p_ = params()
    ports, per = p_["weight_ports"], p_.get("weight_beats", 1)
    ds = [cocotb.start_soon(drive_stream(tb, "cmd", [j.cmd for j in jobs], idle, stop)),
          cocotb.start_soon(drive_stream(tb, "x", [b for j in jobs for b in j.x_beats], idle, stop))]
    for p in range(ports):
        beats = [t for j in jobs for t in j.w_transfers(p, ports, per)]
        ds.append(cocotb.start_soon(drive_stream(tb, f"w__{p}", beats, idle, stop)))
    return ds


async def _monitor(tb, jobs, stall, layout, cols, got, stop):
    dut, rng = tb.dut, tb.rng
    expected = deque((n, b) for n, job in enumerate(jobs) for b in job.beats(cols))
    off = layout["value"].offset
    while expected and not stop["now"]:
        ready = rng.random() >= stall
        dut.y__ready.value = int(ready)
        await ReadOnly()
        if ready and int(dut.y__valid.value):
            word = int(dut.y__payload.value)
            n, (h, tt, last, vals) = expected.popleft()
            job = jobs[n]
            ctx = f"job {n} (mode {job.mode}, K {job.steps}, T {job.n_tokens}, rows {job.n_rows})"
            assert (field(word, layout, "h"), field(word, layout, "t")) == (h, tt), \
                f"{ctx}: beat (h, t) = ({field(word, layout, 'h')}, {field(word, layout, 't')}), " \
                f"expected ({h}, {tt})"
            assert field(word, layout, "last") == last, f"{ctx} beat ({h}, {tt}): last"
            want_valid = sum(1 << g for g in vals)
            assert field(word, layout, "row_valid") == want_valid, f"{ctx} beat ({h}, {tt}): row_valid"
            for g, want in vals.items():
                bits = (word >> (off + 32 * g)) & 0xFFFF_FFFF
                assert bits == want, (f"{ctx} row {h * cols + g} token {tt}: got {bits:#010x}, "
                                      f"golden {want:#010x}")
            got.append((n, h, tt))
        await RisingEdge(dut.clk)
    dut.y__ready.value = 0


async def run_jobs(tb, jobs, *, idle, stall, max_cycles):
    p = params()
    rows, cols, T = p["rows"], p["cols"], p["max_tokens"]
    stop = {"now": False}
    got = []
    drivers = _drivers(tb, jobs, idle, stop)
    mon = cocotb.start_soon(_monitor(tb, jobs, stall, result_layout(rows, cols, T), cols, got,
                                     stop))
    for _ in range(max_cycles):
        if mon.done():
            break
        await RisingEdge(tb.dut.clk)
    stop["now"] = True
    assert mon.done(), f"timeout: {len(got)} result beats after {max_cycles} cycles"
    mon.result()
    for d in drivers:
        await d
    return got


def _config():
    p = params()
    return dict(rows=p["rows"], cols=p["cols"], max_tokens=p["max_tokens"], max_k=p["max_k"])


async def _reset(tb):
    for port in ["cmd", "x"] + [f"w__{p}" for p in range(params()["weight_ports"])]:
        getattr(tb.dut, f"{port}__valid").value = 0
    tb.dut.y__ready.value = 0
    await tb.reset()


def _rng(tb):
    return np.random.default_rng(tb.rng.getrandbits(32))


@cocotb.test()
async def random_jobs(dut):
    """Random jobs of both passes, every T, under random idle and back-pressure; counters.
    Each job's transfers are packed at random up to its tile's own pack (any smaller pack
    is as valid a layout), so every pack the unit takes is exercised."""
    tb = TB(dut)
    rng = _rng(tb)
    await _reset(tb)
    jobs = [Job(rng, **_config(), group_size=128 if i % 3 == 2 else None)
            for i in range(params().get("jobs", 12))]
    for job in jobs[1:]:
        job.pack = int(rng.choice([q for q in PACKS if q <= job.pack]))
    _widen(jobs, rng)
    await run_jobs(tb, jobs, idle=0.3, stall=0.3, max_cycles=400_000)
    await RisingEdge(dut.clk)
    assert int(dut.useful_macs.value) == sum(j.useful for j in jobs)
    assert int(dut.busy_cycles.value) == sum(j.steps * j.n_tokens for j in jobs)


@cocotb.test()
async def every_t(dut):
    """Every T from 1 to max_tokens, both passes, back to back with no idle cycles."""
    tb = TB(dut)
    rng = _rng(tb)
    c = _config()
    await _reset(tb)
    jobs = [Job(rng, **c, mode=mode, n_tokens=t, specials=True)
            for t in range(1, c["max_tokens"] + 1) for mode in (0, 1)]
    _widen(jobs, rng)
    await run_jobs(tb, jobs, idle=0.0, stall=0.1, max_cycles=400_000)


@cocotb.test()
async def special_values(dut):
    """NaN, ±Inf, ±0, subnormal (flushed) and extreme activations; both passes."""
    tb = TB(dut)
    rng = _rng(tb)
    await _reset(tb)
    jobs = [Job(rng, **_config(), mode=i % 2, specials=True) for i in range(8)]
    _widen(jobs, rng)
    await run_jobs(tb, jobs, idle=0.2, stall=0.2, max_cycles=200_000)


@cocotb.test()
async def boundary_jobs(dut):
    """One-input jobs, full-size jobs, one row, one token, mode switches, back to back."""
    tb = TB(dut)
    rng = _rng(tb)
    c = _config()
    await _reset(tb)
    slots = c["rows"] * c["cols"]
    jobs = []
    for mode in (0, 1, 0, 1):
        jobs.append(Job(rng, **c, mode=mode, steps=1, n_rows=1, n_tokens=1))
        jobs.append(Job(rng, **c, mode=mode, steps=c["max_k"], n_rows=slots,
                        n_tokens=c["max_tokens"]))
        jobs.append(Job(rng, **c, mode=mode, steps=1, n_rows=slots, n_tokens=c["max_tokens"]))
    await run_jobs(tb, jobs, idle=0.0, stall=0.0, max_cycles=200_000)


@cocotb.test()
async def reset_mid_job(dut):
    """Reset while operations and results are in flight; afterwards only new jobs appear."""
    tb = TB(dut)
    rng = _rng(tb)
    c = _config()
    await _reset(tb)
    await reset_mid_stream(
        tb, new_job=lambda: Job(rng, **c), drivers=lambda js, stop: _drivers(tb, js, 0.2, stop),
        reset=lambda: _reset(tb), hold_cycles=int(rng.integers(3, 3 * c["max_k"])),
        run=lambda js: run_jobs(tb, js, idle=0.2, stall=0.2, max_cycles=200_000))


@cocotb.test()
async def latency(dut):
    """The first result beat of a lone job comes exactly ``latency`` cycles after its last input."""
    p = params()
    tb = TB(dut)
    rng = _rng(tb)
    await _reset(tb)
    job = Job(rng, **_config(), n_tokens=1)
    dut.y__ready.value = 1
    stop = {"now": False}
    ports, per = p["weight_ports"], p.get("weight_beats", 1)
    cocotb.start_soon(drive_stream(tb, "cmd", [job.cmd], 0.0, stop))
    for q in range(ports):
        cocotb.start_soon(drive_stream(tb, f"w__{q}", job.w_transfers(q, ports, per), 0.0, stop))
    for beat in job.x_beats:
        dut.x__valid.value, dut.x__payload.value = 1, beat
        while True:
            await ReadOnly()
            ok = int(dut.x__ready.value)
            await RisingEdge(dut.clk)
            if ok:
                break
    dut.x__valid.value = 0
    cycles = 0
    while cycles < 4 * p["latency"]:
        await ReadOnly()
        if int(dut.y__valid.value):
            break
        await RisingEdge(dut.clk)
        cycles += 1
    assert cycles + 1 == p["latency"], f"first y.valid {cycles + 1} cycles after the last input, " \
                                       f"latency property {p['latency']}"


async def _count_cycles(dut, box):
    """Cycles from the first ``cmd`` transfer to the last ``y`` transfer, both included."""
    first = last = None
    n = 0
    while not box.get("stop"):
        await ReadOnly()
        if first is None and int(dut.cmd__valid.value) and int(dut.cmd__ready.value):
            first = n
        if int(dut.y__valid.value) and int(dut.y__ready.value):
            last = n
        await RisingEdge(dut.clk)
        n += 1
    box["cycles"] = last - first + 1


@cocotb.test()
async def utilization(dut):
    """Steady state, no idle or back-pressure: MAC-slot utilization per T and pass, and the
    cycles from the first command to the last result (the cycle model's calibration)."""
    p = params()
    if "report" not in p:
        return
    tb = TB(dut)
    rng = np.random.default_rng(1)
    c = _config()
    slots = c["rows"] * c["cols"]
    # Whole tiles by default; a smaller tile (``n_rows``) is fed packed (its pack_factor).
    n_rows = p.get("n_rows", slots)
    report = {}
    for mode in (0, 1):
        for n_tokens in p["tokens"]:
            await _reset(tb)
            jobs = [Job(rng, **c, mode=mode, steps=p["steps"], n_rows=n_rows, n_tokens=n_tokens)
                    for _ in range(p["jobs"])]
            box = {}
            counter = cocotb.start_soon(_count_cycles(dut, box))
            await run_jobs(tb, jobs, idle=0.0, stall=0.0, max_cycles=4_000_000)
            await RisingEdge(dut.clk)
            box["stop"] = True
            await counter
            busy, stall = int(dut.busy_cycles.value), int(dut.stall_cycles.value)
            macs = int(dut.useful_macs.value)
            report[f"{'draft' if mode else 'full'}-T{n_tokens}"] = {
                "mode": mode, "n_tokens": n_tokens, "jobs": p["jobs"], "steps": p["steps"],
                "n_rows": n_rows, "busy": busy, "stall": stall, "useful_macs": macs,
                "utilization": macs / (n_rows * (busy + stall)), "cycles": box["cycles"],
                "utilization_end_to_end": macs / (n_rows * box["cycles"])}
    with open(p["report"], "w") as f:
        json.dump(report, f, indent=1)


@cocotb.test()
async def many_dot_products(dut):
    """``params()["dot_products"]`` random dot products (short K, every T, both passes, a
    fifth of the jobs with IEEE specials), under light idle and back-pressure."""
    p = params()
    if "dot_products" not in p:
        return
    tb = TB(dut)
    rng = _rng(tb)
    c = _config()
    await _reset(tb)
    slots, done = c["rows"] * c["cols"], 0
    while done < p["dot_products"]:
        jobs = [Job(rng, **c, steps=int(rng.integers(1, 4)), n_rows=slots,
                    n_tokens=int(rng.integers(1, c["max_tokens"] + 1)), specials=i % 5 == 0)
                for i in range(50)]
        await run_jobs(tb, jobs, idle=0.05, stall=0.05, max_cycles=1_000_000)
        done += sum(j.n_rows * j.n_tokens for j in jobs)
    tb.dut._log.info(f"checked {done} dot products bit for bit")
