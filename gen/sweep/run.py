"""Run a sweep on Dask and keep its results: resumable, never half-written.

:func:`run_sweep` evaluates the points of a :class:`gen.sweep.spec.SweepSpec` on a
``dask.distributed`` cluster (a ``LocalCluster`` by default, or an existing scheduler
at ``tcp://HOST:PORT``) and rewrites the results file after every finished point,
each time through a temporary file and a rename (:func:`gen.cli.output.write_files`),
so a reader or a crash never sees half a file. A re-run reads the file back and
evaluates only the points that are missing or failed.

Results are CSV, or Parquet when the file ends in ``.parquet`` (needs ``pyarrow``).
"""

import csv
import io
from pathlib import Path

from specgen.gen.sweep.point import METRICS, evaluate_point
from specgen.gen.sweep.spec import point_id

__all__ = ["run_sweep", "read_results", "encode_results", "pareto_front", "pareto_figure",
           "FORMATS"]

FORMATS = {".csv": "CSV", ".parquet": "Parquet"}
_NUMERIC = ("tokens_per_s", "tokens_per_step", "memory_tokens_per_s", "compute_tokens_per_s",
            "limit_tokens_per_s", "limit_ratio", "seconds")
_INTEGER = ("dsp58", "dsp58_budget", "lut", "lut_budget")


def _columns(rows):
    axes = sorted({k for r in rows for k in r} - set(METRICS))
    return list(METRICS[:3]) + axes + list(METRICS[3:])


def _typed(row):
    out = {}
    for k, v in row.items():
        if v in ("", None):
            out[k] = None
        elif k in _NUMERIC:
            out[k] = float(v)
        elif k in _INTEGER:
            out[k] = int(float(v))
        elif k == "fits":
            out[k] = v if isinstance(v, bool) else str(v) == "True"
        else:
            out[k] = v
    return out


def encode_results(rows, path):
    """The bytes of ``rows`` in the format of ``path``'s suffix."""
    cols = _columns(rows)
    if Path(path).suffix.lower() == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq
        table = pa.Table.from_pylist([{c: (None if r.get(c) is None else str(r.get(c)))
                                       for c in cols} for r in rows])
        buf = io.BytesIO()
        pq.write_table(table, buf)
        return buf.getvalue()
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: "" if r.get(c) is None else r.get(c) for c in cols})
    return buf.getvalue().encode()


def read_results(path):
    """The rows of a results file written by :func:`run_sweep` (``[]`` if it does not exist)."""
    path = Path(path)
    if not path.exists():
        return []
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq
        rows = pq.read_table(path).to_pylist()
    else:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    return [_typed(r) for r in rows]


def run_sweep(spec, *, out, scheduler=None, workers=2, processes=True, progress=None):
    """Evaluate the points of ``spec`` that ``out`` does not hold yet, on Dask.

    Parameters
    ----------
    spec : gen.sweep.spec.SweepSpec
    out : path
        Results file (``.csv`` or ``.parquet``), read back to resume.
    scheduler : str, optional
        ``tcp://HOST:PORT`` of a running Dask scheduler; default a ``LocalCluster``.
    workers : int
        LocalCluster workers, one thread each.
    processes : bool
        LocalCluster workers as processes (default) or as threads of this process.
    progress : callable, optional
        Called with each finished row.

    Returns
    -------
    dict
        ``{"rows", "evaluated", "reused", "failed"}``.
    """
    from dask.distributed import Client, LocalCluster, as_completed

    from specgen.gen.cli.output import write_files

    out = Path(out)
    points = spec.points()
    wanted = {point_id(p): p for p in points}
    old = {r["id"]: r for r in read_results(out) if r.get("id") in wanted}
    keep = {i: r for i, r in old.items() if r.get("status") == "ok"}
    todo = [p for i, p in wanted.items() if i not in keep]
    rows = dict(keep)

    def flush():
        ordered = [rows[i] for i in wanted if i in rows]
        write_files(out.parent, {out.name: encode_results(ordered, out)})

    cluster = None
    if todo:
        if scheduler is None:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes,
                                   dashboard_address=None)
            client = Client(cluster)
        else:
            client = Client(scheduler, timeout="10s")
        try:
            futures = client.map(evaluate_point, todo, step=spec.step, board=spec.board,
                                 overrides=spec.overrides, pure=False)
            by_key = {f.key: p for f, p in zip(futures, todo)}
            for fut in as_completed(futures):
                try:
                    row = fut.result()
                except Exception as exc:    # a worker died: the point is recorded as failed
                    p = by_key[fut.key]
                    row = dict(p, **{k: None for k in METRICS})
                    row.update(id=point_id(p), status="error",
                               error=f"{type(exc).__name__}: {' '.join(str(exc).split())}")
                rows[row["id"]] = row
                flush()
                if progress is not None:
                    progress(row)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    else:
        flush()
    ordered = [rows[i] for i in wanted if i in rows]
    return {"rows": ordered, "evaluated": len(todo), "reused": len(keep),
            "failed": sum(r["status"] != "ok" for r in ordered)}


def pareto_front(rows, cost):
    """Ids of the ok rows that fit their board and that no other such row beats: more
    tokens/s for at most the cost."""
    ok = [r for r in rows if r.get("status") == "ok" and r.get(cost) is not None and r["fits"]]
    front = []
    for r in ok:
        dominated = any(o is not r and o[cost] <= r[cost] and o["tokens_per_s"] >= r["tokens_per_s"]
                        and (o[cost] < r[cost] or o["tokens_per_s"] > r["tokens_per_s"])
                        for o in ok)
        if not dominated:
            front.append(r["id"])
    return front


def pareto_figure(rows, *, title="specgen sweep"):
    """Tokens/s against LUT and against DSP58, one panel each, the Pareto front of the
    designs that fit joined; points that do not fit their board hollow."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullFormatter

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8))
    ok = [r for r in rows if r.get("status") == "ok"]
    boards = sorted({str(r.get("board", "")) for r in ok})
    colors = {b: f"C{i}" for i, b in enumerate(boards)}
    for ax, cost, label in zip(axes, ("lut", "dsp58"), ("LUT (analytic estimate)", "DSP58")):
        for r in ok:
            c = colors[str(r.get("board", ""))]
            ax.scatter([r[cost]], [r["tokens_per_s"]], s=30, edgecolors=c,
                       facecolors=c if r["fits"] else "white", zorder=3)
        front = sorted((r for r in ok if r["id"] in set(pareto_front(ok, cost))),
                       key=lambda r: r[cost])
        if front:
            ax.plot([r[cost] for r in front], [r["tokens_per_s"] for r in front], color="0.3",
                    lw=1, zorder=2)
        ax.set_xlabel(label)
        ax.set_ylabel("tokens/s (model)")
        ax.set_yscale("log")
        if ok and min(r[cost] for r in ok) > 0:
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, which="both", lw=0.3)
        ax.set_title(f"tokens/s against {label.split(' ')[0]}", fontsize=10)
    failed = len(rows) - len(ok)
    handles = [Line2D([], [], ls="", marker="o", color=colors[b], label=f"board {b}")
               for b in boards]
    handles += [Line2D([], [], color="0.3", lw=1, label="Pareto front (designs that fit)"),
                Line2D([], [], ls="", marker="o", markerfacecolor="white", color="0.3",
                       label="hollow: does not fit its board")]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle(f"{title}: {len(ok)} points modeled"
                 + (f", {failed} failed (in the results file)" if failed else ""), fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig
