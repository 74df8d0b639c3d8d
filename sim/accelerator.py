"""cocotb bench of :class:`hw.accelerator.Accelerator`, driven only through its AXI ports.

The host is ``cocotbext-axi``'s ``AxiLiteMaster`` on ``s_axi``. Every AXI4 port
of the linear and SSM engines reaches one byte memory: the read ports through
:class:`sim.axi_master.LatencyReadSlave` (a fixed latency, random AR and R
stalls), the write ports through ``cocotbext-axi``'s ``AxiSlaveWrite`` (random AW,
W and B stalls). The host writes registers only; the bench places what the
layer's upstream stages would (the linear jobs' BSFP planes and activations, the
nodes' input records, the parameters, the initial states) at the addresses of
:func:`golden.weight_planes.pack_jobs` and :func:`golden.memory_map.ssm_engine_layout`,
and reads every result back from memory. Golden references:

* linear jobs: :func:`golden.dsp.draft_dot` and :func:`golden.dsp.full_dot`,
  through :class:`sim.dsp_linear_unit.Job`;
* SSM: :func:`golden.mamba2.ssm_step_hw_bits`, every node from its parent's state
  (the root from the committed state), per layer;
* acceptance: :func:`golden.tree.accepted_path`.

Tests: ``draft_verify_step`` (draft tokens, a ``ROLLBACK``, a draft commit, then
verify steps with linear jobs alongside; every ``y`` and every written state
checked in memory), ``reset_mid_step`` (a reset in mid commit pass leaves both
committed banks byte for byte whole; the step, run again, commits the golden
state), ``errors`` (every error code a host can provoke; a step passes afterwards).
"""

import json
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from specgen.golden import tree as gtree
from specgen.golden.config import preset
from specgen.golden.mamba2 import SSMParams, mamba2_init_params
from specgen.golden.memory_map import SSM_BUFFERS, SSM_SLOTS, align, ssm_engine_layout
from specgen.hw.accelerator import ERROR
from specgen.hw.linear_engine import WEIGHT_PORTS, LinearEngine
from specgen.hw.regmap import LIN_ADDR_SHIFT, accelerator_regmap
from specgen.sim.axi_master import Memory, attach_memory, period_ps, reset_domains
from specgen.sim.bench import TB, params
from specgen.sim.dsp_linear_unit import Job
from specgen.sim.ssm_unit import initial_state, make_tokens
from specgen.sim.ssm_unit_bfm import state_from_memory, state_to_memory
from specgen.sim.tree_ssm import expected

__all__ = ["AccelTB", "Layers"]

SHAPES = [(2, 2, 1), (2, 1, 2), (3, 1), (1, 2, 2), (2, 2), (3, 2)]


def _config():
    return preset(params().get("preset", "sim"))


