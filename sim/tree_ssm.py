"""Bench of :class:`hw.tree_ssm.TreeSSMUnit`: tile-streamed tree passes against
:func:`golden.mamba2.ssm_step_hw_bits` applied along the tree, bit for bit.

Every node's expected state is its parent's (the committed state for the root)
advanced by the node's own token with the golden hardware step; its ``y`` comes
from the same call. The ring's slots come from :func:`golden.tree.fifo_schedule`,
so a wrong slot, a parent read before its write-back or a slot overwritten while
live shows up as a wrong ``y`` or state. The committed tiles are offered on
``st_in`` with random gaps (a memory that stalls), ``y`` and ``st_out`` are taken
under random back-pressure, and a pass may be cut by a reset in mid-stream and
then run again from the start: nothing of the cut pass may leak into the rerun.

The driver runs on ``amaranth.sim`` (:func:`run_pysim`), so the default suite
covers several geometries in seconds; the Verilator test runs the shipped Verilog
through the same scenario (:func:`tree_pass`).
"""

import random

import cocotb
import numpy as np
from amaranth.lib import data
from cocotb.triggers import ReadOnly, RisingEdge

from specgen.golden.mamba2 import SSMParams, mamba2_init_params, ssm_step_hw_bits
from specgen.golden.tree import ROOT
from specgen.golden.tree import node_table as tree_node_table
from specgen.hw.tree_ssm import TreeSSMUnit, pass_layout, table_layout
from specgen.sim.bench import TB, pack, params
from specgen.sim.ssm_unit import (
    config_from_params,
    initial_state,
    make_tokens,
    param_beats,
    token_beats,
)
from specgen.sim.ssm_unit_bfm import pack_tiles, unpack_tiles

__all__ = ["CocotbIO", "PySimIO", "check", "expected", "make_plans", "node_table", "run_pysim",
           "tree_passes"]


def node_table(parents, fifo_depth):
    """Per node ``(root, parent_slot, write_slot)`` of the FIFO schedule
    (:func:`golden.tree.node_table`)."""
    return tree_node_table(np.asarray(parents), fifo_depth=fifo_depth)


def expected(cfg, prm, state0, parents, tokens):
    """Golden ``y`` (uint32 ``(H, P)``) and state of every node, stepped from its parent."""
    ys, states = [], []
    for i, (x, B, C, dt) in enumerate(tokens):
        parent = state0 if parents[i] == ROOT else states[parents[i]]
        y, st = ssm_step_hw_bits(cfg, prm, parent, x, B, C, dt)
        ys.append(y)
        states.append(st)
    return ys, states


def y_order(unit, nodes):
    """``(node, first row)`` of every ``y`` beat of a pass, in the order the unit sends
    them: a beat holds :attr:`~hw.tree_ssm.TreeSSMUnit.rows_per_issue` rows from that one
    on, the first in the low word."""
    R, Q = unit.rows_per_tile, unit.rows_per_issue
    return [(i, t * R + r) for t in range(unit.tiles) for i in range(nodes)
            for r in range(0, R, Q)]


def make_plans(cfg, *, parents, out_node, passes, rng):
    """Layer parameters and, per pass, ``(committed state, tokens, golden y, golden
    st_out)``; each pass starts from the previous one's ``out_node`` state."""
    H = cfg.nheads
    prm = mamba2_init_params(cfg, rng)
    prm = SSMParams(A=prm.A, dt_bias=prm.dt_bias,
                    D=(1 + 0.25 * rng.standard_normal(H)).astype(np.float32))
    state = initial_state(rng, cfg)
    plans = []
    for k in range(passes):
        toks = make_tokens(rng, cfg, prm, len(parents), specials=(k == passes - 1))
        want_y, want_states = expected(cfg, prm, state, parents, toks)
        plans.append((state, toks, want_y, want_states[out_node]))
        state = want_states[out_node]
    return prm, plans


