"""``specgen perf``: the performance model of one speculative decoding step.

``specgen perf --board B [--config FILE] [--set KEY=VALUE] --target M --draft D [--tree 2,2,1,1]
[--accept 4.91 | --alpha A | --acceptance FILE] [--early-stop C] [--sizing preset|dsp]
[--policy recompute|store] [--draft-flow node|prefix|best] [--overlap X] [--state-ports N]
[--vector-lanes N] [--weight-beats N] [--nibble-beats N] [--stage-reuse] [--json]``

``--acceptance FILE`` takes a measured profile, the JSON of ``specgen acceptance --json``
(:func:`read_acceptance`): its tree, tokens per step and early stopping.

A readable table by default (:func:`gen.perf.report.format_result`) with the step's
ceilings under it (:func:`gen.perf.roofline.format_roofline`: memory, compute on every
DSP58, the smaller of the two per phase, the design's own slots, LUT-built MACs), the
JSON of :meth:`gen.perf.system.StepResult.to_dict` with ``--json`` (its ``ceilings``
key: :meth:`gen.perf.roofline.Roofline.to_dict`). Unknown names exit
with status 2 and a message listing the allowed values; a step the hardware or
the statistics cannot produce (a tree larger than the board's tree verifier, a
draft model not smaller than its target, more committed tokens than drafted
levels) is refused by :func:`check_step`, naming the flags.
"""

import json
import sys
from pathlib import Path

from specgen.gen.cli.errors import CLIError
from specgen.gen.perf.claims import SEED, SPEQ_ALPHA

__all__ = ["add_parser", "run", "parse_tree", "read_acceptance", "fit_continue_prob",
           "parse_profile", "read_profile", "run_tree_best"]

#: Tokens per step without --accept/--alpha: SpecMamba's reported figure.
DEFAULT_ACCEPT = SEED["tokens_per_step"]
#: SPEQ's per-token acceptance without --alpha (:data:`gen.perf.claims.SPEQ_ALPHA`).
SPEQ_DEFAULT_ALPHA = SPEQ_ALPHA


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
    """The ``c`` with ``Σ_{n<depth} c^n = draft_length`` (mean levels drafted): the mean
    length rises monotonically with ``c``, from 1 to ``depth``."""
    from specgen.gen.perf.system import solve_rising
    return solve_rising(lambda c: sum(c ** n for n in range(depth)), draft_length)