class Layers:
    """Where the bench puts the model in memory, and the golden side of it: per layer the
    parameters and each model's committed state, the banks ``STATE_BANK`` names."""

    def __init__(self, tb, *, layers):
        cfg = tb.config.ssm
        self.cfg, self.layers, self.rng = cfg, layers, tb.rng_np
        self.lay = lay = ssm_engine_layout(tb.config)
        self.bases = {"weights": 0}
        self.bases["state"] = align(layers * lay.params_stride)
        self.bases["io"] = self.bases["state"] + layers * lay.state_layer_stride
        self.end = self.bases["io"] + layers * lay.io_layer_stride
        assert self.end <= len(tb.memory.data), "the bench's model does not fit the memory"
        tb.lin_area, tb.lin_cursor = align(self.end), None
        self.tb = tb
        self.prm, self.state = [], {"target": [], "draft": []}
        self.bank = {"target": 0, "draft": 0}
        for layer in range(layers):
            prm = mamba2_init_params(cfg, self.rng)
            prm = SSMParams(A=prm.A, dt_bias=prm.dt_bias,
                            D=(1 + 0.25 * self.rng.standard_normal(cfg.nheads)).astype(np.float32))
            self.prm.append(prm)
            tb.put(self.params_addr(layer), np.concatenate(
                [np.asarray(v, np.float32).view(np.uint32) for v in (prm.A, prm.dt_bias, prm.D)]))
            for who in ("target", "draft"):
                st = initial_state(self.rng, cfg)
                self.state[who].append(st)
                self.write_state(layer, f"{who}0", st)

    def params_addr(self, layer):
        return self.bases["weights"] + layer * self.lay.params_stride

    def slot_addr(self, layer, slot):
        return (self.bases["state"] + layer * self.lay.state_layer_stride
                + SSM_SLOTS.index(slot) * self.lay.slot_stride)

    def buffer_addr(self, layer, buffer):
        return (self.bases["io"] + layer * self.lay.io_layer_stride
                + SSM_BUFFERS.index(buffer) * self.lay.buffer_stride)

    def committed_slot(self, who, *, other=False):
        return f"{who}{self.bank[who] ^ int(other)}"

    def write_state(self, layer, slot, state):
        self.tb.put(self.slot_addr(layer, slot), state_to_memory(self.cfg, state))

    def read_state(self, layer, slot):
        return state_from_memory(self.cfg, self.tb.get(self.slot_addr(layer, slot),
                                                       self.lay.state_bytes // 4))

    def write_records(self, layer, who, first, tokens):
        """Node records ``first …`` of ``who``'s input buffer: B, C, x, dt (binary32)."""
        at = self.buffer_addr(layer, f"{who}.in") + first * self.lay.record_bytes
        self.tb.put(at, np.concatenate([np.concatenate([B, C, x.ravel(), dt])
                                        for x, B, C, dt in tokens]))

    def read_y(self, layer, who, node):
        H, P, _ = self.cfg.state_shape
        at = self.buffer_addr(layer, f"{who}.y") + node * self.lay.y_bytes
        return self.tb.get(at, H * P).reshape(H, P)

    def tokens(self, layer, count, *, specials=False):
        return make_tokens(self.rng, self.cfg, self.prm[layer], count, specials=specials)

    async def set_registers(self):
        """The bases, the layer count and the banks: all the host ever writes of the model."""
        tb = self.tb
        for kind, at in self.bases.items():
            await tb.write(f"MEM_{kind.upper()}_BASE_LO", addr=at >> 12)
            await tb.write(f"MEM_{kind.upper()}_BASE_HI", addr=0)
        await tb.write("DIM_MODEL", d_model=2, n_layer=self.layers)
        await tb.write("STATE_BANK", target=self.bank["target"], draft=self.bank["draft"])


class AccelTB(TB):
    """Clocks, resets, the AXI host and memory models and register helpers."""

    def __init__(self, dut, *, stall=0.2, latency=20):
        super().__init__(dut)
        self.config = _config()
        self.regmap = accelerator_regmap(self.config)
        self.rng_np = np.random.default_rng(self.rng.getrandbits(64))
        d = dut
        board = self.config.board
        cocotb.start_soon(Clock(d.mem_clk, period_ps(board.memory_clock_mhz), unit="ps").start())
        aw = len(d.m_axi_ssm_in__araddr)
        self.memory = Memory(1 << aw, self.rng)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(d, "s_axi_"), d.clk, d.rst)
        # The linear engine's record sizes and ports (constructing it elaborates nothing).
        self.lin_engine = LinearEngine(config=self.config, addr_width=aw)
        S = self.config.ssm.state_ports
        attach_memory(d, self.memory,
                      reads=("m_axi_ssm_in_", *(f"m_axi_ssm_st_rd{q}_" for q in range(S)),
                             "m_axi_lin_x_", *(f"m_axi_lin_w{j}_" for j in range(
                                 WEIGHT_PORTS * self.lin_engine.weight_ports))),
                      writes=(*(f"m_axi_ssm_st_wr{q}_" for q in range(S)), "m_axi_ssm_y_",
                              "m_axi_lin_y_"),
                      latency=latency, stall=stall, rng=self.rng)
        self.lin_area = None           # set by Layers: where the linear jobs' data go
        self.lin_cursor = None
        self.lin_jobs = 0              # jobs issued since reset
        self.cycle = 0
        cocotb.start_soon(self._count())

    async def _count(self):
        while True:
            await RisingEdge(self.dut.clk)
            self.cycle += 1

    async def reset(self):
        await reset_domains(self.dut)
        self.lin_jobs = 0

    def put(self, addr, words):
        self.memory.put_words(addr, words)

    def get(self, addr, count):
        return self.memory.get_words(addr, count)

    # -- registers -------------------------------------------------------------------
    def addr(self, name, at=0):
        return self.regmap[name].offset + 4 * at

    async def write(self, name, at=0, **fields):
        reg = self.regmap[name]
        value = 0
        for f in reg.fields:
            value |= (fields.get(f.name.lower(), 0) & ((1 << f.width) - 1)) << f.lsb
        await self.axil.write_dword(self.addr(name, at), value)

    async def read(self, name, at=0):
        """``{field: value}`` of a register."""
        reg = self.regmap[name]
        word = await self.axil.read_dword(self.addr(name, at))
        return {f.name.lower(): (word >> f.lsb) & ((1 << f.width) - 1) for f in reg.fields}

    async def read64(self, name):
        lo = (await self.read(f"{name}_LO"))["value"]
        hi = (await self.read(f"{name}_HI"))["value"]
        return lo | hi << 32

    async def wait_status(self, *, timeout=400_000, until="idle"):
        """Poll STATUS until not BUSY (``until="match"``: until WAIT_MATCH or not BUSY);
        returns the STATUS fields."""
        start = self.cycle
        while True:
            st = await self.read("STATUS")
            if not st["busy"] or (until == "match" and st["wait_match"]):
                return st
            assert self.cycle - start < timeout, f"still BUSY after {timeout} cycles"
            for _ in range(8):
                await RisingEdge(self.dut.clk)

    async def clear_status(self):
        await self.write("STATUS", done=1, error=1)

    async def expect_ok(self, what):
        st = await self.wait_status()
        assert not st["error"], f"{what}: ERROR code {st['error_code']}"
        return st

    # -- linear jobs -------------------------------------------------------------------
    def linear_job(self, *, mode, n_tokens, specials=False):
        lin = self.config.linear
        return Job(self.rng_np, rows=lin.rows, cols=lin.cols, max_tokens=lin.max_tokens,
                   max_k=lin.max_k, mode=mode, n_tokens=n_tokens, specials=specials)

    def place_linear(self, job):
        """Put ``job``'s weight planes and activations in the linear area (its y region keeps
        the memory's random bytes); returns the four byte addresses."""
        lin, eng = self.config.linear, self.lin_engine
        # Token-major activations, one vector a token at a 64-byte-aligned stride, at times
        # with a gap of random bytes between vectors.
        stride = align(2 * job.steps, 1 << LIN_ADDR_SHIFT) + (
            int(self.rng_np.integers(0, 2)) << LIN_ADDR_SHIFT)
        img = job.memory_images(rows=lin.rows, cols=lin.cols,
                                word_bits=eng.weight_stream.word_width, ports=eng.weight_ports,
                                x_stride=stride, rng=self.rng_np,
                                weight_beats=eng.unit.weight_beats)
        sizes = {name: len(data) for name, data in img.items()}
        sizes["y"] = job.y_bytes(lin.cols, eng.y_record_bytes)
        need = sum(sizes.values()) + 8 * 64 * 4
        if self.lin_cursor is None or self.lin_cursor + need > len(self.memory.data):
            self.lin_cursor = self.lin_area       # jobs far apart in time reuse the area
        at = self.lin_cursor
        out = {}
        for name, size in sizes.items():
            out[name] = at
            at = align(at + size + int(self.rng_np.integers(0, 3)) * 64, 1 << LIN_ADDR_SHIFT)
        assert at <= len(self.memory.data), "a linear job does not fit the bench's memory"
        self.lin_cursor = at
        for name, data in img.items():
            self.memory.data[out[name]:out[name] + len(data)] = data
        job.addr = out
        return out

    async def issue_linear(self, job):
        """Place ``job`` in memory and start it from the registers; one queued job at most."""
        addr = self.place_linear(job)
        while (await self.read("LIN_STATUS"))["pending"]:
            pass
        await self.write("LIN_CMD", mode=job.mode, n_rows=job.n_rows, n_tokens=job.n_tokens,
                         scale=int(job.tensor.scales))
        await self.write("LIN_STEPS", steps=job.steps)
        await self.write("LIN_X_STRIDE", stride=job.x_stride >> LIN_ADDR_SHIFT)
        for name, at in addr.items():
            await self.write(f"LIN_{name.upper()}_LO", addr=at >> LIN_ADDR_SHIFT)
            await self.write(f"LIN_{name.upper()}_HI", addr=at >> 32)
        await self.write("LIN_CTRL", go=1)
        self.lin_jobs += 1
        job.number = self.lin_jobs

    async def check_linear(self, job, what, *, timeout=200_000):
        """Wait until ``LIN_STATUS.JOBS_DONE`` counts ``job``, then check every result word of
        it in memory against golden, in the engine's record layout."""
        start = self.cycle
        while ((await self.read("LIN_STATUS"))["jobs_done"] - job.number) % (1 << 16) >= 1 << 15:
            assert self.cycle - start < timeout, f"{what}: not done after {timeout} cycles"
        job.check_memory(self.get, job.addr["y"], cols=self.config.linear.cols,
                         record_bytes=self.lin_engine.y_record_bytes, what=what)


def _check(got, want, what):
    bad = np.argwhere(np.asarray(got) != np.asarray(want))
    assert bad.size == 0, (f"{what}: {len(bad)} words differ from golden; first "
                           f"{tuple(bad[0])}: {int(np.asarray(got)[tuple(bad[0])]):#010x} in "
                           f"memory, golden {int(np.asarray(want)[tuple(bad[0])]):#010x}")


async def draft_tokens(tb, model, count, *, first=0, specials=False):
    """``count`` draft tokens (``MODE = DRAFT``, ``START`` each), records ``first …``;
    every token's ``y`` checked in memory; returns each layer's chain of states."""
    chain = [[model.state["draft"][layer]] for layer in range(model.layers)]
    toks = [model.tokens(layer, count, specials=specials) for layer in range(model.layers)]
    for layer in range(model.layers):
        model.write_records(layer, "draft", first, toks[layer])
    await tb.write("MODE", mode=0, draft_len=16)
    for t in range(count):
        await tb.write("CTRL", start=1)
        st = await tb.expect_ok(f"draft token {first + t}")
        assert st["done"] and st["draft_tokens"] == first + t + 1, st
        await tb.clear_status()
        for layer in range(model.layers):
            ys, states = expected(model.cfg, model.prm[layer], chain[layer][-1], [-1],
                                  [toks[layer][t]])
            chain[layer].append(states[0])
            _check(model.read_y(layer, "draft", first + t), ys[0],
                   f"draft token {first + t} layer {layer} y")
    return chain


async def draft_step(tb, model):
    """Three draft tokens and a quantized linear job (BSFP nibble plane, draft_dot); a
    ROLLBACK; two tokens again from the committed bank; DRAFT_COMMIT of the first; the
    draft's other bank then holds the golden state after it, the committed bank is whole."""
    job = tb.linear_job(mode=1, n_tokens=1)
    await tb.issue_linear(job)
    await draft_tokens(tb, model, 3)
    await tb.write("CTRL", rollback=1)
    st = await tb.expect_ok("ROLLBACK")
    assert st["draft_tokens"] == 0, st
    await tb.clear_status()
    chain = await draft_tokens(tb, model, 2)
    committed = [bytes(tb.get(model.slot_addr(layer, model.committed_slot("draft")),
                              model.lay.state_bytes // 4)) for layer in range(model.layers)]
    await tb.write("DRAFT_ACCEPT", count=1)
    await tb.write("CTRL", draft_commit=1)
    st = await tb.expect_ok("DRAFT_COMMIT")
    assert st["done"] and st["draft_tokens"] == 0, st
    await tb.clear_status()
    for layer in range(model.layers):
        assert bytes(tb.get(model.slot_addr(layer, model.committed_slot("draft")),
                            model.lay.state_bytes // 4)) == committed[layer]
        _check(model.read_state(layer, model.committed_slot("draft", other=True)),
               chain[layer][1], f"draft commit layer {layer} state")
        model.state["draft"][layer] = chain[layer][1]
    model.bank["draft"] ^= 1
    await tb.write("STATE_BANK", target=model.bank["target"], draft=model.bank["draft"])
    await tb.check_linear(job, "draft job")


async def verify_step(tb, model, *, parents=None, match=None, linear=True, cut=None,
                      specials=False):
    """One target step over a tree on every layer; returns the step's measured figures.
    With ``cut`` (cycles after MATCH_GO), reset in mid commit and return ``None``."""
    rng = tb.rng_np
    cfg = model.cfg
    if parents is None:
        parents = gtree.flatten(SHAPES[int(rng.integers(0, len(SHAPES)))])
    n = len(parents)
    lin = tb.config.linear
    jobs = []
    if linear:
        for first in range(0, n, lin.token_lanes):
            jobs.append(tb.linear_job(mode=0, n_tokens=min(lin.token_lanes, n - first),
                                      specials=specials))
    golden = []
    for layer in range(model.layers):
        toks = model.tokens(layer, n, specials=specials)
        model.write_records(layer, "target", 0, toks)
        golden.append(expected(cfg, model.prm[layer], model.state["target"][layer], parents,
                               toks))
    await tb.write("TREE_DESC", node_count=n, depth=int(gtree.tree_depths(parents).max()))
    for i in range(1, n):
        await tb.write("TREE_PARENT", i, parent=int(parents[i]))
    await tb.write("PERF_CTRL", clear=1)
    await tb.write("MODE", mode=1, draft_len=16)
    await tb.write("CTRL", start=1)

    async def linear_jobs():
        for job in jobs:
            await tb.issue_linear(job)
    lin_task = cocotb.start_soon(linear_jobs())
    st = await tb.wait_status(until="match")
    assert st["wait_match"] and not st["error"], f"tree passes: {st}"
    for layer in range(model.layers):
        for i in range(n):
            _check(model.read_y(layer, "target", i), golden[layer][0][i],
                   f"layer {layer} tree node {i} (parent {parents[i]}) y")
    if match is None:
        match = [0] + [int(v) for v in rng.random(n - 1) < 0.7]
    for i in range(n):
        await tb.write("TREE_MATCH", i, match=match[i])
    committed = [bytes(tb.get(model.slot_addr(layer, model.committed_slot("target")),
                              model.lay.state_bytes // 4)) for layer in range(model.layers)]
    await tb.write("CTRL", match_go=1)
    want_path = gtree.accepted_path(parents, match).nodes
    if cut is not None:
        await ClockCycles(tb.dut.clk, cut)
        await tb.reset()
        await lin_task
        return None
    st = await tb.expect_ok("verify step")
    assert st["done"], "verify step did not set DONE"
    await tb.clear_status()
    res = await tb.read("TREE_RESULT")
    assert res["tokens"] == len(want_path), (res, want_path)
    assert res["last_node"] == want_path[-1], (res, want_path)
    got_path = []
    for k in range(len(want_path)):
        await tb.write("TREE_PATH", index=k)
        got_path.append((await tb.read("TREE_PATH"))["node"])
    assert tuple(got_path) == tuple(want_path), f"path {got_path}, golden {want_path}"
    for layer in range(model.layers):
        assert bytes(tb.get(model.slot_addr(layer, model.committed_slot("target")),
                            model.lay.state_bytes // 4)) == committed[layer], (
            f"layer {layer}: the commit pass wrote the committed bank")
        want = golden[layer][1][want_path[-1]]
        _check(model.read_state(layer, model.committed_slot("target", other=True)), want,
               f"layer {layer} committed state (path {list(want_path)})")
        model.state["target"][layer] = want
    model.bank["target"] ^= 1
    await tb.write("STATE_BANK", target=model.bank["target"], draft=model.bank["draft"])
    await lin_task
    for j, job in enumerate(jobs):
        await tb.check_linear(job, f"verify job {j}")
    await tb.write("PERF_CTRL", snapshot=1)
    figures = {name: await tb.read64(f"PERF_{name.upper()}") for name in (
        "last_step", "nodes", "steps", "tokens_accepted", "state_cycles", "ssm_busy",
        "linear_busy", "overlap", "verify_cycles", "stall_cycles")}
    assert figures["nodes"] == n and figures["steps"] == 1, figures
    assert figures["tokens_accepted"] == len(want_path), figures
    figures.update(nodes_in_tree=n, path=list(want_path), parents=[int(p) for p in parents],
                   layers=model.layers)
    return figures


async def _setup(dut, **kw):
    p = params()
    tb = AccelTB(dut, **kw)
    await tb.reset()
    model = Layers(tb, layers=p.get("layers", 2))
    await model.set_registers()
    return tb, model


@cocotb.test()
async def draft_verify_step(dut):
    """Draft tokens, ROLLBACK and a draft commit; verify steps (tree on every layer,
    linear full jobs alongside, the last with special values), all under random pauses,
    stalls and back-pressure, every result in memory checked."""
    p = params()
    tb, model = await _setup(dut, stall=p.get("stall", 0.2))
    await draft_step(tb, model)
    figures = await verify_step(tb, model)
    await verify_step(tb, model, parents=gtree.flatten((1, 1)), linear=False, specials=True)
    dut._log.info("step figures: %s", figures)
    if p.get("result_file"):
        Path(p["result_file"]).write_text(json.dumps(figures))


@cocotb.test()
async def reset_mid_step(dut):
    """A reset of both domains in mid commit pass: both committed banks are byte for byte
    what they were; after the host rewrites its registers the step runs again and commits
    the golden state."""
    tb, model = await _setup(dut, stall=0.3)
    parents = gtree.flatten((2, 2, 1))
    match = [0] + [int(v) for v in tb.rng_np.random(len(parents) - 1) < 0.7]
    before = {who: [bytes(tb.get(model.slot_addr(layer, f"{who}{b}"), model.lay.state_bytes // 4))
                    for layer in range(model.layers) for b in (0, 1)]
              for who in ("target", "draft")}
    assert await verify_step(tb, model, parents=parents, match=match, linear=False,
                             cut=int(tb.rng_np.integers(5, 120))) is None
    st = await tb.read("STATUS")
    assert not st["busy"] and not st["done"] and not st["error"], st
    for who in ("target", "draft"):
        committed = model.committed_slot(who)
        for layer in range(model.layers):
            got = bytes(tb.get(model.slot_addr(layer, committed), model.lay.state_bytes // 4))
            assert got == before[who][2 * layer + int(committed[-1])], (
                f"the reset changed {who}'s committed state, layer {layer}")
    await model.set_registers()
    await verify_step(tb, model, parents=parents, match=match, linear=False)


@cocotb.test()
async def wrong_bank(dut):
    """The bench can fail: the host names the wrong committed bank (random bytes), so the
    tree's y in memory differ from golden."""
    tb, model = await _setup(dut, stall=0.1)
    await tb.write("STATE_BANK", target=1 - model.bank["target"], draft=model.bank["draft"])
    await verify_step(tb, model, parents=gtree.flatten((2,)), linear=False)


@cocotb.test()
async def errors(dut):
    """Every error a host can cause: its ERROR_CODE; the accelerator still runs a step."""
    tb, model = await _setup(dut)
    lin = tb.config.linear
    max_nodes = tb.config.tree.max_nodes

    async def expect(code, what):
        st = await tb.wait_status()
        assert st["error"] and st["error_code"] == ERROR[code], f"{what}: {st}"
        await tb.clear_status()
        st = await tb.read("STATUS")
        assert not st["error"], f"{what}: ERROR not cleared"

    await tb.write("LIN_CMD", mode=0, n_rows=lin.tile_rows + 1, n_tokens=1)
    await tb.write("LIN_STEPS", steps=1)
    await tb.write("LIN_CTRL", go=1)
    await expect("LINEAR_CMD", "n_rows above the tile's rows")
    await tb.write("LIN_CMD", mode=0, n_rows=1, n_tokens=lin.token_lanes + 1)
    await tb.write("LIN_CTRL", go=1)
    await expect("LINEAR_CMD", "n_tokens above the token lanes")
    await tb.write("LIN_CMD", mode=0, n_rows=1, n_tokens=1)
    await tb.write("LIN_STEPS", steps=0)
    await tb.write("LIN_CTRL", go=1)
    await expect("LINEAR_CMD", "zero steps")
    await tb.write("MODE", mode=1)
    await tb.write("TREE_DESC", node_count=max_nodes + 1)
    await tb.write("CTRL", start=1)
    await expect("TREE_SIZE", "NODE_COUNT above max_nodes")
    await tb.write("TREE_DESC", node_count=4)
    for i, parent in enumerate([0, 0, 1, 0]):
        await tb.write("TREE_PARENT", i, parent=parent)
    await tb.write("CTRL", start=1)
    await expect("TREE_ORDER", "parents decrease")
    await tb.write("DIM_MODEL", d_model=2, n_layer=0)
    await tb.write("CTRL", start=1)
    await expect("DIMENSIONS", "N_LAYER 0")
    await tb.write("DIM_MODEL", d_model=2, n_layer=model.layers)
    await tb.write("DRAFT_ACCEPT", count=1)
    await tb.write("CTRL", draft_commit=1)
    await expect("DRAFT_ACCEPT", "a draft commit before any draft token")
    # a root with fifo_depth + 1 children that each have a child keeps more slots
    # live than the ring holds: refused before any pass
    depth = tb.config.tree.fifo_depth
    wide = np.concatenate([[-1], np.zeros(depth + 1, np.int64), np.arange(1, depth + 2)])
    if len(wide) <= max_nodes:
        assert gtree.overflow_node(wide, fifo_depth=depth) is not None
        await tb.write("TREE_DESC", node_count=len(wide))
        for i in range(1, len(wide)):
            await tb.write("TREE_PARENT", i, parent=int(wide[i]))
        await tb.write("CTRL", start=1)
        await expect("TREE_OVERFLOW", "more live slots than fifo_depth")
    await draft_tokens(tb, model, 1)
    await tb.write("DRAFT_ACCEPT", count=2)
    await tb.write("CTRL", draft_commit=1)
    await expect("DRAFT_ACCEPT", "DRAFT_ACCEPT above the draft tokens run")
    await verify_step(tb, model, linear=False)
