# amaranth: UnusedElaboratable=no
"""The whole-step model (``gen.perf.program``) without simulation: it decodes the step
programs ``hw.step_program`` writes, its walk follows the sequencer's rules on
hand-made programs (expected cycles worked out by hand here), its fit recovers known
costs, and the shipped calibration's recorded runs hold the 5 % target.
``tests/test_rtl_generate.py`` (``make test-slow``) sets it beside the RTL."""

import json

import pytest
from specgen.gen.perf import program as pm
from specgen.gen.perf.program import COSTS_PATH, default_costs
from specgen.gen.perf.program_calibration import CHECK_RUNS, FIT_RUNS
from specgen.golden.decoder import HardwareLM
from specgen.golden.lm import MambaLM
from specgen.golden.tree import ROOT
from specgen.hw.step_program import StepPlan
from specgen.sim.decoder_core import make_core
from tests.test_decoder_core import DESIGN

TOLERANCE = 0.05


@pytest.fixture(scope="module")
def built():
    config, model, core = make_core(DESIGN)
    lm = HardwareLM(MambaLM.from_seed(model, seed=3), config=config)
    return config, model, core, lm


def test_decode_program_reads_back_the_step(built):
    config, model, core, lm = built
    parents, tokens = [ROOT, 0, 0, 1], [1, 2, 3, 4]
    plan = StepPlan(core, lm, nodes=len(parents))
    recs = pm.decode_program(core, *plan.program(parents, tokens))
    V = len(parents)
    assert [r.engine for r in recs[:V]] == ["copy"] * V
    assert recs[V].engine == "norm" and recs[V].wait == ("copy",)
    assert recs[V].desc == {"vectors": V, "elements": model.d_model // config.stage_lanes("norm")}
    jobs = [r for r in recs if r.engine == "linear"]
    assert all(r.desc["n_tokens"] == V for r in jobs)
    ssm = [r for r in recs if r.engine == "ssm"]
    assert len(ssm) == model.n_layer and all(r.desc["nodes"] == V for r in ssm)
    assert all(pm.kind(r) == "ssm" for r in ssm)
    assert recs[-2].engine == "accept" and recs[-2].wait == ("argmax",)
    assert recs[-2].desc == {"vectors": 1, "elements": V}
    assert recs[-1].engine is None and recs[-1].wait == ("accept",)
    commit = pm.decode_program(core, *plan.commit_program([0, 1, 3]))
    assert [pm.kind(r) for r in commit] == ["ssm_commit", "copy"] * model.n_layer + [None]
    assert commit[0].desc["nodes"] == 3


def test_the_system_models_vector_elements_are_the_programs(built):
    """``gen.perf.system.vector_elements`` (the board-scale model's count of the vector
    stages' elements) equals what the step program hands the stream engines, and
    ``commit_vector_elements`` what a commit hands the copy engine, on this core."""
    from specgen.gen.perf.system import commit_vector_elements, vector_beats, vector_elements
    config, model, core, lm = built
    stream = ("copy", "norm", "conv1d", "gate_norm", "residual", "argmax")
    for parents in ([ROOT], [ROOT, 0, 0, 1], [ROOT, 0, 1, 2, 3]):
        plan = StepPlan(core, lm, nodes=len(parents))
        recs = pm.decode_program(core, *plan.program(parents, list(range(len(parents)))))
        # A descriptor's elements are beats of its engine's lanes.
        lanes = {e: config.stage_lanes(e) for e in stream}
        assert lanes["norm"] == lanes["argmax"] == 2
        beats = sum(r.desc["vectors"] * r.desc["elements"] for r in recs if r.engine in stream)
        got = sum(r.desc["vectors"] * r.desc["elements"] * lanes[r.engine]
                  for r in recs if r.engine in stream)
        assert got == vector_elements(model, tokens=len(parents)), parents
        assert beats == vector_beats(model, tokens=len(parents), lanes=lanes.__getitem__)
        commit = pm.decode_program(core, *plan.commit_program([0, 1][:len(parents)]))
        got = sum(r.desc["vectors"] * r.desc["elements"] * lanes["copy"]
                  for r in commit if r.engine == "copy")
        assert got == commit_vector_elements(model)


def test_the_system_models_vector_beats_in_head_groups():
    """With two head groups the conv1d runs B and C once (group 0's) and the copy engine
    moves them into group 1's records: ``vector_beats(groups=2)`` is what the program
    hands the stream engines."""
    from specgen.gen.perf.system import vector_beats
    design = {**DESIGN, "ssm": {"nheads": 4, "headdim": 4, "d_state": 8, "head_groups": 2},
              "model": {**DESIGN["model"], "headdim": 4}}
    config, model, core = make_core(design)
    lm = HardwareLM(MambaLM.from_seed(model, seed=3), config=config)
    stream = ("copy", "norm", "conv1d", "gate_norm", "residual", "argmax")
    lanes = {e: config.stage_lanes(e) for e in stream}
    for parents in ([ROOT], [ROOT, 0, 0, 1]):
        plan = StepPlan(core, lm, nodes=len(parents))
        recs = pm.decode_program(core, *plan.program(parents, list(range(len(parents)))))
        beats = sum(r.desc["vectors"] * r.desc["elements"] for r in recs if r.engine in stream)
        assert beats == vector_beats(model, tokens=len(parents), lanes=lanes.__getitem__,
                                     groups=2), parents


SHAPE = pm.CoreShape(rows=2, cols=4, weight_ports=1, ssm_sweep=10,
                     engines=("linear", "ssm", "norm", "copy"))
# A norm takes 100 + beats cycles, a copy 20 + beats, an SSM pass 50 + 10 a node; a job
# 30 + period + 2 a drain beat; START to the first hand-over 7; done 4 after.
COSTS = pm.EngineCosts(
    weights={"norm": (100.0, 1.0, 0, 0, 0), "copy": (20.0, 1.0, 0, 0, 0),
             "ssm": (50.0, 0.0, 10.0, 0, 0), "ssm_commit": (0, 0, 0, 0, 0)},
    linear=(30.0, 2.0, 0.0), start=(7.0, 0.0), end=4.0)


def _norm(wait=(), vectors=1, elements=8):
    return pm.ProgramRecord("norm", wait, {"vectors": vectors, "elements": elements})


def _job(steps, tokens, rows=8, wait=()):
    return pm.ProgramRecord("linear", wait, {"mode": 0, "steps": steps, "n_rows": rows,
                                             "n_tokens": tokens})


def test_walk_barriers_and_engine_occupancy():
    END = pm.ProgramRecord(None, ("norm", "copy"))
    recs = [_norm(), pm.ProgramRecord("copy", (), {"vectors": 1, "elements": 5}),
            _norm(elements=2), END]
    total, ev = pm.program_cycles(recs, costs=COSTS, shape=SHAPE, latency=0, trace=True)
    # norm at 7, done 7 + 108; the copy 3 cycles later (no wait), done 10 + 25; the
    # second norm waits for the first to be idle (no barrier: the port is busy), done
    # 115 + 102; END: its barrier (BARRIER_LAG after the last idle), then 4.
    assert ev == [(7, 115), (10, 35), (115, 217), (219, 223)]
    assert total == 223
    # With a barrier on the copy, the second norm waits BARRIER_LAG after the norm's idle.
    recs[2] = _norm(wait=("norm",), elements=2)
    _, ev = pm.program_cycles(recs, costs=COSTS, shape=SHAPE, latency=0, trace=True)
    assert ev[2] == (115 + pm.BARRIER_LAG, 115 + pm.BARRIER_LAG + 102)


def test_walk_chains_queued_jobs():
    # Jobs of 8 inputs: 1 token is weight-bound (8 · cols = 32 cycles), 5 tokens
    # operation-bound (40); 8 rows are 2 drain beats a token.
    kw = dict(rows=2, cols=4)
    assert pm.job_terms({"steps": 8, "n_tokens": 1, "n_rows": 8}, **kw, weight_ports=1) == (32, 2)
    assert pm.job_terms({"steps": 8, "n_tokens": 5, "n_rows": 8}, **kw, weight_ports=1) == (40, 10)
    assert pm.job_terms({"steps": 8, "n_tokens": 1, "n_rows": 8}, **kw, weight_ports=2) == (16, 2)
    # Two slots a column: a job of at most 4 rows is fed two columns a sub-beat (16 cycles),
    # two sub-beats a transfer one input a cycle (8); a job of 5 rows is not packed.
    kw = dict(rows=2, cols=4, weight_ports=1)
    assert pm.job_terms({"steps": 8, "n_tokens": 1, "n_rows": 4}, **kw) == (16, 1)
    assert pm.job_terms({"steps": 8, "n_tokens": 1, "n_rows": 4}, **kw, weight_beats=2) == (8, 1)
    assert pm.job_terms({"steps": 8, "n_tokens": 1, "n_rows": 5}, **kw, weight_beats=2) == (16, 2)
    recs = [_job(8, 5), _job(8, 5), _job(8, 5, rows=4), _norm(wait=("linear",)),
            pm.ProgramRecord(None, ("norm",))]
    total, ev = pm.program_cycles(recs, costs=COSTS, shape=SHAPE, latency=0, trace=True)
    first = 7 + 30 + 40 + 2 * 10
    assert ev[0] == (7, first)
    assert ev[1] == (10, first + 40)
    # 4 rows: one drain beat a token, 5 fewer beats than the job before: 10 cycles sooner
    assert ev[2] == (13, first + 80 - 10)
    assert ev[3][0] == first + 70 + pm.BARRIER_LAG
    assert total == ev[3][1] + pm.BARRIER_LAG + 4


def test_walk_needs_an_end():
    with pytest.raises(ValueError, match="no END record"):
        pm.program_cycles([_norm()], costs=COSTS, shape=SHAPE, latency=0)


def _events(recs, ev):
    """The RTL's event list for the model's own walk."""
    out, jobs = [], 0
    idx = {n: i for i, n in enumerate(SHAPE.engines)}
    for r, (h, d) in zip(recs, ev):
        if r.engine is None:
            continue
        out.append(("hand", h, idx[r.engine]))
        if r.engine == "linear":
            out.append(("job", d, jobs))
            jobs += 1
        out.append(("idle", d, idx[r.engine]))
    return sorted(out, key=lambda e: (e[1], e[0] != "hand"))


def test_fit_recovers_the_costs_it_is_given():
    import random
    rng = random.Random(4)
    truth = pm.EngineCosts(
        weights={"norm": (60.0, 1.3, 10.0, 0.8, 0.1), "copy": (25.0, 1.6, 2.0, 0.6, 0.4),
                 "ssm": (100.0, 2.0, 1.0, 0.6, 0.1), "ssm_commit": (0, 0, 0, 0, 0)},
        linear=(29.0, 6.0, 1.5), start=(14.0, 1.0), end=4.0)
    runs = []
    for _ in range(40):
        lat = rng.choice([10.0, 20.0, 32.0])
        v = rng.randint(1, 6)
        recs = [pm.ProgramRecord("copy", (), {"vectors": v, "elements": rng.randint(1, 40)}),
                _norm(("copy",), v, rng.randint(1, 40)),
                _job(rng.randint(1, 16), v, wait=("norm",)),
                pm.ProgramRecord("ssm", ("linear",), {"nodes": v, "out_en": 0, "y_en": 1}),
                pm.ProgramRecord(None, ("ssm",))]
        total, ev = pm.program_cycles(recs, costs=truth, shape=SHAPE, latency=lat, trace=True)
        runs.append((recs, _events(recs, ev), total, SHAPE, lat))
    got = pm.fit(runs)
    assert got.linear == pytest.approx(truth.linear, abs=1e-6)
    assert got.start == pytest.approx(truth.start, abs=1e-6)
    assert got.end == truth.end
    for k in ("norm", "copy"):
        assert got.weights[k] == pytest.approx(truth.weights[k], abs=1e-6)
    # SSM: nodes · sweep and nodes are one column here (one sweep): the fit keeps the
    # first and predicts the same times.
    for recs, _, total, shape, lat in runs:
        assert pm.program_cycles(recs, costs=got, shape=shape, latency=lat) == pytest.approx(total)


def test_fit_refuses_a_trace_that_does_not_match_its_program():
    recs = [_norm(), pm.ProgramRecord(None, ("norm",))]
    with pytest.raises(ValueError, match="engine norm was handed 0 descriptors, the program "
                                         "has 1"):
        pm.fit([(recs, [("hand", 3, 3), ("idle", 5, 3)], 10, SHAPE, 0.0)])


def test_shipped_calibration_holds_the_target():
    doc = json.loads(COSTS_PATH.read_text())
    runs = doc["runs"]
    assert [r["role"] for r in runs] == ["fit"] * len(FIT_RUNS) + ["check"] * len(CHECK_RUNS)
    assert len({(r["model"], tuple(r["tree"]), r["latency"]) for r in runs}) == len(runs)
    for r in runs:
        assert abs(r["error"]) <= TOLERANCE, r
    costs = default_costs()
    assert set(costs.weights) >= {"copy", "norm", "gate_norm", "conv1d", "residual", "argmax",
                                  "ssm", "ssm_commit"}


def test_predict_names_an_engine_the_costs_do_not_cover():
    recs = [pm.ProgramRecord("accept", (), {"vectors": 1, "elements": 5}),
            pm.ProgramRecord(None, ("accept",))]
    with pytest.raises(ValueError, match=r"the whole-step model has no costs for accept "
                                         r"\(program_costs.json\): run python -m "
                                         r"specgen.gen.perf.program_calibration"):
        pm.predict([(recs, None, 0, SHAPE, 0)], costs=COSTS)


def test_a_commits_window_copies_run_beside_its_replays(built):
    """A commit's layers are an SSM replay and a window copy with no barrier between them
    (``StepPlan.commit_parts``): the walk (the sequencer's rules, costs fitted on the RTL)
    runs each copy beside its layer's replay, so the commit takes about the larger of the
    two a layer, not their sum. ``gen.perf.system.commit_seconds`` prices it so at paper
    scale."""
    from specgen.gen.perf.system import commit_seconds
    config, model, core, lm = built
    plan = StepPlan(core, lm, nodes=4)
    recs = pm.decode_program(core, *plan.commit_program([0, 1, 3]))
    shape, costs = pm.CoreShape.of(core, config), default_costs()
    total, events = pm.program_cycles(recs, costs=costs, shape=shape, latency=16, trace=True)
    spans = [(r.engine, done - hand) for r, (hand, done) in zip(recs, events) if r.engine]
    ssm = [d for e, d in spans if e == "ssm"]
    copy = [d for e, d in spans if e == "copy"]
    assert len(ssm) == len(copy) == model.n_layer
    # Each copy's hand-over comes before its layer's replay is done.
    done = {i: events[i][1] for i, r in enumerate(recs) if r.engine == "ssm"}
    for i, r in enumerate(recs):
        if r.engine == "copy":
            assert events[i][0] < done[i - 1]
    serial, beside = sum(ssm) + sum(copy), sum(max(s, c) for s, c in zip(ssm, copy))
    overhead = costs.start[0] + costs.start[1] * 16 + costs.end + pm.RECORD_GAP * len(recs)
    assert total <= beside + overhead < serial + overhead
    assert commit_seconds(sum(ssm), sum(copy), groups=1) == max(sum(ssm), sum(copy))
    # Two groups: the first group's replay alone, the second's beside the copy.
    assert commit_seconds(10.0, 4.0, groups=2) == 5.0 + 5.0
    assert commit_seconds(10.0, 8.0, groups=2) == 5.0 + 8.0
