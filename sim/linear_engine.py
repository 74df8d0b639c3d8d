"""cocotb bench of :class:`hw.linear_engine.LinearEngine` against a byte memory.

Jobs are real BSFP tiles (:class:`sim.dsp_linear_unit.Job`: random sizes, both passes,
special activations) placed in memory as the engine reads them
(:func:`golden.weight_planes.pack_jobs` for the planes, binary16 activations one vector a
token at a stride, random bytes between them);
their descriptors go in on ``desc`` with random idle cycles, several queued at once. All
six AXI4 ports reach one memory: :class:`sim.axi_master.LatencyReadSlave` on the five
read ports (a fixed latency, random AR and R stalls), ``cocotbext-axi``'s
``AxiSlaveWrite`` on the result port (random AW, W and B stalls).

Checks: ``jobs_done`` counts every job once; then every result word of every job in
memory equals :func:`golden.dsp.full_dot` / :func:`golden.dsp.draft_dot`, and the bytes
around each job's result region are untouched (nothing written outside it); ``error``
stays low. ``reset_mid_job`` resets both domains while jobs are in flight: the jobs
after it run exactly.
"""

import json

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from specgen.golden.weight_planes import MatrixJob, pack_matrix, pack_matrix_draft
from specgen.hw.linear_engine import WEIGHT_PORTS, descriptor_layout
from specgen.sim.axi_master import (
    Memory,
    attach_memory,
    reset_domains,
    start_clocks,
)
from specgen.sim.bench import drive_stream, pack, params
from specgen.sim.bench import seed as bench_seed
from specgen.sim.dsp_linear_unit import Job

#: Fabric cycles per job before a run fails instead of hanging.
STUCK = 100_000
#: Guard bytes checked on each side of a job's result region.
GUARD = 64


