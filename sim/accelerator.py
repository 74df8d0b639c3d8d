"""cocotb bench of :class:`hw.accelerator.Accelerator`, driven only through its AXI ports.

The host is ``cocotbext-axi``: an ``AxiLiteMaster`` on ``s_axi``, an
``AxiStreamSource`` on each input stream and an ``AxiStreamSink`` on each output
stream, every one under random pauses (sources) or back-pressure (sinks) from
the bench's seeded generator. Golden references:

* linear jobs: :func:`golden.bsfp.draft_dot` (quantized mode, BSFP nibble plane)
  and :func:`golden.bsfp.full_dot` (full mode), through :class:`sim.linear_unit.Job`;
* SSM path: :func:`golden.mamba2.ssm_step_hw_bits`, every node from its parent's
  state (the root from the committed state);
* acceptance: :func:`golden.tree.accepted_path`;
* the committed state after a step: the golden sequential run along the accepted
  path, checked by running two more tokens and comparing their ``y`` (the state
  itself has no AXI read path).

Tests: ``step`` (prompt, a draft step with a ``ROLLBACK``, then a verify step
with linear jobs running alongside the tree pass), ``reset_mid_step`` (a reset
while node tokens flow, ``ROLLBACK``, then a full step), ``errors`` (bad linear
command, bad tree, ``START`` while busy).
"""

import json
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame, \
    AxiStreamSink, AxiStreamSource

from specgen.golden import tree as gtree
from specgen.golden.config import preset
from specgen.golden.fp import FORMATS
from specgen.golden.mamba2 import SSMParams, mamba2_init_params, ssm_step_hw_bits
from specgen.hw.accelerator import ERROR
from specgen.hw.linear_unit import result_layout
from specgen.hw.regmap import accelerator_regmap
from specgen.hw.ssm_unit import SEL_A, SEL_B, SEL_C, SEL_D, SEL_DT, SEL_DT_BIAS, SEL_X
from specgen.sim.bench import TB, params, random_pattern
from specgen.sim.linear_unit import Job
from specgen.sim.ssm_unit import make_tokens

__all__ = ["AccelTB", "token_frame", "param_frame"]

SHAPES = [(2, 2, 1), (2, 1, 2), (3, 1), (1, 2, 2), (2, 2), (3, 2)]


def _config():
    p = params()
    config = preset(p.get("preset", "sim"))
    return config


def _frame(words, tusers, addr_bits):
    data, user = bytearray(), []
    for w, u in zip(words, tusers):
        data += int(w).to_bytes(4, "little")
        user += [u] * 4
    return AxiStreamFrame(bytes(data), tuser=user)


def token_frame(cfg, token):
    """One token as an ``s_axis_ssm`` frame: B, C, x, dt words; ``tlast`` commits it."""
    x, B, C, dt = token
    H, P, N = cfg.state_shape
    items = ([(SEL_B, n, B[n]) for n in range(N)] + [(SEL_C, n, C[n]) for n in range(N)]
             + [(SEL_X, h * P + p, x[h, p]) for h in range(H) for p in range(P)]
             + [(SEL_DT, h, dt[h]) for h in range(H)])
    return _frame([v for _, _, v in items], [sel | (a << 3) for sel, a, _ in items], None)


def param_frame(cfg, prm):
    """The layer parameters A, dt_bias, D as one frame (its last beat is a parameter,
    so it commits nothing)."""
    items = []
    for sel, arr in ((SEL_A, prm.A), (SEL_DT_BIAS, prm.dt_bias), (SEL_D, prm.D)):
        items += [(sel, h, v) for h, v in enumerate(np.asarray(arr, np.float32).view(np.uint32))]
    return _frame([v for _, _, v in items], [sel | (a << 3) for sel, a, _ in items], None)


