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

from specgen.gen.cli.errors import CLIError

__all__ = ["main", "build_parser", "iter_commands", "EXIT_USAGE", "EXIT_INTERRUPTED",
           "EXIT_BROKEN_PIPE"]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line: no usage block."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


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
    """The ``specgen`` parser: every command, added by the ``cli`` module of its room.

    Each room's ``add_parser(sub)`` adds its commands to ``sub``; their handlers import the
    room's heavy modules only when they run, so ``specgen --help`` stays fast.
    """
    from specgen.gen.bench.cli import add_parser as add_bench
    from specgen.gen.cli.design import add_parser as add_config
    from specgen.gen.cli.docs import add_parser as add_docs
    from specgen.gen.cli.output import specgen_version
    from specgen.gen.emit.cli import add_parser as add_emit
    from specgen.gen.estimate.cli import add_parser as add_estimate
    from specgen.gen.perf.cli import add_parser as add_perf
    from specgen.gen.runtime.cli import add_parser as add_generate
    from specgen.gen.studies.cli import add_parser as add_studies
    from specgen.gen.sweep.cli import add_parser as add_sweep

    parser = _Parser(
        prog="specgen",
        description="Generator of speculative-decoding accelerators for Mamba on AMD Versal "
                    "(SpecMamba + SPEQ).")
    parser.add_argument("--version", action="version", version=f"specgen {specgen_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # The one list of rooms with commands, in the order of `specgen --help`.
    for add in (add_emit,        # verilog, golden (gen/emit/cli.py)
                add_studies,     # bsfp-study, ssm-budget, backtrack-cost, dsp-numerics, acceptance
                add_bench,       # bench (gen/bench/cli.py)
                add_perf,        # perf (gen/perf/cli.py)
                add_sweep,       # sweep (gen/sweep/cli.py)
                add_generate,    # generate (gen/runtime/cli.py)
                add_estimate,    # estimate (gen/estimate/cli.py)
                add_docs,        # docs (gen/cli/docs.py)
                add_config):     # config show|schema (gen/cli/design.py)
        add(sub)
    # Every command, whichever room added it: --quiet (gen/cli/progress.py).
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
