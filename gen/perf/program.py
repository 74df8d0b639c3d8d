"""Cycle model of a decoder-core program: the whole-step model the RTL engine is set beside.

A decode step on :class:`hw.decoder.DecoderCore` is one program of records
(:mod:`hw.step_program`); the sequencer (:class:`hw.sequencer.Sequencer`) hands them out in
order, each once the engines in its ``wait`` mask are idle and its own engine takes it.
This model replays that walk: a record's hand-over is the latest of

* the sequencer being free for it (:data:`RECORD_GAP` cycles after the last hand-over:
  the record is decoded into a register, then its barrier is a register too);
* its barrier: every waited engine idle for :data:`BARRIER_LAG` cycles (the engines'
  ``busy`` and the barrier are registered);
* its engine taking it: a stream or SSM engine takes a descriptor only while idle; the
  linear engine queues jobs (:func:`program_cycles` says why the model's queue has no
  bound).

and an engine's time for its descriptor is :class:`EngineCosts`' affine form of the
descriptor's work (beats, jobs' operations and drains, SSM sweeps) and of the memory's
read latency, whose constants are fitted to hand-over and idle events traced on the RTL
(:func:`fit`, from :func:`sim.decoder_core.run_program`'s traces). The fit is checked on
whole programs the fit never saw (``tests/test_program_model.py``,
``docs/perf.md``'s whole-step calibration).
"""

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

# The sequencer's own timing (hw.sequencer): the walk below follows its registers.
from specgen.golden.weight_planes import input_transfers, pack_factor
from specgen.hw.sequencer import BARRIER_LAG, OP_END, RECORD_GAP, record_layout

__all__ = ["ProgramRecord", "EngineCosts", "CoreShape", "decode_program", "program_cycles",
           "record_features", "job_terms", "kind", "fit", "program_runs", "predict",
           "default_costs", "COSTS_PATH", "RECORD_GAP", "BARRIER_LAG"]

#: The shipped costs, fitted on the RTL by :mod:`gen.perf.program_calibration`.
COSTS_PATH = Path(__file__).with_name("program_costs.json")



@dataclass(frozen=True)
class ProgramRecord:
    """One record: ``engine`` (a name, or ``None`` for ``END``), ``wait`` (names) and the
    descriptor's fields (``desc``)."""

    engine: str | None
    wait: tuple
    desc: dict = field(default_factory=dict, compare=False)


_FIELDS = {"linear": ("mode", "steps", "n_rows", "n_tokens"),
           "ssm": ("nodes", "out_en", "y_en")}


def decode_program(core, program, count):
    """The records of ``program`` (bytes, ``count`` records) of ``core`` (a
    :class:`hw.decoder.SequencedCore`)."""
    from amaranth.lib import data
    names = list(core.engines)
    rb = core.record_bits // 8
    lay = record_layout(core.record_bits)
    layouts = {n: e.desc.payload.shape() for n, e in core.engines.items()}
    out = []
    for i in range(count):
        word = int.from_bytes(program[i * rb:(i + 1) * rb], "little")
        rec = data.Const(lay, word)
        wait = tuple(n for e, n in enumerate(names) if int(rec.wait) >> e & 1)
        if int(rec.op) == OP_END:
            out.append(ProgramRecord(None, wait))
            continue
        name = names[int(rec.engine)]
        d = data.Const(layouts[name], int(rec.payload) & ((1 << layouts[name].size) - 1))
        desc = {f: int(getattr(d, f)) for f in _FIELDS.get(name, ("vectors", "elements"))}
        out.append(ProgramRecord(name, wait, desc))
    return out


