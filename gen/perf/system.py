"""System model of the generated accelerator: one speculative decoding step on a roofline.

The blocks' cycles come from :mod:`gen.perf.blocks`, the papers' figures it is compared with
from :mod:`gen.perf.claims`.

:func:`step_model`: one speculative decoding step of a
Mamba2 target with a separate Mamba2 draft or with SPEQ self-speculation (the
draft reads only the BSFP v1 nibble plane). Every phase is placed on a
roofline: its time is the larger of its memory time (bytes / bandwidth) and
its compute time (block cycles / clock). What the block models do not cover
(the overlap of the linear and SSM units that the accelerator's scheduler
achieves, the share of the restore hidden behind the next step) is modeled by
explicit parameters (:class:`Accelerator` ``overlap``, ``restore_overlap``) with a
calibration hook (:class:`Calibration`). The draft's passes follow the flows the
runtime runs on the decoder core (:data:`hw.step_program.DRAFT_FLOWS`).

Nothing here simulates; the figures are model outputs, labelled as such in
every report.
"""

import functools
import json
import math
from dataclasses import asdict, dataclass, field, fields, replace

from specgen.golden.config import Config, preset, preset_names
from specgen.golden.lm import LMConfig
from specgen.golden.mamba2 import MAMBA2_DEFAULTS, MAMBA2_SIZES, MAMBA2_VOCAB
from specgen.golden.tree import TreeShape, fifo_schedule, fits_behind
from specgen.golden.validate import check_choice, check_float, check_int
from specgen.golden.weight_planes import (DRAFT_STRIPES, engine_weight_ports, input_transfers,
                                          stream_word_bits)
from specgen.hw.step_program import DRAFT_FLOWS

from specgen.gen.perf.blocks import (SSMTiming, pe_latency, dsp_linear_schedule, dsp_matmul_jobs,
                             linear_schedule, matmul_jobs, ssm_stream, tree_verifier_cycles)
from specgen.gen.perf.claims import SEED, SEED_TREE, SPEQ_ALPHA, SPEQ_CHAIN
from specgen.gen.perf.traffic import commit_traffic, pass_traffic

__all__ = ["VOCAB", "MambaDims", "model_names", "mamba_dims", "Calibration", "PowerModel",
           "PAPER_BOARD", "SIZINGS", "RESTORE_POLICIES", "SSM_ROWS", "Accelerator", "perf_board_names",
           "accelerator", "DRAFT_CHOICES", "MODEL_DRAFT_FLOWS", "StepConfig", "Phase", "StepResult", "JSON_KEYS",
           "expected_tokens", "SSM_OPS_PER_ELEM", "ssm_timing", "weight_bytes", "layout_weight_bytes",
           "state_bytes",
           "step_model", "deepest_probability", "solve_rising", "seed_step", "speq_step", "paper_rows", "StateTraffic",
           "state_traffic", "ssm_layer_seconds", "state_ports_needed", "vector_elements",
           "vector_stage_elements", "vector_beats", "commit_vector_elements", "head_groups",
           "layer_overlap"]

#: Mamba2 vocabulary (:data:`golden.mamba2.MAMBA2_VOCAB`).
VOCAB = MAMBA2_VOCAB


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
    """Mamba2 sizes accepted by :func:`mamba_dims` (``state-spaces/mamba``)."""
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
    (``docs/perf.md``), so every factor is 1.0 today. Once a whole step of
    ``hw.accelerator.Accelerator`` is measured, its figures replace the analytic
    parameters of :class:`Accelerator` (``restore_overlap``, ``overlap``) and
    :attr:`source` names the measurement.
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
        Device static plus board power at idle, W (:attr:`golden.config.BoardConfig.static_w`).
    pj_per_mac_full, pj_per_mac_quant : float
        Energy of one FP16 MAC (DSP58 multiply + exact fabric accumulate) and of
        one draft product (an exponent add), pJ.
    pj_per_state_elem : float
        One EMU state update (3 binary32 multiplies + 1 add), pJ.
    pj_per_byte : float
        Off-chip memory energy per byte moved, pJ
        (:attr:`golden.config.BoardConfig.mem_pj_per_byte`).
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

    @classmethod
    def from_board(cls, board):
        """The assumptions of a :class:`golden.config.BoardConfig` (its ``static_w`` and
        ``mem_pj_per_byte``); the per-operation energies are the defaults."""
        return cls(static_w=board.static_w, pj_per_byte=board.mem_pj_per_byte)


@dataclass(frozen=True, kw_only=True)
class StateTraffic:
    """One layer's SSM-state traffic on ``SSMEngine``'s state ports.

    The state lives in memory and streams through the engine's state read port
    while the SSM unit sweeps it, the new state out through its write port
    (``docs/blocks-tree-ssm.md``). Per layer and pass:

    * **tree pass** (verification): the committed state is read once; the tile
      ring of ``hw.tree_ssm.TreeSSMUnit`` keeps the nodes' states on chip
      (``gen/studies/tree_memory.py``), and nothing is written;
    * **commit** (SpecMamba's replay of the accepted path): the committed state
      read, one new state written;
    * **draft token**: its parent's state read, its own written.

    Reads and writes run on their own ports, striped over ``ports`` of each; on a
    board they also share the board's bandwidth with the weights
    (``shared_bytes_per_s``: DDR on VCK190 is the tighter limit). A port moves one beat
    a memory cycle at most, and no faster than its master's fabric side: a read
    master hands on one slice (``read_pack`` beats) a fabric cycle, and a write master
    takes one (``write_pack`` beats, ``hw.axi_master``).

    Attributes
    ----------
    layer_bytes : float
        One state of one layer: ``state_elems × elem_bytes``.
    port_bits : int
        Width of one state port (:func:`hw.ssm_engine.state_port_shape`).
    memory_clock_hz : float
        The board's memory clock, on which the ports run.
    fabric_clock_hz : float
        The board's fabric clock, on which the engine's side of each master runs.
    read_pack, write_pack : int
        Beats a read master packs into the slice it hands on each fabric cycle, and a
        write master splits from the slice it takes.
    ports : int
        Read ports, and as many write ports.
    efficiency : float
        Sustained share of each port's peak.
    shared_bytes_per_s : float or None
        The board's sustained bandwidth, which reads and writes share; None
        without a memory model (``sim``).
    """

    layer_bytes: float
    port_bits: int
    memory_clock_hz: float
    fabric_clock_hz: float
    read_pack: int
    ports: int
    write_pack: int = 1
    efficiency: float = 1.0
    shared_bytes_per_s: float | None = None

    @property
    def read_port_bytes_per_s(self):
        """Peak of one read port: its width times the memory clock, or times the fabric
        clock and ``read_pack`` where that is lower."""
        return self.port_bits / 8 * min(self.memory_clock_hz, self.fabric_clock_hz * self.read_pack)

    @property
    def write_port_bytes_per_s(self):
        """Peak of one write port: its width times the memory clock, or times the fabric
        clock and ``write_pack`` where that is lower."""
        return self.port_bits / 8 * min(self.memory_clock_hz,
                                        self.fabric_clock_hz * self.write_pack)

    def seconds(self, *, reads, writes):
        """Seconds to read ``reads`` and write ``writes`` states of one layer."""
        per_port = self.ports * self.efficiency
        t = max(reads * self.layer_bytes / (self.read_port_bytes_per_s * per_port),
                writes * self.layer_bytes / (self.write_port_bytes_per_s * per_port))
        if self.shared_bytes_per_s:
            t = max(t, (reads + writes) * self.layer_bytes / self.shared_bytes_per_s)
        return t

    def ports_needed(self, compute_s, *, reads, writes, max_ports=1024):
        """Fewest ports per direction whose state traffic fits in ``compute_s``, or None if
        no count up to ``max_ports`` does (the board's shared bandwidth binds)."""
        for n in range(1, max_ports + 1):
            if replace(self, ports=n).seconds(reads=reads, writes=writes) <= compute_s * (1 + 1e-12):
                return n
        return None


