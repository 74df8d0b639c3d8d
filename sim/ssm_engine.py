"""cocotb bench of :class:`hw.ssm_engine.SSMEngine`: multi-layer tree steps with every
word in a modeled memory, against :func:`golden.mamba2.ssm_step_hw_bits` along the tree.

The memory is one byte array behind four AXI subordinates: the two read ports are
:class:`sim.axi_master.LatencyReadSlave` (a fixed latency in ``mem`` cycles, random
AR and R stalls), the two write ports ``cocotbext-axi``'s ``AxiSlaveWrite`` (random
AW, W and B stalls). The bench writes only descriptors and the node table; it lays
out each layer's parameters, node inputs and committed state in memory, and after
every pass reads back every node's ``y`` and the written state and compares them
with the golden step applied along the tree. The state is striped over the
engine's state ports (``golden.memory_map.stripe_state``), each port on its own
subordinate. The committed state lives in two
banks: a step reads bank ``b`` and writes bank ``1 − b`` of every layer, and the
banks flip when the step is done. One pass is cut by a reset of both domains in
mid-burst; the committed bank must be byte-for-byte untouched, and the pass, run
again, must give the golden result (nothing lost, nothing applied twice).
"""

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from specgen.golden.mamba2 import SSMParams, mamba2_init_params
from specgen.hw.ssm_engine import descriptor_layout
from specgen.hw.tree_ssm import table_layout
from specgen.sim.axi_master import (
    Memory,
    attach_memory,
    reset_domains,
    start_clocks,
)
from specgen.sim.bench import offer, pack, params
from specgen.sim.bench import seed as bench_seed
from specgen.sim.ssm_unit import config_from_params, initial_state, make_tokens
from specgen.sim.ssm_unit_bfm import state_from_memory, state_to_memory
from specgen.sim.tree_ssm import expected, node_table

__all__ = ["Layout"]

#: Fabric cycles a pass may take before the bench calls it stuck.
PASS_TIMEOUT = 100_000


