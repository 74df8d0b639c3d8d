"""Block cycle models, calibrated against the RTL by :mod:`gen.perf.calibrate`
(``docs/perf-model.md``):

* :func:`linear_schedule`: cycles of a stream of ``LinearUnit`` jobs, exact
  recurrence over the PE pipeline, its one-tile result buffer and the stall it
  causes (``hw/linear_unit.py``); :func:`dsp_linear_schedule` the same for
  ``DSPLinearUnit`` (``hw/dsp_linear_unit.py``);
* :class:`SSMTiming` and :func:`ssm_stream`: cycles of a token stream through
  ``SSMUnit`` (two input banks, per-head prologue, one tile per cycle sweep,
  read-after-write gap), ``hw/ssm_unit.py`` and ``docs/blocks-ssm.md``;
* :func:`tree_verifier_cycles`: one tree through ``TreeVerifier`` (load,
  ``passes`` schedule passes, match, path walk and send);
* :func:`ring_fifo_cycles`: a burst through ``RingFIFO``.
"""

from dataclasses import dataclass
from functools import lru_cache

from specgen.golden.config import LinearConfig, PipelineConfig
from specgen.golden.mamba2 import SSMConfig
from specgen.golden.tree import fifo_schedule, schedule_beats
from specgen.golden.validate import check_choice, check_int
from specgen.golden.weight_planes import input_transfers, pack_factor, tile_pieces

__all__ = ["pe_latency", "LinearJob", "LinearSchedule", "linear_schedule", "matmul_jobs",
           "dsp_linear_latency", "DSP_DRAIN_TO_Y", "dsp_linear_schedule", "dsp_matmul_jobs", "SSMTiming",
           "SSMStream", "ssm_stream", "tree_verifier_cycles", "ring_fifo_cycles"]

# The RTL's latency properties are read from components built for the purpose, never
# elaborated. Building one (its signature's signals) costs milliseconds, and the step
# model asks tens of thousands of times (profiled: half of ``make bench``'s model
# section), so each configuration's is built once (the configs are frozen).
@lru_cache(maxsize=256)
def pe_latency(config):
    """:attr:`hw.linear_unit.LinearUnit.pe_latency` of the ``LinearUnit`` built from a
    ``golden.config.Config`` (its PEs' pipeline, with ``pipeline.pe_round_stages``)."""
    from specgen.hw.hierarchy import template
    from specgen.hw.linear_unit import LinearUnit
    return template(LinearUnit.from_config(config)).pe_latency


# =====================================================================================
# Block cycle models
# =====================================================================================

@dataclass(frozen=True, kw_only=True)
class LinearJob:
    """One ``LinearUnit`` command: an output tile of ``n_rows`` rows for ``n_tokens`` tokens.

    Parameters
    ----------
    mode : int
        0 full (FP16 weights), 1 quantized (BSFP nibbles, ``quant_lanes`` per beat).
    steps : int
        Weight/activation beats of the job (≥ 1).
    n_rows : int
        Valid output rows (≥ 1): result beats on ``y``.
    n_tokens : int
        Valid token lanes (≥ 1); does not change the timing.
    """

    mode: int = 0
    steps: int
    n_rows: int
    n_tokens: int = 1

    def __post_init__(self):
        check_int("LinearJob", "mode", self.mode, min=0, max=1)
        check_int("LinearJob", "steps", self.steps, min=1)
        check_int("LinearJob", "n_rows", self.n_rows, min=1)
        check_int("LinearJob", "n_tokens", self.n_tokens, min=1)


@dataclass(frozen=True)
class LinearSchedule:
    """Cycle numbers of a job stream; cycle 0 is the one in which the first command is taken.

    Attributes
    ----------
    capture : tuple of int
        Cycle in which each job's tile enters the result buffer; its rows leave on
        ``y`` in the ``n_rows`` cycles after it (empty for streams of more than
        4,096 jobs, which are evaluated in closed form).
    end : int
        Cycle of the last ``y`` transfer.
    stall_cycles : int
        Cycles the array held because a finished tile found the buffer still draining.
    beats : int
        Weight beats of the stream.
    """

    capture: tuple
    end: int
    stall_cycles: int
    beats: int

    @property
    def cycles(self):
        """Cycles from the first command to the last ``y`` transfer, both included."""
        return self.end + 1


