"""The whole-step model's calibration: RTL generations traced, :func:`gen.perf.program.fit`
run on some, and the model set beside every program of the others.

``python -m specgen.gen.perf.program_calibration [--traces DIR]`` runs :data:`FIT_RUNS`
and :data:`CHECK_RUNS` (``specgen generate --engine rtl`` runs with
``RtlEngine(trace=True)``, SPEQ self-speculation: about 3 minutes each on this 2-core
machine once the two cores' Verilator builds are cached, about 5 minutes a build),
keeps each run's traced result in ``DIR`` (default ``build/program-traces``; a run whose
file is there is read, not run again), fits the costs on the first set and writes them
with the error of every run to :data:`COSTS_PATH` (the file's ``runs``), which
:func:`default_costs` reads. ``docs/perf.md``'s whole-step calibration quotes it.
"""

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from specgen.golden.config import preset
from specgen.golden.lm import lm_preset
from specgen.golden.tree import TreeShape

from . import program as pm
from .program import COSTS_PATH, predict, program_runs

__all__ = ["FIT_RUNS", "CHECK_RUNS", "STEP_HEADING", "design_of", "step_markdown", "main"]

#: The heading of ``docs/perf.md``'s section (:func:`step_markdown`).
STEP_HEADING = "## Whole-step calibration: the decoder core's programs"


#: ``(model preset, tree branching, memory read latency in memory cycles, tokens, seed)``.
#: ``tiny``'s out_proj has 32 inputs: its design takes ``linear.max_k = 32``.
FIT_RUNS = (("micro", (2, 1), 16, 6, 1), ("micro", (2, 1), 48, 6, 1), ("tiny", (2, 1), 16, 6, 1))
#: Runs the fit never sees: other latencies and tree shapes (a chain, a star).
CHECK_RUNS = (("tiny", (1, 1, 1, 1), 32, 6, 1), ("micro", (4,), 32, 6, 1))


def design_of(model):
    """The ``sim`` preset as the calibration builds it for ``model`` (a preset name)."""
    cfg = preset("sim")
    m = lm_preset(model)
    if m.d_inner > cfg.linear.max_k:
        cfg = cfg.replace(linear=dataclasses.replace(cfg.linear, max_k=m.d_inner))
    return cfg


def trace_name(run):
    """The file name of ``run``'s traced result."""
    model, tree, latency, tokens, seed = run
    return f"{model}-tree{'x'.join(map(str, tree))}-lat{latency}-n{tokens}-seed{seed}.json"


def _traced(run, folder):
    from specgen.gen.runtime.runtime import Runtime, RtlEngine, rtl_design
    from specgen.hw.decoder import DecoderCore
    from specgen.hw.hierarchy import silence
    model, tree, latency, tokens, seed = run
    cfg = design_of(model)
    path = folder / trace_name(run)
    if not path.exists():
        eng = RtlEngine(config=cfg, latency=latency, trace=True, draft_on="host")
        rt = Runtime(config=cfg, engine=eng)
        rt.load_model(model, seed=seed)
        rt.load_draft("speq")
        rt.generate([3, 1, 4], tokens, tree=tree, gamma=0.0)
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(eng.last_run))
        tmp.replace(path)
    result = json.loads(path.read_text())
    nodes = TreeShape(tuple(tree)).num_nodes
    if "addr_width" in result:
        # The core the run built: its descriptors' address fields are this wide.
        design = rtl_design(cfg, lm_preset(model))
        core = DecoderCore(config=design, model=lm_preset(model), max_nodes=nodes,
                           max_records=result["max_records"], addr_width=result["addr_width"])
    else:                                   # a run from before the results named it
        design, core = RtlEngine(config=cfg).core(lm_preset(model), nodes)
    silence(core)                           # only decodes programs, never elaborated
    return program_runs(result, core=core, design=design, latency=latency)