def state_traffic(config, *, state_elems, elem_bytes, ports=None, efficiency=1.0):
    """The :class:`StateTraffic` of a layer of ``state_elems`` elements on ``config``'s
    state ports (works without a memory model too: the ``sim`` preset).

    Parameters
    ----------
    config : golden.config.Config
        Board (memory clock, port width, bandwidth) and SSM lanes.
    state_elems : int
        State elements of one layer (``nheads × headdim × d_state``).
    elem_bytes : int
        Bytes per state element.
    ports : int, optional
        Read ports and as many write ports (default the design's ``ssm.state_ports``).
    efficiency : float
        Sustained share of the peaks.
    """
    if not isinstance(config, Config):
        raise TypeError(f"state_traffic: config must be a golden.config.Config, not {config!r}")
    check_int("state_traffic", "state_elems", state_elems, min=1)
    check_int("state_traffic", "elem_bytes", elem_bytes, min=1)
    ports = config.ssm.state_ports if ports is None else ports
    check_int("state_traffic", "ports", ports, min=1)
    check_float("state_traffic", "efficiency", efficiency, min=0.01, max=1.0)
    board = config.board
    shared = board.mem_bw_gbs * 1e9 * efficiency if board.mem_bw_gbs > 0 else None
    from specgen.hw.ssm_engine import state_port_shape
    bits, slice_bits = state_port_shape(config)
    return StateTraffic(layer_bytes=state_elems * elem_bytes, port_bits=bits,
                        memory_clock_hz=board.memory_clock_mhz * 1e6,
                        fabric_clock_hz=board.clock_mhz * 1e6, read_pack=slice_bits // bits,
                        write_pack=slice_bits // bits,
                        ports=ports, efficiency=efficiency, shared_bytes_per_s=shared)


SIZINGS = ("preset", "dsp")
RESTORE_POLICIES = ("recompute", "store")
#: :attr:`Accelerator.ssm_rows`: state rows a cycle (1 as built; more, what-ifs).
SSM_ROWS = (1, 2, 4, 8)


