"""cocotb bench of :class:`hw.stream_engine.StreamEngine`: the decoder's vector stages
run from memory, against their golden models, bit for bit.

Every operand and result is in a modeled memory: each read port is a
:class:`sim.axi_master.LatencyReadSlave` (a fixed latency, random AR and R stalls),
each write port ``cocotbext-axi``'s ``AxiSlaveWrite`` (random AW, W and B stalls).
Each run draws a layout per operand: vectors one after another, one vector shared by
all (``vstride = 0``), or vectors cut into chunks at a stride (a linear engine's result
records), with random gaps so bursts cross 4 KB pages. After a run, every result equals
the golden model's, and every byte of memory outside the result regions is as it was
(no stray, lost or duplicated beat). One run is cut by a reset of both domains in
mid-write; run again, it must give the golden result.
"""

import random

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge
from specgen.golden.argmax import argmax_hw_bits
from specgen.golden.conv1d import conv1d_hw
from specgen.golden.fp import FP16, FP32, convert
from specgen.golden.nonlinear import LUTSpec
from specgen.golden.residual import residual_hw_bits
from specgen.golden.rmsnorm import gated_rmsnorm_hw
from specgen.golden.tree import greedy_acceptance, tree_entries
from specgen.hw.argmax import argmax_out_layout
from specgen.hw.stream_engine import Field, descriptor_layout
from specgen.sim.argmax import logit_vectors
from specgen.sim.axi_master import (
    Memory,
    attach_memory,
    reset_domains,
    start_clocks,
)
from specgen.sim.bench import offer, pack, params, write_report
from specgen.sim.bench import seed as bench_seed
from specgen.sim.conv1d import channel_inputs
from specgen.sim.gated_norm import norm_vectors
from specgen.sim.residual import residual_inputs

#: Fabric cycles a run may take before the bench calls it stuck.
RUN_TIMEOUT = 200_000
#: Operands that are one vector for every node in the decoder (a norm's weights, the
#: conv taps and bias): the bench lays them out shared as often as not.
SHARED = ("w", "taps", "bias")


def _words(values, nbytes):
    """``values`` (..., k) uint32 words as elements of ``nbytes`` bytes (zero-padded)."""
    values = np.asarray(values, np.uint32)
    pad = nbytes // 4 - values.shape[-1]
    return np.concatenate([values, np.zeros(values.shape[:-1] + (pad,), np.uint32)], axis=-1)


def _lanes(a, vectors, elements, lanes, words):
    """Model elements ``a`` (``vectors · elements · lanes`` of them, ``k`` uint32 words
    each) as beats of ``lanes`` elements, each padded to ``words`` words:
    ``(vectors, elements, lanes · words)``, lane ``j`` of a beat at word ``j · words``."""
    a = np.asarray(a, np.uint32).reshape(vectors, elements, lanes, -1)
    pad = np.zeros(a.shape[:3] + (words - a.shape[-1],), np.uint32)
    return np.concatenate([a, pad], axis=-1).reshape(vectors, elements, -1)


