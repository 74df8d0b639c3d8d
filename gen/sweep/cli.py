"""``specgen sweep SPEC.toml``: evaluate a grid or a random sample of designs on Dask.

``specgen sweep SPEC.toml [--out FILE.csv|FILE.parquet] [--plot FILE.png]
[--scheduler tcp://HOST:PORT] [--workers N] [--threads]``

Each point (:mod:`gen.sweep.spec`) gets its modeled tokens/s, its ceilings and the
analytic fit estimate (:mod:`gen.sweep.point`); results go to ``--out`` (default
``SPEC-results.csv`` beside the sweep file), rewritten atomically after every point,
and a re-run evaluates only what is missing or failed (:mod:`gen.sweep.run`). The Pareto
plot of tokens/s against LUT and DSP58 goes to ``--plot`` (default ``OUT-pareto.png``).
"""

import re
import sys
from pathlib import Path

from specgen.gen.cli.errors import CLIError

__all__ = ["add_parser", "run"]

_SCHEDULER = re.compile(r"tcp://[A-Za-z0-9_.\-\[\]:]+:\d{1,5}\Z")


def add_parser(sub):
    """Add ``specgen sweep`` to ``sub`` (an argparse subparsers object)."""
    from specgen.gen.cli.design import int_at_least

    p = sub.add_parser("sweep", help="evaluate a grid or random sample of designs on Dask: "
                                     "tokens/s, ceilings, fit; CSV/Parquet and a Pareto plot")
    p.add_argument("spec", metavar="SPEC.toml", help="the sweep file (gen/sweep/spec.py)")
    p.add_argument("--out", metavar="FILE",
                   help="results, .csv or .parquet (default: SPEC-results.csv beside SPEC)")
    p.add_argument("--plot", metavar="FILE.png",
                   help="Pareto plot (default: OUT-pareto.png beside --out)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="an existing Dask scheduler (default: a LocalCluster)")
    p.add_argument("--workers", type=int_at_least(1), default=2, metavar="N",
                   help="LocalCluster workers (default 2)")
    p.add_argument("--threads", action="store_true",
                   help="LocalCluster workers as threads of this process, not processes")
    p.set_defaults(func=run)
    return p


def run(args, *, out=None):
    """Run the sweep of parsed ``args``; print one line per point and a summary."""
    from specgen.gen.cli.output import check_out, write_files
    from specgen.gen.sweep.run import FORMATS, pareto_figure, run_sweep
    from specgen.gen.sweep.spec import SpecError, load_spec

    out = sys.stdout if out is None else out
    try:
        spec = load_spec(args.spec)
    except SpecError as exc:
        raise CLIError(str(exc)) from None
    spec_path = Path(args.spec)
    results = Path(args.out) if args.out else spec_path.with_name(spec_path.stem + "-results.csv")
    check_out(str(results), flag="--out", folder=False)
    suffix = results.suffix.lower()
    if suffix not in FORMATS:
        raise CLIError(f"--out {str(results)!r}: unknown results format {suffix or '(none)'!r}; "
                       f"allowed: {', '.join(FORMATS)}")
    if suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise CLIError(f"--out {str(results)!r}: Parquet needs pyarrow (pip install "
                           f"pyarrow); or give a .csv file") from None
    plot = Path(args.plot) if args.plot else results.with_name(results.stem + "-pareto.png")
    if plot.suffix.lower() != ".png":
        raise CLIError(f"--plot {str(plot)!r} must end in .png")
    if args.scheduler is not None and not _SCHEDULER.match(args.scheduler):
        raise CLIError(f"--scheduler must be tcp://HOST:PORT, not {args.scheduler!r}")
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        raise CLIError("specgen sweep needs dask.distributed (pip install "
                       "'dask[distributed]', the dev extra)") from None
    quiet = getattr(args, "quiet", False)

    def progress(row):
        if quiet:
            return
        axes = ", ".join(f"{k}={row[k]}" for k in sorted(spec.axes))
        what = (f"{row['tokens_per_s']:.1f} tok/s, {row['dsp58']} DSP58, {row['lut']:,} LUT"
                if row["status"] == "ok" else f"failed: {row['error']}")
        print(f"{row['id']}  {axes}: {what}", file=out, flush=True)

    try:
        summary = run_sweep(spec, out=results, scheduler=args.scheduler, workers=args.workers,
                            processes=not args.threads, progress=progress)
    except OSError as exc:
        raise CLIError(f"--scheduler {args.scheduler}: cannot reach the scheduler: "
                       f"{' '.join(str(exc).split())}") from None
    except TimeoutError as exc:
        raise CLIError(f"--scheduler {args.scheduler}: no answer: {exc}") from None
    fig = pareto_figure(summary["rows"], title=f"specgen sweep {spec_path.name}")
    import io

    import matplotlib.pyplot as plt
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    write_files(plot.parent, {plot.name: buf.getvalue()})
    if not quiet:
        print(f"{len(summary['rows'])} points ({summary['evaluated']} evaluated, "
              f"{summary['reused']} reused, {summary['failed']} failed) -> {results}, {plot}",
              file=out)
    return summary