@dataclass(frozen=True, kw_only=True)
class Accelerator:
    """The generated accelerator as the model sees it: the design's config, from which the
    RTL is built too, and the model's own assumptions.

    Parameters
    ----------
    config : golden.config.Config
        The design: board (clock, memory bandwidth, DSP58 budget, power assumptions),
        linear unit, SSM unit, tree and pipeline configs (:func:`accelerator`).
    ssm_words_per_cycle : int, optional
        32-bit words per cycle into the SSM unit's input banks; by default the
        design's ``ssm.input_words`` (what the RTL's input port takes a beat).
    sizing : str
        ``"preset"`` (the design's arrays) or ``"dsp"`` (sized to the DSP budget,
        :func:`accelerator`).
    overlap : float
        Scheduler overlap of the linear unit and the SSM unit inside a pass,
        0 (serial) … 1 (the longer hides the shorter).
    restore_overlap : float
        Share of the state-restore phase hidden behind the next step's weight
        streaming (0 = none hidden).
    state_bytes : int
        Bytes per SSM state element (4: binary32, as the RTL).
    mem_efficiency : float
        Sustained share of the peak memory bandwidth (1.0: peak); the state ports
        sustain the same share of theirs.
    state_ports : int, optional
        State read ports, and as many write ports, the SSM state is striped over:
        by default the design's (``ssm.state_ports``, what ``hw.ssm_engine.SSMEngine``
        builds: 16 on VHK158, 1 on VCK190); another count prices a design with
        that many ports of the same width (:class:`StateTraffic`).
    weight_beats : int, optional
        Column beats each weight port delivers a cycle: by default the design's
        ``linear.weight_beats`` (what ``hw.weight_stream`` hands the unit a transfer: 2 on
        VHK158, 1 on VCK190); another count is a what-if.
    nibble_beats : int, optional
        The same in a nibble-plane (SPEQ draft) pass: by default :attr:`weight_beats`, or
        four times it with ``linear.draft_plane`` (the draft plane striped over a port's
        four masters, a transfer of ``4 · weight_beats`` sub-beats; without it three of the
        four idle); another count is a what-if.
    vector_lanes : int, optional
        Elements a cycle of the decoder core's vector stages (the norms, conv1d, the
        residual, the moves: :func:`vector_stage_elements`): by default the design's
        ``vector.lanes`` (what ``hw.stream_engine`` builds), each stage at
        ``config.stage_lanes`` (the conv1d's windows over ``config.conv1d_parts`` ports);
        another count prices stages with that many lanes. The stages run between the
        linear and SSM units: the core's programs order every layer's stages by
        barriers, except that a head group's conv1d and SSM pass run beside the linear
        engine's jobs for the next group's rows (:func:`layer_overlap`).
    ssm_rows : int
        A what-if on the SSM unit's rows a cycle: 1 (the design's, ``ssm.lanes``: one
        row's columns, or ``lanes/d_state`` rows of a head as ``hw.tree_ssm.TreeSSMUnit``
        builds them) or 2, 4, 8 times as many, with as many times the EMU lanes and
        DSP58. The golden model defines the results (``golden.mamba2.SSMConfig`` with
        ``lanes`` a multiple of ``d_state``: the same reduction tree, so the same bits);
        the state streams that much faster, which the phases' state time prices on
        :attr:`state_ports`.
    stage_reuse : bool
        A what-if (default False: as built): each matrix's inputs read once for all its
        jobs, and the stages' weights (norm weights, conv taps and bias) once a pass
        (:func:`gen.perf.traffic.pass_traffic`'s ``reuse``). As built, every output
        tile's job reads its inputs again and the stages read their weights with every
        node: bytes the memory carries where its bandwidth binds (VCK190).
    calibration : Calibration
    """

    config: Config
    ssm_words_per_cycle: int | None = None
    sizing: str = "preset"
    overlap: float = 0.0
    restore_overlap: float = 0.0
    state_bytes: int = 4
    mem_efficiency: float = 1.0
    state_ports: int | None = None
    vector_lanes: int | None = None
    weight_beats: int | None = None
    nibble_beats: int | None = None
    ssm_rows: int = 1
    stage_reuse: bool = False
    calibration: Calibration = field(default_factory=Calibration)

    def __post_init__(self):
        if not isinstance(self.config, Config):
            raise TypeError(f"Accelerator.config must be a golden.config.Config, not {self.config!r}")
        if self.board.mem_bw_gbs <= 0:
            raise ValueError(f"Accelerator.config.board {self.board.name!r} has no memory model "
                             f"(mem_bw_gbs {self.board.mem_bw_gbs}); allowed boards: "
                             f"{', '.join(perf_board_names())}, or a design with board.mem_bw_gbs > 0")
        if self.ssm_lanes & (self.ssm_lanes - 1):
            raise ValueError(f"Accelerator.config.ssm.lanes must be a power of two, not {self.ssm_lanes}")
        if self.ssm_words_per_cycle is None:
            object.__setattr__(self, "ssm_words_per_cycle", self.config.ssm.input_words)
        check_int("Accelerator", "ssm_words_per_cycle", self.ssm_words_per_cycle, min=1)
        check_choice("Accelerator", "sizing", self.sizing, SIZINGS)
        check_float("Accelerator", "overlap", self.overlap, min=0.0, max=1.0)
        check_float("Accelerator", "restore_overlap", self.restore_overlap, min=0.0, max=1.0)
        check_choice("Accelerator", "state_bytes", self.state_bytes, (2, 4))
        check_float("Accelerator", "mem_efficiency", self.mem_efficiency, min=0.01, max=1.0)
        if self.state_ports is None:
            object.__setattr__(self, "state_ports", self.config.ssm.state_ports)
        check_int("Accelerator", "state_ports", self.state_ports, min=1)
        if self.vector_lanes is None:
            object.__setattr__(self, "vector_lanes", self.config.vector.lanes)
        check_int("Accelerator", "vector_lanes", self.vector_lanes, min=1)
        if self.weight_beats is None:
            object.__setattr__(self, "weight_beats", self.config.linear.weight_beats)
        check_int("Accelerator", "weight_beats", self.weight_beats, min=1)
        if self.nibble_beats is None:
            object.__setattr__(self, "nibble_beats", self.weight_beats * (
                DRAFT_STRIPES if self.config.linear.draft_plane else 1))
        check_int("Accelerator", "nibble_beats", self.nibble_beats, min=1)
        check_choice("Accelerator", "ssm_rows", self.ssm_rows, SSM_ROWS)
        check_choice("Accelerator", "stage_reuse", self.stage_reuse, (False, True))
        if not isinstance(self.calibration, Calibration):
            raise TypeError(f"Accelerator.calibration must be a Calibration, not {self.calibration!r}")

    # The design's facts, read from its config (never copied).
    board = property(lambda self: self.config.board)
    linear = property(lambda self: self.config.linear)
    ssm_lanes = property(lambda self: self.config.ssm.lanes)
    ssm_mul_stages = property(lambda self: self.config.pipeline.fp_mul_stages)
    ssm_add_stages = property(lambda self: self.config.pipeline.fp_add_stages)
    fifo_depth = property(lambda self: self.config.tree.fifo_depth)

    def stage_lanes(self, engine):
        """Elements a beat of the decoder core's vector engine ``engine`` at
        :attr:`vector_lanes` (``golden.config.Config.stage_lanes``: Mamba2's
        ``d_conv = 4`` windows for the conv1d)."""
        return self.config.stage_lanes(engine, lanes=self.vector_lanes)

    @property
    def power(self):
        """The board's :class:`PowerModel`."""
        return PowerModel.from_board(self.board)

    @property
    def clock_hz(self):
        return self.board.clock_mhz * 1e6

    @property
    def bandwidth(self):
        """Sustained bytes/s."""
        return self.board.mem_bw_gbs * 1e9 * self.mem_efficiency

    def state_traffic(self, dims):
        """The :class:`StateTraffic` of one layer of ``dims`` on this design's state ports."""
        return state_traffic(self.config, state_elems=dims.state_elems,
                             elem_bytes=self.state_bytes, ports=self.state_ports,
                             efficiency=self.mem_efficiency)

    @property
    def weight_ports(self):
        """Weight ports of the DSP linear engine (``golden.weight_planes.engine_weight_ports``:
        6 on VHK158, 1 on VCK190), each delivering one column beat a cycle."""
        return engine_weight_ports(self.config)

    def beats(self, mode):
        """Column beats a weight port delivers a cycle in a pass of ``mode`` (1: the nibble
        plane alone): :attr:`nibble_beats` or :attr:`weight_beats`."""
        return self.nibble_beats if mode else self.weight_beats

    def weight_feed(self, mode=0, pack=1):
        """Cycles one input's weights take on a weight port: its ``cols / weight_ports``
        column beats, ``pack`` to a sub-beat (a tile of at most ``1/pack`` of the slots),
        at :meth:`beats` sub-beats a cycle (VHK158 as built: 7 cycles, 4 packed 2, 2 packed
        4; VCK190: 8, 4, 2). A DSP linear job takes at least this many cycles per input, so
        passes of fewer tokens are bound by it (``gen.perf.blocks.dsp_linear_schedule``,
        calibrated on the RTL)."""
        return input_transfers(self.linear.port_columns, pack, self.beats(mode))

    @property
    def dsp_linear(self):
        """DSP58 of the linear unit: one per PE (an 11 × 11 significand product)."""
        return self.linear.rows * self.linear.cols

    @property
    def ssm_emus(self):
        """EMU lanes of the SSM unit: ``ssm.lanes`` times :attr:`ssm_rows`."""
        return self.ssm_lanes * self.ssm_rows

    @property
    def dsp_ssm(self):
        """DSP58 of the SSM unit of :attr:`ssm_emus` lanes
        (:func:`gen.estimate.dsp_model.analytical_dsp58`, the design's count)."""
        from specgen.gen.estimate.dsp_model import analytical_dsp58
        ssm = replace(self.config.ssm, lanes=self.ssm_emus)
        return analytical_dsp58(self.config.replace(ssm=ssm))["SSM unit"]

    def describe(self):
        lin = self.linear
        array = (f"DSPLinearUnit {lin.rows}x{lin.cols} DSPFP32 slots (T <= {lin.max_tokens})"
                 if lin.contract == "dspfp32" else
                 f"LinearUnit {lin.rows}x{lin.cols} PEs (q{lin.quant_lanes})")
        return (f"{self.board.name}: {array}, "
                f"SSMUnit {self.ssm_lanes} lanes"
                f"{f' x {self.ssm_rows} rows (what-if)' if self.ssm_rows > 1 else ''}, "
                f"{self.board.clock_mhz:g} MHz, "
                f"{self.board.memory} {self.board.mem_bw_gbs:g} GB/s, sizing {self.sizing}")

    def to_dict(self):
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "config"}
        d["calibration"] = asdict(self.calibration)
        d.update(design=self.config.name, board=asdict(self.board), linear=asdict(self.linear),
                 ssm_lanes=self.ssm_lanes, ssm_mul_stages=self.ssm_mul_stages,
                 ssm_add_stages=self.ssm_add_stages,
                 pe_round_stages=self.config.pipeline.pe_round_stages,
                 fifo_depth=self.fifo_depth, power=asdict(self.power),
                 dsp_linear=self.dsp_linear, dsp_ssm=self.dsp_ssm, dsp_budget=self.board.dsp58)
        return d


def perf_board_names():
    """Board presets with a memory model (the performance model needs a bandwidth)."""
    return tuple(n for n in preset_names() if preset(n).board.mem_bw_gbs > 0)


def _pow2_floor(x):
    return 1 << (max(1, int(x)).bit_length() - 1)


#: The board on which SpecMamba reports its DSP58 split (:data:`gen.perf.claims.SEED`).
PAPER_BOARD = "vhk158"