def stage_data(p, rng, vectors, elements):
    """Operands ``{name: (vectors, elements, words)}`` uint32 and the golden results
    ``{name: (vectors, n, words)}`` (``n`` = elements, or 1 for a reduction). An element
    is a beat of ``p["lanes"]`` model elements."""
    kind, L = p["kind"], p.get("lanes", 1)
    count = vectors * elements * L

    def beats(a, words=1):
        return _lanes(a, vectors, elements, L, words)
    if kind == "residual":
        h, d = residual_inputs(rng, count)
        # residual_inputs appends every pair of special values; keep a random sample.
        pick = rng.choice(h.size, count, replace=False)
        h, d = h[pick], d[pick]
        return ({"h": beats(h), "d": beats(d)},
                {"out": beats(residual_hw_bits(h, d, contract=p["contract"]))})
    if kind == "copy":
        # Any words, IEEE specials among them (a copy must not canonicalize a NaN or
        # flush a subnormal).
        x = rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)
        specials = np.array([0x7FC00001, 0xFF800000, 0x80000000, 0x00000001, 0x7F7FFFFF],
                            np.uint32)
        x[rng.random(count) < 0.2] = rng.choice(specials)
        return {"x": beats(x)}, {"y": beats(x)}
    if kind == "conv1d":
        dc = p["d_conv"]
        window, x, w, b = channel_inputs(rng, count, dc)
        # The taps and bias are a channel's: the same for every vector (node).
        per = elements * L
        w = np.tile(w[:per], (vectors, 1))
        b = np.tile(b[:per], vectors)
        y, win = conv1d_hw(window, x, w, b, silu_lut=LUTSpec(**p["silu_lut"]),
                           contract=p["contract"])
        # Words of one lane's element of each field (a field in parts: its parts' bytes
        # together).
        size = {**p["read_bytes"], **p["write_bytes"]}
        ew = {f.name: sum(size[n] for n, _ in f.ports()) // 4 // L
              for f in (Field(*x) for x in p["reads"] + p["writes"])}

        def shape(a, name):
            return beats(np.asarray(a, np.float32).view(np.uint32), ew[name])
        return ({"window": shape(window.T, "window"), "x": shape(x, "x"),
                 "taps": shape(w, "taps"), "bias": shape(b, "bias")},
                {"y": shape(y, "y"), "new_window": shape(np.asarray(win).T, "new_window")})
    if kind == "norm":
        y, z, w = norm_vectors(rng, vectors, elements * L)
        want = gated_rmsnorm_hw(y, z if p["gate"] else None, w,
                                silu_lut=LUTSpec(**p["silu_lut"]),
                                rsqrt_lut=LUTSpec(**p["rsqrt_lut"]), eps=p["eps"],
                                contract=p["contract"], lanes=L).view(np.uint32)
        if p["out16"]:
            want = convert(want, FP32, FP16).astype(np.uint16)
            # A beat's binary16 lanes, low first: as 32-bit words when there are two or more
            # (one binary16 a beat is packed two a word by the engine's upsizer instead).
            want = (want.reshape(vectors, elements, 1).astype(np.uint32) if L == 1 else
                    np.ascontiguousarray(want).view(np.uint32).reshape(vectors, elements, -1))
        else:
            want = beats(want)
        ops = {"y": y, **({"z": z} if p["gate"] else {}), "w": np.tile(w, (vectors, 1))}
        return ({k: beats(np.asarray(v, np.float32).view(np.uint32)) for k, v in ops.items()},
                {"out": want})
    if kind == "argmax":
        # logit_vectors puts its edge cases in its first three vectors: draw at least
        # three and keep a random ``vectors`` of them.
        # A vector is elements beats of L logits.
        x = logit_vectors(rng, max(vectors, 3), elements * L)
        x = x[rng.permutation(len(x))[:vectors]]
        index, value, nan = argmax_hw_bits(x)
        lay = argmax_out_layout(elements * L)
        packed = [int(i) << lay["index"].offset | int(v) << lay["value"].offset
                  | int(f) << lay["nan"].offset for i, v, f in zip(index, value, nan)]
        res = np.array([[[q & 0xFFFFFFFF, q >> 32]] for q in packed], np.uint32)
        return {"logits": beats(x)}, {"result": res}
    if kind == "accept":
        vocab = p["vocab"]
        nodes, best, path = [], [], []
        for _ in range(vectors):
            parents, tokens, top = random_tree(rng, elements, vocab)
            lay = argmax_out_layout(vocab)
            # The argmax beat's other fields (value, nan) are noise to the block.
            noise = rng.integers(0, 1 << 32, elements, dtype=np.uint64) << np.uint64(
                lay["value"].offset)
            nodes.append(tree_entries(parents, tokens))
            best.append(np.asarray(top, np.uint64) | noise)
            path.append(greedy_acceptance(parents, tokens, top))

        def words(a):
            a = np.asarray(a, np.uint64)
            return np.stack([a & np.uint64(0xFFFFFFFF), a >> np.uint64(32)], -1).astype(np.uint32)
        return {"node": words(nodes), "best": words(best)}, {"path": words(path)}
    raise ValueError(f"unknown stage kind {kind!r}")


def random_tree(rng, nodes, vocab):
    """A random BFS tree of ``nodes`` nodes for the acceptance engine: ``(parents, draft
    tokens, the target's argmax at each node)``. Most nodes' tokens match their parent's
    argmax, so paths run deep; siblings sometimes share a token (the tie rule)."""
    parents = [-1]
    for i in range(1, nodes):
        parents.append(int(rng.integers(max(parents[-1], 0), i)))
    top = rng.integers(0, vocab, nodes)
    tokens = rng.integers(0, vocab, nodes)
    for i in range(1, nodes):
        if rng.random() < 0.7:
            tokens[i] = top[parents[i]]
    return parents, tokens, top


