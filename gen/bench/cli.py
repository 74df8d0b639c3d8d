"""``specgen bench``: its arguments and its command."""

__all__ = ["add_parser"]


def _cmd_bench(args):
    from gen.bench.suite import write_bench
    from gen.cli.progress import Progress, summarize
    Progress.from_args(args).status("running the benchmarks (minutes)")
    write_bench(out=args.out, echo=not args.quiet)
    summarize(args, "bench", [args.out])


def add_parser(sub):
    """Add ``specgen bench`` to the CLI's subparsers."""
    p = sub.add_parser("bench", help="run the benchmarks and rewrite docs/perf.md")
    p.add_argument("--out", default="docs/perf.md", metavar="FILE", help="report path")
    p.set_defaults(func=_cmd_bench)