def accelerator(config, *, sizing="preset", **assumptions):
    """The accelerator of a design.

    Parameters
    ----------
    config : golden.config.Config
        The design (a preset, a design file, overrides: :func:`gen.cli.design.resolve_config`).
    sizing : str
        ``"preset"``: the design's linear unit and SSM lanes. ``"dsp"``: 16 token
        lanes (the SpecMamba notes' prediction length) and as many rows as SpecMamba's
        linear unit's share of the DSP58 on VHK158 (3537), and the SSM lanes of
        its SSM unit's share (1068, four DSP58 per lane), both scaled to the
        design's DSP58 count; at most ``d_state`` = 128 lanes (the RTL's limit).
    **assumptions
        Any other :class:`Accelerator` field.

    Raises
    ------
    TypeError, ValueError
        Not a ``Config``, or an unknown sizing; the message names the allowed values.
    """
    if not isinstance(config, Config):
        raise TypeError(f"accelerator: config must be a golden.config.Config, not {config!r}")
    check_choice("accelerator", "sizing", sizing, SIZINGS)
    if sizing == "dsp":
        share = config.board.dsp58 / preset(PAPER_BOARD).board.dsp58
        cols = 16
        rows = int(SEED["linear_dsp_vhk158"] * share) // cols
        lanes = min(MAMBA2_DEFAULTS["d_state"], _pow2_floor(SEED["ssm_dsp_vhk158"] * share / 4))
        config = replace(config, linear=replace(config.linear, rows=rows, cols=cols),
                         ssm=replace(config.ssm, lanes=lanes))
    return Accelerator(config=config, sizing=sizing, **assumptions)


# =====================================================================================
# One speculative decoding step
# =====================================================================================

DRAFT_CHOICES = ("speq", "none")
#: The draft flows a step may name: the runtime's, and ``best`` (the faster of them).
MODEL_DRAFT_FLOWS = DRAFT_FLOWS + ("best",)


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
        Committed tokens per step (accepted + bonus), e.g. the SpecMamba notes' 4.91.
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
    draft_flow : str
        How the draft's passes run on the decoder core
        (:data:`hw.step_program.DRAFT_FLOWS`, what the runtime's
        ``RtlEngine(draft_flow=)`` runs): ``"node"``, one 1-node pass per expanded node
        from its parent's state in memory, writing its own; ``"prefix"``, per depth one
        tree pass over every node drafted so far from the committed state. ``"best"``
        (default): whichever gives the step more tokens/s (:func:`step_model` returns
        the step with the flow it chose).
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
    draft_flow: str = "best"

    def __post_init__(self):
        check_choice("StepConfig", "target", self.target, model_names())
        check_choice("StepConfig", "draft", self.draft, model_names() + DRAFT_CHOICES)
        tree = self.tree if isinstance(self.tree, TreeShape) else TreeShape(tuple(self.tree))
        if self.draft != "none" and tree.depth == 0:
            raise ValueError("StepConfig.tree must have depth >= 1 when drafting, not a root alone")
        object.__setattr__(self, "tree", tree if self.draft != "none" else TreeShape(()))
        check_float("StepConfig", "continue_prob", self.continue_prob, min=0.0, max=1.0)
        check_choice("StepConfig", "restore_policy", self.restore_policy, RESTORE_POLICIES)
        check_choice("StepConfig", "draft_flow", self.draft_flow, MODEL_DRAFT_FLOWS)
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
        Seconds to move its bytes at the sustained bandwidth; seconds of block cycles,
        the SSM unit's share taking at least its state traffic (:attr:`t_state`).
    bytes : float
        Off-chip bytes: the weights, the SSM state and the stages' operands and results
        (:attr:`stage_bytes`).
    weight_bytes : float
        The weight bytes the design reads (the planes as laid out, padded tiles
        included: :func:`layout_weight_bytes`).
    macs : float
        Useful work in multiply-accumulate equivalents (operations / 2): the
        linear layers' MACs plus :data:`SSM_OPS_PER_ELEM` / 2 per EMU state update.
    linear_cycles, ssm_cycles, other_cycles : float
        Block cycles (expected values over early stopping).
    hidden : float
        Share of the phase hidden behind other phases (restore only).
    full_macs, quant_macs : float
        Linear-layer MACs of the phase at full precision (FP16 weights) and in the
        array's quantized mode (the SPEQ draft's nibble-plane products).
    state_updates : float
        EMU state-element updates (one per state element, node and layer).
    t_state : float
        Seconds of SSM-state traffic on the state ports (:class:`StateTraffic`), all layers.
    t_ssm : float
        Seconds of the SSM unit's own cycles; the SSM part of :attr:`t_compute` is
        ``max(t_ssm, t_state)``.
    dense_weight_bytes : float
        The model's weight bytes at the pass's precision, unpadded (:func:`weight_bytes`):
        what the memory ceiling counts.
    vector_cycles : float
        Cycles of the vector stages (:func:`vector_beats` at
        :meth:`Accelerator.stage_lanes`), serial with the linear and SSM units and
        included in :attr:`t_compute`.
    overlap_cycles : float
        Cycles of the linear unit, the SSM unit and the conv1d that run at once inside
        the phase's passes (:func:`layer_overlap`: head groups beside in_proj's later
        jobs), taken off :attr:`t_compute`.
    t_feed : float
        Seconds the design's weight ports take to deliver the passes' linear-layer weights
        once each (:meth:`Accelerator.weight_feed`; 0 for an exact PE array).
    stage_bytes : float
        Off-chip bytes of the stages' operands and results, the conv windows, the SSM
        input records and ``y``, and the programs' records (:mod:`gen.perf.traffic`):
        every word of the decoder core is in memory.
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
    full_macs: float = 0.0
    quant_macs: float = 0.0
    state_updates: float = 0.0
    t_state: float = 0.0
    t_ssm: float = 0.0
    dense_weight_bytes: float = 0.0
    vector_cycles: float = 0.0
    overlap_cycles: float = 0.0
    t_feed: float = 0.0
    stage_bytes: float = 0.0

    @property
    def linear_macs(self):
        """MACs of the linear layers, both modes."""
        return self.full_macs + self.quant_macs

    @property
    def time(self):
        return max(self.t_mem, self.t_compute) * (1.0 - self.hidden)

    @property
    def bound(self):
        """``"memory"`` (the shared bandwidth), ``"state"`` (the SSM waits on its state
        ports) or ``"compute"``."""
        if self.t_mem >= self.t_compute:
            return "memory"
        return "state" if self.t_state > self.t_ssm else "compute"

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
    """Outputs of :func:`step_model`.

    ``draft_passes`` is the expected number of depths drafted (the golden decoder's
    draft length); the passes the draft flow runs for them are in the draft phase.
    """

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
        """Tokens/J if the design ran at the SpecMamba notes' TOPS/W on our operation count."""
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
                  "SSM states are read/written off-chip in binary32, through the SSM "
                  "engine's state ports (the SSM part of a pass takes at least that); "
                  "every stage's operands and results cross the memory too "
                  "(gen.perf.traffic, exact against the RTL's AXI bytes)",
        "stage_reuse": acc.stage_reuse,
        "state_ports": acc.state_ports,
        "overlap": acc.overlap,
        "restore_overlap": acc.restore_overlap,
        "restore_policy": step.restore_policy,
        "draft_flow": step.draft_flow,
        "mem_efficiency": acc.mem_efficiency,
        "power": asdict(acc.power),
        "calibration": asdict(acc.calibration),
        "not_modeled": "the host's work between programs (the draft's top-k of each "
                       "expanded node's logits, the programs it writes)",
    }


