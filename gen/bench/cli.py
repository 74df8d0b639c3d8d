"""``specgen bench``: its arguments and its command."""

__all__ = ["add_parser"]


def _cmd_bench(args):
    import json

    from specgen.gen.bench.suite import run_named, write_bench
    from specgen.gen.cli.errors import CLIError
    from specgen.gen.cli.progress import Progress, summarize
    if args.section:
        # One section of the report from the benchmark it needs; the rest stays.
        from specgen.gen.bench.suite import SECTIONS, write_section
        need = SECTIONS[args.section]
        if args.only and need and need not in args.only:
            raise CLIError(f"--section {args.section} needs --only {need}, not "
                           f"{', '.join(args.only)}")
        rows = run_named(args.only or ([need] if need else []))
        write_section(args.section, rows, out=args.out)
        if args.json:
            print(json.dumps(rows, indent=2))
        return
    if args.only:
        # Some benchmarks only: print their records; docs/perf.md keeps all of them.
        rows = run_named(args.only)
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            for r in rows:
                print(f"{r['name']}: {r['value']} {r['unit']} ({r['note']})")
        return
    Progress.from_args(args).status("running the benchmarks (minutes)")
    rows = write_bench(out=args.out, echo=not args.quiet and not args.json)
    if args.json:
        print(json.dumps(rows, indent=2))
    summarize(args, "bench", [args.out])


def add_parser(sub):
    """Add ``specgen bench`` to the CLI's subparsers."""
    from specgen.gen.bench.suite import NAMED, SECTIONS
    p = sub.add_parser("bench", help="run the benchmarks and rewrite docs/perf.md")
    p.add_argument("--out", default="docs/perf.md", metavar="FILE", help="report path")
    p.add_argument("--only", metavar="NAME", action="append",
                   help="run only this benchmark and print its records, leaving the report "
                        f"alone ({', '.join(NAMED)}; repeatable)")
    p.add_argument("--section", choices=tuple(SECTIONS),
                   help="run only the benchmark this section of the report needs and rewrite "
                        "that section of --out, leaving the rest")
    p.add_argument("--json", action="store_true", help="print the records as JSON")
    p.set_defaults(func=_cmd_bench)