async def tree_passes(io, cfg, *, unit, parents, out_node, prm, plans, pyrng, stall=0.0,
                      idle=0.0, st_idle=0.0, reset_at=None, max_cycles=400_000):
    """The bench, written once over ``io`` (:class:`PySimIO` or :class:`CocotbIO`):
    load the parameters, then per pass the node table and tokens, start the pass,
    offer the committed tiles with random gaps and take ``y`` and ``st_out`` under
    random back-pressure. ``reset_at``: the first pass is cut by a reset that many
    cycles after its start, then run again from scratch. Returns the results of
    :func:`run_pysim`."""
    H, P, _N = cfg.state_shape
    n = len(parents)
    table = node_table(parents, unit.fifo_depth)
    order = y_order(unit, n)
    tbl_layout, cmd_layout = table_layout(unit.fifo_depth), pass_layout(unit.max_nodes)

    async def write_params():
        for sel, a, v in param_beats(cfg, prm):
            io.set("wr_en", 1), io.set("wr_sel", sel), io.set("wr_addr", a), io.set("wr_data", v)
            await io.tick()
        io.set("wr_en", 0)

    await write_params()
    results, k, reset_pending = [], 0, reset_at is not None
    while k < len(plans):
        state0, toks, want_y, want_out = plans[k]
        for i, (root, ps, ws) in enumerate(table):
            io.set("tbl_we", 1), io.set("tbl_node", i)
            io.set("tbl_entry", pack(tbl_layout, {"root": root, "parent_slot": ps, "write_slot": ws}))
            await io.tick()
        io.set("tbl_we", 0)
        for i, tok in enumerate(toks):
            for sel, a, v in token_beats(cfg, *tok):
                while pyrng.random() < idle:
                    io.set("wr_en", 0)
                    await io.tick()
                io.set("wr_en", 1), io.set("wr_node", i), io.set("wr_sel", sel)
                io.set("wr_addr", a), io.set("wr_data", v)
                await io.tick()
        io.set("wr_en", 0)
        io.set("cmd__payload", pack(cmd_layout, {"nodes": n, "out_node": out_node, "out_en": 1}))
        io.set("cmd__valid", 1)
        await io.settle()
        while not io.get("cmd__ready"):
            await io.tick()
            await io.settle()
        await io.tick()
        io.set("cmd__valid", 0)
        tiles_in = pack_tiles(cfg, state0)
        ti, ys, y_cycles, outs, cycles = 0, [], [], [], 0
        cut = False
        while True:
            await io.settle()
            if len(ys) == len(order) and len(outs) == len(tiles_in) and not io.get("busy"):
                break
            assert cycles < max_cycles, (
                f"pass {k}: no progress after {cycles} cycles ({len(ys)} of {len(order)} y, "
                f"{len(outs)} of {len(tiles_in)} st_out beats)")
            if reset_pending and cycles == reset_at:
                cut = True
                break
            await io.tick()
            offer = ti < len(tiles_in) and pyrng.random() >= st_idle
            io.set("st_in__valid", int(offer))
            io.set("st_in__payload", tiles_in[ti] if offer else 0)
            ry, rs = int(pyrng.random() >= stall), int(pyrng.random() >= stall)
            io.set("y__ready", ry), io.set("st_out__ready", rs)
            await io.settle()
            if offer and io.get("st_in__ready"):
                ti += 1
            if ry and io.get("y__valid"):
                assert len(ys) < len(order), f"pass {k}: more y beats than {len(order)}"
                ys.append(io.get("y__payload"))
                y_cycles.append(cycles)
            if rs and io.get("st_out__valid"):
                assert len(outs) < len(tiles_in), f"pass {k}: more st_out beats than tiles"
                outs.append(io.get("st_out__payload"))
            cycles += 1
        await io.tick()
        for name in ("st_in__valid", "y__ready", "st_out__ready"):
            io.set(name, 0)
        if cut:
            # A reset in mid-stream: the pass is abandoned and run again from scratch.
            reset_pending = False
            await io.reset()
            await write_params()
            continue
        got_y = [np.zeros((H, P), dtype=np.uint32) for _ in range(n)]
        for (i, r), v in zip(order, ys):
            for q in range(unit.rows_per_issue):
                got_y[i].reshape(-1)[r + q] = (v >> (32 * q)) & 0xFFFFFFFF
        results.append({"y": got_y, "want_y": want_y, "out": unpack_tiles(cfg, outs),
                        "want_out": want_out, "cycles": cycles, "y_cycles": y_cycles})
        k += 1
    return results


class PySimIO:
    """:func:`tree_passes`'s port access on amaranth.sim (``a__b`` names ``dut.a.b``)."""

    def __init__(self, ctx, dut, rst):
        self.ctx, self.dut, self.rst = ctx, dut, rst

    def _sig(self, name):
        obj = self.dut
        for part in name.split("__"):
            obj = getattr(obj, part)
        # Struct ports take and give the integer, as the Verilog's flat ports do.
        return obj.as_value() if isinstance(obj, data.View) else obj

    def set(self, name, value):
        self.ctx.set(self._sig(name), value)

    def get(self, name):
        return int(self.ctx.get(self._sig(name)))

    async def settle(self):
        pass

    async def tick(self):
        await self.ctx.tick()

    async def reset(self):
        self.ctx.set(self.rst, 1)
        await self.ctx.tick().repeat(2)
        self.ctx.set(self.rst, 0)


