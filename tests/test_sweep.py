"""specgen sweep (gen/sweep): a small grid on a LocalCluster of 2 workers (threads), failed
points recorded, a re-run resuming, the Pareto front, the analytic fit."""

import csv

import pytest

pytest.importorskip("dask.distributed", reason="dask[distributed] not installed (dev extra)")

from specgen.golden.config import preset  # noqa: E402

from specgen.gen.cli.commands import main  # noqa: E402
from specgen.gen.sweep.point import evaluate_point, fit_estimate  # noqa: E402
from specgen.gen.sweep.run import pareto_front, read_results, run_sweep  # noqa: E402
from specgen.gen.sweep.spec import SpecError, load_spec, point_id  # noqa: E402

SPEC = """
[sweep]
mode = "grid"
[design]
board = "vhk158"
[step]
target = "2.7B"
draft = "370M"
accept = 4.91
[axes]
"linear.rows" = [32, 64]
tree = ["2,2,1,1", "chain3"]
"""
# chain3 commits at most 4 tokens per step: 4.91 cannot be, so those points fail.


def write(tmp_path, text=SPEC, name="s.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_grid_on_two_workers_records_failures_and_resumes(tmp_path):
    spec = load_spec(write(tmp_path))
    out = tmp_path / "res.csv"
    first = run_sweep(spec, out=out, workers=2, processes=False)
    assert first["evaluated"] == 4 and first["reused"] == 0 and first["failed"] == 2
    rows = read_results(out)
    assert len(rows) == 4 and {r["id"] for r in rows} == {point_id(p) for p in spec.points()}
    bad = [r for r in rows if r["status"] == "error"]
    assert {r["tree"] for r in bad} == {"chain3"}
    assert all("tokens_per_step" in r["error"] for r in bad)
    ok = [r for r in rows if r["status"] == "ok"]
    # Twice the rows of MAC slots, faster (the verify pass is compute-bound on this array).
    by_rows = {r["linear.rows"]: r for r in ok}
    assert by_rows["64"]["tokens_per_s"] > by_rows["32"]["tokens_per_s"]
    # A re-run reuses the ok rows and retries only the failed ones.
    again = run_sweep(spec, out=out, workers=2, processes=False)
    assert again["reused"] == 2 and again["evaluated"] == 2
    with out.open() as f:
        assert sum(1 for _ in csv.DictReader(f)) == 4


def test_cli_writes_results_and_the_pareto_plot(tmp_path, capsys):
    path = write(tmp_path, SPEC.replace('tree = ["2,2,1,1", "chain3"]', 'tree = ["2,2,1,1"]'))
    out = tmp_path / "r" / "grid.csv"
    assert main(["sweep", str(path), "--out", str(out), "--threads"]) == 0
    text = capsys.readouterr().out
    assert "2 points (2 evaluated, 0 reused, 0 failed)" in text
    assert (tmp_path / "r" / "grid-pareto.png").stat().st_size > 10_000
    # Nothing half-written is left beside the outputs.
    assert sorted(p.name for p in out.parent.iterdir()) == ["grid-pareto.png", "grid.csv"]
    assert main(["sweep", str(path), "--out", str(out), "--threads"]) == 0
    assert "(0 evaluated, 2 reused" in capsys.readouterr().out


def test_pareto_front_keeps_what_nothing_beats():
    rows = [{"id": "a", "status": "ok", "lut": 10, "tokens_per_s": 5.0, "fits": True},
            {"id": "b", "status": "ok", "lut": 20, "tokens_per_s": 4.0, "fits": True},
            {"id": "c", "status": "ok", "lut": 30, "tokens_per_s": 9.0, "fits": True},
            {"id": "d", "status": "ok", "lut": 5, "tokens_per_s": 99.0, "fits": False},
            {"id": "e", "status": "error", "lut": None, "tokens_per_s": None, "fits": None}]
    assert pareto_front(rows, "lut") == ["a", "c"]


def test_fit_estimate_counts_the_design():
    cfg = preset("vhk158")
    fit = fit_estimate(cfg)
    assert fit["dsp58"] >= cfg.linear.rows * cfg.linear.cols and fit["fits"] is True
    assert fit["lut_budget"] == cfg.board.lut
    row = evaluate_point({"linear.rows": 0}, step={"target": "2.7B", "draft": "370M",
                                                   "accept": 4.91}, board="vhk158")
    assert row["status"] == "error" and "linear.rows" in row["error"]


@pytest.mark.parametrize("text,message", [
    ("[sweep]\nmode = 'all'\n", "sweep.mode must be one of grid, random"),
    ("[axes]\nx = []\n", "axes.x must be a non-empty list"),
    ("[bogus]\n", "unknown section [bogus]"),
    ("[design]\nboard='vhk158'\n[step]\ntarget='2.7B'\ndraft='370M'\naccept=4.9\n", "[axes]"),
])
def test_bad_spec_is_one_line_exit_2(tmp_path, capsys, text, message):
    path = write(tmp_path, text)
    with pytest.raises(SpecError, match=None):
        load_spec(path)
    assert main(["sweep", str(path), "--out", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("flags,message", [
    (["--scheduler", "localhost:8786"], "--scheduler must be tcp://HOST:PORT"),
    (["--out", "x.json"], "unknown results format '.json'"),
    (["--plot", "p.svg"], "--plot 'p.svg' must end in .png"),
])
def test_bad_flags_are_one_line_exit_2(tmp_path, capsys, flags, message):
    assert main(["sweep", str(tmp_path / "missing.toml")]) == 2
    assert "missing.toml: no such file" in capsys.readouterr().err
    assert main(["sweep", str(write(tmp_path)), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_an_existing_scheduler_and_a_random_sample(tmp_path):
    from dask.distributed import LocalCluster
    spec = load_spec(write(tmp_path, SPEC.replace('mode = "grid"',
                                                  'mode = "random"\nsamples = 3\nseed = 5')))
    assert len(spec.points()) == 3 and spec.points() == spec.points()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster:
        got = run_sweep(spec, out=tmp_path / "r.csv", scheduler=cluster.scheduler_address)
    assert got["evaluated"] == 3 and len(read_results(tmp_path / "r.csv")) == 3


def test_parquet_results_round_trip(tmp_path):
    pytest.importorskip("pyarrow", reason="pyarrow not installed: Parquet is optional")
    spec = load_spec(write(tmp_path, SPEC.replace('tree = ["2,2,1,1", "chain3"]',
                                                  'tree = ["2,2,1,1"]')))
    out = tmp_path / "r.parquet"
    run_sweep(spec, out=out, workers=2, processes=False)
    assert {r["status"] for r in read_results(out)} == {"ok"}
    assert run_sweep(spec, out=out, workers=2, processes=False)["evaluated"] == 0