def expected_tokens(tree, *, alpha, levels=None):
    """Expected committed tokens per step for per-token acceptance ``alpha``.

    Model assumption: at depth ``k`` an accepted node's ``b_k`` children hold
    distinct candidate tokens and one of them is the target's choice with
    probability ``1 − (1 − alpha)^b_k``; the bonus token always counts. For a
    chain this is ``(1 − alpha^(L+1)) / (1 − alpha)``.

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

    # wbytes: the weight bytes the design reads; dbytes: the model's dense weight bytes,
    # which the roofline (the physical limit) counts.
    # sbytes: the SSM state's and the stages' bytes; abytes: the stages' alone.
    KEYS = ("lin", "ssm", "other", "vec", "hidden", "wbytes", "dbytes", "sbytes", "abytes",
            "full", "quant", "t_feed", "elems", "t_comp", "t_mem", "t_state", "t_ssm", "time")

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

    def phase(self, name, hidden=0.0, useful=None):
        """The :class:`Phase`; its work (MACs, state updates, dense weight bytes) from
        ``useful`` (default this tally): what the step needs, which the ceilings count,
        where the design's flow does more (a draft pass that recomputes earlier nodes)."""
        u = self if useful is None else useful
        return Phase(name, self.t_mem, self.t_comp, self.wbytes + self.sbytes, self.wbytes,
                     u.ops / 2, self.lin, self.ssm, self.other, hidden, u.full, u.quant,
                     u.elems, self.t_state, self.t_ssm, u.dbytes, self.vec, self.hidden,
                     u.t_feed, self.abytes)


# Pure functions of frozen (hashable) inputs: a tree search or a sweep prices the same
# passes many times, and one pass's schedule takes a fraction of a second.
@functools.lru_cache(maxsize=4096)
def _linear_cycles(acc, dims, *, tokens, mode):
    runs = []
    dsp = acc.linear.contract == "dspfp32"
    jobs = dsp_matmul_jobs if dsp else matmul_jobs
    for _, o, i, count in dims.matrices():
        runs += jobs(linear=acc.linear, out_features=o, in_features=i, tokens=tokens,
                     mode=mode) * count
    if dsp:
        return (dsp_linear_schedule(runs, linear=acc.linear, columns=acc.linear.port_columns,
                                    beats=acc.beats(mode)).cycles
                * acc.calibration.linear)
    return linear_schedule(runs, pe_latency=pe_latency(acc.config)).cycles * acc.calibration.linear


def ssm_timing(acc, dims):
    """The :class:`SSMTiming` of ``acc``'s SSM unit running a layer of ``dims``."""
    # Lanes beyond d_state sweep several rows a cycle (hw.tree_ssm.TreeSSMUnit); a model
    # whose d_state they do not fit takes one row's d_state lanes.
    lanes = acc.ssm_lanes
    if lanes > dims.d_state and lanes % dims.d_state:
        lanes = dims.d_state
    # The design's arithmetic (its pipeline depths) on the model's geometry.
    return SSMTiming(cfg=replace(dims.ssm_config, lanes=lanes, contract=acc.config.ssm.contract),
                     mul_stages=acc.ssm_mul_stages,
                     add_stages=acc.ssm_add_stages, rows_per_cycle=acc.ssm_rows)