class CocotbIO:
    """:func:`tree_passes`'s port access on a cocotb DUT (the emitted Verilog's names)."""

    def __init__(self, tb):
        self.tb, self.dut = tb, tb.dut
        self._settled = False       # in this cycle's ReadOnly phase already

    def set(self, name, value):
        getattr(self.dut, name).value = int(value)

    def get(self, name):
        return int(getattr(self.dut, name).value)

    async def settle(self):
        if not self._settled:
            await ReadOnly()
            self._settled = True

    async def tick(self):
        await RisingEdge(self.dut.clk)
        self._settled = False

    async def reset(self):
        await self.tb.reset()
        self._settled = False


def run_pysim(dut, cfg, *, parents, out_node, seed, passes=1, **kw):
    """Run ``passes`` tree passes of ``parents`` on ``dut`` (a
    :class:`hw.tree_ssm.TreeSSMUnit`) under amaranth.sim (:func:`tree_passes`).

    Returns
    -------
    list of dict
        Per pass: ``y`` and ``want_y`` (per node), ``out`` (the ``st_out`` state) and
        ``want_out``, ``cycles`` (from the cycle after ``cmd`` to the last beat),
        ``y_cycles``.
    """
    from amaranth import Module, Signal
    from amaranth.hdl import ResetInserter
    from amaranth.sim import Simulator

    rng = np.random.default_rng(seed)
    prm, plans = make_plans(cfg, parents=parents, out_node=out_node, passes=passes, rng=rng)
    rst = Signal(name="bench_rst")
    top = Module()
    top.submodules.dut = ResetInserter(rst)(dut)
    out = {}

    async def bench(ctx):
        out["results"] = await tree_passes(PySimIO(ctx, dut, rst), cfg, unit=dut, parents=parents,
                                           out_node=out_node, prm=prm, plans=plans,
                                           pyrng=random.Random(seed), **kw)

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out["results"]


@cocotb.test()
async def passes(dut):
    """Tree passes on the emitted Verilog (parameters from the runner): every node's
    ``y`` and the ``st_out`` state, under stalls, with a reset in mid-stream."""
    p = params()
    cfg = config_from_params(p)
    tb = TB(dut)
    for name in ("wr_en", "tbl_we", "cmd__valid", "st_in__valid", "y__ready", "st_out__ready"):
        getattr(dut, name).value = 0
    await tb.reset()
    unit = TreeSSMUnit(cfg=cfg, max_nodes=p["max_nodes"], fifo_depth=p["fifo_depth"],
                       mul_stages=p["lm"], add_stages=p["la"])
    rng = np.random.default_rng(tb.rng.getrandbits(64))
    prm, plans = make_plans(cfg, parents=p["parents"], out_node=p["out_node"],
                            passes=p["passes"], rng=rng)
    results = await tree_passes(CocotbIO(tb), cfg, unit=unit, parents=p["parents"],
                                out_node=p["out_node"], prm=prm, plans=plans, pyrng=tb.rng,
                                stall=p["stall"], idle=p["idle"], st_idle=p["st_idle"],
                                reset_at=p.get("reset_at"))
    check(results)
    if "pass_cycles" in p:
        # Without stalls (the runner's parameters say so) a pass takes the model's cycles
        # plus the output FIFOs' two.
        for r in results:
            assert r["cycles"] - p["pass_cycles"] in range(4), (r["cycles"], p["pass_cycles"])
    dut._log.info("checked %d passes of %d nodes, %s cycles", len(results), len(p["parents"]),
                  [r["cycles"] for r in results])


def check(results):
    """Assert every pass's ``y`` of every node and the ``st_out`` state equal golden."""
    for k, r in enumerate(results):
        for i, (got, want) in enumerate(zip(r["y"], r["want_y"])):
            bad = np.argwhere(got != want)
            assert bad.size == 0, (f"pass {k} node {i} y{tuple(bad[0])} = "
                                   f"{int(got[tuple(bad[0])]):#010x}, golden "
                                   f"{int(want[tuple(bad[0])]):#010x} ({len(bad)} rows differ)")
        bad = np.argwhere(r["out"] != r["want_out"])
        assert bad.size == 0, (f"pass {k}: {len(bad)} st_out state elements differ; first "
                               f"{tuple(bad[0])}: {int(r['out'][tuple(bad[0])]):#010x} vs golden "
                               f"{int(r['want_out'][tuple(bad[0])]):#010x}")