class AccelTB(TB):
    """Clock, reset, the AXI host models and register helpers."""

    def __init__(self, dut, *, pause=0.2, stall=0.2):
        super().__init__(dut)
        self.config = _config()
        self.regmap = accelerator_regmap(self.config)
        self.rng_np = np.random.default_rng(self.rng.getrandbits(64))
        d = dut
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(d, "s_axi_"), d.clk, d.rst)
        self.w = AxiStreamSource(AxiStreamBus.from_prefix(d, "s_axis_lin_w_"), d.clk, d.rst)
        self.x = AxiStreamSource(AxiStreamBus.from_prefix(d, "s_axis_lin_x_"), d.clk, d.rst)
        self.ssm = AxiStreamSource(AxiStreamBus.from_prefix(d, "s_axis_ssm_"), d.clk, d.rst)
        self.lin_y = AxiStreamSink(AxiStreamBus.from_prefix(d, "m_axis_lin_y_"), d.clk, d.rst)
        self.ssm_y = AxiStreamSink(AxiStreamBus.from_prefix(d, "m_axis_ssm_y_"), d.clk, d.rst)
        for src in (self.w, self.x, self.ssm):
            src.set_pause_generator(random_pattern(self.rng, pause))
        for sink in (self.lin_y, self.ssm_y):
            sink.set_pause_generator(random_pattern(self.rng, stall))
        self.cycle = 0
        cocotb.start_soon(self._count())

    async def _count(self):
        while True:
            await RisingEdge(self.dut.clk)
            self.cycle += 1

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

    async def wait_status(self, *, timeout=200_000):
        """Poll STATUS until not BUSY; returns the STATUS fields."""
        start = self.cycle
        while True:
            st = await self.read("STATUS")
            if not st["busy"]:
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

    # -- SSM path ----------------------------------------------------------------------
    async def ssm_y_token(self):
        """The ``y`` rows of one token (a frame ending with ``tlast``), as uint32."""
        frame = await self.ssm_y.recv()
        data = bytes(frame.tdata)
        H, P, _ = self.config.ssm.state_shape
        ys = np.frombuffer(data, dtype="<u4").astype(np.uint32)
        assert ys.size == H * P, f"a y frame of {ys.size} rows, expected {H * P}"
        return ys.reshape(H, P)

    # -- linear jobs -------------------------------------------------------------------
    def linear_job(self, *, mode, n_tokens):
        lin = self.config.linear
        return Job(self.rng_np, rows=lin.rows, cols=lin.cols, lanes=lin.quant_lanes,
                   max_k=lin.max_k, fmt_out=FORMATS[lin.fmt_out], mode=mode,
                   n_tokens=n_tokens, group_size=None)

    async def issue_linear(self, job):
        # one queued job at most: wait until the previous command has been taken
        while (await self.read("LIN_STATUS"))["pending"]:
            pass
        await self.write("LIN_CMD", mode=job.mode, n_rows=job.n_rows, n_tokens=job.n_tokens)
        await self.write("LIN_STEPS", steps=job.steps)
        await self.write("LIN_CTRL", go=1)
        wb = len(self.dut.s_axis_lin_w__tdata) // 8
        xb = len(self.dut.s_axis_lin_x__tdata) // 8
        await self.w.send(AxiStreamFrame(b"".join(b.to_bytes(wb, "little") for b in job.w_beats)))
        await self.x.send(AxiStreamFrame(b"".join(b.to_bytes(xb, "little") for b in job.x_beats)))

    async def check_linear(self, job, what):
        lin = self.config.linear
        fmt = FORMATS[lin.fmt_out]
        layout = result_layout(lin.rows, lin.cols, fmt)
        nbytes = len(self.dut.m_axis_lin_y__tdata) // 8
        frame = await self.lin_y.recv()
        data = bytes(frame.tdata)
        assert len(data) == job.n_rows * nbytes, (f"{what}: {len(data) // nbytes} result rows, "
                                                  f"expected {job.n_rows}")
        off, rowf, tvf = layout["value"].offset, layout["row"], layout["token_valid"]
        for r in range(job.n_rows):
            word = int.from_bytes(data[r * nbytes:(r + 1) * nbytes], "little")
            assert (word >> rowf.offset) & ((1 << rowf.width) - 1) == r, f"{what}: row order"
            assert (word >> tvf.offset) & ((1 << tvf.width) - 1) == (1 << job.n_tokens) - 1
            for c in range(job.n_tokens):
                got = (word >> (off + c * fmt.width)) & ((1 << fmt.width) - 1)
                want = int(job.expected[r, c])
                assert got == want, (f"{what} (mode {job.mode}, {job.steps} beats) row {r} "
                                     f"token {c}: got {got:#x}, golden "
                                     f"{'draft_dot' if job.mode else 'full_dot'} {want:#x}")


class Model:
    """The golden side of the SSM path: parameters and the committed state."""

    def __init__(self, tb):
        cfg = tb.config.ssm
        rng = tb.rng_np
        prm = mamba2_init_params(cfg, rng)
        self.prm = SSMParams(A=prm.A, dt_bias=prm.dt_bias,
                             D=(1 + 0.25 * rng.standard_normal(cfg.nheads)).astype(np.float32))
        self.cfg = cfg
        self.rng = rng
        self.state = np.zeros(cfg.state_shape, dtype=np.uint32)  # the unit powers up at 0

    def tokens(self, count):
        return make_tokens(self.rng, self.cfg, self.prm, count, specials=False)

    def step(self, state, token):
        x, B, C, dt = token
        return ssm_step_hw_bits(self.cfg, self.prm, state, x, B, C, dt)