def linear_schedule(jobs, *, pe_latency):
    """Cycle model of ``LinearUnit`` for back-to-back jobs, no idle source, ``y`` always ready.

    The array takes one beat per cycle and the next command in the cycle of the
    last beat, so beats run on one "enabled" time axis τ (the PE pipeline moves
    only while every PE is ready). Job ``j``'s last beat is at τ = Σ steps; its
    results reach the PE outputs ``pe_latency`` enabled cycles later and are
    captured as soon as the one-tile buffer is free, ``n_rows + 1`` cycles after
    the previous capture (``n_rows`` row beats, then the cycle in which
    ``buf_valid`` drops). A late capture freezes the whole PE pipeline
    (``i.ready = ~o.valid | o.ready``), which delays every later event by as
    many cycles.

    Parameters
    ----------
    jobs : sequence
        :class:`LinearJob`, ``(count, LinearJob)`` runs (:func:`matmul_jobs`) or
        ``(steps, n_rows)`` pairs. Runs of identical jobs are evaluated in closed form.
    pe_latency : int
        :attr:`hw.linear_unit.LinearUnit.pe_latency` of the unit (:func:`pe_latency`).

    Returns
    -------
    LinearSchedule
    """
    check_int("linear_schedule", "pe_latency", pe_latency, min=1)
    runs = _runs(jobs)
    if not runs:
        raise ValueError("linear_schedule.jobs must hold at least one job, not an empty list")
    detailed = sum(n for n, _ in runs) <= 4096
    tau = 0            # enabled cycles of beats issued so far
    delay = 0          # stall cycles inserted so far
    prev_capture, prev_rows = None, 0
    captures = []
    for count, job in runs:
        s, r = job.steps, job.n_rows
        # the run's first job, exactly
        tau += s
        ready = tau + pe_latency + delay
        free = ready if prev_capture is None else prev_capture + prev_rows + 1
        cap = max(ready, free)
        delay += cap - ready
        captures.append(cap)
        prev_capture, prev_rows = cap, r
        if count > 1:
            # The rest of the run: with steps >= n_rows + 1 no job waits; otherwise each
            # waits n_rows + 1 - steps cycles (the result buffer sets the pace).
            n = count - 1
            period = max(s, r + 1)
            tau += n * s
            delay += n * (period - s)
            if detailed:
                captures += [prev_capture + period * (i + 1) for i in range(n)]
            prev_capture += n * period
    return LinearSchedule(tuple(captures) if detailed else (), prev_capture + prev_rows, delay, tau)


def _runs(jobs):
    out = []
    for item in jobs:
        if isinstance(item, LinearJob):
            count, job = 1, item
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], LinearJob):
            count, job = check_int("linear_schedule", "run count", item[0], min=1), item[1]
        elif isinstance(item, tuple) and len(item) == 2:
            count, job = 1, LinearJob(steps=item[0], n_rows=item[1])
        else:
            raise TypeError(f"linear_schedule.jobs items must be LinearJob, (count, LinearJob) "
                            f"or (steps, n_rows), not {item!r}")
        if out and out[-1][1] == job:
            out[-1] = (out[-1][0] + count, job)
        else:
            out.append((count, job))
    return out


