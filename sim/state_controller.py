"""Benches of :class:`hw.state_controller.StateController`.

Two designs under test share one scenario (:mod:`sim.state_scenario`), one
driver and one scoreboard:

``StateController`` alone, against :class:`sim.ssm_unit_bfm.SSMUnitBFM`
    A cycle-level stand-in for the SSM unit's ports and a conv-window unit
    that asserts their protocol. Its token update is a toy integer
    recurrence. Fast to build on Verilator.

:class:`sim.state_controller_top.StateControllerTop`: ``SSMUnit`` + ``StateController`` + a conv-window RAM
    The real unit: every ``y`` and the state are compared bit for bit with
    :func:`golden.mamba2.ssm_step_hw_bits` run from the right states.

Both run on Amaranth's simulator (:func:`run_bfm_pysim`, :func:`run_system_pysim`)
and on Verilator through cocotb (the tests :func:`bfm` and :func:`system`),
with the same participants (:mod:`sim.loop`). The restore latency study is
:mod:`sim.state_latency`.
"""

import random
from collections import deque

import cocotb
import numpy as np

from specgen.golden.mamba2 import SSMParams, mamba2_init_params, ssm_step_hw_bits
from specgen.hw.state_controller import StateController
from specgen.sim.loop import Sink, run_amaranth, run_cocotb
from specgen.sim.ssm_unit_bfm import BFMHooks, SSMUnitBFM, toy_step
from specgen.sim.state_controller_top import DebugHooks, StateControllerTop
from specgen.sim.ssm_unit import config_from_params, make_tokens
from specgen.sim.state_scenario import HostProgram, Scoreboard, check_latencies, make_scenario, summary

__all__ = ["bfm_setup", "system_setup", "run_bfm_pysim", "run_system_pysim"]


def bfm_setup(cfg, *, slots, records, conv_width, conv_depth, seed, steps, stall, idle,
              resets=1):
    """Scenario, BFM and participants for the controller-alone bench."""
    rng = np.random.default_rng(seed)
    pyrng = random.Random(seed)
    ctrl = StateController(ssm_cfg=cfg, slots=slots, records=records, conv_width=conv_width,
                           conv_depth=conv_depth)
    H, P, N = cfg.state_shape

    def token_fn():
        return (rng.integers(0, 1 << 32, (H, P), dtype=np.uint64).astype(np.uint32),
                rng.integers(0, 1 << 32, N, dtype=np.uint64).astype(np.uint32),
                rng.integers(0, 1 << 32, N, dtype=np.uint64).astype(np.uint32),
                rng.integers(0, 1 << 32, H, dtype=np.uint64).astype(np.uint32))

    step = lambda st, tok: toy_step(cfg, st, tok)  # noqa: E731
    items, ex = make_scenario(rng, cfg, step, slots=slots, records=records,
                              conv_depth=ctrl.conv_depth, conv_width=ctrl.conv_width, steps=steps,
                              token_fn=token_fn, resets=resets)
    bfm = SSMUnitBFM(cfg, conv_depth=ctrl.conv_depth, conv_width=ctrl.conv_width, rng=pyrng)
    sb = Scoreboard()
    host = HostProgram(cfg, items, sb, BFMHooks(bfm), pyrng, idle=idle, index_bits=ctrl.index_bits)
    ib = ctrl.index_bits
    parts = [host, bfm,
             Sink("y", pyrng, stall, lambda v, o: sb.on_y(v, o["cycle"])),
             Sink("resp", pyrng, stall, lambda v, o: sb.on_resp(v, o, ib), sb.on_resp_valid)]
    return ctrl, parts, host, sb, bfm


def run_bfm_pysim(cfg, *, slots, records=0, conv_width=None, conv_depth=None, seed, steps=6,
                  stall=0.3, idle=0.1, resets=1):
    """The controller-alone bench on Amaranth's simulator; returns a summary dict."""
    ctrl, parts, host, sb, bfm = bfm_setup(cfg, slots=slots, records=records, conv_width=conv_width,
                                           conv_depth=conv_depth, seed=seed, steps=steps,
                                           stall=stall, idle=idle, resets=resets)
    cycles = run_amaranth(ctrl, parts)
    return summary(ctrl, host, sb, cycles)