def head_groups(acc, dims):
    """SSM passes a layer of ``dims`` takes on ``acc`` (an :class:`Accelerator`, or a
    design's ``golden.config.Config``): the design's ``ssm.head_groups`` where it splits
    the model's heads into groups of a multiple of ``ssm.input_words`` heads (what
    :class:`hw.decoder.DecoderCore` runs), else 1 (a what-if on a model the design's
    groups do not divide)."""
    ssm = (acc if isinstance(acc, Config) else acc.config).ssm
    G, H = ssm.head_groups, dims.nheads
    return G if H % G == 0 and (H // G) % ssm.input_words == 0 else 1


@functools.lru_cache(maxsize=4096)
def _ssm_cycles(acc, dims, *, tokens):
    """SSM unit cycles of ``tokens`` nodes in every layer (one stream per pass, a pass per
    head group, passes and layers serial)."""
    G = head_groups(acc, dims)
    t = ssm_timing(acc, dims)
    if G > 1:
        t = replace(t, cfg=replace(t.cfg, nheads=t.cfg.nheads // G))
    per_layer = G * (ssm_stream(t, tokens=tokens, words_per_cycle=acc.ssm_words_per_cycle).end + 1)
    return dims.n_layer * per_layer * acc.calibration.ssm


def layer_overlap(*, jobs, need, job_cycles, conv, ssm):
    """Cycles of one layer's in_proj jobs, conv1d and SSM passes hidden by running head
    groups beside the linear engine, as :class:`hw.step_program.StepPlan` orders them:
    group ``g``'s conv1d waits for the first ``need[g]`` jobs (those holding its rows), its
    SSM pass for its conv1d and the pass before; the jobs a group adds are handed out after
    the previous group's SSM pass (and the rest of in_proj, ``z``, after the last), and the
    gated norm waits for every SSM pass and job. ``jobs`` in_proj jobs of ``job_cycles``
    cycles each; ``conv[g]`` and ``ssm[g]`` each group's cycles. Returns the serial sum
    minus the schedule's span (≥ 0; the hand-over latencies are left out)."""
    lin_end, issued, hand, conv_end, ssm_end = 0.0, 0, 0.0, 0.0, 0.0
    for g, n in enumerate(need):
        if n > issued:
            lin_end = max(lin_end, hand) + (n - issued) * job_cycles
            issued, start = n, max(lin_end, hand, conv_end)
        else:
            start = max(hand, conv_end)
        conv_end = start + conv[g]
        hand = max(conv_end, ssm_end)          # the SSM pass's hand-over
        ssm_end = hand + ssm[g]
    if jobs > issued:
        lin_end = max(lin_end, hand) + (jobs - issued) * job_cycles
    serial = jobs * job_cycles + sum(conv) + sum(ssm)
    return max(0.0, serial - max(lin_end, ssm_end))


@functools.lru_cache(maxsize=4096)
def _hidden_cycles(acc, dims, *, tokens, mode, ssm_layer):
    """Cycles of a pass of ``tokens`` nodes that :func:`layer_overlap` hides, all layers
    (the DSP linear engine only: the decoder core's)."""
    if acc.linear.contract != "dspfp32":
        return 0.0
    from specgen.hw.step_program import group_rows_end, in_proj_segments
    G = head_groups(acc, dims)
    segs, _ = in_proj_segments(dims, acc.linear.cols, G)
    tile = acc.linear.tile_rows
    runs = dsp_matmul_jobs(linear=acc.linear, out_features=dims.d_in_proj,
                           in_features=dims.d_model, tokens=tokens, mode=mode)
    jobs = -(-dims.d_in_proj // tile)
    job_cycles = (dsp_linear_schedule(runs, linear=acc.linear, columns=acc.linear.port_columns,
                                      beats=acc.beats(mode)).cycles
                  * acc.calibration.linear
                  / jobs)
    need = [min(jobs, -(-end // tile)) for end in group_rows_end(segs, G)]
    Hg = dims.nheads // G
    conv = [tokens * (2 * dims.d_state + Hg * dims.headdim) / acc.stage_lanes("conv1d")] * G
    return dims.n_layer * layer_overlap(jobs=jobs, need=need, job_cycles=job_cycles,
                                        conv=conv, ssm=[ssm_layer / G] * G)


def ssm_layer_seconds(acc, dims, *, tokens):
    """Seconds of ``acc``'s SSM unit on ``tokens`` nodes of one layer of ``dims`` (its own
    cycles, without waiting on the state ports)."""
    return _ssm_cycles(acc, dims, tokens=tokens) / dims.n_layer / acc.clock_hz


def vector_stage_elements(dims, *, tokens, groups=1):
    """:func:`vector_elements` by the decoder core's engine that streams them
    (``hw.decoder.DECODER_ENGINES``); with ``groups`` head groups the copy engine moves
    ``B`` and ``C`` from group 0's SSM records into each later group's (each group's
    record holds them)."""
    return {"copy": tokens * (dims.d_model + dims.n_layer * (dims.nheads
                                                              + 2 * (groups - 1) * dims.d_state)),
            "norm": tokens * (dims.n_layer + 1) * dims.d_model,
            "conv1d": tokens * dims.n_layer * dims.conv_dim,
            "gate_norm": tokens * dims.n_layer * dims.d_inner,
            "residual": tokens * dims.n_layer * dims.d_model,
            "argmax": tokens * dims.vocab}


def vector_beats(dims, *, tokens, lanes, groups=1):
    """Beats (cycles at full rate) of the vector stages of one pass over ``tokens`` nodes,
    ``lanes(engine)`` elements a beat of each engine (``golden.config.Config.stage_lanes``)."""
    return sum(n / lanes(e) for e, n in
               vector_stage_elements(dims, tokens=tokens, groups=groups).items())


def vector_elements(dims, *, tokens):
    """Elements the decoder core's vector stages stream in one pass of ``dims``'s model over
    ``tokens`` nodes, as ``hw.step_program.StepPlan.program`` orders them: per node the
    embedding row's gather (``d_model``), per layer and node the pre-norm (``d_model``),
    conv1d (``conv_dim`` channels), the move of ``dt`` into the SSM records (``nheads``),
    the gated norm (``d_inner``) and the residual (``d_model``), then per node the final
    norm (``d_model``) and the argmax over the logits (``vocab``). The acceptance
    engine's few cycles a node are left out."""
    return sum(vector_stage_elements(dims, tokens=tokens).values())


def commit_vector_elements(dims):
    """Elements a commit's vector stage streams: per layer the accepted path's last conv
    window into the committed slot, ``conv_dim`` windows of ``d_conv − 1`` binary32 words
    each in the copy engine's element (:func:`hw.decoder.window_bytes`), moved as 32-bit
    words."""
    from specgen.hw.decoder import window_bytes
    return dims.n_layer * dims.conv_dim * window_bytes(dims) // 4


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


@functools.lru_cache(maxsize=256)
def layout_weight_bytes(config, dims, *, bits):
    """Bytes a pass of ``config``'s DSP linear engine reads from the weight planes of
    ``dims``'s model, as the memory map lays them out (``golden.weight_planes``): every
    output tile holds ``rows · cols`` slots, padding rows included, so a matrix whose rows
    do not fill its last tile reads that tile whole, or its pieces with
    ``linear.split_tiles`` (``docs/memory.md``, tile padding). ``bits`` 4: the nibble
    plane alone (a SPEQ draft pass); 16: both planes. in_proj's segments are padded
    as the programs lay them out (:func:`gen.perf.traffic.pass_traffic`'s weight
    bytes, which the step model charges). The other weights
    (:attr:`MambaDims.small_params`) are counted FP16, as in :func:`weight_bytes`."""
    check_choice("layout_weight_bytes", "bits", bits, (4, 16))
    planes = pass_traffic(config, dims, tokens=1, mode=int(bits == 4),
                          groups=head_groups(config, dims)).weights[0]
    return planes + dims.small_params * 2


def state_bytes(acc, dims):
    """Bytes of one node's recurrent state over all layers: SSM state and conv window."""
    return dims.n_layer * (dims.state_elems + dims.conv_elems) * acc.state_bytes


def _state_seconds(acc, dims, *, reads, writes):
    """Seconds of ``reads`` and ``writes`` node states per layer on the state ports, all layers."""
    return dims.n_layer * acc.state_traffic(dims).seconds(reads=reads, writes=writes)


def _pass(acc, dims, *, tokens, mode, bits, scale_group, state_reads, state_writes,
          accept=False):
    """One forward pass over ``tokens`` nodes that share one weight read, reading
    ``state_reads`` and writing ``state_writes`` node states per layer (``accept``: the
    target's tree pass, ending with the greedy acceptance)."""
    t = _Tally()
    t.lin = _linear_cycles(acc, dims, tokens=tokens, mode=mode)
    t.ssm = _ssm_cycles(acc, dims, tokens=tokens)
    t.dbytes = weight_bytes(dims, bits=bits, scale_group=scale_group)
    # The dense linear weights (the other weights are binary32 words the stages read with
    # their operands: the stage bytes below).
    t.wbytes = t.dbytes - 2 * dims.small_params
    # Every other word the decoder core's program moves through memory: the SSM state
    # images and the stages' operands and results (gen.perf.traffic, which the RTL's
    # counted bytes check).
    tr = pass_traffic(acc.config, dims, tokens=tokens, mode=mode, groups=head_groups(acc, dims),
                      accept=accept, state_elem_bytes=acc.state_bytes,
                      reuse=acc.stage_reuse)
    if (acc.linear.contract == "dspfp32" and bits in (4, 16) and scale_group is None
            and stream_word_bits(acc.config) % 8 == 0):
        # What the engine streams: the planes as laid out, padding rows included (and
        # in_proj's segments padded to whole result records). An array with no plane
        # layout (a column beat of 4·rows bits that is not whole bytes, as some
        # DSP-sized arrays of the model) keeps the dense bytes.
        t.wbytes = tr.weights[0]
    t.abytes = sum(tr.stage)
    t.sbytes = (state_reads + state_writes) * tr.state[0] + t.abytes
    if mode:
        t.quant = dims.linear_params * tokens
    else:
        t.full = dims.linear_params * tokens
    if acc.linear.contract == "dspfp32":
        # Column beats of `rows` weights, `weight_ports × beats` a cycle.
        t.t_feed = (dims.linear_params / (acc.weight_ports * acc.linear.rows * acc.beats(mode))
                    / acc.clock_hz)
    t.elems = dims.state_elems * dims.n_layer * tokens
    # The state streams through the engine while the SSM unit sweeps it, so each layer's
    # SSM part takes max(its cycles, its state traffic); the linear unit, which does not
    # touch the state, combines with that as before (with overlap 1 the pass is the plain
    # roofline max(linear, SSM, state)).
    t.t_ssm = t.ssm / acc.clock_hz
    t.t_state = _state_seconds(acc, dims, reads=state_reads, writes=state_writes)
    t.vec = vector_beats(dims, tokens=tokens, lanes=acc.stage_lanes,
                         groups=head_groups(acc, dims))
    # In a layer, head groups' conv1d and SSM passes run beside in_proj's later jobs
    # (layer_overlap); the overlap knob prices more than the programs do, as a what-if.
    ssm_layer = max(t.t_ssm, t.t_state) * acc.clock_hz / dims.n_layer
    t.hidden = _hidden_cycles(acc, dims, tokens=tokens, mode=mode, ssm_layer=ssm_layer)
    t.t_comp = min(t.lin + max(t.t_ssm, t.t_state) * acc.clock_hz + t.vec - t.hidden,
                   _combine(t.lin, max(t.t_ssm, t.t_state) * acc.clock_hz, acc.overlap)
                   + t.vec) / acc.clock_hz
    t.t_mem = (t.wbytes + t.sbytes) / acc.bandwidth
    t.time = max(t.t_comp, t.t_mem)
    return t


def step_model(accel, step):
    """Model one speculative decoding step on ``accel``.

    Phases (each on its own roofline):

    draft
        ``levels`` depths of draft passes (early stopping: a distribution over
        ``levels``), as the runtime runs them on the decoder core
        (``step.draft_flow``). ``node``: one 1-node pass per expanded node (the
        ``b``-ary tree's nodes of depth ``< levels``), each reading the draft's weights,
        its parent's state (the committed state for the root) and writing its own.
        ``prefix``: per depth ``k`` one tree pass over every node of depth ``≤ k``
        (one weight read; the committed state read once, the tile ring keeps the nodes'
        states on chip). When the accepted path ends on the deepest level, which no pass
        ran (its probability is that of the acceptance model,
        :func:`deepest_probability`), its last node is carried into the next step: it
        rides in the root's pass, a chain of two (``node``), or as one more node in every
        pass (``prefix``). The steady-state probability that a step carries one in is
        that of the step before ending on its deepest level; where the tile ring cannot
        schedule the prefix flow's tree with the carried node in front, the whole tree
        runs first instead.
    verify
        One target pass over every drafted node (one weight read; the FIFO tree
        schedule keeps node states on chip tile by tile and reads the committed
        state once), plus the ``TreeVerifier``'s load, match and path cycles.
        Without a draft: one plain decode pass (state read and written).
    restore
        The target's: ``recompute``, the per-node SSM inputs (x, B, C, dt) are written
        during verification and the target SSM is re-run along the accepted path (those
        inputs and the committed state read, the new state written); ``store``, every
        node's state was written during verification. Then the draft's commit, as the
        runtime runs it (SPEQ's nibble-plane draft keeps a state of its own too):
        ``prefix``, the same replay along the path in the draft (a carried node first, a
        node carried on left out: the same length on average); ``node``, the last path
        node's windows copied and its stored state adopted, no replay.
        ``restore_overlap`` of the phase is hidden, and in the ``node`` flow the
        target's commit runs beside the draft's next node pass: hidden up to that pass's
        linear and vector time.

    Each phase takes ``max(t_mem, t_compute)``; inside a pass the linear and SSM
    cycles combine with the scheduler ``overlap``, the SSM part taking at least its
    state traffic on the ``state_ports`` (:class:`StateTraffic`).

    With ``step.draft_flow == "best"`` both flows are priced and the faster returned,
    its :attr:`StepResult.step` naming the flow.

    Returns
    -------
    StepResult
    """
    if not isinstance(accel, Accelerator):
        raise TypeError(f"step_model.accel must be an Accelerator, not {accel!r}")
    if not isinstance(step, StepConfig):
        raise TypeError(f"step_model.step must be a StepConfig, not {step!r}")
    if step.draft_flow == "best" and step.draft != "none":
        runs = [_step_model(accel, replace(step, draft_flow=f)) for f in DRAFT_FLOWS]
        return max(runs, key=lambda r: r.tokens_per_s)
    return _step_model(accel, step)


def solve_rising(f, target):
    """The ``x`` in ``[0, 1]`` with ``f(x) = target`` for ``f`` rising on ``[0, 1]``
    (bisection to 2^-60; an end of the interval when ``target`` is outside ``f``'s range)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return (lo + hi) / 2


def deepest_probability(tree, *, levels, tokens=None, alpha=None):
    """Probability that the accepted path reaches depth ``levels`` of ``tree`` (the
    deepest level drafted, whose nodes no draft pass runs), under
    :func:`expected_tokens`' acceptance model: ``alpha``, or the ``alpha`` that gives
    ``tokens`` committed tokens per step (1 when ``tokens`` is the most the tree holds)."""
    tree = tree if isinstance(tree, TreeShape) else TreeShape(tuple(tree))
    if alpha is None:
        check_float("deepest_probability", "tokens", tokens, min=1.0)
        alpha = (1.0 if tokens >= expected_tokens(tree, alpha=1.0, levels=levels) else
                 solve_rising(lambda a: expected_tokens(tree, alpha=a, levels=levels), tokens))
    reach = 1.0
    for b in tree.branching[:levels]:
        reach *= 1.0 - (1.0 - alpha) ** b
    return reach


def commit_seconds(ssm, copy, *, groups):
    """Seconds of a commit program whose layers' SSM replays take ``ssm`` and whose
    window copies take ``copy`` (both summed over the layers; ``groups`` SSM passes a
    layer). A layer's records are its groups' replays, then its copy, with no barrier
    between them (:meth:`hw.step_program.StepPlan.commit_parts`): the sequencer hands
    the copy out right after the last group's replay, so it runs beside that replay, and
    the next layer's first replay waits only for the SSM engine. A layer takes
    ``(G − 1)/G · ssm + max(ssm/G, copy)`` of its share."""
    G = check_int("commit_seconds", "groups", groups, min=1)
    return (G - 1) / G * ssm + max(ssm / G, copy)


def _commit_times(accel, dims, t):
    """Set the times of ``t``, a commit of ``dims``'s model (:func:`commit_seconds`,
    its memory at the bandwidth, ``restore_overlap`` of it hidden)."""
    clk = accel.clock_hz
    t.t_ssm = t.ssm / clk
    t.t_comp = (commit_seconds(max(t.t_ssm, t.t_state), t.vec / clk,
                               groups=head_groups(accel, dims)) + t.other / clk)
    t.t_mem = t.sbytes / accel.bandwidth
    t.time = max(t.t_comp, t.t_mem) * (1 - accel.restore_overlap)


def _replay(accel, dims, *, path):
    """The SSM replay of ``path`` nodes in ``dims`` from the kept per-node inputs (which
    the passes wrote), the committed state read and the new one written, and the last
    node's conv window copied (:func:`gen.perf.traffic.commit_traffic`)."""
    r = _Tally()
    r.ssm = _ssm_cycles(accel, dims, tokens=path)
    r.elems = dims.state_elems * dims.n_layer * path
    tr = commit_traffic(accel.config, dims, path=path, groups=head_groups(accel, dims),
                        state_elem_bytes=accel.state_bytes)
    r.abytes = sum(tr.stage)
    r.sbytes = sum(tr.state) + r.abytes
    r.t_state = _state_seconds(accel, dims, reads=1, writes=1)
    r.vec = commit_vector_elements(dims) / accel.stage_lanes("copy")
    return r


def _step_model(accel, step):
    tgt = mamba_dims(step.target)
    clk = accel.clock_hz
    tree = step.tree
    sizes = tree.level_sizes
    fifo_depth = accel.fifo_depth
    drafting = step.draft != "none"
    if drafting:
        dist = _levels_distribution(tree.depth, step.continue_prob)
        fifo_schedule(tree.parents, fifo_depth=fifo_depth)   # raises if the ring is too small
        if step.draft == "speq":
            ddims, mode, bits, group = tgt, 1, step.draft_bits, step.scale_group
        else:
            ddims, mode, bits, group = mamba_dims(step.draft), 0, 16, None
    else:
        dist = [(0, 1.0)]

    def draft_pass(tokens, *, reads, writes):
        return _pass(accel, ddims, tokens=tokens, mode=mode, bits=bits, scale_group=group,
                     state_reads=reads, state_writes=writes)

    def step_tokens(levels):
        if not drafting:
            return 1.0
        if step.tokens_per_step is not None:
            return step.tokens_per_step
        return expected_tokens(tree, alpha=step.alpha, levels=levels)

    def deepest(levels):
        return deepest_probability(tree, levels=levels, alpha=step.alpha,
                                   tokens=None if step.alpha is not None else step_tokens(levels))

    # Both flows carry a path's last node, when no draft pass ran it, into the next
    # step's passes (gen.runtime.rtl_host; the prefix flow where the tile ring schedules
    # the tree with it in front): a step carries one in with the steady-state
    # probability that the step before ended on its deepest level.
    carry = None
    if drafting and (step.draft_flow == "node"
                     or fits_behind(tree.parents, fifo_depth=fifo_depth)):
        carry = sum(prob * deepest(levels) for levels, prob in dist)

    draft, verify, restore, need = _Tally(), _Tally(), _Tally(), _Tally()
    passes_e = nodes_e = tokens_e = roof_e = beside_e = 0.0
    for levels, prob in dist:
        nodes = sum(sizes[:levels + 1]) if drafting else 1
        tokens = step_tokens(levels)
        # ---- draft: the passes, as the runtime runs them ----
        d, n = _Tally(), _Tally()
        if drafting:
            # What the draft needs, whatever the flow: each depth's nodes once, the
            # weights once a depth (the ceilings' work).
            for k in range(levels):
                n.add(draft_pass(sizes[k], reads=0, writes=0), 1.0)
            # A node pass: one node alone, from its parent's state, its own written.
            node_pass = draft_pass(1, reads=1, writes=1)
            if step.draft_flow == "node":
                # The carried node (probability `carry`) rides in the root's pass, a
                # 2-node chain; this step's own deepest node is carried on.
                d.add(node_pass, sum(sizes[:levels]) - carry)
                d.add(draft_pass(2, reads=1, writes=1), carry)
            elif carry is not None:
                # The node the last step carried (with probability `carry`) rides in
                # every pass of this step, one node more; this step's own deepest node
                # is carried on, no pass of its own.
                for k in range(levels):
                    d.add(draft_pass(sum(sizes[:k + 1]), reads=1, writes=0), 1.0 - carry)
                    d.add(draft_pass(sum(sizes[:k + 1]) + 1, reads=1, writes=0), carry)
            else:
                for k in range(levels):
                    d.add(draft_pass(sum(sizes[:k + 1]), reads=1, writes=0), 1.0)
                d.add(draft_pass(nodes, reads=1, writes=0), deepest(levels))
        # ---- verify ----
        # The tree pass reads the committed state once (the tile ring keeps the nodes'
        # states on chip) and writes none; a plain decode pass writes its new state.
        v = _pass(accel, tgt, tokens=nodes, mode=0, bits=16, scale_group=None,
                  state_reads=1, state_writes=0 if drafting else 1, accept=drafting)
        if drafting:
            par = TreeShape(tree.branching[:levels]).parents
            v.other = tree_verifier_cycles(par, [1] * len(par), fifo_depth=fifo_depth)["cycles"]
            v.other *= accel.calibration.tree
            v.t_comp += v.other / clk
            v.time = max(v.t_comp, v.t_mem)
        # ---- restore: the target's, then the draft's commit ----
        r = _Tally()
        if drafting:
            path = math.ceil(tokens)
            if step.restore_policy == "recompute":
                r.add(_replay(accel, tgt, path=path), 1.0)
            else:
                r.sbytes = nodes * state_bytes(accel, tgt)
                r.t_state = _state_seconds(accel, tgt, reads=0, writes=nodes)
                r.vec = commit_vector_elements(tgt) / accel.stage_lanes("copy")
            _commit_times(accel, tgt, r)
            if step.draft_flow == "node":
                # The runtime runs the target's commit beside the draft's next node pass
                # (StepPlan.node_program's beside): the replay hides behind that pass's
                # linear jobs and vector stages, at most.
                # (A root's pass behind a carried node takes no commit beside it: the
                # commit waits for the next pass, or runs alone where there is none.)
                alone = carry if sum(sizes[:levels]) == 1 else 0.0
                beside_e += prob * (1 - alone) * min(r.time, (node_pass.lin + node_pass.vec)
                                                     / clk)
                # The draft's commit: every path node's state is stored, so the windows
                # are copied and the last node's state adopted (StepPlan.window_program,
                # adopt).
                c = _Tally()
                c.vec = commit_vector_elements(ddims) / accel.stage_lanes("copy")
                c.abytes = c.sbytes = commit_traffic(
                    accel.config, ddims, path=path, groups=head_groups(accel, ddims),
                    replay=False).total
            else:
                c = _replay(accel, ddims, path=path)
            _commit_times(accel, ddims, c)
            r.add(c, 1.0)
        draft.add(d, prob)
        need.add(n, prob)
        verify.add(v, prob)
        restore.add(r, prob)
        passes_e += prob * levels
        nodes_e += prob * nodes
        tokens_e += prob * tokens
        roof_e += prob * (n.dbytes + v.dbytes)

    phases = [verify.phase("verify")]
    if drafting:
        # The share of the restore hidden: restore_overlap, and the target's commit beside
        # the draft's next node pass (node flow).
        whole = max(restore.t_mem, restore.t_comp)
        hidden = accel.restore_overlap + (1 - accel.restore_overlap) * (
            min(1.0, beside_e / whole) if whole else 0.0)
        phases = [draft.phase("draft", useful=need), phases[0],
                  restore.phase("restore", hidden)]
    t_step = sum(p.time for p in phases)
    # The energy of the work done; the operations of the work needed.
    energy = sum(t.energy(accel.power) for t in (draft, verify, restore))
    power = accel.power.static_w + energy / t_step
    ops = need.ops + verify.ops + restore.ops
    return StepResult(accel, step, tuple(phases), tokens_e, passes_e, nodes_e, roof_e, power, ops)


def state_ports_needed(accel, step, *, max_ports):
    """Fewest ``state_ports`` (per direction) with which no phase of ``step`` is bound by its
    state traffic: ``(ports, StepResult)``, or ``(None, None)`` if ``max_ports`` do not do."""
    check_int("state_ports_needed", "max_ports", max_ports, min=1)
    for n in range(1, max_ports + 1):
        res = step_model(replace(accel, state_ports=n), step)
        if all(p.bound != "state" for p in res.phases):
            return n, res
    return None, None


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
            acc = accelerator(preset(board), sizing=sizing)
            for name, step in (("SpecMamba: 2.7B + 370M draft, 4.91 tok/step", seed_step()),
                               ("SPEQ self-speculation: 2.7B, nibble-plane draft", speq_step()),
                               ("autoregressive 2.7B (no draft)",
                                StepConfig(target="2.7B", draft="none", tree=()))):
                rows.append({"config": name, "board": board, "sizing": sizing,
                             "result": step_model(acc, step)})
    return rows