async def _setup(dut, **kw):
    tb = AccelTB(dut, **kw)
    await tb.reset()
    model = Model(tb)
    await tb.ssm.send(param_frame(model.cfg, model.prm))
    return tb, model


async def run_tokens(tb, model, count, what):
    """``count`` tokens with the stream open; every y checked; the state advances."""
    for t, tok in enumerate(model.tokens(count)):
        await tb.ssm.send(token_frame(model.cfg, tok))
        want, model.state = model.step(model.state, tok)
        got = await tb.ssm_y_token()
        assert np.array_equal(got, want), (f"{what} token {t}: y {got.ravel().tolist()} vs "
                                           f"ssm_step_hw_bits {want.ravel().tolist()}")


async def draft_step(tb, model):
    """Draft mode: a quantized linear job (BSFP nibble plane) checked against draft_dot;
    START checkpoints the committed state, a draft token runs, ROLLBACK undoes it."""
    job = tb.linear_job(mode=1, n_tokens=1)
    await tb.issue_linear(job)
    await tb.write("MODE", mode=0, draft_len=16)
    await tb.write("CTRL", start=1)
    st = await tb.expect_ok("draft START")
    assert st["done"], "draft START did not set DONE"
    await tb.clear_status()
    tok = model.tokens(1)[0]
    await tb.ssm.send(token_frame(model.cfg, tok))
    want, _ = model.step(model.state, tok)           # the draft token's y, not committed
    got = await tb.ssm_y_token()
    assert np.array_equal(got, want), "draft token y"
    await tb.write("CTRL", rollback=1)
    await tb.expect_ok("ROLLBACK")
    await tb.check_linear(job, "draft job")


async def verify_step(tb, model, *, parents=None, match=None, linear=True):
    """One target step over a random tree; returns the step's measured figures."""
    rng = tb.rng_np
    cfg = model.cfg
    if parents is None:
        shape = SHAPES[int(rng.integers(0, len(SHAPES)))]
        parents = gtree.flatten(shape)
    n = len(parents)
    # linear jobs over the tree's nodes (cols tokens per job), issued with the step
    lin = tb.config.linear
    jobs = []
    if linear:
        for first in range(0, n, lin.cols):
            jobs.append(tb.linear_job(mode=0, n_tokens=min(lin.cols, n - first)))
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

    tokens = model.tokens(n)
    states = [None] * n
    for i, tok in enumerate(tokens):
        await tb.ssm.send(token_frame(cfg, tok))
    for i, tok in enumerate(tokens):
        src = model.state if i == 0 else states[parents[i]]
        want, states[i] = model.step(src, tok)
        got = await tb.ssm_y_token()
        assert np.array_equal(got, want), (f"tree node {i} (parent {parents[i]}): y "
                                           f"{got.ravel().tolist()} vs ssm_step_hw_bits from "
                                           f"the parent's state {want.ravel().tolist()}")
    if match is None:
        match = [0] + [int(v) for v in rng.random(n - 1) < 0.7]
    for i in range(n):
        await tb.write("TREE_MATCH", i, match=match[i])
    await tb.write("CTRL", match_go=1)
    st = await tb.expect_ok("verify step")
    assert st["done"], "verify step did not set DONE"
    await tb.clear_status()
    want_path = gtree.accepted_path(parents, match).nodes
    res = await tb.read("TREE_RESULT")
    assert res["tokens"] == len(want_path), (res, want_path)
    assert res["last_node"] == want_path[-1], (res, want_path)
    got_path = []
    for k in range(len(want_path)):
        await tb.write("TREE_PATH", index=k)
        got_path.append((await tb.read("TREE_PATH"))["node"])
    assert tuple(got_path) == tuple(want_path), f"path {got_path}, golden {want_path}"
    # the committed state: the golden sequential run along the path
    for node in want_path:
        _, model.state = model.step(model.state, tokens[node])
    await lin_task
    for j, job in enumerate(jobs):
        await tb.check_linear(job, f"verify job {j}")
    await tb.write("PERF_CTRL", snapshot=1)
    figures = {name: await tb.read64(f"PERF_{name.upper()}") for name in (
        "last_step", "nodes", "steps", "tokens_accepted", "state_cycles", "ssm_busy",
        "linear_busy", "overlap", "verify_cycles", "stall_cycles")}
    assert figures["nodes"] == n and figures["steps"] == 1
    assert figures["tokens_accepted"] == len(want_path)
    figures.update(nodes_in_tree=n, path=list(want_path), parents=[int(p) for p in parents])
    # after the step the stream is open again: two more tokens check the committed state
    await run_tokens(tb, model, 2, "after the step (committed state)")
    return figures


