"""One point of a sweep: the design it names, its modeled tokens/s and its fit.

:func:`evaluate_point` runs on a Dask worker: it takes plain data (a point, the step,
the base design) and returns a plain row, with any error caught and recorded in the
row rather than raised, so a failed point is written down and not lost.

The fit is the fast analytic estimate (:func:`fit_estimate`): DSP58 from
:func:`gen.estimate.dsp_model.analytical_dsp58`, LUT from per-slot, per-lane and
fixed coefficients taken from the whole-design UltraScale+ proxy estimates of
``docs/estimate.md`` (2026-12-01). It is a proxy; ``specgen estimate`` is the
synthesis.
"""

import time
import traceback

__all__ = ["evaluate_point", "fit_estimate", "design_of", "LUT_PER_LINEAR_SLOT",
           "LUT_PER_SSM_LANE", "LUT_FIXED", "METRICS"]

#: LUT per DSPLinearUnit MAC slot: 22,461 LUT for 64 × 8 slots on vck190 and 234,784 for
#: 64 × 84 on vhk158 (docs/estimate.md: 43.9 and 43.7 per slot).
LUT_PER_LINEAR_SLOT = 43.7
#: LUT per SSM lane: SSMUnit_h80_p64_n128_l64_dsp_w8, 8,008 LUT for 64 lanes (docs/estimate.md).
LUT_PER_SSM_LANE = 125.0
#: LUT of the rest: the vck190 top level (54,047, its state controller, scheduler and
#: register file) plus the tree verifier (754) and the small blocks (docs/estimate.md).
LUT_FIXED = 54_800

#: Columns every row has, after the point's axes.
METRICS = ("id", "status", "error", "tokens_per_s", "tokens_per_step", "memory_tokens_per_s",
           "compute_tokens_per_s", "limit_tokens_per_s", "limit_ratio", "dsp58", "dsp58_budget",
           "lut", "lut_budget", "fits", "seconds")


def fit_estimate(config):
    """``{"dsp58", "dsp58_budget", "lut", "lut_budget", "fits"}`` of a design (module docstring)."""
    from specgen.gen.estimate.dsp_model import analytical_dsp58
    dsp = analytical_dsp58(config)["Total"]
    lut = round(LUT_PER_LINEAR_SLOT * config.linear.pes + LUT_PER_SSM_LANE * config.ssm.lanes
                + LUT_FIXED)
    b = config.board
    return {"dsp58": dsp, "dsp58_budget": b.dsp58, "lut": lut, "lut_budget": b.lut,
            "fits": bool(dsp <= b.dsp58 and (b.lut == 0 or lut <= b.lut))}


def design_of(point, *, board=None, overrides=()):
    """The :class:`golden.config.Config` of a point: its board (or ``board``), the fixed
    ``overrides``, then its ``--set`` axes in key order.

    Raises
    ------
    ValueError
        An unknown preset or key, or a value the config refuses (golden.config_io's message).
    """
    from specgen.golden.config import preset
    from specgen.golden.config_io import apply_overrides, parse_override
    config = preset(point.get("board", board))
    sets = list(overrides) + [f"{k}={v}" for k, v in sorted(point.items())
                              if k not in ("board", "tree")]
    for text in sets:
        config = apply_overrides(config, [parse_override(text)])
    return config


def evaluate_point(point, *, step, board=None, overrides=()):
    """Model one point; never raises.

    Parameters
    ----------
    point : dict
        ``{axis: value}`` of :meth:`gen.sweep.spec.SweepSpec.points`.
    step : dict
        The sweep's ``[step]`` (target, draft, accept or alpha, sizing, policy).
    board : str, optional
        The preset when the point has no board axis.
    overrides : sequence of str
        Fixed ``key=value`` overrides before the point's.

    Returns
    -------
    dict
        The point's axes and :data:`METRICS`; ``status`` is ``"ok"`` or ``"error"``
        (``error``: the exception's type and message, one line).
    """
    from specgen.gen.sweep.spec import point_id
    t0 = time.perf_counter()
    row = dict(point)
    row.update({k: None for k in METRICS})
    row["id"] = point_id(point)
    try:
        from specgen.gen.perf.claims import SEED_TREE
        from specgen.gen.perf.cli import parse_tree
        from specgen.gen.perf.roofline import roofline
        from specgen.gen.perf.system import StepConfig, accelerator, step_model
        config = design_of(point, board=board, overrides=overrides)
        draft = step["draft"]
        tree = parse_tree(str(point["tree"])) if "tree" in point else SEED_TREE
        acc = accelerator(config, sizing=step.get("sizing", "preset"))
        st = StepConfig(target=step["target"], draft=draft, tree=tree if draft != "none" else (),
                        tokens_per_step=step.get("accept") if draft != "none" else None,
                        alpha=step.get("alpha") if draft != "none" else None,
                        restore_policy=step.get("policy", "recompute"))
        res = step_model(acc, st)
        roof = roofline(res)
        row.update(tokens_per_s=res.tokens_per_s, tokens_per_step=res.tokens_per_step,
                   memory_tokens_per_s=roof.memory, compute_tokens_per_s=roof.compute,
                   limit_tokens_per_s=roof.limit, limit_ratio=roof.ratio("limit"))
        row.update(fit_estimate(acc.config))
        row["status"] = "ok"
    except Exception as exc:    # recorded in the row: a failed point is data, not a crash
        row["status"] = "error"
        where = traceback.extract_tb(exc.__traceback__)[-1]
        row["error"] = (f"{type(exc).__name__}: {' '.join(str(exc).split())} "
                        f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno})")
    row["seconds"] = round(time.perf_counter() - t0, 4)
    return row
