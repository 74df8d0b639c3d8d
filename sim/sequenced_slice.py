"""A slice of a Mamba2 layer run by the layer sequencer from one program: the norm, a
projection and the residual, ``h' = h + W·fp16(RMSNorm(u)·w)`` for ``V`` nodes, with every
word in a modeled memory and no host work between the stages.

:class:`SliceTop` (a bench top level, not part of the design) is a
:class:`hw.decoder.SequencedCore` of three engines: a :func:`hw.stream_engine.norm_engine`
writing binary16 vectors one a node, a :class:`hw.linear_engine.LinearEngine` reading
them token-major (:class:`hw.activation_reader.ActivationReader`) and writing result
records, and a :func:`hw.stream_engine.residual_engine` reading those records in place.
The program is four records: the norm; the linear job, waiting for the norm; the residual,
waiting for the linear engine; ``END``, waiting for the residual. The bench checks ``h'`` in
memory against the golden contracts composed in numpy (``gated_rmsnorm_hw``, binary16
``convert``, ``full_dot`` / ``draft_dot`` on the BSFP planes, ``residual_hw_bits``), and
that nothing outside the results and the two intermediate buffers changed. Every AXI
channel stalls at random; one program is cut by a reset in mid-run and then run whole.
"""

import random

import cocotb
import numpy as np
from specgen.golden import bsfp, dsp
from specgen.golden.fp import FP16, FP32, convert
from specgen.golden.nonlinear import LUTSpec
from specgen.golden.residual import residual_hw_bits
from specgen.golden.rmsnorm import gated_rmsnorm_hw
from specgen.golden.weight_planes import job_images
from specgen.hw.linear_engine import WEIGHT_PORTS, LinearEngine
from specgen.hw.linear_engine import descriptor_layout as linear_layout
from specgen.hw.decoder import SequencedCore
from specgen.hw.sequencer import OP_DISPATCH, OP_END, encode_record, start_layout
from specgen.hw.stream_engine import Field, norm_engine, residual_engine
from specgen.hw.stream_engine import descriptor_layout as stream_layout
from specgen.sim.axi_master import Memory, reset_and_attach, start_clocks
from specgen.sim.bench import pack, params
from specgen.sim.decoder_core import run_program
from specgen.sim.bench import seed as bench_seed
from specgen.sim.gated_norm import norm_vectors
from specgen.sim.residual import residual_inputs

#: Engine indices of the program.
NORM, LINEAR, RESIDUAL = 0, 1, 2
#: Records of a program at most (the slice's program has four).
MAX_RECORDS = 8
#: Fabric cycles a program may take.
TIMEOUT = 100_000


class SliceTop(SequencedCore):
    """The sequencer and the slice's three engines; every AXI port at the top.

    Parameters
    ----------
    config : golden.config.Config
        With ``linear.contract`` ``"dspfp32"``.
    k, n, nodes : int
        The norm's and projection's inputs, the projection's outputs (at most one job:
        ``rows · cols``), the nodes (at most ``linear.max_tokens``).
    addr_width : int
    """

    def __init__(self, *, config, k, n, nodes, addr_width):
        engines = {
            "norm": norm_engine(config, size=k, gate=False, out_fmt=FP16, max_vectors=nodes,
                                addr_width=addr_width),
            "lin": LinearEngine(config=config, addr_width=addr_width),
            "res": residual_engine(config, max_vectors=nodes, max_elements=n,
                                   addr_width=addr_width)}
        self.norm, self.lin, self.res = engines.values()
        self.k, self.n, self.nodes = k, n, nodes
        super().__init__(config=config, engines=engines, max_records=MAX_RECORDS,
                         addr_width=addr_width)

    @property
    def module_name(self):
        return (f"SliceTop_k{self.k}_n{self.n}_v{self.nodes}_"
                f"{self.lin.module_name.removeprefix('LinearEngine_')}")


