"""``specgen``: the command-line entry point.

Every command validates its arguments up front, writes its output atomically
(into a temporary folder that is renamed into place only on success) and exits
with status 2 and a one-line message on bad input.
"""

import argparse
import sys

from .errors import CLIError

__all__ = ["main", "CLIError"]


def _cmd_verilog(args):
    from .emit import write_verilog
    write_verilog(board=args.board, out=args.out)


def _cmd_golden(args):
    from .golden_vectors import write_golden
    write_golden(out=args.out, seed=args.seed, config=args.config)


def _cmd_bsfp_study(args):
    from .bsfp_study import write_study
    write_study(out=args.out)


def _cmd_ssm_budget(args):
    from .ssm_error_budget import write_error_budget
    write_error_budget(out=args.out, steps=args.steps, seed=args.seed)


def _cmd_bench(args):
    from .bench import write_bench
    write_bench(out=args.out)


def _cmd_backtrack_cost(args):
    from .backtrack_cost import write_backtrack_table
    write_backtrack_table(out=args.out)


def build_parser():
    from golden.config import preset_names

    parser = argparse.ArgumentParser(
        prog="specgen",
        description="Generator of speculative-decoding accelerators for Mamba on AMD Versal "
                    "(SpecMamba + SPEQ).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("verilog", help="emit Verilog and a manifest for a board preset")
    p.add_argument("--board", required=True, metavar="BOARD",
                   help=f"board preset: {', '.join(preset_names())}")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.set_defaults(func=_cmd_verilog)

    p = sub.add_parser("golden", help="write deterministic golden vector sets")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--config", default="sim", metavar="NAME",
                   help=f"config preset: {', '.join(preset_names())} (default sim)")
    p.set_defaults(func=_cmd_golden)

    p = sub.add_parser("bsfp-study", help="regenerate the BSFP study on real weights")
    p.add_argument("--out", default="docs", metavar="DIR", help="output folder (default docs)")
    p.set_defaults(func=_cmd_bsfp_study)

    p = sub.add_parser("ssm-budget", help="regenerate the SSM numerics contract and error budget")
    p.add_argument("--out", default="docs", metavar="DIR", help="output folder (default docs)")
    p.add_argument("--steps", type=int, default=1000, help="decode steps (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.set_defaults(func=_cmd_ssm_budget)

    p = sub.add_parser("bench", help="run the benchmarks and rewrite docs/perf.md")
    p.add_argument("--out", default="docs/perf.md", metavar="FILE", help="report path")
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser("backtrack-cost",
                       help="regenerate the state-backtracking cost table (backtracking.md)")
    p.add_argument("--out", default="docs", metavar="DIR", help="output folder (default docs)")
    p.set_defaults(func=_cmd_backtrack_cost)

    from .perf_cli import add_parser as add_perf_parser
    add_perf_parser(sub)    # specgen perf: the performance model (gen/perf_cli.py)

    from .estimate import add_parser as add_estimate_parser
    add_estimate_parser(sub)    # specgen estimate: yosys proxy resources and depth (gen/estimate.py)

    from .acceptance import add_parser as add_acceptance_parser
    add_acceptance_parser(sub)    # specgen acceptance: measured acceptance (gen/acceptance.py)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except CLIError as exc:
        print(f"specgen {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
