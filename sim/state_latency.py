"""The restore latency of :class:`hw.state_controller.StateController`, measured.

:func:`measure_latency` runs a directed scenario on
:class:`sim.state_controller_top.StateControllerTop` (Amaranth's simulator)
and returns the cycles of each command; :func:`latency_table` writes the
table of ``docs/blocks-state.md``::

    .venv/bin/python -m sim.state_latency
"""

import random

import numpy as np

from specgen.golden.mamba2 import SSMConfig, SSMParams, mamba2_init_params, ssm_step_hw_bits
from specgen.golden.nonlinear import COARSE_LUTS
from specgen.hw.state_controller import Op
from specgen.sim.loop import Sink, run_amaranth
from specgen.sim.state_controller_top import DebugHooks, StateControllerTop
from specgen.sim.state_scenario import (Expect, HostProgram, IdleItem, LoadItem, ParamItem, Scoreboard,
                                check_latencies, summary)

__all__ = ["measure_latency", "latency_table", "LATENCY_CONFIGS"]


def measure_latency(cfg, *, slots=2, records=2, conv_width=None, conv_depth=None, seed=0,
                    mul_stages=1, add_stages=1):
    """Cycles of each command on SSMUnit + StateController (Amaranth's simulator).

    A directed run, no back-pressure: a token, then (unit drained) ``CHECKPOINT``
    and ``RESTORE``; a token committed right before a ``RESTORE`` (the restore
    waits for it to drain); a captured token, ``RESTORE`` and ``REPLAY``, and the
    cycles until the replayed token has left the unit (``busy`` low). Every
    ``y`` and the state are checked as in the randomized bench.

    Returns
    -------
    dict
        ``tiles``, ``conv_depth``, ``restore_cycles`` (the property), and
        measured ``checkpoint``, ``restore`` (drained), ``restore_after_token``
        and its ``wait``, ``replay`` (to the response) and ``replay_done``
        (to ``busy`` low), all in cycles from the command being taken.
    """
    from specgen.sim.ssm_unit import make_tokens

    rng = np.random.default_rng(seed)
    pyrng = random.Random(seed)
    top = StateControllerTop(ssm_cfg=cfg, slots=slots, records=records, conv_width=conv_width,
                             conv_depth=conv_depth, mul_stages=mul_stages, add_stages=add_stages)
    c = top.ctrl
    H = cfg.nheads
    prm = mamba2_init_params(cfg, rng)
    prm = SSMParams(A=prm.A, dt_bias=prm.dt_bias, D=(1 + 0.25 * rng.standard_normal(H)).astype(np.float32))
    toks = make_tokens(rng, cfg, prm, 6, specials=False)
    step = lambda st, tok: ssm_step_hw_bits(cfg, prm, st, *tok)  # noqa: E731
    ex = Expect(cfg, step, slots=slots, records=records, conv_depth=c.conv_depth)
    st0 = (rng.standard_normal(cfg.state_shape) * 0.5).astype(np.float32).view(np.uint32)
    conv0 = [int(v) for v in rng.integers(0, 1 << min(c.conv_width, 62), c.conv_depth, dtype=np.uint64)]
    items = [ParamItem(prm=prm), ex.load(state=st0, conv=conv0 if c.conv_depth else None),
             ex.token(toks[0]), IdleItem(cycles=1)]
    items.append(LoadItem())                                     # quiesce
    items += [ex.cmd(Op.CHECKPOINT, 0, label="checkpoint"), ex.token(toks[1]), LoadItem(),
              ex.cmd(Op.RESTORE, 0, label="restore"), ex.check("restored"),
              ex.token(toks[2]), ex.cmd(Op.RESTORE, 0, label="restore_after_token"),
              ex.check("restored after a token")]
    if records:
        items += [ex.token(toks[3], capture=0), LoadItem(), ex.cmd(Op.RESTORE, 0, label="restore"),
                  ex.cmd(Op.REPLAY, 0, label="replay"), ex.check("replayed")]
    sb = Scoreboard()
    host = HostProgram(cfg, items, sb, DebugHooks(c.state_tiles, c.conv_depth), pyrng, idle=0.0,
                       index_bits=c.index_bits,
                       extra_inputs=("dbg_hold", "dbg_addr", "dbg_we", "dbg_wdata", "cdbg_addr",
                                     "cdbg_we", "cdbg_wdata"))
    busy_low = []

    class Spy:
        def run(self):
            o = yield {"conv_busy": 0}
            was = 0
            while True:
                if was and not o["busy"]:
                    busy_low.append(o["cycle"])
                was = o["busy"]
                o = yield {"conv_busy": 0}

    parts = [host, Spy(), Sink("y", pyrng, 0.0, lambda v, o: sb.on_y(v, o["cycle"])),
             Sink("resp", pyrng, 0.0, lambda v, o: sb.on_resp(v, o, c.index_bits), sb.on_resp_valid)]
    cycles = run_amaranth(top, parts)
    check_latencies(summary(c, host, sb, cycles))
    rec = {r["label"]: r for r in sb.records}
    out = {"tiles": c.state_tiles, "conv_depth": c.conv_depth, "restore_cycles": c.restore_cycles,
           "checkpoint": rec["checkpoint"]["latency"], "restore": rec["restore"]["latency"],
           "restore_after_token": rec["restore_after_token"]["latency"],
           "wait": rec["restore_after_token"]["wait"]}
    if records:
        r = rec["replay"]
        out["replay"] = r["latency"]
        out["replay_done"] = min(b for b in busy_low if b > r["take"]) - r["take"]
        out["replay_cycles"] = c.replay_cycles
    return out


LATENCY_CONFIGS = (
    ("sim preset: H2 P4 N16, 4 lanes", dict(nheads=2, headdim=4, d_state=16, lanes=4), {}),
    ("H2 P4 N16, 2 lanes", dict(nheads=2, headdim=4, d_state=16, lanes=2), {}),
    ("H2 P2 N8, 4 lanes", dict(nheads=2, headdim=2, d_state=8, lanes=4), {}),
    ("H2 P2 N8, 4 lanes, no conv window", dict(nheads=2, headdim=2, d_state=8, lanes=4),
     {"conv_depth": 0}),
)


def latency_table(clock_mhz=400):
    """Markdown rows of :func:`measure_latency` over :data:`LATENCY_CONFIGS`."""
    rows = ["| config | tiles T | conv words | CHECKPOINT | RESTORE, unit drained | = T/conv + fixed "
            f"| ns at {clock_mhz} MHz | RESTORE right after a token (of it: waiting) "
            "| REPLAY: response / token out of the unit |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, geom, kw in LATENCY_CONFIGS:
        r = measure_latency(SSMConfig(**geom, **COARSE_LUTS), **kw)
        copy = max(r["tiles"], r["conv_depth"])
        rows.append(f"| {name} | {r['tiles']} | {r['conv_depth']} | {r['checkpoint']} | {r['restore']} "
                    f"| {copy} + {r['restore'] - copy} | {r['restore'] * 1000 / clock_mhz:.1f} "
                    f"| {r['restore_after_token']} ({r['wait']}) "
                    f"| {r.get('replay', '–')} / {r.get('replay_done', '–')} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(latency_table())
