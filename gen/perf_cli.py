"""``specgen perf``: the performance model of one speculative decoding step.

``specgen perf --board B --target M --draft D [--tree 2,2,1,1] [--accept 4.91 | --alpha A |
--acceptance FILE] [--early-stop C] [--sizing preset|dsp] [--policy recompute|store] [--overlap X]
[--json]``

``--acceptance FILE`` takes a measured profile, the JSON of ``specgen acceptance --json``
(:func:`read_acceptance`): its tree, tokens per step and early stopping.

A readable table by default (:func:`gen.perf_report.format_result`), the JSON
of :meth:`gen.perf_model.StepResult.to_dict` with ``--json``. Unknown names exit
with status 2 and a message listing the allowed values.
"""

import json
import sys
from pathlib import Path

from .errors import CLIError

__all__ = ["add_parser", "run", "parse_tree", "read_acceptance", "fit_continue_prob"]

DEFAULT_ACCEPT = 4.91
SPEQ_DEFAULT_ALPHA = 0.97


def parse_tree(text):
    """``"2,2,1,1"`` → ``(2, 2, 1, 1)``; ``"chain16"`` → sixteen ones."""
    t = text.strip().lower()
    try:
        if t.startswith("chain"):
            n = int(t[5:])
            if n < 1:
                raise ValueError
            return (1,) * n
        shape = tuple(int(x) for x in t.split(","))
        if not shape or min(shape) < 1:
            raise ValueError
        return shape
    except ValueError:
        raise CLIError(f"--tree must be a comma-separated branching list of integers >= 1 "
                       f"(e.g. 2,2,1,1) or chainN (e.g. chain16), not {text!r}") from None