class Layout:
    """Where the bench puts each layer's words (4 KB-aligned regions)."""

    def __init__(self, cfg, *, layers, max_nodes, state_bytes, record_bytes):
        H, P, _N = cfg.state_shape
        page = 4096

        def up(n):
            return -(-n // page) * page
        self.params = [up(3 * 4 * H) * i for i in range(layers)]
        base = up(3 * 4 * H) * layers
        self.inputs = [base + up(max_nodes * record_bytes) * i for i in range(layers)]
        base += up(max_nodes * record_bytes) * layers
        self.state = [[base + up(state_bytes) * (2 * i + b) for b in (0, 1)] for i in range(layers)]
        base += up(state_bytes) * 2 * layers
        self.y = [base + up(max_nodes * 4 * H * P) * i for i in range(layers)]
        self.end = base + up(max_nodes * 4 * H * P) * layers


class Bench:
    def __init__(self, dut, p):
        import random
        self.dut, self.p = dut, p
        self.rng = random.Random(bench_seed())
        self.nprng = np.random.default_rng(self.rng.getrandbits(64))
        self.cfg = config_from_params(p)
        self.memory = Memory(1 << p["addr_width"], self.rng)
        start_clocks(dut, sync_mhz=p["sync_mhz"], mem_mhz=p["mem_mhz"])

    async def reset(self):
        await reset_domains(self.dut)

    async def count(self):
        """AXI handshakes of the input port, for the timeout message."""
        d = self.dut
        self.counts = {"ar": 0, "r": 0, "rlast": 0, "ar_beats": 0}
        while True:
            await RisingEdge(d.mem_clk)
            await ReadOnly()
            if int(d.m_axi_in__arvalid.value) and int(d.m_axi_in__arready.value):
                self.counts["ar"] += 1
                self.counts["ar_beats"] += int(d.m_axi_in__arlen.value) + 1
            if int(d.m_axi_in__rvalid.value) and int(d.m_axi_in__rready.value):
                self.counts["r"] += 1
                self.counts["rlast"] += int(d.m_axi_in__rlast.value)

    def attach(self):
        d, p, rng = self.dut, self.p, self.rng
        cocotb.start_soon(self.count())
        S = self.cfg.state_ports
        attach_memory(d, self.memory,
                      reads=("m_axi_in_", *(f"m_axi_st_rd{q}_" for q in range(S))),
                      writes=(*(f"m_axi_st_wr{q}_" for q in range(S)), "m_axi_y_"),
                      latency=p["latency"],
                      stall=p["stall"], rng=rng)

    def put(self, addr, words):
        self.memory.put_words(addr, words)


    def get(self, addr, count):
        return self.memory.get_words(addr, count)

    async def write_table(self, parents, srcs):
        """The node table of ``parents`` (its FIFO schedule) and each node's record."""
        d = self.dut
        lay = table_layout(self.p["fifo_depth"])
        for i, (root, ps, ws) in enumerate(node_table(parents, self.p["fifo_depth"])):
            d.tbl_we.value, d.tbl_node.value, d.tbl_src.value = 1, i, srcs[i]
            d.tbl_entry.value = pack(lay, {"root": root, "parent_slot": ps, "write_slot": ws})
            await RisingEdge(d.clk)
        d.tbl_we.value = 0

    async def run_pass(self, desc, *, cut_beat=None):
        """Offer ``desc`` and wait for ``passes`` to count it; with ``cut_beat``, reset both
        domains once that many W beats of the state write port have been taken (in
        mid-burst, before the pass can be done) and return False."""
        d = self.dut
        lay = descriptor_layout(max_nodes=self.p["max_nodes"], addr_width=self.p["addr_width"])
        before = int(d.passes.value)
        await offer(d, "desc", pack(lay, desc))
        if cut_beat is not None:
            beats = 0
            for _ in range(PASS_TIMEOUT):
                await RisingEdge(d.mem_clk)
                await ReadOnly()
                assert int(d.passes.value) == before, "the pass was done before its state write"
                beats += int(d.m_axi_st_wr0__wvalid.value) & int(d.m_axi_st_wr0__wready.value)
                if beats == cut_beat:
                    await RisingEdge(d.mem_clk)
                    await self.reset()
                    return False
            raise AssertionError(f"fewer than {cut_beat} state write beats in {PASS_TIMEOUT} "
                                 "memory cycles")
        for _cycle in range(PASS_TIMEOUT):
            await ReadOnly()
            if int(d.passes.value) == before + 1 and not int(d.busy.value):
                assert not int(d.error.value), "an AXI port answered an error"
                await RisingEdge(d.clk)
                return True
            await RisingEdge(d.clk)
        probes = dict(self.counts)
        for name in ("cmd_pending", "loaded", "started", "y_all_issued", "load_node", "section",
                     "loading_params", "rd_node", "rec_ok", "y_tile", "y_node", "y_done0"):
            try:
                probes[name] = int(getattr(d, name).value)
            except (AttributeError, ValueError) as exc:
                probes[name] = repr(exc)[:40]
        raise AssertionError(f"pass not done in {PASS_TIMEOUT} cycles; {probes}")


@cocotb.test()
async def steps(dut):
    """``steps`` tree steps over ``layers`` layers; every y and written state equal golden,
    the committed bank untouched by a pass cut by a reset in mid-burst."""
    p = params()
    b = Bench(dut, p)
    cfg = b.cfg
    H, P, _N = cfg.state_shape
    d = dut
    for name in ("desc__valid", "tbl_we"):
        getattr(d, name).value = 0
    await b.reset()
    b.attach()
    parents, layers = p["parents"], p["layers"]
    n = len(parents)
    lay = Layout(cfg, layers=layers, max_nodes=p["max_nodes"], state_bytes=p["state_bytes"],
                 record_bytes=p["record_bytes"])
    assert lay.end <= len(b.memory.data), "the bench's regions do not fit the memory"
    prms, states = [], []
    for layer in range(layers):
        prm = mamba2_init_params(cfg, b.nprng)
        prm = SSMParams(A=prm.A, dt_bias=prm.dt_bias,
                        D=(1 + 0.25 * b.nprng.standard_normal(H)).astype(np.float32))
        prms.append(prm)
        b.put(lay.params[layer], np.concatenate([np.asarray(v, np.float32).view(np.uint32)
                                                 for v in (prm.A, prm.dt_bias, prm.D)]))
        st = initial_state(b.nprng, cfg)
        states.append(st)
        b.put(lay.state[layer][0], state_to_memory(cfg, st))
    bank = 0
    cut = p.get("cut_step")
    children = [[j for j in range(n) if parents[j] == i] for i in range(n)]
    for step in range(p["steps"]):
        # Target pass per layer: the whole tree, y of every node, no state written.
        await b.write_table(parents, list(range(n)))
        golden = []
        for layer in range(layers):
            toks = make_tokens(b.nprng, cfg, prms[layer], n, specials=(step == p["steps"] - 1))
            recs = [np.concatenate([B, C, x.ravel(), dt]) for x, B, C, dt in toks]
            b.put(lay.inputs[layer], np.concatenate(recs))
            want_y, want_states = expected(cfg, prms[layer], states[layer], parents, toks)
            golden.append(want_states)
            if p.get("corrupt") and step == 0 and layer == 0:
                # The exponent's top bit of element (h, 0, 0) flipped in memory, one per
                # head: a head whose dA underflows to 0 forgets its state, so corrupting
                # every head keeps the bench's failure certain.
                at = lay.state[layer][bank]
                bad = state_from_memory(cfg, b.get(at, p["state_bytes"] // 4))
                bad[:, 0, 0] ^= 0x40000000
                b.put(at, state_to_memory(cfg, bad))
            assert await b.run_pass({
                "nodes": n, "out_node": 0, "out_en": 0, "y_en": 1, "load_params": 1,
                "params_addr": lay.params[layer], "input_addr": lay.inputs[layer],
                "state_in_addr": lay.state[layer][bank], "state_out_addr": 0,
                "y_addr": lay.y[layer]})
            ys = b.get(lay.y[layer], n * H * P).reshape(n, H, P)
            for i in range(n):
                bad = np.argwhere(ys[i] != want_y[i])
                assert bad.size == 0, (f"step {step} layer {layer} node {i} y{tuple(bad[0])} = "
                                       f"{int(ys[i][tuple(bad[0])]):#010x} in memory, golden "
                                       f"{int(want_y[i][tuple(bad[0])]):#010x}")
        # The accepted path (random here: acceptance is the tree verifier's), then a
        # commit pass per layer: the path replayed from the committed state, its
        # last node's state written to the other bank, y dropped.
        path = [0]
        while children[path[-1]] and b.rng.random() < 0.7:
            path.append(b.rng.choice(children[path[-1]]))
        await b.write_table([-1] + list(range(len(path) - 1)), path)
        for layer in range(layers):
            desc = {"nodes": len(path), "out_node": len(path) - 1, "out_en": 1, "y_en": 0,
                    "load_params": 1, "params_addr": lay.params[layer],
                    "input_addr": lay.inputs[layer], "state_in_addr": lay.state[layer][bank],
                    "state_out_addr": lay.state[layer][1 - bank], "y_addr": 0}
            lo, hi = lay.state[layer][bank], lay.state[layer][bank] + p["state_bytes"]
            if cut is not None and step == cut and layer == layers - 1:
                committed = bytes(b.memory.data[lo:hi])
                # Cut inside the state write: after 1 to all-but-one of port 0's beats.
                beats = p["state_bytes"] // cfg.state_ports * 8 // len(d.m_axi_st_wr0__wdata)
                assert not await b.run_pass(desc, cut_beat=b.rng.randrange(1, beats))
                assert bytes(b.memory.data[lo:hi]) == committed, (
                    "the reset in mid-pass changed the committed state")
                await b.write_table([-1] + list(range(len(path) - 1)), path)
                cut = None
            assert await b.run_pass(desc)
            got = state_from_memory(cfg, b.get(lay.state[layer][1 - bank], p["state_bytes"] // 4))
            want = golden[layer][path[-1]]
            bad = np.argwhere(got != want)
            assert bad.size == 0, (f"step {step} layer {layer}: {len(bad)} committed state "
                                   f"elements in memory differ from golden (path {path}); first "
                                   f"{tuple(bad[0])}")
            states[layer] = want
        bank = 1 - bank
    dut._log.info("checked %d steps of %d layers, %d nodes each", p["steps"], layers, n)