@cocotb.test()
async def draft_verify_step(dut):
    """Prompt tokens, a draft step (linear draft job, ROLLBACK), a verify step (tree,
    linear full jobs alongside), all under random pauses and back-pressure."""
    p = params()
    tb, model = await _setup(dut, pause=p.get("pause", 0.2), stall=p.get("stall", 0.2))
    await run_tokens(tb, model, 2, "prompt")
    await draft_step(tb, model)
    figures = await verify_step(tb, model)
    # a second step on a known tree for the measured figures: no pauses
    dut._log.info("step figures: %s", figures)
    if p.get("result_file"):
        Path(p["result_file"]).write_text(json.dumps(figures))


@cocotb.test()
async def reset_mid_step(dut):
    """A reset while node tokens flow; ROLLBACK restores the committed state; a full
    step then passes."""
    tb, model = await _setup(dut)
    await run_tokens(tb, model, 1, "prompt")
    parents = gtree.flatten((2, 2, 1))
    n = len(parents)
    await tb.write("TREE_DESC", node_count=n)
    for i in range(1, n):
        await tb.write("TREE_PARENT", i, parent=int(parents[i]))
    await tb.write("MODE", mode=1)
    await tb.write("CTRL", start=1)
    sent = int(tb.rng_np.integers(1, n - 1))
    for tok in model.tokens(sent + 1):
        await tb.ssm.send(token_frame(model.cfg, tok))
    await tb.ssm_y_token()             # the root has run: the committed checkpoint is done
    for _ in range(int(tb.rng_np.integers(0, 60))):
        await RisingEdge(dut.clk)
    await tb.reset()
    tb.ssm.clear()
    tb.ssm_y.clear()
    for _ in range(4):
        await RisingEdge(dut.clk)
    st = await tb.read("STATUS")
    assert not st["busy"] and not st["done"] and not st["error"], st
    await tb.ssm.send(param_frame(model.cfg, model.prm))
    await tb.write("CTRL", rollback=1)
    await tb.expect_ok("ROLLBACK after reset")
    await run_tokens(tb, model, 1, "after ROLLBACK")
    await verify_step(tb, model)


@cocotb.test()
async def errors(dut):
    """Bad linear command, too big and non-BFS trees, START while busy: ERROR and its code;
    the accelerator still runs a step afterwards."""
    tb, model = await _setup(dut)
    lin = tb.config.linear
    max_nodes = tb.config.tree.max_nodes

    async def expect(code, what):
        st = await tb.wait_status()
        assert st["error"] and st["error_code"] == ERROR[code], f"{what}: {st}"
        await tb.clear_status()
        st = await tb.read("STATUS")
        assert not st["error"], f"{what}: ERROR not cleared"

    await tb.write("LIN_CMD", mode=0, n_rows=lin.rows + 1, n_tokens=1)
    await tb.write("LIN_STEPS", steps=1)
    await tb.write("LIN_CTRL", go=1)
    await expect("LINEAR_CMD", "n_rows above CAPS_LINEAR.ROWS")
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
    # a root with fifo_depth + 1 children that each have a child keeps more slots
    # live than the ring holds: the nodes before the first that does not fit run
    depth = tb.config.tree.fifo_depth
    wide = np.concatenate([[-1], np.zeros(depth + 1, np.int64), np.arange(1, depth + 2)])
    if len(wide) <= max_nodes:
        stop = gtree.overflow_node(wide, fifo_depth=depth)
        assert stop is not None
        await tb.write("TREE_DESC", node_count=len(wide))
        for i in range(1, len(wide)):
            await tb.write("TREE_PARENT", i, parent=int(wide[i]))
        await tb.write("CTRL", start=1)
        for tok in model.tokens(stop):
            await tb.ssm.send(token_frame(model.cfg, tok))
            await tb.ssm_y_token()
        await expect("TREE_OVERFLOW", "more live slots than fifo_depth")
        await tb.write("CTRL", rollback=1)
        await tb.expect_ok("ROLLBACK after overflow")
    await verify_step(tb, model, linear=False)
