"""``specgen``: the command-line entry point.

Every command validates its arguments up front, writes its output atomically
(into a temporary folder that is renamed into place only on success) and
reports an error in one line:

* bad input (a flag's value, an unknown name, an output folder that is not
  specgen's): ``specgen COMMAND: error: ...`` naming the flag, exit status 2;
* Ctrl-C: ``specgen COMMAND: interrupted``, exit status 130 (128 + SIGINT),
  and no partial output;
* a closed pipe on stdout (``specgen perf | head -1``): no message, exit
  status 141 (128 + SIGPIPE, what a shell reports for a command killed by it).
"""

import argparse
import os
import sys

from .errors import CLIError

__all__ = ["main", "build_parser", "iter_commands", "CLIError", "EXIT_USAGE", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE"]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line: no usage block."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def int_at_least(low):
    """An argparse ``type``: an integer ``>= low``; the error names the flag (argparse adds it)."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, not {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, not {value}")
        return value
    parse.__name__ = f"integer >= {low}"
    return parse


def _progress(args):
    from .progress import Progress
    return Progress.from_args(args)


def _summary(args, command, paths, **kwargs):
    from .progress import summary_lines
    _progress(args).summary(summary_lines(command, paths, **kwargs))


def _cmd_verilog(args):
    from .design import resolve_config
    from .emit import write_verilog
    write_verilog(config=resolve_config(args), out=args.out, progress=_progress(args),
                  only=args.only)


def _cmd_golden(args):
    from .design import resolve_config
    from .golden_vectors import DEFAULT_CONFIG, write_golden
    write_golden(out=args.out, seed=args.seed, config=resolve_config(args) or DEFAULT_CONFIG,
                 progress=_progress(args), only=args.block)


def _cmd_bsfp_study(args):
    from .bsfp_study import write_study
    _progress(args).status("reading the weights and running the study")
    paths = write_study(out=args.out)["files"]
    _summary(args, "bsfp-study", paths, root=args.out)


def _cmd_ssm_budget(args):
    from .ssm_error_budget import write_error_budget
    write_error_budget(out=args.out, steps=args.steps, seed=args.seed, progress=_progress(args))


def _cmd_bench(args):
    from .bench import run_named, write_bench
    if args.only:
        # Some benchmarks only: print their records; docs/perf.md keeps all of them.
        rows = run_named(args.only)
        if args.json:
            import json
            print(json.dumps(rows, indent=2))
        else:
            for r in rows:
                print(f"{r['name']}: {r['value']} {r['unit']} ({r['note']})")
        return
    _progress(args).status("running the benchmarks (minutes)")
    rows = write_bench(out=args.out, echo=not args.quiet and not args.json)
    if args.json:
        import json
        print(json.dumps(rows, indent=2))
    _summary(args, "bench", [args.out])


def _cmd_backtrack_cost(args):
    from .backtrack_cost import write_backtrack_table
    _summary(args, "backtrack-cost", [write_backtrack_table(out=args.out)])


def iter_commands(parser, prefix=()):
    """``(("config", "show"), subparser)`` for every command and subcommand of ``parser``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield prefix + (name,), sub
                yield from iter_commands(sub, prefix + (name,))


def add_quiet(parser):
    """``--quiet`` on every command of ``parser`` that has none."""
    for _, sub in iter_commands(parser):
        if "--quiet" not in {s for a in sub._actions for s in a.option_strings}:
            sub.add_argument("-q", "--quiet", action="store_true",
                             help="no progress and no summary (errors are still printed)")


def build_parser():
    from .design import add_config_parser, add_design_args
    from .output import specgen_version
    from .ssm_error_budget import MIN_STEPS

    parser = _Parser(
        prog="specgen",
        description="Generator of speculative-decoding accelerators for Mamba on AMD Versal "
                    "(SpecMamba + SPEQ).")
    parser.add_argument("--version", action="version", version=f"specgen {specgen_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("verilog", help="emit Verilog and a manifest for a design "
                                       "(a board preset, a design file, overrides)")
    add_design_args(p)
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--only", metavar="BLOCK", action="append",
                   help="emit only this block, by its class in snake case (ring_fifo, "
                        "linear_unit, ...; repeatable; a wrong name lists the design's blocks)")
    p.set_defaults(func=_cmd_verilog)

    p = sub.add_parser("golden", help="write deterministic golden vector sets")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--seed", type=int_at_least(0), default=0, help="random seed (default 0)")
    add_design_args(p, required=False)    # default: the sim preset (golden_vectors.DEFAULT_CONFIG)
    p.add_argument("--block", metavar="SET", action="append",
                   help="write only this golden set (repeatable; a wrong name lists them)")
    p.set_defaults(func=_cmd_golden)

    p = sub.add_parser("bsfp-study", help="regenerate the BSFP study on real weights")
    p.add_argument("--out", default="docs", metavar="DIR", help="output folder (default docs)")
    p.set_defaults(func=_cmd_bsfp_study)

    p = sub.add_parser("ssm-budget", help="regenerate the SSM numerics contract and error budget")
    p.add_argument("--out", default="docs", metavar="DIR", help="output folder (default docs)")
    p.add_argument("--steps", type=int_at_least(MIN_STEPS), default=1000,
                   help="decode steps (default 1000)")
    p.add_argument("--seed", type=int_at_least(0), default=0, help="random seed (default 0)")
    p.set_defaults(func=_cmd_ssm_budget)

    p = sub.add_parser("bench", help="run the benchmarks and rewrite docs/perf.md")
    p.add_argument("--out", default="docs/perf.md", metavar="FILE", help="report path")
    from .bench import NAMED as named_benchmarks
    p.add_argument("--only", metavar="NAME", action="append",
                   help="run only this benchmark and print its records, leaving the report "
                        f"alone ({', '.join(named_benchmarks)}; repeatable)")
    p.add_argument("--json", action="store_true", help="print the records as JSON")
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser("backtrack-cost",
                       help="regenerate the state-backtracking cost table (backtracking.md)")
    p.add_argument("--out", default="docs", metavar="DIR", help="output folder (default docs)")
    p.set_defaults(func=_cmd_backtrack_cost)

    from .perf_cli import add_parser as add_perf_parser
    add_perf_parser(sub)    # specgen perf: the performance model (gen/perf_cli.py)

    from .estimate import add_parser as add_estimate_parser
    add_estimate_parser(sub)    # specgen estimate: yosys proxy resources and depth (gen/estimate.py)

    from .dsp_numerics import add_parser as add_dsp_numerics_parser
    add_dsp_numerics_parser(sub)    # specgen dsp-numerics: contract v2 on real weights

    from .acceptance import add_parser as add_acceptance_parser
    add_acceptance_parser(sub)    # specgen acceptance: measured acceptance (gen/acceptance.py)

    add_config_parser(sub)    # specgen config show|schema: design files (gen/design.py)

    # Every command, whichever module added it: --quiet (gen/progress.py).
    add_quiet(parser)
    return parser


def main(argv=None):
    """Run ``specgen`` with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    command = "specgen"
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        command = f"specgen {args.command}"
        args.func(args)
        # Flush here, inside the handler: a reader that went away shows up now, not at exit.
        sys.stdout.flush()
    except CLIError as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        # Output folders are written atomically: an interrupted command leaves nothing behind.
        print(f"{command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader closed the pipe (`specgen perf | head -1`): point stdout at /dev/null so
        # the interpreter's own flush at exit does not raise again, and leave quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return 0


if __name__ == "__main__":
    sys.exit(main())