def job_terms(desc, *, rows, cols, weight_ports, weight_beats=1, draft_plane=False):
    """A linear job's ``(period, drain)``: the cycles it holds the unit,
    ``max(steps · feed, steps · n_tokens)`` (each input's weights are the ``cols /
    weight_ports`` column beats of one weight port, ``q`` to a sub-beat in a job of at most
    ``rows·cols/q`` rows, ``weight_beats`` sub-beats a transfer: ``feed`` =
    ``golden.weight_planes.input_sub_beats(cols / weight_ports, q, weight_beats) /
    weight_beats`` transfers; and each input is applied to every token, one operation a
    cycle), and its result beats, ``ceil(n_rows / cols) · n_tokens``. With ``draft_plane``
    a draft job (``mode`` 1) reads the draft plane, four stripes a transfer: ``feed`` =
    ``draft_input_sub_beats(cols / weight_ports, q, weight_beats) / (4 · weight_beats)``."""
    steps, tok = desc["steps"], desc["n_tokens"]
    q = pack_factor(desc["n_rows"], rows=rows, cols=cols)
    feed = input_transfers(cols // weight_ports, q, weight_beats,
                           wide=bool(draft_plane and desc.get("mode")))
    period = max(steps * feed, steps * tok)
    return period, -(-desc["n_rows"] // cols) * tok


def kind(rec):
    """The cost table's key of a stream or SSM record: its engine's name, and for the SSM
    engine ``ssm`` (a tree pass: every node's ``y``) or ``ssm_commit`` (a replay that
    writes the last node's state and no ``y``), whose memory traffic differ."""
    if rec.engine == "ssm" and rec.desc["out_en"]:
        return "ssm_commit"
    return rec.engine


def record_features(rec, *, ssm_sweep, latency):
    """The work terms of a stream or SSM engine's time (the columns :class:`EngineCosts`
    weighs), ``latency`` the memory's read latency in fabric cycles: stream engines
    ``(1, vectors · elements, vectors, latency, vectors · latency)`` (beats, a vector's
    set-up, and read round trips once a descriptor and once a vector: the engines read
    a vector's chunks in turn); SSM passes the same with ``nodes · ssm_sweep`` and
    ``nodes``, ``ssm_sweep`` the unit's issue cycles a node
    (:attr:`gen.perf.blocks.SSMTiming.tiles`)."""
    d = rec.desc
    if rec.engine == "ssm":
        work, n = d["nodes"] * ssm_sweep, d["nodes"]
    else:
        work, n = d["vectors"] * d["elements"], d["vectors"]
    return (1.0, float(work), float(n), float(latency), float(n * latency))


@dataclass(frozen=True)
class EngineCosts:
    """The fitted constants of :func:`program_cycles` (fabric cycles).

    ``weights[kind]`` weigh :func:`record_features` (:func:`kind`). ``linear`` is
    ``(constant, per drain beat, per latency cycle)``: a job handed to an idle engine is
    written back
    ``constant + period + per_drain · drain + per_latency · latency`` cycles later
    (:func:`job_terms`), and a queued job ``period`` after the job before it, plus the
    difference of their drains' cost. ``start`` is ``(constant, per latency)`` from
    ``START`` to the first hand-over; ``end`` from the ``END`` record's barrier
    clearing to ``done``.
    """

    weights: dict
    linear: tuple
    start: tuple
    end: float

    def time(self, rec, *, ssm_sweep, latency):
        """A stream or SSM record's cycles from hand-over to its engine's idle."""
        f = record_features(rec, ssm_sweep=ssm_sweep, latency=latency)
        return float(np.dot(self.weights[kind(rec)], f))

    def to_dict(self):
        return {"weights": {k: list(v) for k, v in self.weights.items()},
                "linear": list(self.linear), "start": list(self.start), "end": self.end}

    @classmethod
    def from_dict(cls, d):
        return cls(weights={k: tuple(v) for k, v in d["weights"].items()},
                   linear=tuple(d["linear"]), start=tuple(d["start"]), end=float(d["end"]))


@dataclass(frozen=True, kw_only=True)
class CoreShape:
    """What the model needs of a core: the linear engine's ``cols``, weight ports and beats
    a transfer, the SSM unit's issue cycles a node, and the engines' names in the
    sequencer's order."""

    cols: int
    weight_ports: int
    ssm_sweep: int
    engines: tuple
    weight_beats: int = 1
    rows: int = 1
    draft_plane: bool = False

    @classmethod
    def of(cls, core, design):
        from .blocks import SSMTiming
        return cls(cols=design.linear.cols, rows=design.linear.rows,
                   draft_plane=core.engines["linear"].unit.draft_plane,
                   weight_ports=core.engines["linear"].weight_ports,
                   weight_beats=core.engines["linear"].unit.weight_beats,
                   ssm_sweep=SSMTiming(cfg=design.ssm.pass_config).tiles,
                   engines=tuple(core.engines))


def program_cycles(records, *, costs, shape, latency, trace=False):
    """Fabric cycles from ``START`` to ``done`` of ``records``; with ``trace``, also every
    record's ``(hand, done)`` cycles.

    ``latency`` is the memory's read latency in fabric cycles. The linear engine's job
    queue is taken as unbounded: every record after a run of jobs in a
    :mod:`hw.step_program` program waits for the linear engine anyway, so a job handed
    late (the engine holds a few) changes no later record's time unless its own
    write-back is late, which the job before it bounds."""
    idle = {}                                   # engine -> cycle it is idle from
    lin = None                                  # (done, drain) of the last linear job
    c0, c_drain, c_lat = costs.linear
    t_seq = costs.start[0] + costs.start[1] * latency - RECORD_GAP
    events = []
    for rec in records:
        t = t_seq + RECORD_GAP
        for e in rec.wait:
            t = max(t, idle.get(e, 0) + BARRIER_LAG)
        if rec.engine is None:
            total = t + costs.end
            events.append((t, total))
            return (total, events) if trace else total
        if rec.engine == "linear":
            period, drain = job_terms(rec.desc, rows=shape.rows, cols=shape.cols,
                                      weight_ports=shape.weight_ports,
                                      weight_beats=shape.weight_beats,
                                      draft_plane=shape.draft_plane)
            done = t + c0 + period + c_drain * drain + c_lat * latency
            if lin is not None and lin[0] > t:
                done = max(done, lin[0] + period + c_drain * (drain - lin[1]))
            lin = (done, drain)
        else:
            t = max(t, idle.get(rec.engine, 0))
            done = t + costs.time(rec, ssm_sweep=shape.ssm_sweep, latency=latency)
        idle[rec.engine] = done
        events.append((t, done))
        t_seq = t
    raise ValueError("program_cycles: the program has no END record")


def _lstsq(rows):
    """Least squares of ``[(features, target)]``. A column the data cannot tell from the
    columns before it (constant, or a multiple of them) is left at 0, so the first, most
    physical, terms carry the cost."""
    X = np.array([f for f, _ in rows], float)
    y = np.array([t for _, t in rows], float)
    keep = []
    for j in range(X.shape[1]):
        if np.linalg.matrix_rank(X[:, keep + [j]]) == len(keep) + 1:
            keep.append(j)
    coef, *_ = np.linalg.lstsq(X[:, keep], y, rcond=None)
    out = np.zeros(X.shape[1])
    out[keep] = coef
    return [float(c) for c in out]


def fit(runs):
    """Fit :class:`EngineCosts` to traced programs.

    ``runs``: ``(records, events, total, shape, latency)`` per traced program (records from
    :func:`decode_program`, events from :func:`sim.decoder_core.run_program`, ``total``
    its measured cycles, a :class:`CoreShape`, ``latency`` in fabric cycles). Least
    squares per engine on hand-over to idle (a linear job handed to an idle engine: to
    its write-back); the latency terms need runs at two latencies or more.
    """
    rows, lin, starts, ends = {}, [], [], []
    for records, events, total, shape, latency in runs:
        hands, idles, jobs = {}, {}, []
        for what, cycle, who in events:
            if what == "job":
                jobs.append(cycle)
            else:
                (hands if what == "hand" else idles).setdefault(who, []).append(cycle)
        names = []
        for rec in records:
            if rec.engine is not None and rec.engine not in names:
                names.append(rec.engine)
        starts.append(((1.0, latency), min(c for k, c, _ in events if k == "hand")))
        ends.append(total - max(c for k, c, _ in events if k == "idle") - BARRIER_LAG)
        for name in names:
            recs = [r for r in records if r.engine == name]
            e = shape.engines.index(name)
            h = hands.get(e, [])
            if len(h) != len(recs):
                raise ValueError(f"fit: engine {name} was handed {len(h)} descriptors, the "
                                 f"program has {len(recs)}")
            if name == "linear":
                for j, (rec, hc) in enumerate(zip(recs, h)):
                    if j and jobs[j - 1] > hc:
                        continue                     # queued behind the job before it
                    period, drain = job_terms(rec.desc, rows=shape.rows, cols=shape.cols,
                                              weight_ports=shape.weight_ports,
                                              weight_beats=shape.weight_beats,
                                              draft_plane=shape.draft_plane)
                    lin.append(((1.0, drain, latency), jobs[j] - hc - period))
                continue
            idl = idles.get(e, [])
            k = 0
            for rec, hc in zip(recs, h):
                while idl[k] <= hc:
                    k += 1
                f = record_features(rec, ssm_sweep=shape.ssm_sweep, latency=latency)
                rows.setdefault(kind(rec), []).append((f, idl[k] - hc))
    weights = {name: tuple(_lstsq(data)) for name, data in rows.items()}
    return EngineCosts(weights=weights, linear=tuple(_lstsq(lin)),
                       start=tuple(_lstsq(starts)), end=float(np.median(ends)))


@lru_cache(maxsize=1)
def default_costs():
    """The shipped :class:`EngineCosts` (:data:`COSTS_PATH`)."""
    return EngineCosts.from_dict(json.loads(COSTS_PATH.read_text())["costs"])


def program_runs(result, *, core, design, latency):
    """``(records, events, cycles, shape, latency)`` of every program of an RTL run's
    ``result`` (:attr:`gen.runtime.runtime.RtlEngine.last_run`) on ``core`` built from
    ``design``; ``latency`` in memory cycles, returned in fabric cycles. ``events`` is
    ``None`` for an untraced run."""
    lat = latency * design.board.clock_mhz / design.board.memory_clock_mhz
    shape = CoreShape.of(core, design)
    out = []
    for t in result["programs"]:
        recs = decode_program(core, bytes.fromhex(t["program"]), t["records"])
        ev = [tuple(e) for e in t["events"]] if "events" in t else None
        out.append((recs, ev, t["cycles"], shape, lat))
    return out


def predict(runs, *, costs=None):
    """The model's cycles of each :func:`program_runs` entry (default: the shipped
    costs)."""
    costs = costs or default_costs()
    missing = sorted({kind(r) for recs, *_ in runs for r in recs
                      if r.engine not in (None, "linear")} - set(costs.weights))
    if missing:
        raise ValueError(f"the whole-step model has no costs for {', '.join(missing)} "
                         f"({COSTS_PATH.name}): run python -m specgen.gen.perf.program_calibration")
    return [program_cycles(r, costs=costs, shape=s, latency=lat) for r, _, _, s, lat in runs]
