"""``specgen docs PAGE``: regenerate the generated pages of ``docs/`` that no other command writes.

Every generated page names, near its top, the one command that regenerates it: this one, or
the command of its study (``bsfp-study``, ``ssm-budget``, ``backtrack-cost``, ``dsp-numerics``,
``bench``) or a make target (``make models``, ``make acceptance``).
"""

from specgen.gen.cli.errors import CLIError

__all__ = ["PAGES", "add_parser", "write_page"]


def _regmap(out, progress):
    from specgen.gen.cli.output import write_files
    from specgen.gen.emit.regmap_doc import render_regmap_doc
    return write_files(out, {"regmap.md": render_regmap_doc().encode()})


def _regmap_core(out, progress):
    from specgen.gen.cli.output import write_files
    from specgen.gen.emit.regmap_doc import render_core_regmap_doc
    return write_files(out, {"regmap-core.md": render_core_regmap_doc().encode()})


def _memory_map(out, progress):
    from specgen.gen.cli.output import write_files
    from specgen.gen.emit.memory_map_doc import render_memory_map_doc
    return write_files(out, {"memory-map.md": render_memory_map_doc().encode()})


def _tree_memory(out, progress):
    from specgen.gen.studies.tree_memory import write_tree_memory
    try:
        return [write_tree_memory(out=out)]
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def _estimate(out, progress):
    from specgen.gen.estimate.report import write_estimate_doc
    path = out / "estimate.md"
    write_estimate_doc(out=path, progress=progress)
    return [path, path.with_suffix(".json")]


def _figures(out, progress):
    from specgen.gen.studies.figures import write_figures
    return write_figures(out=out)


#: ``page: (what it writes, writer(out_dir, progress) -> paths)``: the one list of pages.
PAGES = {
    "regmap": ("regmap.md: the register map of hw/regmap.py", _regmap),
    "regmap-core": ("regmap-core.md: the decoder core's registers (hw/decoder_top.py)",
                    _regmap_core),
    "memory-map": ("memory-map.md: the off-chip memory map of golden/memory_map.py for every "
                   "preset", _memory_map),
    "tree-memory": ("the generated table of tree.md (state memory per tree shape)", _tree_memory),
    "estimate": ("estimate.md and estimate.json: Yosys estimates of both boards (about an hour)",
                 _estimate),
    "figures": ("the pictures: block diagram, utilization charts, timing diagrams, performance "
                "plots (gen/studies/figures.py)", _figures),
}


def write_page(page, *, out="docs", progress=None):
    """Regenerate ``page`` (one of :data:`PAGES`) in the folder ``out``; return the paths."""
    from pathlib import Path
    if page not in PAGES:
        raise CLIError(f"unknown page {page!r}; allowed: {', '.join(PAGES)}")
    out = Path(out)
    if not out.is_dir():
        raise CLIError(f"--out {str(out)!r} is not an existing folder")
    return PAGES[page][1](out, progress)


def _cmd_docs(args):
    from specgen.gen.cli.progress import Progress, summarize
    progress = Progress.from_args(args)
    paths = []
    for page in args.page:
        paths += write_page(page, out=args.out, progress=progress.status)
    summarize(args, "docs", paths)


def add_parser(sub):
    """Add ``specgen docs PAGE... [--out DIR]`` to the CLI's subparsers."""
    p = sub.add_parser("docs", help="regenerate generated pages of docs/: "
                                    + ", ".join(PAGES))
    p.add_argument("page", nargs="+", choices=list(PAGES), metavar="PAGE",
                   help="; ".join(f"{k}: {v[0]}" for k, v in PAGES.items()))
    p.add_argument("--out", default="docs", metavar="DIR", help="docs folder (default docs)")
    p.set_defaults(func=_cmd_docs)
