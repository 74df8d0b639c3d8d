"""Performance model of the generated accelerator: block cycle models and one speculative step.

Two layers, both derived from the same config objects as the RTL:

**Block cycle models** (calibrated against the RTL by ``gen/perf/calibrate.py``,
``docs/perf-model.md``):

* :func:`linear_schedule`: cycles of a stream of ``LinearUnit`` jobs, exact
  recurrence over the PE pipeline, its one-tile result buffer and the stall it
  causes (``hw/linear_unit.py``);
* :class:`SSMTiming` and :func:`ssm_stream`: cycles of a token stream through
  ``SSMUnit`` (two input banks, per-head prologue, one tile per cycle sweep,
  read-after-write gap), ``hw/ssm_unit.py`` and ``docs/blocks-ssm.md``;
* :func:`tree_verifier_cycles`: one tree through ``TreeVerifier`` (load,
  ``passes`` schedule passes, match, path walk and send);
* :func:`ring_fifo_cycles`: a burst through ``RingFIFO``.

**System model** (:func:`step_model`): one speculative decoding step of a
Mamba2 target with a separate Mamba2 draft or with SPEQ self-speculation (the
draft reads only the BSFP v1 nibble plane). Every phase is placed on a
roofline: its time is the larger of its memory time (bytes / bandwidth) and
its compute time (block cycles / clock). Blocks that have no RTL yet (the
``StateController`` and the linear/SSM scheduler) are modeled by explicit
parameters (:class:`Accelerator` ``overlap``, ``restore_overlap``,
``controller_cycles``) with a calibration hook (:class:`Calibration`).

Nothing here simulates; the figures are model outputs, labelled as such in
every report.
"""

import json
import math
from dataclasses import asdict, dataclass, field, replace

from golden.config import BoardConfig, LinearConfig, PipelineConfig, preset, preset_names
from golden.lm import LMConfig
from golden.mamba2 import MAMBA2_DEFAULTS, MAMBA2_SIZES, MAMBA2_VOCAB, SSMConfig
from golden.tree import TreeShape, fifo_schedule, schedule_beats
from golden.validate import check_choice, check_float, check_int

__all__ = [
    "VOCAB", "PE_LATENCY", "SEED", "LinearJob", "LinearSchedule", "linear_schedule",
    "dsp_linear_schedule", "dsp_matmul_jobs", "dsp_linear_latency",
    "matmul_jobs", "SSMTiming", "SSMStream", "ssm_stream", "tree_verifier_cycles",
    "ring_fifo_cycles", "MambaDims", "mamba_dims", "model_names", "perf_board_names",
    "Calibration", "PowerModel", "POWER_ASSUMPTIONS", "Accelerator", "accelerator", "SIZINGS",
    "StepConfig", "Phase", "StepResult", "step_model", "expected_tokens", "DRAFT_CHOICES",
    "RESTORE_POLICIES", "paper_rows", "seed_step", "speq_step", "JSON_KEYS", "SSM_OPS_PER_ELEM",
    "ssm_timing", "weight_bytes", "state_bytes", "SEED_TREE", "SPEQ_CHAIN", "SPEQ_ALPHA",
]

#: Mamba2 vocabulary (:data:`golden.mamba2.MAMBA2_VOCAB`).
VOCAB = MAMBA2_VOCAB

#: DualModePE pipeline latency with LinearUnit's defaults: input register +
#: mul_stages 1 + acc_stages 1 + accumulator + round_stages 2 (the board presets
#: register 4 rounding stages: ``PE_LATENCY - 2 + pe_round_stages``).
PE_LATENCY = 1 + 1 + 1 + 1 + 2

#: The seed's claims (SPEC §4, §7): never our figures.
SEED = {
    "gpu_tok_s": 89.0,
    "lightmamba_tok_s": 169.0,
    "specmamba_tok_s": 313.0,
    "speedup_vs_gpu": 2.27,
    "speedup_vs_fpga": 2.85,
    "energy_vs_gpu": 5.41,
    "energy_vs_fpga": 1.26,
    "tokens_per_step": 4.91,
    "draft_time_share": 0.35,
    "linear_dsp_vhk158": 3537,
    "ssm_dsp_vhk158": 1068,
    "tops_per_w": {"vck190": 2.09, "vhk158": 4.91},
    "speq_acceptance": (0.964, 0.990),
    "speq_speedup": (2.07, 2.18),
}


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


def linear_schedule(jobs, *, pe_latency=PE_LATENCY):
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
        :attr:`hw.dual_mode_pe.DualModePE.latency` (default :data:`PE_LATENCY`).

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


def dsp_linear_latency():
    """:attr:`hw.dsp_linear_unit.DSPLinearUnit.latency`: cycles from a job's last
    operation to its first result beat."""
    from hw.dsp_linear_unit import DSPLinearUnit
    from hw.hierarchy import template
    return template(DSPLinearUnit(rows=1, cols=1, max_tokens=1, max_k=1)).latency


#: Cycles from a drain beat's request to its ``y.valid`` (``DSPLinearUnit``: the
#: columns' read and mux, the result FIFO).
DSP_DRAIN_TO_Y = 5


