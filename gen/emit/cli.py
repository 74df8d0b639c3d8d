"""``specgen verilog`` and ``specgen golden``: their arguments and their commands."""

from specgen.gen.cli.design import add_design_args, int_at_least

__all__ = ["add_parser"]


def _cmd_verilog(args):
    from specgen.gen.cli.design import resolve_config
    from specgen.gen.cli.progress import Progress
    from specgen.gen.emit.verilog import write_verilog
    write_verilog(config=resolve_config(args), out=args.out, progress=Progress.from_args(args),
                  only=args.only, top=args.top, model=args.model)


def _cmd_golden(args):
    from specgen.gen.cli.design import resolve_config
    from specgen.gen.cli.progress import Progress
    from specgen.gen.emit.golden_vectors import DEFAULT_CONFIG, write_golden
    write_golden(out=args.out, seed=args.seed, config=resolve_config(args) or DEFAULT_CONFIG,
                 progress=Progress.from_args(args), only=args.block)


def add_parser(sub):
    """Add ``specgen verilog`` and ``specgen golden`` to the CLI's subparsers."""
    p = sub.add_parser("verilog", help="emit Verilog and a manifest for a design "
                                       "(a board preset, a design file, overrides)")
    add_design_args(p)
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--only", metavar="BLOCK", action="append",
                   help="emit only this block, by its class in snake case (ring_fifo, "
                        "linear_unit, ...; repeatable; a wrong name lists the design's blocks)")
    p.add_argument("--top", default="accelerator", metavar="TOP",
                   help="accelerator (default: the linear and SSM engines the host steps) or "
                        "decoder (the decoder core behind its registers: every stage of a "
                        "decode step from programs in memory, one file)")
    p.add_argument("--model", default="2.7B", metavar="LM",
                   help="with --top decoder: the LM the core is built for (a Mamba2 size, or "
                        "micro, tiny, small; default 2.7B)")
    p.set_defaults(func=_cmd_verilog)

    p = sub.add_parser("golden", help="write deterministic golden vector sets")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--seed", type=int_at_least(0), default=0, help="random seed (default 0)")
    add_design_args(p, required=False)    # default: the sim preset (golden_vectors.DEFAULT_CONFIG)
    p.add_argument("--block", metavar="SET", action="append",
                   help="write only this golden set (repeatable; a wrong name lists them)")
    p.set_defaults(func=_cmd_golden)