def axi_prefixes(p):
    """The cocotb prefixes of the top's read and write ports (``p``: the bench's params)."""
    reads = ["m_axi_seq_", "m_axi_norm_y_", "m_axi_norm_w_", "m_axi_lin_x_", "m_axi_res_h_",
             "m_axi_res_d_"]
    reads += [f"m_axi_lin_w__{j}_" for j in range(WEIGHT_PORTS * p["weight_ports"])]
    return reads, ["m_axi_norm_out_", "m_axi_lin_y_", "m_axi_res_out_"]


class Bench:
    def __init__(self, dut, p):
        self.dut, self.p = dut, p
        self.rng = random.Random(bench_seed())
        self.np_rng = np.random.default_rng(self.rng.getrandbits(64))
        self.memory = Memory(1 << p["addr_width"], self.rng)
        self.top = 0
        aw, V = p["addr_width"], p["nodes"]
        self.layouts = {
            "norm": stream_layout(reads=(Field("y", 32), Field("w", 32)),
                                  writes=(Field("out", 16),), max_vectors=V,
                                  max_elements=p["k"], addr_width=aw),
            "linear": linear_layout(slots=p["rows"] * p["cols"], max_tokens=p["max_tokens"],
                                    max_k=p["max_k"], addr_width=aw),
            "residual": stream_layout(reads=(Field("h", 32), Field("d", 32)),
                                      writes=(Field("out", 32),), max_vectors=V,
                                      max_elements=p["n"], addr_width=aw)}
        start_clocks(dut, sync_mhz=p["sync_mhz"], mem_mhz=p["mem_mhz"])

    def alloc(self, nbytes, align=64):
        at = -(-self.top // align) * align + align * self.rng.randrange(0, 8)
        self.top = at + nbytes
        assert self.top <= len(self.memory.data), "the slice does not fit the bench memory"
        return at

    def program(self):
        """Place one slice's operands and program; returns the start, the expected ``h'``
        and the result and scratch regions ``[(addr, bytes)]``."""
        p, r = self.p, self.np_rng
        K, N, V, cols, rec = p["k"], p["n"], p["nodes"], p["cols"], p["y_record_bytes"]
        u, _, w = norm_vectors(r, V, K)
        g = gated_rmsnorm_hw(u, None, w, silu_lut=LUTSpec(**p["silu_lut"]),
                             rsqrt_lut=LUTSpec(**p["rsqrt_lut"]), eps=p["eps"],
                             contract=p["contract"])
        x16 = convert(g.view(np.uint32), FP32, FP16).astype(np.uint16)      # (V, K)
        wt = (r.standard_normal((N, K)) * 0.1).astype(np.float16)
        tensor = bsfp.encode(wt.view(np.uint16), config=bsfp.BSFPConfig(group_size=p["group"]))
        mode = int(r.integers(0, 2))
        d = (dsp.draft_dot if mode else dsp.full_dot)(tensor, x16)          # (N, V) bits
        h, _ = residual_inputs(r, V * N)
        h = h[r.choice(h.size, V * N, replace=False)].reshape(V, N)
        want = residual_hw_bits(h.reshape(-1), d.T.reshape(-1),
                                contract=p["contract"]).reshape(V, N)
        nib, res = job_images(tensor.stored, rows=p["rows"], cols=cols, ports=p["weight_ports"],
                              word_bits=p["word_bits"], weight_beats=p.get("weight_beats", 1))
        put = self.memory.put_words
        u_at = self.alloc(V * K * 4)
        put(u_at, np.asarray(u, np.float32).view(np.uint32).reshape(-1))
        w_at = self.alloc(K * 4)
        put(w_at, np.asarray(w, np.float32).view(np.uint32))
        x_stride = -(-2 * K // 64) * 64 + 64 * self.rng.randrange(0, 2)
        x_at = self.alloc(V * x_stride)
        nib_at = self.alloc(len(nib))
        self.memory.data[nib_at:nib_at + len(nib)] = nib
        res_at = self.alloc(len(res))
        self.memory.data[res_at:res_at + len(res)] = res
        groups = -(-N // cols)
        y_at = self.alloc(groups * V * rec)
        h_stride = -(-N * 4 // 64) * 64
        h_at = self.alloc(V * h_stride)
        for v in range(V):
            put(h_at + v * h_stride, h[v])
        out_stride = h_stride + 64 * self.rng.randrange(0, 2)
        out_at = self.alloc(V * out_stride)
        norm_desc = {"vectors": V, "elements": K,
                     "y_addr": u_at, "y_vstride": K * 4, "y_cstride": 0, "y_chunk": K,
                     "y_chunks": 1,
                     "w_addr": w_at, "w_vstride": 0, "w_cstride": 0, "w_chunk": K, "w_chunks": 1,
                     "out_addr": x_at, "out_vstride": x_stride}
        lin_desc = {"mode": mode, "steps": K, "n_rows": N, "n_tokens": V,
                    "k": int(tensor.scales), "nibble_addr": nib_at, "residue_addr": res_at,
                    "x_addr": x_at, "x_stride": x_stride, "y_addr": y_at}
        # Row r of node v is at y + (⌊r/cols⌋·V + v)·rec + 4·(r mod cols): chunks of cols.
        res_desc = {"vectors": V, "elements": N,
                    "h_addr": h_at, "h_vstride": h_stride, "h_cstride": 0, "h_chunk": N,
                    "h_chunks": 1,
                    "d_addr": y_at, "d_vstride": rec, "d_cstride": V * rec, "d_chunk": cols,
                    "d_chunks": groups,
                    "out_addr": out_at, "out_vstride": out_stride}
        rb = p["record_bits"]
        lay = self.layouts
        recs = [encode_record(rb, op=OP_DISPATCH, engine=NORM,
                              payload=pack(lay["norm"], norm_desc)),
                encode_record(rb, op=OP_DISPATCH, engine=LINEAR, wait=(NORM,),
                              payload=pack(lay["linear"], lin_desc)),
                encode_record(rb, op=OP_DISPATCH, engine=RESIDUAL, wait=(LINEAR,),
                              payload=pack(lay["residual"], res_desc)),
                encode_record(rb, op=OP_END, wait=(RESIDUAL,))]
        prog = b"".join(recs)
        prog_at = self.alloc(len(prog), rb // 8)
        self.memory.data[prog_at:prog_at + len(prog)] = prog
        start = pack(start_layout(p["addr_width"], MAX_RECORDS), {"addr": prog_at, "records": len(recs)})
        written = [(x_at, V * x_stride), (y_at, groups * V * rec), (out_at, V * out_stride)]
        return start, want, (out_at, out_stride), written, mode


@cocotb.test()
async def slices(dut):
    """``runs`` slices of random operands, one cut by a reset and then run again."""
    p = params()
    b = Bench(dut, p)
    dut.start__valid.value = 0
    dut.abort_req.value = 0
    reads, writes = axi_prefixes(p)
    await reset_and_attach(dut, b.memory, p, b.rng, reads=reads, writes=writes)
    for run in range(p["runs"]):
        b.top = 0
        start, want, (out_at, out_stride), written, mode = b.program()
        if p.get("corrupt") and run == 0:
            want[0, 0] ^= 1
        snapshot = np.frombuffer(bytes(b.memory.data), np.uint8).copy()
        if run == p.get("cut_run"):
            await run_program(dut, start, timeout=TIMEOUT, cut=b.rng.randrange(20, 200))
        cycles = await run_program(dut, start, timeout=TIMEOUT)
        V, N = want.shape
        for v in range(V):
            got = b.memory.get_words(out_at + v * out_stride, N)
            for i in range(N):
                assert int(got[i]) == int(want[v, i]), (
                    f"run {run} ({'draft' if mode else 'verify'} pass): h' of node {v}, "
                    f"element {i} is {int(got[i]):#010x} in memory, golden {int(want[v, i]):#010x}")
        mask = np.ones(len(snapshot), bool)
        for at, size in written:
            mask[at:at + size] = False
        now = np.frombuffer(bytes(b.memory.data), np.uint8)
        stray = np.flatnonzero((now != snapshot) & mask)
        assert stray.size == 0, f"run {run}: {stray.size} bytes written outside the slice's " \
                                f"buffers, first at {int(stray[0]):#x}"
        dut._log.info(f"slice {run}: {cycles} cycles")