class Bench:
    def __init__(self, dut, p):
        self.dut, self.p = dut, p
        self.rng = random.Random(bench_seed())
        self.nprng = np.random.default_rng(self.rng.getrandbits(64))
        self.memory = Memory(1 << p["addr_width"], self.rng)
        self.reads = [Field(*f) for f in p["reads"]]
        self.writes = [Field(*f) for f in p["writes"]]
        self.layout = descriptor_layout(reads=self.reads, writes=self.writes,
                                        max_vectors=p["max_vectors"],
                                        max_elements=p["max_elements"],
                                        addr_width=p["addr_width"])
        self.top = 0
        start_clocks(dut, sync_mhz=p["sync_mhz"], mem_mhz=p["mem_mhz"])

    def attach(self):
        attach_memory(self.dut, self.memory,
                      reads=[f"m_axi_{n}_" for f in self.reads for n, _ in f.ports()],
                      writes=[f"m_axi_{n}_" for f in self.writes for n, _ in f.ports()],
                      latency=self.p["latency"], stall=self.p["stall"], rng=self.rng)

    def alloc(self, nbytes, align):
        """A fresh region after a random gap of 0 to 300 elements (so bursts cross pages)."""
        at = -(-self.top // align) * align + align * self.rng.randrange(0, 300)
        self.top = at + nbytes
        assert self.top <= len(self.memory.data), "the bench's regions do not fit the memory"
        return at

    def place(self, name, words, nbytes, parts=1):
        """Operand ``words`` (vectors, elements, k) in memory; its descriptor fields. In
        ``parts`` (each ``nbytes`` an element), part ``j`` (the ``j``-th slice of every
        beat's words) in a plane of its own, ``pstride`` bytes after the one before."""
        V, E = words.shape[:2]
        elems = [_words(w, nbytes) for w in np.split(words, parts, axis=-1)]
        shared = name in SHARED and self.rng.random() < 0.6
        style = "shared" if shared else self.rng.choice(["rows", "rows", "chunks"])
        if style == "chunks":
            # Half the time a chunk that does not divide the vector: a ragged last chunk
            # of ``tail`` elements, as a linear job's last output group when ``cols``
            # does not divide the rows.
            divisors = [c for c in range(1, E + 1) if E % c == 0]
            ragged = [c for c in range(2, E) if E % c]
            chunk = self.rng.choice(ragged if ragged and self.rng.random() < 0.5
                                    else divisors[:-1] or divisors)
        else:
            chunk = E
        chunks = -(-E // chunk)
        tail = E - (chunks - 1) * chunk
        # A whole last chunk may be given as 0 or as its size: both mean the same.
        tail_field = 0 if tail == chunk and self.rng.random() < 0.5 else tail
        # Chunks of one vector at cstride, vectors at vstride: vector v's chunk k sits in
        # slot k·V + v of a record array, as a linear job's tokens interleave.
        cstride = (chunk + self.rng.randrange(0, 3)) * nbytes * (1 if style != "chunks" else V)
        vstride = 0 if shared else (cstride // V if style == "chunks" else
                                    (E + self.rng.randrange(0, 5)) * nbytes)
        span = (1 if shared else V) * E * nbytes
        if style == "chunks":
            span = chunks * cstride
        elif not shared:
            span = V * vstride
        # The planes a random gap apart, so a part read at another's address fails.
        pstride = (-(-span // nbytes) + self.rng.randrange(0, 40)) * nbytes
        base = self.alloc(span + (parts - 1) * pstride, nbytes)
        for j, elem in enumerate(elems):
            for v in range(1 if shared else V):
                for k in range(chunks):
                    at = base + j * pstride + v * vstride + k * cstride
                    self.memory.put_words(
                        at, elem[v, k * chunk:min(E, (k + 1) * chunk)].reshape(-1))
        return {f"{name}_addr": base, f"{name}_vstride": vstride, f"{name}_cstride": cstride,
                f"{name}_chunk": chunk, f"{name}_chunks": chunks, f"{name}_tail": tail_field,
                **({f"{name}_pstride": pstride} if parts > 1 else {})}

    def result_region(self, name, n, vectors, nbytes, pack_, parts=1):
        """``(base, vstride, size, pstride)`` of a result's region: ``vectors`` of ``size``
        bytes at ``vstride``, each of its ``parts`` at ``pstride`` from the one before."""
        beat = max(nbytes, 4)
        size = n // pack_ * beat
        vstride = -(-(size + beat * self.rng.randrange(0, 4)) // beat) * beat
        pstride = vectors * vstride + beat * self.rng.randrange(0, 8)
        base = self.alloc(vectors * vstride + (parts - 1) * pstride, beat)
        return base, vstride, size, pstride

    async def run(self, desc, *, cut=None):
        """Offer ``desc``; wait for ``runs`` to count it (True), or with ``cut`` (a count of
        W beats of the first write port, fewer than the run writes there) reset both
        domains after that many beats and return False."""
        d = self.dut
        before = int(d.runs.value)
        await offer(d, "desc", pack(self.layout, desc))
        first = f"m_axi_{self.writes[0].ports()[0][0]}__"
        if cut is not None:
            beats, at = 0, cut
            for _ in range(RUN_TIMEOUT):
                await RisingEdge(d.mem_clk)
                await ReadOnly()
                beats += (int(getattr(d, first + "wvalid").value)
                          & int(getattr(d, first + "wready").value))
                if beats >= at:
                    assert int(d.runs.value) == before, "the run ended before its cut"
                    await RisingEdge(d.mem_clk)
                    await reset_domains(d)
                    return False
            raise AssertionError(f"fewer than {at} write beats in {RUN_TIMEOUT} cycles")
        for cycles in range(RUN_TIMEOUT):
            await ReadOnly()
            if int(d.runs.value) == before + 1 and not int(d.busy.value):
                assert not int(d.error.value), "an AXI port answered an error"
                self.cycles = cycles    # fabric cycles from the descriptor's hand-over to done
                await RisingEdge(d.clk)
                return True
            await RisingEdge(d.clk)
        raise AssertionError(f"run not done in {RUN_TIMEOUT} cycles")


@cocotb.test()
async def runs(dut):
    """``runs`` descriptors of random sizes and layouts; results golden, nothing else
    written; run ``cut_run`` is cut by a reset in mid-write and run again."""
    p = params()
    b = Bench(dut, p)
    dut.desc__valid.value = 0
    await reset_domains(dut)
    b.attach()
    rb, wb, pk = p["read_bytes"], p["write_bytes"], p["pack"]
    stats = []
    for run in range(p["runs"]):
        b.top = 0
        cut = run == p.get("cut_run")
        # A cut run has at least two result beats on every port, to cut between.
        V = b.rng.randint(2 if cut else 1, p["max_vectors"])
        if p["fixed_elements"]:
            E = p["max_elements"]
        else:
            E = b.rng.randint(1, p["max_elements"] // 2) * 2 if run else p["max_elements"]
        ops, want = stage_data(p, b.nprng, V, E)
        # A field in parts: part j the j-th slice of every beat's words (its lanes).
        want = {n: a for f in b.writes
                for n, a in zip([n for n, _ in f.ports()],
                                np.split(want[f.name], f.parts, axis=-1))}
        desc = {"vectors": V, "elements": E}
        for f in b.reads:
            desc.update(b.place(f.name, ops[f.name], rb[f.ports()[0][0]], f.parts))
        regions = {}
        for f in b.writes:
            port = f.ports()[0][0]
            n = want[port].shape[1]
            base, vstride, size, pstride = b.result_region(f.name, n, V, wb[port], pk[port],
                                                           f.parts)
            for j, (name, _) in enumerate(f.ports()):
                regions[name] = (base + j * pstride, vstride, size)
            desc.update({f"{f.name}_addr": base, f"{f.name}_vstride": vstride,
                         **({f"{f.name}_pstride": pstride} if f.parts > 1 else {})})
        if p.get("corrupt") and run == 0:
            name = b.writes[-1].ports()[-1][0]
            want[name][V // 2, 0, 0] ^= 1
        snapshot = bytes(b.memory.data)
        if cut:
            name = b.writes[0].ports()[0][0]
            total = V * (want[name].shape[1] // pk[name])
            assert not await b.run(desc, cut=b.rng.randrange(1, total))
        assert await b.run(desc)
        stats.append({"vectors": V, "elements": E, "cycles": b.cycles})
        # Everything outside the result regions is untouched.
        mask = np.ones(len(snapshot), bool)
        for base, vstride, size in regions.values():
            for v in range(V):
                mask[base + v * vstride:base + v * vstride + size] = False
        now = np.frombuffer(bytes(b.memory.data), np.uint8)
        stray = np.flatnonzero((now != np.frombuffer(snapshot, np.uint8)) & mask)
        assert stray.size == 0, f"run {run}: {stray.size} bytes written outside the results, " \
                                f"first at {int(stray[0]):#x}"
        for name, (base, vstride, size) in regions.items():
            for v in range(V):
                raw = bytes(b.memory.data[base + v * vstride:base + v * vstride + size])
                if wb[name] < 4:
                    got = np.frombuffer(raw, np.uint16).astype(np.uint32).reshape(-1, 1)
                else:
                    got = np.frombuffer(raw, "<u4").reshape(-1, wb[name] // 4)
                exp = _words(want[name][v], max(wb[name], 4))[:, :got.shape[1]]
                bad = np.argwhere(got != exp)
                assert bad.size == 0, (
                    f"run {run} ({V}x{E}) {name} vector {v} element {tuple(bad[0])}: "
                    f"{int(got[tuple(bad[0])]):#x} in memory, golden {int(exp[tuple(bad[0])]):#x}")
    write_report(p, {"runs": stats})
    dut._log.info("checked %d runs", p["runs"])