def add_parser(sub):
    """Add the ``perf`` subcommand to ``sub`` (an argparse subparsers object)."""
    from specgen.gen.perf.system import (DRAFT_CHOICES, RESTORE_POLICIES, SIZINGS, model_names,
                                 perf_board_names)

    from specgen.gen.cli.design import add_design_args

    p = sub.add_parser("perf", help="model tokens/s, time split and tokens/J of one decoding step")
    # --config/--set change every fact of the design the model reads: the board's clock,
    # bandwidth, DSP58 count and power assumptions, the arrays, the tree and the pipelines.
    add_design_args(p, boards=perf_board_names())
    p.add_argument("--target", required=True, metavar="MODEL",
                   help=f"Mamba2 target: {', '.join(model_names())}")
    p.add_argument("--draft", required=True, metavar="DRAFT",
                   help=f"draft: a Mamba2 size, 'speq' (self-speculation, BSFP nibble plane) or "
                        f"'none'; one of {', '.join(model_names() + DRAFT_CHOICES)}")
    p.add_argument("--tree", metavar="SHAPE",
                   help="per-depth branching, e.g. 2,2,1,1 (default), or chainN (default for "
                        "speq: chain16), or 'best': search every shape the tree verifier holds "
                        "under an acceptance profile (--profile, --alpha or --acceptance)")
    p.add_argument("--profile", metavar="A1,A2,...",
                   help="with --tree best: the draft's top-1 acceptance per depth (deeper depths "
                        "take the last), e.g. 0.9,0.85,0.8")
    p.add_argument("--top", type=int, default=5, metavar="N",
                   help="with --tree best: how many of the fastest shapes to list (default 5)")
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
    p.add_argument("--draft-flow", default="best", metavar="F", dest="draft_flow",
                   help="the draft's passes on the decoder core: node (one per expanded node "
                        "from its parent's state), prefix (a depth at a time over the nodes so "
                        "far) or best (the faster; default)")
    p.add_argument("--overlap", type=float, default=0.0, metavar="X",
                   help="linear/SSM scheduler overlap in [0, 1] (default 0: no scheduler yet)")
    p.add_argument("--state-ports", type=int, default=None, metavar="N", dest="state_ports",
                   help="SSM state read ports, and as many write ports, the state is striped "
                        "over (default the design's ssm.state_ports: 16 on vhk158, 1 on vck190)")
    p.add_argument("--vector-lanes", type=int, default=None, metavar="N", dest="vector_lanes",
                   help="elements a cycle of the decoder core's vector stages (norms, conv1d, "
                        "residual, moves; default the design's vector.lanes, as built)")
    p.add_argument("--weight-beats", type=int, default=None, metavar="N", dest="weight_beats",
                   help="column beats each weight port delivers a cycle (default the design's "
                        "linear.weight_beats, as built; another count is a what-if)")
    p.add_argument("--nibble-beats", type=int, default=None, metavar="N", dest="nibble_beats",
                   help="the same in a SPEQ nibble-plane draft pass (default --weight-beats; "
                        "a what-if)")
    p.add_argument("--ssm-rows", type=int, default=1, metavar="R", dest="ssm_rows",
                   help="a what-if: state rows the SSM unit sweeps a cycle, 1 (as built), 2, 4 "
                        "or 8 (R times the EMU lanes and their DSP58)")
    p.add_argument("--stage-reuse", action="store_true", dest="stage_reuse",
                   help="a what-if: each matrix's inputs read once for all its jobs and the "
                        "stages' weights once a pass (as built: every job reads its inputs, "
                        "every node the stages' weights)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.set_defaults(func=run)
    return p


def _check(name, value, allowed):
    if value not in allowed:
        raise CLIError(f"unknown {name} {value!r}; allowed: {', '.join(allowed)}")


def _check_range(flag, value, lo, hi, *, lo_open=False, why=""):
    """``--flag`` must lie in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
    if value is None:
        return
    ok = (lo < value if lo_open else lo <= value) and value <= hi
    if not ok:
        bounds = f"{'(' if lo_open else '['}{lo:g}, {hi:g}]"
        raise CLIError(f"{flag} must be in {bounds}{why}, not {value:g}")


#: Fields of the model's objects -> the flags that set them, for the messages that
#: come from the model's own validation.
FLAG_OF_FIELD = {
    "StepConfig.continue_prob": "--early-stop", "StepConfig.tokens_per_step": "--accept",
    "StepConfig.alpha": "--alpha", "StepConfig.tree": "--tree", "StepConfig.target": "--target",
    "StepConfig.draft": "--draft", "StepConfig.restore_policy": "--policy",
    "StepConfig.draft_flow": "--draft-flow",
    "Accelerator.overlap": "--overlap", "Accelerator.sizing": "--sizing",
    "Accelerator.state_ports": "--state-ports", "Accelerator.vector_lanes": "--vector-lanes",
    "Accelerator.weight_beats": "--weight-beats", "Accelerator.nibble_beats": "--nibble-beats",
    "Accelerator.ssm_rows": "--ssm-rows",
    "accelerator.sizing": "--sizing",
}


def _flag_message(text):
    # Longest names first: StepConfig.draft_flow before StepConfig.draft.
    for name in sorted(FLAG_OF_FIELD, key=len, reverse=True):
        text = text.replace(name, FLAG_OF_FIELD[name])
    return text


def check_step(args, *, tree, accept, cont, config):
    """Reject a step the hardware or the statistics cannot produce, naming the flags.

    Parameters
    ----------
    args : argparse.Namespace
    tree : tuple of int
        The per-depth branching in use.
    accept : float or None
        Committed tokens per step (``--accept`` or its default).
    cont : float
        The early-stop continue probability in use.
    config : golden.config.Config
        The board's config: the tree verifier's capacity.

    Raises
    ------
    CLIError
    """
    from specgen.golden.tree import TreeShape, fifo_schedule

    from specgen.gen.perf.system import DRAFT_CHOICES, model_names

    names = model_names()
    _check_range("--overlap", args.overlap, 0.0, 1.0)
    _check_range("--alpha", args.alpha, 0.0, 1.0)
    if args.draft in names and names.index(args.draft) >= names.index(args.target):
        smaller = names[:names.index(args.target)]
        allowed = ", ".join(smaller + DRAFT_CHOICES)
        raise CLIError(f"--draft {args.draft} is not smaller than --target {args.target}; "
                       f"allowed: {allowed}")
    if args.draft == "none":
        return
    shape = TreeShape(tree)
    tree_text = args.tree or ",".join(map(str, tree))
    # The root and every draft node take one verifier slot (golden.tree.flatten).
    capacity = config.tree.max_nodes
    if shape.num_nodes > capacity:
        raise CLIError(f"--tree {tree_text} has {shape.num_nodes} nodes with the root; the "
                       f"{config.board.name} tree verifier holds at most {capacity} "
                       f"(--set tree.max_nodes)")
    try:
        fifo_schedule(shape.parents, fifo_depth=config.tree.fifo_depth)
    except ValueError as exc:
        raise CLIError(f"--tree {tree_text} does not fit the {config.board.name} tree verifier's "
                       f"ring of {config.tree.fifo_depth} state slots (--set tree.fifo_depth): "
                       f"{str(exc).split(';')[0]}") from None
    # Early stopping at 0 would never draft past the first level, so no tree is built.
    _check_range("--early-stop", cont, 0.0, 1.0, lo_open=True)
    if accept is not None:
        # A step commits at most one token per drafted level plus the bonus token; with
        # early stopping the expected number of levels is below the tree's depth.
        levels = sum(n * cont ** (n - 1) * ((1 - cont) if n < shape.depth else 1.0)
                     for n in range(1, shape.depth + 1))
        hi = 1.0 + levels
        why = (f" for --tree {tree_text}" if cont == 1.0 else
               f" for --tree {tree_text} with --early-stop {cont:g} "
               f"({levels:.3g} levels drafted on average)")
        _check_range("--accept", accept, 1.0, round(hi, 6), why=why)


def _accelerator(config, args):
    """The model of the design ``config`` with the flags' sizing and what-ifs."""
    from specgen.gen.perf.system import accelerator
    return accelerator(config, sizing=args.sizing, overlap=args.overlap,
                       state_ports=args.state_ports, vector_lanes=args.vector_lanes,
                       weight_beats=args.weight_beats, nibble_beats=args.nibble_beats,
                       ssm_rows=args.ssm_rows, stage_reuse=args.stage_reuse)


def run(args, *, out=None):
    """Evaluate the model for parsed ``args`` and print the result."""
    from specgen.gen.perf.system import (DRAFT_CHOICES, RESTORE_POLICIES, SIZINGS, StepConfig,
                                 model_names, perf_board_names, step_model)
    from specgen.gen.perf.report import format_result
    from specgen.gen.perf.roofline import format_roofline, roofline

    from specgen.gen.cli.design import resolve_config

    out = sys.stdout if out is None else out
    if args.board is not None:
        _check("board", args.board, perf_board_names())
    config = resolve_config(args)
    if config.board.mem_bw_gbs <= 0:
        raise CLIError(f"board {config.board.name!r} has no memory model (board.mem_bw_gbs 0); "
                       f"allowed: {', '.join(perf_board_names())}, or a design with "
                       f"board.mem_bw_gbs > 0")
    _check("target", args.target, model_names())
    _check("draft", args.draft, model_names() + DRAFT_CHOICES)
    _check("sizing", args.sizing, SIZINGS)
    _check("policy", args.policy, RESTORE_POLICIES)
    if args.accept is not None and args.alpha is not None:
        raise CLIError("give --accept (tokens/step) or --alpha (acceptance rate), not both")
    speq = args.draft == "speq"
    if args.tree is not None and args.tree.strip().lower() == "best":
        return run_tree_best(args, config=config, out=out)
    if getattr(args, "profile", None) is not None:
        raise CLIError("--profile is for --tree best; give --accept or --alpha for one tree")
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
    check_step(args, tree=tree, accept=accept, cont=cont, config=config)
    try:
        # The design itself (its board, blocks and tree); --sizing dsp resizes its arrays.
        acc = _accelerator(config, args)
        step = StepConfig(target=args.target, draft=args.draft, tree=tree if args.draft != "none" else (),
                          tokens_per_step=accept if args.draft != "none" else None,
                          alpha=alpha if args.draft != "none" else None, continue_prob=cont,
                          restore_policy=args.policy, draft_flow=args.draft_flow)
        res = step_model(acc, step)
    except (TypeError, ValueError) as exc:
        raise CLIError(_flag_message(str(exc))) from None
    roof = roofline(res)
    if args.json:
        d = json.loads(res.to_json())
        d["ceilings"] = roof.to_dict()
        print(json.dumps(d, indent=2, sort_keys=True), file=out)
    else:
        print(format_result(res) + "\n" + format_roofline(roof), file=out)
    return res


def parse_profile(text):
    """``"0.9,0.85"`` -> :class:`gen.perf.tree_search.AcceptanceProfile` (``--profile``)."""
    from specgen.gen.perf.tree_search import AcceptanceProfile
    try:
        rates = tuple(float(x) for x in text.split(","))
        if not rates or not all(0.0 <= r <= 1.0 for r in rates):
            raise ValueError
    except ValueError:
        raise CLIError(f"--profile must be comma-separated acceptance rates in [0, 1] "
                       f"(e.g. 0.9,0.85,0.8), not {text!r}") from None
    return AcceptanceProfile(rates, source="--profile")


def read_profile(path):
    """The top-1 profile of a ``specgen acceptance --json`` report (its tree and per-depth
    acceptance, :func:`gen.perf.tree_search.top1_from_measured`)."""
    from specgen.gen.perf.tree_search import top1_from_measured
    try:
        rep = json.loads(Path(path).read_text())
        tree = tuple(int(b) for b in rep["tree"])
        rates = [None if r is None else float(r) for r in rep["per_depth_acceptance"]]
        profile = top1_from_measured(tree, rates)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CLIError(f"--acceptance {str(path)!r} must be the JSON of 'specgen acceptance "
                       f"--json' (tree, per_depth_acceptance): {exc}") from None
    return profile


def run_tree_best(args, *, config, out):
    """``specgen perf --tree best``: the fastest tree shape under an acceptance profile, with
    the SpecMamba notes' (2,2,1,1) and chains beside it."""
    from specgen.gen.perf.tree_search import (AcceptanceProfile, beside_shapes, candidate_shapes,
                                      search_trees)

    if args.draft == "none":
        raise CLIError("--tree best needs a draft: --draft a Mamba2 size or speq, not none")
    given = [f for f, v in (("--profile", args.profile), ("--alpha", args.alpha),
                            ("--acceptance", args.acceptance)) if v is not None]
    if len(given) > 1:
        raise CLIError(f"give one acceptance profile for --tree best, not {' and '.join(given)}")
    if args.accept is not None:
        raise CLIError("--accept is one tree's tokens/step; --tree best takes --profile, --alpha "
                       "or --acceptance")
    if args.profile is not None:
        profile = parse_profile(args.profile)
    elif args.alpha is not None:
        _check_range("--alpha", args.alpha, 0.0, 1.0)
        profile = AcceptanceProfile((args.alpha,), source="--alpha")
    elif args.acceptance is not None:
        profile = read_profile(args.acceptance)
    elif args.draft == "speq":
        profile = AcceptanceProfile((SPEQ_DEFAULT_ALPHA,), source="SPEQ's acceptance")
    else:
        raise CLIError("--tree best needs an acceptance profile: --profile A1,A2,..., --alpha A "
                       "or --acceptance FILE (specgen acceptance --json)")
    cont = 1.0 if args.early_stop is None else args.early_stop
    _check_range("--early-stop", cont, 0.0, 1.0, lo_open=True)
    if args.top < 1:
        raise CLIError(f"--top must be an integer >= 1, not {args.top}")
    tree = config.tree
    shapes = candidate_shapes(max_nodes=tree.max_nodes, fifo_depth=tree.fifo_depth)
    if not shapes:
        raise CLIError(f"no tree fits the {config.board.name} tree verifier "
                       f"(--set tree.max_nodes {tree.max_nodes}, tree.fifo_depth "
                       f"{tree.fifo_depth})")
    # Beside the best: the notes' shape and chains, where the verifier holds them; a shape
    # the search does not cover (a chain deeper than its depth limit) is priced as well.
    beside_wanted = beside_shapes(max_nodes=tree.max_nodes, fifo_depth=tree.fifo_depth)
    extra = [s for s in beside_wanted if s not in set(shapes)]
    try:
        acc = _accelerator(config, args)
        ranked = search_trees(acc, target=args.target, draft=args.draft, profile=profile,
                              shapes=shapes + extra, continue_prob=cont,
                              restore_policy=args.policy, draft_flow=args.draft_flow)
    except (TypeError, ValueError) as exc:
        raise CLIError(_flag_message(str(exc))) from None
    searched = [c for c in ranked if c.branching not in extra]
    best = searched[0]
    by_shape = {c.branching: c for c in ranked}
    beside = [by_shape[s] for s in beside_wanted]
    if args.json:
        print(json.dumps({"best": best.to_dict(), "top": [c.to_dict() for c in searched[:args.top]],
                          "beside": [c.to_dict() for c in beside],
                          "profile": list(profile.rates), "profile_source": profile.source,
                          "shapes_searched": len(shapes), "board": config.board.name,
                          "continue_prob": cont,
                          "target": args.target, "draft": args.draft,
                          "max_nodes": tree.max_nodes, "fifo_depth": tree.fifo_depth},
                         indent=2), file=out)
        return best
    rates = ", ".join(f"{r:.3f}" for r in profile.rates)
    lines = [f"specgen perf --tree best (model, not a measurement): {acc.describe()}",
             f"target Mamba2-{args.target}, draft {args.draft}; top-1 acceptance per depth "
             f"{rates} ({profile.source}); early stop {cont:g}; {len(shapes)} shapes searched "
             f"(non-increasing branching, <= {tree.max_nodes} nodes, ring of "
             f"{tree.fifo_depth} slots)", "",
             f"{'':<7} {'tree':<33} {'nodes':>5} {'tokens/step':>12} {'tokens/s':>9}"]
    for label, rows in (("best", searched[:1]), ("next", searched[1:args.top]),
                        ("beside", beside)):
        for c in rows:
            lines.append(f"{label:<7} {','.join(map(str, c.branching)):<33} {c.nodes:>5} "
                         f"{c.tokens_per_step:>12.3f} {c.tokens_per_s:>9.1f}")
    print("\n".join(lines), file=out)
    return best