def _summary(run, runs, costs):
    model = predict(runs, costs=costs)
    measured = [c for _, _, c, _, _ in runs]
    errs = [(m - c) / c for m, c in zip(model, measured)]
    name, tree, latency, tokens, seed = run
    return {"model": name, "tree": list(tree), "latency": latency, "tokens": tokens,
            "seed": seed, "programs": len(runs), "measured_cycles": sum(measured),
            "model_cycles": round(sum(model), 1),
            "error": (sum(model) - sum(measured)) / sum(measured),
            "worst_program_error": max(errs, key=abs)}


def step_markdown(path=COSTS_PATH):
    """``docs/perf.md``'s section: the shipped calibration's runs (``path``), model beside
    RTL."""
    doc = json.loads(Path(path).read_text())
    lines = [
        STEP_HEADING, "",
        "`gen/perf/program.py` replays a `DecoderCore` program as its sequencer walks it (in "
        "order, each record once its barrier's engines are idle and its own engine takes "
        "it) with a fitted affine cost a descriptor: stream and SSM engines on their beats, "
        "vectors and read round trips; linear jobs on `max(steps · cols / (weight_ports · "
        "weight_beats), steps · n_tokens)` cycles of the unit each and their drain. The costs are fitted "
        "(least squares) to hand-over and idle events traced on Verilator in the `fit` "
        "runs; the `check` runs are generations the fit never saw (another latency, a chain "
        "or a star tree). Every run is `specgen generate --engine rtl` on a `sim`-derived "
        "core (SPEQ self-speculation drafted on the host, prompt 3 tokens, 6 generated, no "
        "memory stalls), each program from `START` to `done`: the prompt's steps and "
        "commits, then every step's tree and commit. With the draft's passes on the core "
        "too (`--draft-on core`, the default), the same costs predict those programs "
        "(`tests/test_rtl_generate.py` holds them to 5 % too). Every target step ends "
        "with the greedy acceptance engine's descriptor (`accept`). Produced by "
        f"`{doc['command']}` (`gen/perf/program_costs.json`); "
        "`specgen generate --engine rtl` prints the model beside the RTL, and "
        "`tests/test_rtl_generate.py` fails above 5 % on its own runs (latency 24, resets "
        "and aborts in mid step and mid commit).", "",
        "| role | model | tree | read latency (memory cycles) | programs | RTL cycles | model "
        "cycles | error | worst program |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in doc["runs"]:
        lines.append(
            f"| {r['role']} | {r['model']} | {','.join(map(str, r['tree']))} | {r['latency']} | "
            f"{r['programs']} | {r['measured_cycles']:,} | {r['model_cycles']:,.0f} | "
            f"{100 * r['error']:+.2f} % | {100 * r['worst_program_error']:+.2f} % |")
    lines += ["", "What it does not cover yet: random memory stalls (the fit runs have none), "
              "the linear engine's job queue (taken as unbounded: every record after a run of "
              "jobs waits for the engine in today's programs), and paper-scale programs (a "
              "`StepPlan` needs the model's weights; the board-scale system model is the "
              "section below).", ""]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m specgen.gen.perf.program_calibration",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=COSTS_PATH)
    ap.add_argument("--traces", type=Path, default=Path("build/program-traces"))
    args = ap.parse_args(argv)
    traced = {run: _traced(run, args.traces) for run in FIT_RUNS + CHECK_RUNS}
    costs = pm.fit([r for run in FIT_RUNS for r in traced[run]])
    doc = {"command": "python -m specgen.gen.perf.program_calibration",
           "costs": costs.to_dict(),
           "runs": [dict(_summary(run, traced[run], costs), role=role)
                    for role, runs in (("fit", FIT_RUNS), ("check", CHECK_RUNS))
                    for run in runs]}
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(args.out)
    for r in doc["runs"]:
        print(f"{r['role']:5} {r['model']:5} tree {r['tree']} latency {r['latency']}: "
              f"{r['measured_cycles']} cycles measured, {r['model_cycles']:.0f} model "
              f"({100 * r['error']:+.2f} %, worst program {100 * r['worst_program_error']:+.2f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