def read_acceptance(path):
    """``(tree, tokens_per_step, continue_prob)`` of a ``specgen acceptance --json`` report.

    ``continue_prob`` is the ``c`` whose level distribution
    (``P(levels = n) = c^(n−1)(1 − c)``, the last level taking the rest) has the
    measured mean draft length: ``(1 − c^D)/(1 − c) = draft_length`` for depth ``D``.
    """
    try:
        rep = json.loads(Path(path).read_text())
        tree = tuple(int(b) for b in rep["tree"])
        tps, length = float(rep["tokens_per_step"]), float(rep["draft_length"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CLIError(f"--acceptance {str(path)!r} must be the JSON of 'specgen acceptance --json' "
                       f"(tree, tokens_per_step, draft_length): {exc}") from None
    return tree, tps, fit_continue_prob(len(tree), length)


def fit_continue_prob(depth, draft_length):
    """The ``c`` with ``Σ_{n<depth} c^n = draft_length`` (mean levels drafted; bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):     # the mean length rises monotonically with c, from 1 to depth
        c = (lo + hi) / 2
        lo, hi = (c, hi) if sum(c ** n for n in range(depth)) < draft_length else (lo, c)
    return (lo + hi) / 2


def add_parser(sub):
    """Add the ``perf`` subcommand to ``sub`` (an argparse subparsers object)."""
    from .perf_model import DRAFT_CHOICES, RESTORE_POLICIES, SIZINGS, model_names, perf_board_names

    p = sub.add_parser("perf", help="model tokens/s, time split and tokens/J of one decoding step")
    p.add_argument("--board", required=True, metavar="BOARD",
                   help=f"board preset: {', '.join(perf_board_names())}")
    p.add_argument("--target", required=True, metavar="MODEL",
                   help=f"Mamba2 target: {', '.join(model_names())}")
    p.add_argument("--draft", required=True, metavar="DRAFT",
                   help=f"draft: a Mamba2 size, 'speq' (self-speculation, BSFP nibble plane) or "
                        f"'none'; one of {', '.join(model_names() + DRAFT_CHOICES)}")
    p.add_argument("--tree", metavar="SHAPE",
                   help="per-depth branching, e.g. 2,2,1,1 (default), or chainN (default for "
                        "speq: chain16)")
    p.add_argument("--accept", type=float, metavar="TOKENS",
                   help=f"committed tokens per step (default {DEFAULT_ACCEPT} when the tree is deep "
                        f"enough and no --alpha is given)")
    p.add_argument("--alpha", type=float, metavar="A",
                   help=f"per-token acceptance rate instead of --accept (default for speq: "
                        f"{SPEQ_DEFAULT_ALPHA})")
    p.add_argument("--acceptance", metavar="FILE",
                   help="a measured profile (specgen acceptance --json): its tree, tokens/step and "
                        "early stopping, instead of --accept/--alpha/--early-stop")
    p.add_argument("--early-stop", type=float, metavar="C", dest="early_stop",
                   help="probability that drafting continues to the next level (1 = no early "
                        "stopping; default 1, for speq the acceptance rate)")
    p.add_argument("--sizing", default="preset", metavar="S",
                   help=f"array sizing: {', '.join(SIZINGS)} (default preset)")
    p.add_argument("--policy", default="recompute", metavar="P",
                   help=f"target state restore: {', '.join(RESTORE_POLICIES)} (default recompute)")
    p.add_argument("--overlap", type=float, default=0.0, metavar="X",
                   help="linear/SSM scheduler overlap in [0, 1] (default 0: no scheduler yet)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.set_defaults(func=run)
    return p


def _check(name, value, allowed):
    if value not in allowed:
        raise CLIError(f"unknown {name} {value!r}; allowed: {', '.join(allowed)}")


def run(args, *, out=None):
    """Evaluate the model for parsed ``args`` and print the result."""
    from .perf_model import (DRAFT_CHOICES, RESTORE_POLICIES, SIZINGS, StepConfig, accelerator,
                             model_names, perf_board_names, step_model)
    from .perf_report import format_result

    out = sys.stdout if out is None else out
    _check("board", args.board, perf_board_names())
    _check("target", args.target, model_names())
    _check("draft", args.draft, model_names() + DRAFT_CHOICES)
    _check("sizing", args.sizing, SIZINGS)
    _check("policy", args.policy, RESTORE_POLICIES)
    if args.accept is not None and args.alpha is not None:
        raise CLIError("give --accept (tokens/step) or --alpha (acceptance rate), not both")
    speq = args.draft == "speq"
    tree = parse_tree(args.tree) if args.tree else ((1,) * 16 if speq else (2, 2, 1, 1))
    accept, alpha, cont = args.accept, args.alpha, args.early_stop
    if getattr(args, "acceptance", None) is not None:
        if (accept, alpha, cont) != (None, None, None):
            raise CLIError("give --acceptance FILE or --accept/--alpha/--early-stop, not both")
        measured, accept, cont = read_acceptance(args.acceptance)
        if args.tree and tree != measured:
            raise CLIError(f"--tree {args.tree} is not the measured tree "
                           f"{','.join(map(str, measured))} of --acceptance")
        tree = measured
    if accept is None and alpha is None:
        if speq or len(tree) + 1 < DEFAULT_ACCEPT:
            alpha = SPEQ_DEFAULT_ALPHA if speq else None
            if alpha is None:
                raise CLIError(f"--tree {args.tree} commits at most {len(tree) + 1} tokens per "
                               f"step; give --accept (1 to {len(tree) + 1}) or --alpha")
        else:
            accept = DEFAULT_ACCEPT
    if cont is None:
        cont = alpha if speq and alpha is not None else 1.0
    try:
        acc = accelerator(args.board, sizing=args.sizing, overlap=args.overlap)
        step = StepConfig(target=args.target, draft=args.draft, tree=tree if args.draft != "none" else (),
                          tokens_per_step=accept if args.draft != "none" else None,
                          alpha=alpha if args.draft != "none" else None, continue_prob=cont,
                          restore_policy=args.policy)
        res = step_model(acc, step)
    except (TypeError, ValueError) as exc:
        raise CLIError(str(exc)) from None
    print(res.to_json() if args.json else format_result(res), file=out)
    return res
