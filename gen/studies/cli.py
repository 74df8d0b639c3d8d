"""The studies' commands: ``bsfp-study``, ``ssm-budget``, ``backtrack-cost``, ``dsp-numerics``
and ``acceptance``. Each writes (or prints) a table of the docs."""

from specgen.gen.cli.design import int_at_least

__all__ = ["add_parser"]


def _cmd_bsfp_study(args):
    from specgen.gen.cli.progress import Progress, summarize
    from specgen.gen.studies.bsfp import write_study
    Progress.from_args(args).status("reading the weights and running the study")
    paths = write_study(out=args.out)["files"]
    summarize(args, "bsfp-study", paths, root=args.out)


def _cmd_ssm_budget(args):
    from specgen.gen.cli.progress import Progress
    from specgen.gen.studies.ssm_error_budget import write_error_budget
    write_error_budget(out=args.out, steps=args.steps, seed=args.seed,
                       progress=Progress.from_args(args))


def _cmd_backtrack_cost(args):
    from specgen.gen.cli.progress import summarize
    from specgen.gen.studies.backtrack_cost import write_backtrack_table
    summarize(args, "backtrack-cost", [write_backtrack_table(out=args.out)])


def _cmd_dsp_numerics(args):
    from specgen.gen.studies.dsp_numerics import write_study
    write_study(out=args.out, seed=args.seed)


def _cmd_acceptance(args):
    from specgen.gen.studies.acceptance import run
    run(args)


def add_parser(sub):
    """Add the studies' commands to the CLI's subparsers."""
    from specgen.golden.bsfp import DRAFT_FORMATS
    from specgen.golden.speculative import DEFAULT_GAMMA

    from specgen.gen.studies.acceptance import SPEQ
    from specgen.gen.studies.ssm_error_budget import MIN_STEPS

    p = sub.add_parser("bsfp-study", help="regenerate the BSFP study on real weights")
    p.add_argument("--out", default="docs", metavar="DIR", help="output folder (default docs)")
    p.set_defaults(func=_cmd_bsfp_study)

    p = sub.add_parser("ssm-budget", help="regenerate the SSM numerics contract and error budget")
    p.add_argument("--out", default="docs", metavar="DIR", help="output folder (default docs)")
    p.add_argument("--steps", type=int_at_least(MIN_STEPS), default=1000,
                   help="decode steps (default 1000)")
    p.add_argument("--seed", type=int_at_least(0), default=0, help="random seed (default 0)")
    p.set_defaults(func=_cmd_ssm_budget)

    p = sub.add_parser("backtrack-cost",
                       help="regenerate the state-backtracking cost table (backtracking.md)")
    p.add_argument("--out", default="docs", metavar="DIR", help="output folder (default docs)")
    p.set_defaults(func=_cmd_backtrack_cost)

    p = sub.add_parser("dsp-numerics", help="the DSPFP32 contract against the exact one on "
                                            "real weights (docs/numerics-dsp.md)")
    p.add_argument("--out", default="docs", metavar="DIR", help="output folder (default docs)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="random seed (default 0)")
    p.set_defaults(func=_cmd_dsp_numerics)

    p = sub.add_parser("acceptance", help="measure speculative acceptance on the shipped models")
    p.add_argument("--model", default="target", metavar="M", help="shipped target (default target)")
    p.add_argument("--draft", default=SPEQ, metavar="D",
                   help="'speq' (BSFP self-speculation, default) or a shipped model")
    p.add_argument("--tree", metavar="SHAPE",
                   help="per-depth branching, e.g. 2,2,1,1 (default for a draft model) or chainN "
                        "(default for speq: chain8)")
    p.add_argument("--gamma", type=float, default=DEFAULT_GAMMA, metavar="G",
                   help=f"early-stopping threshold in [0, 1], 0 = off (default {DEFAULT_GAMMA})")
    p.add_argument("--bsfp", default="E3M0", metavar="FORMAT",
                   help=f"speq draft format: {', '.join(DRAFT_FORMATS)} (default E3M0)")
    p.add_argument("--group-size", type=int, metavar="N", dest="group_size",
                   help="speq: one BSFP scale per N weights (default: per tensor)")
    p.add_argument("--prompts", type=int, default=8, metavar="N", help="held-out prompts (default 8)")
    p.add_argument("--prompt-len", type=int, default=64, metavar="N", dest="prompt_len",
                   help="bytes per prompt (default 64)")
    p.add_argument("--tokens", type=int, default=48, metavar="N",
                   help="tokens generated per prompt (default 48)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.set_defaults(func=_cmd_acceptance)