class LinearTB:
    def __init__(self, dut, p):
        import random
        self.dut, self.p = dut, p
        self.rng = random.Random(bench_seed())
        self.np_rng = np.random.default_rng(self.rng.getrandbits(32))
        self.memory = Memory(1 << p["addr_width"], self.rng)
        start_clocks(dut, sync_mhz=p["sync_mhz"], mem_mhz=p["mem_mhz"])
        attach_memory(dut, self.memory,
                      reads=("m_axi_x_", *(f"m_axi_w__{j}_"
                                           for j in range(WEIGHT_PORTS * p["weight_ports"]))),
                      writes=("m_axi_y_",), latency=p["latency"], stall=p["stall"],
                      rng=self.rng)
        self.cursor = 0
        self.layout = descriptor_layout(slots=p["rows"] * p["cols"], max_tokens=p["max_tokens"],
                                        max_k=p["max_k"], addr_width=p["addr_width"],
                                        draft_plane=bool(p.get("draft_plane")))

    def _take(self, size):
        at = self.cursor + GUARD
        self.cursor = -(-(at + size + GUARD + int(self.np_rng.integers(0, 4)) * 64) // 64) * 64
        assert self.cursor <= len(self.memory.data), "the jobs do not fit the bench's memory"
        return at

    def job(self, *, split=False, **kw):
        """A random job placed in memory; returns it with its descriptors (:attr:`descs`)
        and y region. With ``split`` its rows are laid out as a matrix's last tile with
        ``linear.split_tiles`` (:func:`golden.weight_planes.pack_matrix`): one descriptor
        a piece, each with its own plane regions, its rows and its place in y."""
        p = self.p
        job = Job(self.np_rng, rows=p["rows"], cols=p["cols"], max_tokens=p["max_tokens"],
                  max_k=p["max_k"], specials=self.np_rng.random() < 0.5, **kw)
        vec = -(-2 * job.steps // 8) * 8
        img = job.memory_images(rows=p["rows"], cols=p["cols"], word_bits=p["word_bits"],
                                ports=p["weight_ports"], rng=self.np_rng,
                                weight_beats=p.get("weight_beats", 1),
                                x_stride=vec + 8 * int(self.np_rng.choice([0, 0, 1, 5])))
        pieces = [MatrixJob(row0=0, n_rows=job.n_rows, k0=0, n_k=job.steps)]
        lay = dict(rows=p["rows"], cols=p["cols"], max_k=p["max_k"], word_bits=p["word_bits"],
                   ports=p["weight_ports"], split=split, weight_beats=p.get("weight_beats", 1))
        if split:
            nib, res, pieces = pack_matrix(job.tensor.stored, **lay)
            img = {**img, "w_nibble": nib, "w_residue": res}
        d_offs = [0] * len(pieces)
        if p.get("draft_plane"):
            # The draft plane (linear.draft_plane), which the engine's draft jobs read.
            draft, d_offs = pack_matrix_draft(job.tensor.stored, **lay)
            img = {**img, "w_draft": draft}
        y_size = job.y_bytes(p["cols"], p["y_record_bytes"])
        addr = {"nibble_addr": self._take(len(img["w_nibble"])),
                "residue_addr": self._take(len(img["w_residue"])),
                "x_addr": self._take(len(img["x"])), "y_addr": self._take(y_size)}
        planes = [("nibble_addr", "w_nibble"), ("residue_addr", "w_residue"), ("x_addr", "x")]
        if "w_draft" in img:
            addr["draft_addr"] = self._take(len(img["w_draft"]))
            planes.append(("draft_addr", "w_draft"))
        for name, key in planes:
            self.memory.data[addr[name]:addr[name] + len(img[key])] = img[key]
        job.addr, job.y_size = addr, y_size
        y = addr["y_addr"]
        job.guard = (bytes(self.memory.data[y - GUARD:y]),
                     bytes(self.memory.data[y + y_size:y + y_size + GUARD]))
        # A piece's results go where the whole job's rows row0... would: beat row0/cols
        # of each token (golden.dsp's result beats, rows h·cols + g).
        job.descs = [pack(self.layout, {
            "mode": job.mode, "steps": j.n_k, "n_rows": j.n_rows, "n_tokens": job.n_tokens,
            "k": int(job.tensor.scales), "x_stride": job.x_stride, "x_addr": addr["x_addr"],
            "nibble_addr": addr["nibble_addr"] + j.nibble_offset,
            "residue_addr": addr["residue_addr"] + j.residue_offset,
            **({"draft_addr": addr["draft_addr"] + d} if "draft_addr" in addr else {}),
            "y_addr": addr["y_addr"] + j.row0 // p["cols"] * job.n_tokens * p["y_record_bytes"]})
            for j, d in zip(pieces, d_offs)]
        job.pieces = pieces
        return job

    def check(self, job, what):
        p = self.p
        y = job.addr["y_addr"]
        job.check_memory(self.memory.get_words, y, cols=p["cols"],
                         record_bytes=p["y_record_bytes"], what=what)
        assert bytes(self.memory.data[y - GUARD:y]) == job.guard[0], f"{what}: wrote below y"
        assert bytes(self.memory.data[y + job.y_size:y + job.y_size + GUARD]) == job.guard[1], (
            f"{what}: wrote past its y region")

    async def run(self, jobs, *, idle=0.3, what="job"):
        """Offer ``jobs`` on ``desc``; wait until ``jobs_done`` has counted each once."""
        dut = self.dut
        first = int(dut.jobs_done.value)
        stop = {"now": False}
        descs = [d for j in jobs for d in j.descs]
        driver = cocotb.start_soon(drive_stream(self, "desc", descs, idle, stop))
        cycles, ops = 0, 0
        self.op_span = [None, None]          # cycles of the first and the last operation
        while int(dut.jobs_done.value) - first < len(descs):
            await RisingEdge(dut.clk)
            cycles += 1
            if int(dut.op_fire.value):
                ops += 1
                self.op_span = [self.op_span[0] or cycles, cycles]
            assert cycles < STUCK * len(descs), (
                f"{what}: {int(dut.jobs_done.value) - first} of {len(descs)} jobs done after "
                f"{cycles} cycles")
        await driver
        await ClockCycles(dut.clk, 20)
        assert int(dut.jobs_done.value) - first == len(descs), "a job was counted twice"
        assert not int(dut.busy.value), "busy with every job done"
        assert not int(dut.error.value), "error set"
        for n, job in enumerate(jobs):
            self.check(job, f"{what} {n}")
        return cycles, ops


async def _start(dut):
    """The bench's clocks and memory, ``desc`` idle, both domains reset."""
    tb = LinearTB(dut, params())
    dut.desc__valid.value = 0
    await reset_domains(dut)
    return tb


@cocotb.test()
async def random_jobs(dut):
    """Random jobs of both passes, queued back to back: every result in memory is golden.
    Then three jobs of one token (the descriptor stage's shortest count), each into an
    idle engine (so it issues at the earliest cycle) and with a K other than the job
    before it, so a weight port's region offset that lagged the job would show."""
    tb = await _start(dut)
    k = tb.p["max_k"]
    jobs = [tb.job() for _ in range(tb.p["jobs"])]
    cycles, ops = await tb.run(jobs)
    for s in (k, 1, max(1, k // 2 + 1)):
        await tb.run([tb.job(n_tokens=1, steps=s)], idle=0.0, what="one-token job")
    dut._log.info("%d jobs (%d draft), %d cycles, %d operations", len(jobs),
                  sum(j.mode for j in jobs), cycles, ops)


@cocotb.test()
async def reset_mid_job(dut):
    """A reset of both domains with jobs in flight; the jobs after it are golden."""
    tb = await _start(dut)
    stop = {"now": False}
    doomed = [tb.job() for _ in range(3)]
    driver = cocotb.start_soon(drive_stream(tb, "desc", [d for j in doomed for d in j.descs],
                                            0.2, stop))
    await ClockCycles(dut.clk, int(tb.np_rng.integers(30, 300)))
    stop["now"] = True
    await driver
    await reset_domains(dut)
    assert not int(dut.busy.value) and not int(dut.jobs_done.value), "state left by the reset"
    jobs = [tb.job() for _ in range(3)]
    await tb.run(jobs, what="job after the reset")


@cocotb.test()
async def split_tile(dut):
    """Jobs laid out as a matrix's last tile cut into pieces (``linear.split_tiles``,
    :func:`golden.weight_planes.tile_pieces`), each piece a job packed by its own rows,
    queued with whole jobs of both passes between them: every row's result lands where
    the whole job's would and equals golden. ``split_rows`` lists the jobs' rows; each
    must split (the bench fails on a layout that did not)."""
    tb = await _start(dut)
    jobs = []
    for n in tb.p["split_rows"]:
        jobs.append(tb.job(split=True, n_rows=n))
        assert len(jobs[-1].pieces) > 1, f"{n} rows: one piece, nothing split"
        jobs.append(tb.job())
    cycles, ops = await tb.run(jobs, what="split job")
    dut._log.info("%d pieces of %s rows, %d cycles",
                  sum(len(j.pieces) for j in jobs[::2]),
                  [[q.n_rows for q in j.pieces] for j in jobs[::2]], cycles)


@cocotb.test()
async def efficiency(dut):
    """Long jobs back to back with no idle descriptors: the cycles of the run and those from
    the first operation to the last (the unit streams one a cycle at best), written to
    ``result_file``. ``tokens`` (default ``max_tokens``) sets the jobs' tokens: with fewer
    than ``cols / weight_ports``, the weights bound the rate."""
    tb = await _start(dut)
    p = tb.p
    lin = {"steps": p["max_k"], "n_rows": p["rows"] * p["cols"]}
    tokens = p.get("tokens", p["max_tokens"])
    jobs = [tb.job(mode=m, n_tokens=tokens, **lin) for m in (0, 1, 0, 1)]
    cycles, ops = await tb.run(jobs, idle=0.0, what="long job")
    # A job is K·T operations: with every input on time the unit issues one a cycle.
    want = sum(j.steps * j.n_tokens for j in jobs)
    assert ops == want, f"{ops} operations issued, {want} expected"
    if p.get("result_file"):
        with open(p["result_file"], "w") as f:
            json.dump({"cycles": cycles, "operations": ops, "jobs": len(jobs),
                       "span": tb.op_span[1] - tb.op_span[0] + 1}, f)