def dsp_linear_schedule(jobs, *, linear, latency=None):
    """Cycle model of ``DSPLinearUnit`` for back-to-back jobs: sources always valid,
    ``y`` always ready.

    A job issues ``steps · n_tokens`` operations, one per cycle, from the cycle
    after its command is taken; the next command is taken in the cycle of the
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
    lead = latency - DSP_DRAIN_TO_Y - 1        # last operation -> drain start
    runs = _runs(jobs)
    if not runs:
        raise ValueError("dsp_linear_schedule.jobs must hold at least one job, not an empty list")
    taken, e_prev = 0, None
    d_last = [-10**9, -10**9]                  # last drain beat of the two previous jobs
    stall = beats = 0
    for count, job in runs:
        ops = job.steps * job.n_tokens
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
    ``in_features`` inputs for at most ``max_tokens`` tokens; both passes take one
    input per operation (the draft weights enter as binary32 powers of two).
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
    full, rest = divmod(out_features, tile)
    runs = []
    for g in range(-(-tokens // linear.max_tokens)):
        n_tok = min(linear.max_tokens, tokens - g * linear.max_tokens)
        if full:
            runs.append((full, LinearJob(mode=mode, steps=in_features, n_rows=tile, n_tokens=n_tok)))
        if rest:
            runs.append((1, LinearJob(mode=mode, steps=in_features, n_rows=rest, n_tokens=n_tok)))
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
    """

    cfg: SSMConfig
    mul_stages: int = 2
    add_stages: int = 2

    def __post_init__(self):
        if not isinstance(self.cfg, SSMConfig):
            raise TypeError(f"SSMTiming.cfg must be an SSMConfig, not {self.cfg!r}")
        for name, limit in (("mul_stages", "fp_mul_stages"), ("add_stages", "fp_add_stages")):
            lo, hi = PipelineConfig.LIMITS[limit]
            check_int("SSMTiming", name, getattr(self, name), min=lo, max=hi)

    @property
    def tiles(self):
        """Issue cycles per token, ``H·P·N / lanes`` (``SSMUnit.sweep_cycles``)."""
        c = self.cfg
        return c.nheads * c.headdim * -(-c.d_state // c.lanes)

    @property
    def groups(self):
        """Tiles per row, ``N / lanes``."""
        return -(-self.cfg.d_state // self.cfg.lanes)

    @property
    def emu_latency(self):
        return 1 + 2 * self.mul_stages + self.add_stages

    @property
    def gap(self):
        """Least distance between two sweep starts (read after write-back)."""
        return self.emu_latency + 1

    def _lut(self, spec):
        return 3 + spec.degree * (self.mul_stages + self.add_stages)

    @property
    def prologue_latency(self):
        c, lm, la = self.cfg, self.mul_stages, self.add_stages
        return 1 + la + self._lut(c.softplus_lut) + lm + self._lut(c.exp_lut)

    @property
    def row_latency(self):
        """A row's first tile issue to its ``y.valid`` (``SSMUnit.latency``)."""
        lm, la = self.mul_stages, self.add_stages
        return 1 + 3 * lm + la * (1 + self.cfg.tree_depth) + (self.groups - 1) + 1 + la

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
    """Cycle model of ``SSMUnit`` fed by :func:`sim.ssm_unit.run_pysim`'s producer.

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
        last_y.append(s + (rows - 1) * timing.groups + timing.row_latency)
    return SSMStream(tuple(commit), tuple(start), tuple(last_y), start[0] + timing.row_latency)


def tree_verifier_cycles(parents, match, *, fifo_depth, passes=1):
    """Cycle model of one tree through ``TreeVerifier`` without idle or back-pressure.

    Cycle 0 takes the first ``tree`` beat. Loading takes one cycle per node;
    the schedule starts the next cycle and emits
    ``passes × len(schedule_beats(...))`` beats, one per cycle; the match bits
    follow, one per node, from the cycle after the last schedule beat; the path's
    first beat is ``depth + 3`` cycles after the last match beat and it has
    ``depth + 1`` beats (``depth`` of the deepest accepted node).

    Returns
    -------
    dict
        ``load``, ``schedule_beats``, ``first_schedule``, ``last_match``,
        ``first_path``, ``last_path`` (cycle numbers), ``cycles`` (last path + 1).
    """
    from golden.tree import accepted_path

    check_int("tree_verifier_cycles", "passes", passes, min=1)
    sched = fifo_schedule(parents, fifo_depth=fifo_depth)
    n = sched.num_nodes
    beats = len(schedule_beats(sched, passes=passes))
    depth = accepted_path(parents, match).accepted
    first_schedule = n
    last_match = n + beats + n - 1
    first_path = last_match + depth + 3
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


# =====================================================================================
# Model dimensions
# =====================================================================================

@dataclass(frozen=True, kw_only=True)
class MambaDims(LMConfig):
    """A Mamba2 checkpoint's :class:`golden.lm.LMConfig`, named, with the bytes of one pass.

    The dimensions and the widths derived from them (``d_inner``, ``nheads``,
    ``conv_dim``, ``d_in_proj``, ``state_elems``, ``conv_elems``) are the
    golden model's; :func:`mamba_dims` reads them from
    :meth:`golden.lm.LMConfig.from_model`.

    Parameters
    ----------
    name : str
    d_model, n_layer : int
    vocab : int
        Tied embedding / LM head rows (:data:`VOCAB`).
    expand, headdim, d_state, d_conv : int
        Mamba2 defaults (:data:`golden.mamba2.MAMBA2_DEFAULTS`); ``ngroups = 1``.
    """

    name: str
    d_model: int
    n_layer: int
    vocab: int = VOCAB
    headdim: int = MAMBA2_DEFAULTS["headdim"]
    d_state: int = MAMBA2_DEFAULTS["d_state"]

    def matrices(self):
        """``(name, out_features, in_features, count)`` of every linear layer of a pass."""
        return [("in_proj", self.d_in_proj, self.d_model, self.n_layer),
                ("out_proj", self.d_model, self.d_inner, self.n_layer),
                ("lm_head", self.vocab, self.d_model, 1)]

    @property
    def linear_params(self):
        """Weights of the linear layers (the tied LM head once)."""
        return sum(o * i * n for _, o, i, n in self.matrices())

    @property
    def small_params(self):
        """Other weights read per pass: conv1d weight and bias, the two norms, A, D, dt_bias."""
        per_layer = (self.conv_dim * self.d_conv + self.conv_dim + self.d_inner + self.d_model
                     + 3 * self.nheads)
        return per_layer * self.n_layer + self.d_model

    @property
    def params(self):
        return self.linear_params + self.small_params


def model_names():
    """Mamba2 sizes accepted by :func:`mamba_dims` (SPEC §4)."""
    return tuple(MAMBA2_SIZES)


def mamba_dims(name):
    """:class:`MambaDims` of a Mamba2 checkpoint, ``"130M"`` … ``"2.7B"``.

    Raises
    ------
    ValueError
        If ``name`` is unknown; the message lists the allowed names.
    """
    if name not in MAMBA2_SIZES:
        raise ValueError(f"unknown model {name!r}; allowed: {', '.join(model_names())}")
    return MambaDims.from_model(name, name=name)


# =====================================================================================
# Accelerator, power, calibration
# =====================================================================================

@dataclass(frozen=True, kw_only=True)
class Calibration:
    """Hook for measured corrections: multipliers on each block's modeled cycles.

    The block models agree with the RTL to within the calibration table
    (``docs/perf.md``), so every factor is 1.0 today. When the StateController
    and the scheduler exist, their measured figures replace the analytic
    parameters of :class:`Accelerator` (``controller_cycles``,
    ``restore_overlap``, ``overlap``) and :attr:`source` names the measurement.
    """

    linear: float = 1.0
    ssm: float = 1.0
    tree: float = 1.0
    source: str = "gen/perf/calibrate.py: block models match the RTL cycle for cycle"

    def __post_init__(self):
        for f in ("linear", "ssm", "tree"):
            check_float("Calibration", f, getattr(self, f), min=0.1, max=10.0)


@dataclass(frozen=True, kw_only=True)
class PowerModel:
    """Power assumptions (not measured: no board and no Vivado power report here).

    Parameters
    ----------
    static_w : float
        Device static plus board power at idle, W.
    pj_per_mac_full, pj_per_mac_quant : float
        Energy of one FP16 MAC (DSP58 multiply + exact fabric accumulate) and of
        one draft product (an exponent add), pJ.
    pj_per_state_elem : float
        One EMU state update (3 binary32 multiplies + 1 add), pJ.
    pj_per_byte : float
        Off-chip memory energy per byte moved, pJ (DDR4 ≈ 20 pJ/bit, HBM2e ≈ 4 pJ/bit).
    """

    static_w: float
    pj_per_mac_full: float = 3.0
    pj_per_mac_quant: float = 0.6
    pj_per_state_elem: float = 12.0
    pj_per_byte: float

    def __post_init__(self):
        check_float("PowerModel", "static_w", self.static_w, min=0.0)
        for f in ("pj_per_mac_full", "pj_per_mac_quant", "pj_per_state_elem", "pj_per_byte"):
            check_float("PowerModel", f, getattr(self, f), min=0.0)


#: Per-board power assumptions; see :class:`PowerModel`.
POWER_ASSUMPTIONS = {
    "vck190": PowerModel(static_w=20.0, pj_per_byte=160.0),
    "vhk158": PowerModel(static_w=30.0, pj_per_byte=32.0),
}

SIZINGS = ("preset", "dsp")
RESTORE_POLICIES = ("recompute", "store")


@dataclass(frozen=True, kw_only=True)
class Accelerator:
    """The generated accelerator as the model sees it.

    Parameters
    ----------
    board : golden.config.BoardConfig
        Clock, memory bandwidth, DSP58 budget.
    linear : golden.config.LinearConfig
        The ``LinearUnit`` array.
    ssm_lanes : int
        EMU lanes of the ``SSMUnit`` (a power of two).
    ssm_mul_stages, ssm_add_stages : int
        FP pipeline registers of the SSM unit (``golden.config.PipelineConfig``).
    pe_round_stages : int
        Registers of each PE's final rounding (``PipelineConfig.pe_round_stages``).
    ssm_words_per_cycle : int
        32-bit words per cycle into the SSM unit's input banks (the RTL: 1).
    sizing : str
        ``"preset"`` (the board preset's arrays) or ``"dsp"`` (sized to the DSP budget).
    overlap : float
        Scheduler overlap of the linear unit and the SSM unit inside a pass,
        0 (serial: no scheduler RTL yet) … 1 (the longer hides the shorter).
    restore_overlap : float
        Share of the state-restore phase hidden behind the next step's weight
        streaming (StateController, no RTL yet; 0 = none hidden).
    controller_cycles : int
        StateController cycles to switch the committed state to an accepted
        node's stored state (seed: < 100 ns; analytic, no RTL yet).
    state_bytes : int
        Bytes per SSM state element (4: binary32, as the RTL).
    mem_efficiency : float
        Sustained share of the peak memory bandwidth (1.0: peak).
    power : PowerModel
    calibration : Calibration
    """

    board: BoardConfig
    linear: LinearConfig
    ssm_lanes: int
    ssm_mul_stages: int = 2
    ssm_add_stages: int = 2
    pe_round_stages: int = 2
    ssm_words_per_cycle: int = 1
    sizing: str = "preset"
    overlap: float = 0.0
    restore_overlap: float = 0.0
    controller_cycles: int = 25
    state_bytes: int = 4
    mem_efficiency: float = 1.0
    power: PowerModel
    calibration: Calibration = field(default_factory=Calibration)

    def __post_init__(self):
        if not isinstance(self.board, BoardConfig):
            raise TypeError(f"Accelerator.board must be a BoardConfig, not {self.board!r}")
        if self.board.mem_bw_gbs <= 0:
            raise ValueError(f"Accelerator.board {self.board.name!r} has no memory model "
                             f"(mem_bw_gbs {self.board.mem_bw_gbs}); allowed boards: "
                             f"{', '.join(perf_board_names())}")
        if not isinstance(self.linear, LinearConfig):
            raise TypeError(f"Accelerator.linear must be a LinearConfig, not {self.linear!r}")
        check_int("Accelerator", "ssm_lanes", self.ssm_lanes, min=1)
        if self.ssm_lanes & (self.ssm_lanes - 1):
            raise ValueError(f"Accelerator.ssm_lanes must be a power of two, not {self.ssm_lanes}")
        for name, limit in (("ssm_mul_stages", "fp_mul_stages"),
                            ("ssm_add_stages", "fp_add_stages"), ("pe_round_stages", "pe_round_stages")):
            lo, hi = PipelineConfig.LIMITS[limit]
            check_int("Accelerator", name, getattr(self, name), min=lo, max=hi)
        check_int("Accelerator", "ssm_words_per_cycle", self.ssm_words_per_cycle, min=1)
        check_choice("Accelerator", "sizing", self.sizing, SIZINGS)
        check_float("Accelerator", "overlap", self.overlap, min=0.0, max=1.0)
        check_float("Accelerator", "restore_overlap", self.restore_overlap, min=0.0, max=1.0)
        check_int("Accelerator", "controller_cycles", self.controller_cycles, min=0)
        check_choice("Accelerator", "state_bytes", self.state_bytes, (2, 4))
        check_float("Accelerator", "mem_efficiency", self.mem_efficiency, min=0.01, max=1.0)
        if not isinstance(self.power, PowerModel):
            raise TypeError(f"Accelerator.power must be a PowerModel, not {self.power!r}")
        if not isinstance(self.calibration, Calibration):
            raise TypeError(f"Accelerator.calibration must be a Calibration, not {self.calibration!r}")

    @property
    def clock_hz(self):
        return self.board.clock_mhz * 1e6

    @property
    def bandwidth(self):
        """Sustained bytes/s."""
        return self.board.mem_bw_gbs * 1e9 * self.mem_efficiency

    @property
    def dsp_linear(self):
        """DSP58 of the linear unit: one per PE (an 11 × 11 significand product)."""
        return self.linear.rows * self.linear.cols

    @property
    def dsp_ssm(self):
        """DSP58 of the SSM unit: four per EMU lane (three binary32 multiplies and an add)."""
        return 4 * self.ssm_lanes

    def describe(self):
        lin = self.linear
        array = (f"DSPLinearUnit {lin.rows}x{lin.cols} DSPFP32 slots (T <= {lin.max_tokens})"
                 if lin.contract == "dspfp32" else
                 f"LinearUnit {lin.rows}x{lin.cols} PEs (q{lin.quant_lanes})")
        return (f"{self.board.name}: {array}, "
                f"SSMUnit {self.ssm_lanes} lanes, {self.board.clock_mhz:g} MHz, "
                f"{self.board.memory} {self.board.mem_bw_gbs:g} GB/s, sizing {self.sizing}")

    def to_dict(self):
        d = asdict(self)
        d["dsp_linear"], d["dsp_ssm"], d["dsp_budget"] = (self.dsp_linear, self.dsp_ssm,
                                                          self.board.dsp58)
        return d


def perf_board_names():
    """Board presets with a memory model (the performance model needs a bandwidth)."""
    return tuple(n for n in preset_names() if preset(n).board.mem_bw_gbs > 0)


def _pow2_floor(x):
    return 1 << (max(1, int(x)).bit_length() - 1)


def accelerator(board, *, sizing="preset", **overrides):
    """The accelerator of a board preset.

    Parameters
    ----------
    board : str
        One of :func:`perf_board_names`.
    sizing : str
        ``"preset"``: the preset's ``LinearConfig`` and SSM lanes (its ``ssm``
        config if the preset has one, else 64 lanes). ``"dsp"``: 16 token lanes
        (the seed's prediction length) and as many PE rows as the seed's linear
        unit's share of the DSP58 (3537 of 7392 on VHK158), and the SSM lanes of
        its SSM unit's share (1068 of 7392, four DSP58 per lane), at most
        ``d_state`` = 128 (the RTL's limit).
    **overrides
        Any other :class:`Accelerator` field.

    Raises
    ------
    ValueError
        Unknown board or sizing; the message lists the allowed values.
    """
    if board not in perf_board_names():
        raise ValueError(f"unknown board {board!r}; allowed: {', '.join(perf_board_names())}")
    check_choice("accelerator", "sizing", sizing, SIZINGS)
    cfg = preset(board)
    # Presets with an SSM unit config carry its lanes; older presets: 64.
    ssm = getattr(cfg, "ssm", None)
    lanes = ssm.lanes if isinstance(ssm, SSMConfig) else 64
    linear = cfg.linear
    if sizing == "dsp":
        budget = cfg.board.dsp58 / 7392
        cols = 16
        rows = int(SEED["linear_dsp_vhk158"] * budget) // cols
        linear = replace(linear, rows=rows, cols=cols)
        lanes = min(MAMBA2_DEFAULTS["d_state"], _pow2_floor(SEED["ssm_dsp_vhk158"] * budget / 4))
    pipe = cfg.pipeline
    kw = dict(board=cfg.board, linear=linear, ssm_lanes=lanes, sizing=sizing,
              ssm_mul_stages=pipe.fp_mul_stages, ssm_add_stages=pipe.fp_add_stages,
              pe_round_stages=pipe.pe_round_stages, power=POWER_ASSUMPTIONS[board])
    kw.update(overrides)
    return Accelerator(**kw)


# =====================================================================================
# One speculative decoding step
# =====================================================================================

DRAFT_CHOICES = ("speq", "none")


@dataclass(frozen=True, kw_only=True)
class StepConfig:
    """One speculative decoding step.

    Parameters
    ----------
    target : str
        Mamba2 size of the target (:func:`model_names`).
    draft : str
        A Mamba2 size (a separate draft model, FP16 on the array's full mode),
        ``"speq"`` (SPEQ self-speculation: the target's weights read through the
        BSFP v1 nibble plane, 4 bits per weight, on the array's quantized mode),
        or ``"none"`` (plain autoregressive decoding: one token per step).
    tree : golden.tree.TreeShape or sequence of int
        Per-depth branching of the draft tree; ``(1,) * L`` is a chain of ``L``.
    tokens_per_step : float or None
        Committed tokens per step (accepted + bonus), e.g. the seed's 4.91.
    alpha : float or None
        Per-token acceptance rate; used (:func:`expected_tokens`) when
        ``tokens_per_step`` is None.
    continue_prob : float
        Early stopping: probability that the draft extends the tree by another
        level (its confidence stays above γ); 1.0 = no early stopping.
    restore_policy : str
        Target state after verification: ``"recompute"`` (keep the light
        per-node inputs, re-run the SSM along the accepted path) or ``"store"``
        (write every node's state during verification).
    draft_bits : int
        Bits per weight the SPEQ draft reads (4: the nibble plane; 5 with W).
    scale_group : int or None
        BSFP scale granularity along the input axis (None: per tensor); the
        SPEQ draft also reads one 4-bit scale per group.
    """

    target: str
    draft: str
    tree: TreeShape
    tokens_per_step: float | None = None
    alpha: float | None = None
    continue_prob: float = 1.0
    restore_policy: str = "recompute"
    draft_bits: int = 4
    scale_group: int | None = None

    def __post_init__(self):
        check_choice("StepConfig", "target", self.target, model_names())
        check_choice("StepConfig", "draft", self.draft, model_names() + DRAFT_CHOICES)
        tree = self.tree if isinstance(self.tree, TreeShape) else TreeShape(tuple(self.tree))
        if self.draft != "none" and tree.depth == 0:
            raise ValueError("StepConfig.tree must have depth >= 1 when drafting, not a root alone")
        object.__setattr__(self, "tree", tree if self.draft != "none" else TreeShape(()))
        check_float("StepConfig", "continue_prob", self.continue_prob, min=0.0, max=1.0)
        check_choice("StepConfig", "restore_policy", self.restore_policy, RESTORE_POLICIES)
        check_int("StepConfig", "draft_bits", self.draft_bits, min=1, max=16)
        if self.scale_group is not None:
            check_int("StepConfig", "scale_group", self.scale_group, min=1)
        if self.alpha is not None:
            check_float("StepConfig", "alpha", self.alpha, min=0.0, max=1.0)
        if self.tokens_per_step is not None:
            hi = self.tree.depth + 1
            check_float("StepConfig", "tokens_per_step", self.tokens_per_step, min=1.0, max=hi)
        elif self.alpha is None and self.draft != "none":
            raise ValueError("StepConfig needs tokens_per_step or alpha (acceptance), not neither")


@dataclass(frozen=True)
class Phase:
    """One phase of a step on the roofline.

    Attributes
    ----------
    name : str
        ``draft``, ``verify`` or ``restore``.
    t_mem, t_compute : float
        Seconds to move its bytes at the sustained bandwidth; seconds of block cycles.
    bytes : float
        Off-chip bytes (weights and state).
    weight_bytes : float
    macs : float
        Useful work in multiply-accumulate equivalents (operations / 2): the
        linear layers' MACs plus :data:`SSM_OPS_PER_ELEM` / 2 per EMU state update.
    linear_cycles, ssm_cycles, other_cycles : float
        Block cycles (expected values over early stopping).
    hidden : float
        Share of the phase hidden behind other phases (restore only).
    """

    name: str
    t_mem: float
    t_compute: float
    bytes: float
    weight_bytes: float
    macs: float
    linear_cycles: float
    ssm_cycles: float
    other_cycles: float
    hidden: float = 0.0

    @property
    def time(self):
        return max(self.t_mem, self.t_compute) * (1.0 - self.hidden)

    @property
    def bound(self):
        return "memory" if self.t_mem >= self.t_compute else "compute"

    @property
    def intensity(self):
        """Operations (2 per MAC) per off-chip byte."""
        return 2 * self.macs / self.bytes if self.bytes else float("inf")

    def to_dict(self):
        d = asdict(self)
        d.update(time_s=self.time, bound=self.bound, intensity_ops_per_byte=self.intensity)
        return d


@dataclass(frozen=True)
class StepResult:
    """Outputs of :func:`step_model`."""

    accel: Accelerator
    step: StepConfig
    phases: tuple
    tokens_per_step: float
    draft_passes: float
    verify_nodes: float
    roofline_bytes: float
    power_w: float
    ops: float

    @property
    def step_time(self):
        return sum(p.time for p in self.phases)

    @property
    def tokens_per_s(self):
        return self.tokens_per_step / self.step_time

    @property
    def roofline_tokens_per_s(self):
        """Tokens/s if every pass only streamed its weights once at the sustained bandwidth."""
        return self.tokens_per_step * self.accel.bandwidth / self.roofline_bytes

    @property
    def roofline_ratio(self):
        return self.tokens_per_s / self.roofline_tokens_per_s

    @property
    def tokens_per_j(self):
        return self.tokens_per_s / self.power_w

    @property
    def tokens_per_j_seed_efficiency(self):
        """Tokens/J if the design ran at the seed's TOPS/W (SPEC §5) on our operation count."""
        eff = SEED["tops_per_w"].get(self.accel.board.name)
        return None if eff is None else self.tokens_per_step * eff * 1e12 / self.ops

    def phase(self, name):
        for p in self.phases:
            if p.name == name:
                return p
        raise KeyError(name)

    def to_dict(self):
        return {
            "board": self.accel.board.name,
            "accelerator": self.accel.to_dict(),
            "target": self.step.target,
            "draft": self.step.draft,
            "tree": list(self.step.tree.branching),
            "tokens_per_step": self.tokens_per_step,
            "draft_passes": self.draft_passes,
            "verify_nodes": self.verify_nodes,
            "phases": [p.to_dict() for p in self.phases],
            "step_time_s": self.step_time,
            "tokens_per_s": self.tokens_per_s,
            "roofline_tokens_per_s": self.roofline_tokens_per_s,
            "roofline_ratio": self.roofline_ratio,
            "power_w": self.power_w,
            "tokens_per_j": self.tokens_per_j,
            "tokens_per_j_at_seed_efficiency": self.tokens_per_j_seed_efficiency,
            "assumptions": _assumptions(self.accel, self.step),
        }

    def to_json(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, default=_json_default)


#: Top-level keys of :meth:`StepResult.to_dict` (the JSON schema of ``specgen perf --json``).
JSON_KEYS = ("accelerator", "assumptions", "board", "draft", "draft_passes", "phases", "power_w",
             "roofline_ratio", "roofline_tokens_per_s", "step_time_s", "target", "tokens_per_j",
             "tokens_per_j_at_seed_efficiency", "tokens_per_s", "tokens_per_step", "tree",
             "verify_nodes")


def _json_default(o):
    if isinstance(o, TreeShape):
        return list(o.branching)
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"not JSON serializable: {o!r}")


def _assumptions(acc, step):
    return {
        "memory": "every pass streams its weights once from off-chip memory; "
                  "SSM states are read/written off-chip in binary32",
        "overlap": acc.overlap,
        "restore_overlap": acc.restore_overlap,
        "controller_cycles": acc.controller_cycles,
        "restore_policy": step.restore_policy,
        "mem_efficiency": acc.mem_efficiency,
        "power": asdict(acc.power),
        "calibration": asdict(acc.calibration),
        "not_modeled": "conv1d, norms, SiLU gate, embedding lookup, sampling (O(d_inner) per token)",
    }


def expected_tokens(tree, *, alpha, levels=None):
    """Expected committed tokens per step for per-token acceptance ``alpha``.

    Model assumption: at depth ``k`` an accepted node's ``b_k`` children hold
    distinct candidate tokens and one of them is the target's choice with
    probability ``1 − (1 − alpha)^b_k``; the bonus token always counts. For a
    chain this is ``(1 − alpha^(L+1)) / (1 − alpha)`` (SPEC §4).

    Parameters
    ----------
    tree : TreeShape or sequence of int
    alpha : float
    levels : int, optional
        Only the first ``levels`` depths exist (early stopping).
    """
    tree = tree if isinstance(tree, TreeShape) else TreeShape(tuple(tree))
    check_float("expected_tokens", "alpha", alpha, min=0.0, max=1.0)
    branching = tree.branching[:levels] if levels is not None else tree.branching
    total, reach = 1.0, 1.0
    for b in branching:
        reach *= 1.0 - (1.0 - alpha) ** b
        total += reach
    return total


def _levels_distribution(depth, continue_prob):
    """``[(levels, probability)]``: the draft builds ``levels`` depths (1 … depth)."""
    out = []
    for n in range(1, depth + 1):
        p = continue_prob ** (n - 1) * ((1 - continue_prob) if n < depth else 1.0)
        if p > 0:
            out.append((n, p))
    return out


#: Floating-point operations per EMU state update: dA·h, u·B, their sum, h'·C, the reduction add.
SSM_OPS_PER_ELEM = 5


class _Tally:
    """Sums of one phase (cycles, bytes, work), weighted by probability."""

    KEYS = ("lin", "ssm", "other", "wbytes", "sbytes", "full", "quant", "elems", "t_comp", "t_mem",
            "time")

    def __init__(self):
        for k in self.KEYS:
            setattr(self, k, 0.0)

    def add(self, other, weight):
        for k in self.KEYS:
            setattr(self, k, getattr(self, k) + weight * getattr(other, k))

    @property
    def ops(self):
        return 2 * (self.full + self.quant) + SSM_OPS_PER_ELEM * self.elems

    def energy(self, pw):
        return 1e-12 * (pw.pj_per_mac_full * self.full + pw.pj_per_mac_quant * self.quant
                        + pw.pj_per_state_elem * self.elems
                        + pw.pj_per_byte * (self.wbytes + self.sbytes))

    def phase(self, name, hidden=0.0):
        return Phase(name, self.t_mem, self.t_comp, self.wbytes + self.sbytes, self.wbytes,
                     self.ops / 2, self.lin, self.ssm, self.other, hidden)


def _linear_cycles(acc, dims, *, tokens, mode):
    runs = []
    dsp = acc.linear.contract == "dspfp32"
    jobs = dsp_matmul_jobs if dsp else matmul_jobs
    for _, o, i, count in dims.matrices():
        runs += jobs(linear=acc.linear, out_features=o, in_features=i, tokens=tokens,
                     mode=mode) * count
    if dsp:
        return dsp_linear_schedule(runs, linear=acc.linear).cycles * acc.calibration.linear
    pe_latency = PE_LATENCY - 2 + acc.pe_round_stages
    return linear_schedule(runs, pe_latency=pe_latency).cycles * acc.calibration.linear


def ssm_timing(acc, dims):
    """The :class:`SSMTiming` of ``acc``'s SSM unit running a layer of ``dims``."""
    lanes = min(acc.ssm_lanes, dims.d_state)
    return SSMTiming(cfg=replace(dims.ssm_config, lanes=lanes), mul_stages=acc.ssm_mul_stages,
                     add_stages=acc.ssm_add_stages)


def _ssm_cycles(acc, dims, *, tokens):
    """SSM unit cycles of ``tokens`` nodes in every layer (one stream per layer, layers serial)."""
    t = ssm_timing(acc, dims)
    per_layer = ssm_stream(t, tokens=tokens, words_per_cycle=acc.ssm_words_per_cycle).end + 1
    return dims.n_layer * per_layer * acc.calibration.ssm


def _combine(a, b, overlap):
    return max(a, b) + (1.0 - overlap) * min(a, b)


def weight_bytes(dims, *, bits=16, scale_group=None):
    """Bytes of one pass's weights: the linear weights at ``bits`` per weight, the rest FP16.

    With ``scale_group``, one 4-bit power-of-two scale per group of ``scale_group``
    weights along the input axis is read too (BSFP group scaling).
    """
    b = dims.linear_params * bits / 8 + dims.small_params * 2
    if scale_group is not None:
        b += sum(o * -(-i // scale_group) * n for _, o, i, n in dims.matrices()) * 0.5
    return b


def state_bytes(acc, dims):
    """Bytes of one node's recurrent state over all layers: SSM state and conv window."""
    return dims.n_layer * (dims.state_elems + dims.conv_elems) * acc.state_bytes


def _pass(acc, dims, *, tokens, mode, bits, scale_group, state_moves):
    """One forward pass over ``tokens`` nodes that share one weight read."""
    t = _Tally()
    t.lin = _linear_cycles(acc, dims, tokens=tokens, mode=mode)
    t.ssm = _ssm_cycles(acc, dims, tokens=tokens)
    t.wbytes = weight_bytes(dims, bits=bits, scale_group=scale_group)
    t.sbytes = state_moves * state_bytes(acc, dims)
    if mode:
        t.quant = dims.linear_params * tokens
    else:
        t.full = dims.linear_params * tokens
    t.elems = dims.state_elems * dims.n_layer * tokens
    t.t_comp = _combine(t.lin, t.ssm, acc.overlap) / acc.clock_hz
    t.t_mem = (t.wbytes + t.sbytes) / acc.bandwidth
    t.time = max(t.t_comp, t.t_mem)
    return t


def step_model(accel, step):
    """Model one speculative decoding step.

    Phases
    ------
    draft
        ``levels`` sequential draft passes (early stopping: a distribution over
        ``levels``); pass ``k`` runs the nodes of depth ``k − 1`` together (one
        weight read for all of them), reads their parents' states and writes
        their own (off-chip).
    verify
        One target pass over every drafted node (one weight read; the FIFO tree
        schedule keeps node states on chip tile by tile and reads the committed
        state once), plus the ``TreeVerifier``'s load, match and path cycles.
        Without a draft: one plain decode pass (state read and written).
    restore
        ``recompute``: the per-node SSM inputs (x, B, C, dt) are written during
        verification; the target SSM is re-run along the accepted path (those
        inputs and the committed state read, the new state written). ``store``:
        every node's state was written during verification. A separate draft's
        accepted state is selected by the StateController (``controller_cycles``);
        the SPEQ draft restarts from the target's state. ``restore_overlap`` of
        the phase is hidden.

    Each phase takes ``max(t_mem, t_compute)``; inside a pass the linear and SSM
    cycles combine with the scheduler ``overlap``.

    Returns
    -------
    StepResult
    """
    if not isinstance(accel, Accelerator):
        raise TypeError(f"step_model.accel must be an Accelerator, not {accel!r}")
    if not isinstance(step, StepConfig):
        raise TypeError(f"step_model.step must be a StepConfig, not {step!r}")
    tgt = mamba_dims(step.target)
    clk, bw = accel.clock_hz, accel.bandwidth
    tree = step.tree
    sizes = tree.level_sizes
    fifo_depth = preset(accel.board.name).tree.fifo_depth
    drafting = step.draft != "none"
    if drafting:
        dist = _levels_distribution(tree.depth, step.continue_prob)
        fifo_schedule(tree.parents, fifo_depth=fifo_depth)   # raises if the ring is too small
    else:
        dist = [(0, 1.0)]

    draft, verify, restore = _Tally(), _Tally(), _Tally()
    passes_e = nodes_e = tokens_e = roof_e = 0.0
    for levels, prob in dist:
        # ---- draft: one pass per level ----
        d = _Tally()
        for k in range(levels):
            if step.draft == "speq":
                dims, mode, bits, group = tgt, 1, step.draft_bits, step.scale_group
            else:
                dims, mode, bits, group = mamba_dims(step.draft), 0, 16, None
            parents = 1 if k == 0 else sizes[k - 1]
            d.add(_pass(accel, dims, tokens=sizes[k], mode=mode, bits=bits, scale_group=group,
                        state_moves=parents + sizes[k]), 1.0)
        # ---- verify ----
        nodes = sum(sizes[:levels + 1]) if drafting else 1
        v = _pass(accel, tgt, tokens=nodes, mode=0, bits=16, scale_group=None,
                  state_moves=1 if drafting else 2)
        if drafting:
            par = TreeShape(tree.branching[:levels]).parents
            v.other = tree_verifier_cycles(par, [1] * len(par), fifo_depth=fifo_depth)["cycles"]
            v.other *= accel.calibration.tree
            v.t_comp += v.other / clk
            v.time = max(v.t_comp, v.t_mem)
        # ---- tokens ----
        if not drafting:
            tokens = 1.0
        elif step.tokens_per_step is not None:
            tokens = step.tokens_per_step
        else:
            tokens = expected_tokens(tree, alpha=step.alpha, levels=levels)
        # ---- restore ----
        r = _Tally()
        if drafting:
            if step.restore_policy == "recompute":
                path = math.ceil(tokens)
                inputs = tgt.n_layer * (tgt.d_inner + 2 * tgt.d_state + tgt.nheads) * 4
                r.ssm = _ssm_cycles(accel, tgt, tokens=path)
                r.elems = tgt.state_elems * tgt.n_layer * path
                r.sbytes = 2 * state_bytes(accel, tgt) + (nodes + path) * inputs
            else:
                r.sbytes = nodes * state_bytes(accel, tgt)
            if step.draft != "speq":
                r.other = accel.controller_cycles
            r.t_comp = (r.ssm + r.other) / clk
            r.t_mem = r.sbytes / bw
            r.time = max(r.t_comp, r.t_mem) * (1 - accel.restore_overlap)
        draft.add(d, prob)
        verify.add(v, prob)
        restore.add(r, prob)
        passes_e += prob * levels
        nodes_e += prob * nodes
        tokens_e += prob * tokens
        roof_e += prob * (d.wbytes + v.wbytes)

    phases = [verify.phase("verify")]
    if drafting:
        phases = [draft.phase("draft"), phases[0], restore.phase("restore", accel.restore_overlap)]
    t_step = sum(p.time for p in phases)
    energy = sum(t.energy(accel.power) for t in (draft, verify, restore))
    power = accel.power.static_w + energy / t_step
    ops = draft.ops + verify.ops + restore.ops
    return StepResult(accel, step, tuple(phases), tokens_e, passes_e, nodes_e, roof_e, power, ops)


# =====================================================================================
# The papers' configurations
# =====================================================================================

#: The seed's tree in our reading: branching 2, depth 4, 14 draft tokens (15 nodes ≤ 16 lanes).
SEED_TREE = (2, 2, 1, 1)
#: SPEQ: chain of up to L = 16 draft tokens, acceptance 0.97 (the seed's 0.964–0.990).
SPEQ_CHAIN = 16
SPEQ_ALPHA = 0.97


def seed_step(**kw):
    """SpecMamba's headline configuration: 2.7B target, 370M draft, 4.91 tokens/step."""
    args = dict(target="2.7B", draft="370M", tree=SEED_TREE, tokens_per_step=SEED["tokens_per_step"])
    args.update(kw)
    return StepConfig(**args)


def speq_step(**kw):
    """SPEQ self-speculation on the same target: nibble-plane draft chain with early stopping."""
    args = dict(target="2.7B", draft="speq", tree=(1,) * SPEQ_CHAIN, alpha=SPEQ_ALPHA,
                continue_prob=SPEQ_ALPHA)
    args.update(kw)
    return StepConfig(**args)


def paper_rows():
    """Our modeled figures for the papers' configurations on both boards.

    Returns
    -------
    list of dict
        ``config``, ``board``, ``sizing``, ``result`` (:class:`StepResult`).
    """
    rows = []
    for board in ("vhk158", "vck190"):
        for sizing in SIZINGS:
            acc = accelerator(board, sizing=sizing)
            for name, step in (("SpecMamba: 2.7B + 370M draft, 4.91 tok/step", seed_step()),
                               ("SPEQ self-speculation: 2.7B, nibble-plane draft", speq_step()),
                               ("autoregressive 2.7B (no draft)",
                                StepConfig(target="2.7B", draft="none", tree=()))):
                rows.append({"config": name, "board": board, "sizing": sizing,
                             "result": step_model(acc, step)})
    return rows