def matmul_jobs(*, linear, out_features, in_features, tokens, mode):
    """The job runs of ``y = W·x`` (``W``: ``out_features × in_features``) for ``tokens`` tokens.

    The unit takes one output tile of ``linear.rows`` rows per job and at most
    ``linear.cols`` tokens; a weight tile is read once per group of ``cols``
    tokens. In quantized mode one beat carries ``quant_lanes`` inputs.

    Returns
    -------
    list of (count, LinearJob)

    Raises
    ------
    ValueError
        If a dot product needs more than ``linear.max_k`` beats (the unit has no
        partial-sum path yet).
    """
    if not isinstance(linear, LinearConfig):
        raise TypeError(f"matmul_jobs.linear must be a LinearConfig, not {linear!r}")
    check_int("matmul_jobs", "out_features", out_features, min=1)
    check_int("matmul_jobs", "in_features", in_features, min=1)
    check_int("matmul_jobs", "tokens", tokens, min=1)
    check_int("matmul_jobs", "mode", mode, min=0, max=1)
    q = linear.quant_lanes if mode else 1
    steps = -(-in_features // q)
    if steps > linear.max_k:
        raise ValueError(f"matmul_jobs.in_features {in_features} needs {steps} beats; allowed: "
                         f"at most LinearConfig.max_k = {linear.max_k} beats")
    groups = -(-tokens // linear.cols)
    full, rest = divmod(out_features, linear.rows)
    runs = []
    for g in range(groups):
        n_tok = min(linear.cols, tokens - g * linear.cols)
        if full:
            runs.append((full, LinearJob(mode=mode, steps=steps, n_rows=linear.rows, n_tokens=n_tok)))
        if rest:
            runs.append((1, LinearJob(mode=mode, steps=steps, n_rows=rest, n_tokens=n_tok)))
    return runs


@lru_cache(maxsize=1)
def dsp_linear_latency():
    """:attr:`hw.dsp_linear_unit.DSPLinearUnit.latency`: cycles from a job's last
    operation to its first result beat."""
    from specgen.hw.dsp_linear_unit import DSPLinearUnit
    from specgen.hw.hierarchy import template
    return template(DSPLinearUnit(rows=1, cols=1, max_tokens=1, max_k=1)).latency


#: Cycles from a drain beat's request to its ``y.valid`` (``DSPLinearUnit``: the
#: columns' read and mux, the result FIFO).
DSP_DRAIN_TO_Y = 5


def dsp_linear_schedule(jobs, *, linear, latency=None, columns=1, beats=1):
    """Cycle model of ``DSPLinearUnit`` for back-to-back jobs: sources always valid,
    ``y`` always ready.

    A job issues ``steps · n_tokens`` operations, one per cycle, from the cycle
    after its command is taken, and takes at least its feed cycles per input: the
    transfers one weight port delivers for an input, one a cycle, so that an input's
    first operation waits for all of its columns' weights. A port's ``columns`` column
    beats of an input come ``beats`` sub-beats a transfer, each sub-beat holding ``q``
    of them in a job whose tile fills at most ``1/q`` of the slots
    (``golden.weight_planes.pack_factor``): ``input_sub_beats(columns, q, beats) / beats``
    transfers (``golden.weight_planes.input_sub_beats``). The next command is taken in the cycle of the
    last operation when one of the two partial-sum banks is free (the drain of
    the job before the previous one has issued its last beat). A job's drain of
    ``ceil(n_rows / cols) · n_tokens`` beats starts 6 cycles after its last
    operation, once the previous drain is done.

    Parameters
    ----------
    jobs : list
        :class:`LinearJob` or ``(count, LinearJob)`` runs (:func:`dsp_matmul_jobs`).
    linear : golden.config.LinearConfig
        The array (``contract`` ``"dspfp32"``).
    latency : int, optional
        :func:`dsp_linear_latency` by default.
    columns : int
        Column beats of one weight port per input (``cols / weight_ports``; 1: a port per
        column).
    beats : int
        Sub-beats a transfer of a weight port (``linear.weight_beats``, or another count
        to price).

    Returns
    -------
    LinearSchedule
        ``end`` is the cycle of the last ``y`` transfer; cycle 0 takes the first
        command. ``stall_cycles`` counts cycles a job waited for a bank.
    """
    if not isinstance(linear, LinearConfig) or linear.contract != "dspfp32":
        raise TypeError(f"dsp_linear_schedule.linear must be a LinearConfig with contract "
                        f"'dspfp32', not {linear!r}")
    latency = dsp_linear_latency() if latency is None else latency
    check_int("dsp_linear_schedule", "columns", columns, min=1)
    per = check_int("dsp_linear_schedule", "beats", beats, min=1)
    lead = latency - DSP_DRAIN_TO_Y - 1        # last operation -> drain start
    runs = _runs(jobs)
    if not runs:
        raise ValueError("dsp_linear_schedule.jobs must hold at least one job, not an empty list")
    taken, e_prev = 0, None
    d_last = [-10**9, -10**9]                  # last drain beat of the two previous jobs
    stall = beats = 0
    for count, job in runs:
        q = pack_factor(job.n_rows, rows=linear.rows, cols=linear.cols)
        feed = input_transfers(columns, q, per)
        ops = job.steps * max(job.n_tokens, feed)
        drain = -(-job.n_rows // linear.cols) * job.n_tokens
        for i in range(count):
            if e_prev is not None:
                taken = max(e_prev, d_last[0] + 1)
                stall += taken - e_prev
            s = taken + 1
            e = s + ops - 1
            start = max(e + lead, d_last[1] + 1)
            d_last = [d_last[1], start + drain]
            e_prev = e
            beats += job.steps
            if i >= 2 and drain <= ops and count - i > 2:
                # Steady state: every further job of the run adds `ops` cycles.
                rest = count - i - 1
                e_prev += rest * ops
                d_last = [d_last[0] + rest * ops, d_last[1] + rest * ops]
                beats += rest * job.steps
                break
    return LinearSchedule((), d_last[1] + DSP_DRAIN_TO_Y, stall, beats)


def dsp_matmul_jobs(*, linear, out_features, in_features, tokens, mode):
    """The ``DSPLinearUnit`` job runs of ``y = W·x`` for ``tokens`` tokens.

    One job computes a tile of at most ``rows · cols`` output rows over all
    ``in_features`` inputs for at most ``max_tokens`` tokens (the last tile cut into
    pieces with ``linear.split_tiles``: ``golden.weight_planes.tile_pieces``); both
    passes take one input per operation (the draft weights enter as binary32 powers of
    two).
    """
    if not isinstance(linear, LinearConfig):
        raise TypeError(f"dsp_matmul_jobs.linear must be a LinearConfig, not {linear!r}")
    for name, v in (("out_features", out_features), ("in_features", in_features),
                    ("tokens", tokens)):
        check_int("dsp_matmul_jobs", name, v, min=1)
    if in_features > linear.max_k:
        raise ValueError(f"dsp_matmul_jobs.in_features {in_features} exceeds "
                         f"LinearConfig.max_k = {linear.max_k}")
    tile = linear.rows * linear.cols
    pieces = tile_pieces(out_features, rows=linear.rows, cols=linear.cols,
                         split=linear.split_tiles)
    full = sum(n == tile for _, n in pieces)
    runs = []
    for g in range(-(-tokens // linear.max_tokens)):
        n_tok = min(linear.max_tokens, tokens - g * linear.max_tokens)
        if full:
            runs.append((full, LinearJob(mode=mode, steps=in_features, n_rows=tile, n_tokens=n_tok)))
        runs += [(1, LinearJob(mode=mode, steps=in_features, n_rows=n, n_tokens=n_tok))
                 for _, n in pieces[full:]]
    return runs


@dataclass(frozen=True, kw_only=True)
class SSMTiming:
    """Timing parameters of ``SSMUnit`` derived from its config (``docs/blocks-ssm.md``).

    Parameters
    ----------
    cfg : golden.mamba2.SSMConfig
        Geometry, lanes and tables (the prologue latency depends on the table degrees).
    mul_stages, add_stages : int
        Pipeline registers of every FPMul / FPAdd (RTL defaults 2 and 2).
    rows_per_cycle : int
        A what-if (:attr:`gen.perf.system.Accelerator.ssm_rows`): ``R`` times the unit's
        EMU lanes sweeping ``R`` times its rows a cycle, its other latencies the same. The
        unit's own rows a cycle (``cfg.rows_per_word``: ``lanes/d_state`` when ``lanes >
        d_state``, as ``hw.tree_ssm.TreeSSMUnit`` builds it) count already.
    """

    cfg: SSMConfig
    mul_stages: int = 2
    add_stages: int = 2
    rows_per_cycle: int = 1

    def __post_init__(self):
        if not isinstance(self.cfg, SSMConfig):
            raise TypeError(f"SSMTiming.cfg must be an SSMConfig, not {self.cfg!r}")
        for name, limit in (("mul_stages", "fp_mul_stages"), ("add_stages", "fp_add_stages")):
            lo, hi = PipelineConfig.LIMITS[limit]
            check_int("SSMTiming", name, getattr(self, name), min=lo, max=hi)
        check_int("SSMTiming", "rows_per_cycle", self.rows_per_cycle, min=1)

    @property
    def _unit(self):
        # The RTL's own latency properties (no elaboration): the model never copies them.
        # Several rows a cycle share one row's latencies (hw.ssm_unit.SSMDatapath builds a
        # tree of d_state products per row), so the one-row unit gives them.
        return _ssm_unit(self.cfg.one_row, self.mul_stages, self.add_stages)

    @property
    def rows_a_cycle(self):
        """State rows swept a cycle: ``cfg.rows_per_word`` (as built) times
        :attr:`rows_per_cycle` (a what-if)."""
        return self.cfg.rows_per_word * self.rows_per_cycle

    @property
    def tiles(self):
        """Issue cycles per token, ``H·P·N / lanes`` (``SSMUnit.sweep_cycles``) over
        :attr:`rows_a_cycle`."""
        return -(-self._unit.sweep_cycles // self.rows_a_cycle)

    @property
    def groups(self):
        """Tiles per row, ``N / lanes``."""
        return self.cfg.groups_per_row

    @property
    def emu_latency(self):
        return self._unit.emu_latency

    @property
    def gap(self):
        """Least distance between two sweep starts (read after write-back)."""
        return self.emu_latency + 1

    @property
    def prologue_latency(self):
        return self._unit.prologue_latency

    @property
    def row_latency(self):
        """A row's first tile issue to its ``y`` (``SSMUnit.latency``)."""
        return self._unit.latency

    @property
    def input_words(self):
        """32-bit input writes per token: B and C (``N`` each), x (``H·P``), dt (``H``)."""
        c = self.cfg
        return 2 * c.d_state + c.nheads * c.headdim + c.nheads

    def period(self, *, words_per_cycle=1):
        """Steady-state cycles per token of a producer that writes as soon as a bank is free.

        ``max(tiles, gap, (tiles + writes + H + prologue + 3) / 2)``: with two
        banks, token ``t + 2`` is written only after token ``t``'s sweep, then
        committed, then its prologue runs before its sweep may start.
        """
        check_int("SSMTiming.period", "words_per_cycle", words_per_cycle, min=1)
        writes = -(-self.input_words // words_per_cycle)
        bound = (self.tiles + writes + self.cfg.nheads + self.prologue_latency + 3) / 2
        return max(float(self.tiles), float(self.gap), bound)


@lru_cache(maxsize=256)
def _ssm_unit(cfg, mul_stages, add_stages):
    """The ``SSMUnit`` of :attr:`SSMTiming._unit`, built once per configuration."""
    from specgen.hw.hierarchy import template
    from specgen.hw.ssm_unit import SSMUnit
    return template(SSMUnit(cfg=cfg, mul_stages=mul_stages, add_stages=add_stages))


@dataclass(frozen=True)
class SSMStream:
    """Cycle numbers of a token stream through ``SSMUnit`` (cycle 0: the producer's first wait).

    Attributes
    ----------
    commit, sweep_start : tuple of int
        Per token: the cycle ``token_valid & token_ready``; the first tile issue.
    last_y : tuple of int
        Per token: the cycle of its last ``y`` transfer.
    first_y : int
        The first ``y`` of token 0.
    """

    commit: tuple
    sweep_start: tuple
    last_y: tuple
    first_y: int

    @property
    def end(self):
        return self.last_y[-1]

    def steady_cycles_per_token(self):
        """Mean gap between consecutive last ``y`` over the second half (as ``gen/bench/ssm.py``)."""
        gaps = [b - a for a, b in zip(self.last_y, self.last_y[1:])]
        tail = gaps[(len(self.last_y) - 1) // 2:]
        return sum(tail) / len(tail) if tail else float("nan")


def ssm_stream(timing, *, tokens, words_per_cycle=1):
    """Cycle model of ``SSMUnit`` fed by :class:`sim.perf_probes.SSMProbe`'s producer (the
    producer of :func:`sim.ssm_unit.run_pysim` without idles).

    Per token the producer waits for ``fill_free`` (one cycle when free), writes
    :attr:`SSMTiming.input_words` words, then commits (one cycle). The unit
    starts the head prologues the cycle after a commit is registered (one head
    per cycle), the sweep when the last head's ``dA`` is written, the previous
    sweep has issued its last tile, and :attr:`SSMTiming.gap` cycles have passed
    since the previous start. A bank is free again the cycle after its sweep's
    last tile issue. No back-pressure on ``y``.
    """
    if not isinstance(timing, SSMTiming):
        raise TypeError(f"ssm_stream.timing must be an SSMTiming, not {timing!r}")
    check_int("ssm_stream", "tokens", tokens, min=1)
    check_int("ssm_stream", "words_per_cycle", words_per_cycle, min=1)
    H = timing.cfg.nheads
    rows = timing.cfg.nheads * timing.cfg.headdim
    writes = -(-timing.input_words // words_per_cycle)
    commit, start, last_y = [], [], []
    bank_free = [0, 0]
    cycle = 0                       # next cycle the producer acts in
    for t in range(tokens):
        wait = max(cycle, bank_free[t % 2])
        c = wait + 1 + writes
        commit.append(c)
        cycle = c + 1
        s = c + 2 + H + timing.prologue_latency
        if start:
            s = max(s, start[-1] + timing.tiles, start[-1] + timing.gap)
        start.append(s)
        bank_free[t % 2] = s + timing.tiles        # the cycle after the last tile issue
        # The last issue of a sweep: rows over rows_a_cycle, `groups` cycles each.
        last_y.append(s + (-(-rows // timing.rows_a_cycle) - 1) * timing.groups
                      + timing.row_latency)
    return SSMStream(tuple(commit), tuple(start), tuple(last_y), start[0] + timing.row_latency)


def tree_verifier_cycles(parents, match, *, fifo_depth, passes=1):
    """Cycle model of one tree through ``TreeVerifier`` without idle or back-pressure.

    Cycle 0 takes the first ``tree`` beat. Loading takes one cycle per node,
    then one cycle checks the tree; the schedule starts the next cycle and emits
    ``passes × len(schedule_beats(...))`` beats, one per cycle; the match bits
    follow, one per node, from the cycle after the last schedule beat; the path's
    first beat is ``depth + 4`` cycles after the last match beat and it has
    ``depth + 1`` beats (``depth`` of the deepest accepted node).

    Returns
    -------
    dict
        ``load``, ``schedule_beats``, ``first_schedule``, ``last_match``,
        ``first_path``, ``last_path`` (cycle numbers), ``cycles`` (last path + 1).
    """
    from specgen.golden.tree import accepted_path

    check_int("tree_verifier_cycles", "passes", passes, min=1)
    sched = fifo_schedule(parents, fifo_depth=fifo_depth)
    n = sched.num_nodes
    beats = len(schedule_beats(sched, passes=passes))
    depth = accepted_path(parents, match).accepted
    first_schedule = n + 1
    last_match = first_schedule + beats + n - 1
    first_path = last_match + depth + 4
    last_path = first_path + depth
    return {"load": n, "schedule_beats": beats, "first_schedule": first_schedule,
            "last_match": last_match, "first_path": first_path, "last_path": last_path,
            "cycles": last_path + 1}


def ring_fifo_cycles(*, items, depth, mode):
    """Cycles of ``items`` through a ``RingFIFO`` of ``depth`` (cycle 0: the first write).

    ``mode="stream"``: written as fast as ``w.ready`` allows and read as soon as
    valid (reads trail by :attr:`hw.ring_fifo.RingFIFO.latency` = 1). ``w.ready``
    does not look at ``r.ready``, so a one-entry ring takes an item every other
    cycle; deeper rings take one per cycle. ``mode="fill"``: ``items ≤ depth``
    writes first, then reads only.

    Returns
    -------
    int
        Cycles from the first write to the last read, both included.
    """
    check_int("ring_fifo_cycles", "items", items, min=1)
    check_int("ring_fifo_cycles", "depth", depth, min=1)
    check_choice("ring_fifo_cycles", "mode", mode, ("stream", "fill"))
    if mode == "stream":
        return 2 * items if depth == 1 else items + 1
    if items > depth:
        raise ValueError(f"ring_fifo_cycles.items must be <= depth ({depth}) in mode 'fill', "
                         f"not {items}")
    return 2 * items