def system_setup(cfg, *, slots, records, conv_width, conv_depth, seed, steps, stall, idle,
                 resets=1, mul_stages=1, add_stages=1, specials=True):
    """Scenario and participants for the SSMUnit + StateController bench."""
    rng = np.random.default_rng(seed)
    pyrng = random.Random(seed)
    top = StateControllerTop(ssm_cfg=cfg, slots=slots, records=records, conv_width=conv_width,
                             conv_depth=conv_depth, mul_stages=mul_stages, add_stages=add_stages)
    H = cfg.nheads
    prm = mamba2_init_params(cfg, rng)
    prm = SSMParams(A=prm.A, dt_bias=prm.dt_bias,
                    D=(1 + 0.25 * rng.standard_normal(H)).astype(np.float32))
    # a pool of tokens with the special ones (NaN/Inf/subnormal) spread out
    pool = deque(make_tokens(rng, cfg, prm, 200, specials=False))
    specials_pool = make_tokens(rng, cfg, prm, 4, specials=True) if specials else []

    def token_fn():
        if specials_pool and rng.random() < 0.03:
            return specials_pool.pop(0)
        return pool.popleft()

    step = lambda st, tok: ssm_step_hw_bits(cfg, prm, st, *tok)  # noqa: E731
    items, ex = make_scenario(rng, cfg, step, slots=slots, records=records,
                              conv_depth=top.ctrl.conv_depth, conv_width=top.ctrl.conv_width,
                              steps=steps, token_fn=token_fn, resets=resets, params=prm)
    sb = Scoreboard()
    host = HostProgram(cfg, items, sb, DebugHooks(top.ctrl.state_tiles, top.ctrl.conv_depth), pyrng,
                       idle=idle, index_bits=top.ctrl.index_bits,
                       extra_inputs=("dbg_hold", "dbg_addr", "dbg_we", "dbg_wdata", "cdbg_addr",
                                     "cdbg_we", "cdbg_wdata"))
    ib = top.ctrl.index_bits

    class ConvBusy:
        def run(self):
            busy = 0
            o = yield {"conv_busy": busy}
            while True:
                busy = int(pyrng.random() < (0.5 if busy else 0.1)) if not o["ssm_hold"] else 0
                o = yield {"conv_busy": busy}

    parts = [host, ConvBusy(),
             Sink("y", pyrng, stall, lambda v, o: sb.on_y(v, o["cycle"])),
             Sink("resp", pyrng, stall, lambda v, o: sb.on_resp(v, o, ib), sb.on_resp_valid)]
    return top, parts, host, sb


def run_system_pysim(cfg, *, slots, records=0, conv_width=None, conv_depth=None, seed, steps=4,
                     stall=0.3, idle=0.1, resets=1, mul_stages=1, add_stages=1):
    """The SSMUnit + StateController bench on Amaranth's simulator; returns a summary dict."""
    top, parts, host, sb = system_setup(cfg, slots=slots, records=records, conv_width=conv_width,
                                        conv_depth=conv_depth, seed=seed, steps=steps, stall=stall,
                                        idle=idle, resets=resets, mul_stages=mul_stages,
                                        add_stages=add_stages)
    cycles = run_amaranth(top, parts)
    return summary(top.ctrl, host, sb, cycles)


# -- cocotb -------------------------------------------------------------------------------

def _report(dut, p, ctrl, host, sb, cycles):
    import json
    from pathlib import Path

    s = summary(ctrl, host, sb, cycles)
    check_latencies(s)
    dut._log.info("%s", {k: v for k, v in s.items() if k != "records"})
    if p.get("result_file"):
        recs = [{"op": r["op"].name, "index": r["index"], "error": r["error"],
                 "latency": r["latency"], "wait": r["wait"], "label": r["label"]} for r in sb.records]
        Path(p["result_file"]).write_text(json.dumps({**{k: v for k, v in s.items() if k != "records"},
                                                      "records": recs}))


def _setup_kwargs(p, *, steps):
    """Keyword arguments of :func:`bfm_setup` / :func:`system_setup` from the run's parameters."""
    from specgen.sim.bench import seed
    return dict(slots=p["slots"], records=p.get("records", 0), conv_width=p.get("conv_width"),
                conv_depth=p.get("conv_depth"), seed=seed(), steps=p.get("steps", steps),
                stall=p.get("stall", 0.3), idle=p.get("idle", 0.1), resets=p.get("resets", 1))


@cocotb.test()
async def bfm(dut):
    """StateController alone against SSMUnitBFM: the scenario of make_scenario."""
    from specgen.sim.bench import params
    p = params()
    ctrl, parts, host, sb, _bfm = bfm_setup(config_from_params(p), **_setup_kwargs(p, steps=6))
    cycles = await run_cocotb(dut, ctrl, parts)
    _report(dut, p, ctrl, host, sb, cycles)


@cocotb.test()
async def system(dut):
    """SSMUnit + StateController: every y and the state bit for bit ssm_step_hw_bits."""
    from specgen.sim.bench import params
    p = params()
    top, parts, host, sb = system_setup(config_from_params(p), **_setup_kwargs(p, steps=4),
                                        mul_stages=p.get("mul_stages", 1),
                                        add_stages=p.get("add_stages", 1))
    cycles = await run_cocotb(dut, top, parts)
    _report(dut, p, top.ctrl, host, sb, cycles)
