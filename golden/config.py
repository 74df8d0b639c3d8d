"""One frozen configuration object, with named presets, for every consumer.

``hw`` sizes its RTL from these objects, ``golden`` its models, ``gen`` its
output and the performance model its estimates, so no number is typed twice.
Block configs validate eagerly in ``__post_init__``; a bad field raises with a
message that names the field and the allowed values.

Presets
-------
``sim``
    Small dimensions that simulate in seconds on Verilator.
``vck190``, ``vhk158``
    The two Versal boards of the SpecMamba paper (arXiv 2509.19873; ``docs/boards.md``).
"""

from dataclasses import dataclass, field, replace

from .bsfp import BSFPConfig
from .dsp import CONTRACTS
from .mamba2 import SSMConfig
from .nonlinear import LUTSpec
from .validate import check_choice, check_float, check_int

__all__ = ["TreeConfig", "LinearConfig", "PipelineConfig", "VectorConfig", "BoardConfig", "Config",
           "PRESETS", "VECTOR_STAGES", "element_bits",
           "preset", "preset_names", "MEMORY_PORT_BITS", "MEMORY_LATENCY_NS", "READ_REORDER_BYTES",
           "HBM_NMU_PORTS"]


@dataclass(frozen=True, kw_only=True)
class TreeConfig:
    """SpecMamba FIFO-based tree verification.

    Parameters
    ----------
    fifo_depth : int
        Live state slots in the ring buffer (seed: 16).
    tile_size : int
        Hidden-state elements per tile (seed: 64).
    max_nodes : int
        Largest flattened draft tree the verifier accepts.
    """

    fifo_depth: int = 16
    tile_size: int = 64
    max_nodes: int = 64

    def __post_init__(self):
        check_int("TreeConfig", "fifo_depth", self.fifo_depth, min=1)
        check_int("TreeConfig", "tile_size", self.tile_size, min=1)
        check_int("TreeConfig", "max_nodes", self.max_nodes, min=1)

    @property
    def slot_bits(self):
        """Width of a state-slot index held in the ring buffer."""
        return max(1, (self.fifo_depth - 1).bit_length())


@dataclass(frozen=True, kw_only=True)
class LinearConfig:
    """SpecMamba linear unit: the MAC array of every linear layer.

    Two arrays exist, chosen by ``contract`` (numerics contract v2,
    :mod:`golden.dsp`):

    ``"exact"``
        ``rows × cols`` SPEQ dual-mode PEs (``hw.linear_unit.LinearUnit``), output
        stationary: PE ``(r, c)`` computes row ``r`` for token lane ``c``, with an
        exact fixed-point accumulator per PE (:mod:`golden.dot`). The reference,
        for generic targets.
    ``"dspfp32"``
        ``rows × cols`` MAC slots of one DSP58 in DSPFP32 mode each
        (``hw.dsp_linear_unit.DSPLinearUnit``): ``cols`` columns of ``rows``
        slots. Each slot holds one output row's weight for ``T`` cycles while the
        ``T`` tokens' activations pass, so every slot does one useful MAC per
        cycle for any ``T`` from 1 to ``max_tokens`` (:mod:`golden.dsp`).

    Parameters
    ----------
    rows : int
        ``exact``: output rows per weight tile (PE rows). ``dspfp32``: MAC slots
        per column.
    cols : int
        ``exact``: token lanes (PE columns). ``dspfp32``: columns; one result
        beat carries one row of each column.
    quant_lanes : int
        Draft products per PE per cycle in quantized mode (SPEQ: 3); ``exact`` only.
    max_k : int
        Most beats in one dot product; sizes the exact accumulators and the step
        counters.
    fmt_out : str
        ``"fp32"`` or ``"fp16"``: format of the rounded dot products
        (``dspfp32`` gives ``"fp32"``).
    contract : str
        ``"exact"`` or ``"dspfp32"``.
    max_tokens : int
        ``dspfp32``: most tokens one job verifies (threads per slot), 1 … 16.
    weight_beats : int
        ``dspfp32``: column beats each weight port delivers in one transfer, one of
        :data:`WEIGHT_BEATS` dividing :attr:`port_columns`: the weight stream takes them
        from its read masters' word, so a port feeds an input's columns in
        ``port_columns / weight_beats`` cycles (what bounds a job of fewer tokens). The
        ``exact`` array does not read it.
    split_tiles : bool
        ``dspfp32``: cut each matrix's last, partial tile into pieces that pack further
        (:func:`golden.weight_planes.tile_pieces`): fewer weight bytes, at most two
        jobs more a matrix (each a pass over the matrix's inputs). For arrays that wait
        on memory, not on compute (VCK190's DDR); the engine needs nothing new, a piece
        is a job of fewer rows.
    draft_plane : bool
        ``dspfp32``: keep a second copy of the nibble plane for SPEQ's draft passes,
        striped over each weight stream's four read masters
        (:func:`golden.weight_planes.draft_image`), so a draft pass takes ``4 ·
        weight_beats`` nibble sub-beats a transfer instead of ``weight_beats`` (a quarter
        of the transfers of a one-token pass) for 25 % more weight bytes. For arrays whose
        draft passes wait on the weight ports' transfers (VHK158), not on memory.
    """

    rows: int = 4
    cols: int = 4
    quant_lanes: int = 3
    max_k: int = 64
    fmt_out: str = "fp32"
    contract: str = "exact"
    max_tokens: int = 16
    weight_beats: int = 1
    split_tiles: bool = False
    draft_plane: bool = False

    WEIGHT_BEATS = (1, 2, 4, 8)

    def __post_init__(self):
        check_int("LinearConfig", "rows", self.rows, min=1)
        check_int("LinearConfig", "cols", self.cols, min=1)
        check_int("LinearConfig", "quant_lanes", self.quant_lanes, min=1, max=8)
        check_int("LinearConfig", "max_k", self.max_k, min=1)
        check_choice("LinearConfig", "fmt_out", self.fmt_out, ("fp32", "fp16"))
        check_choice("LinearConfig", "contract", self.contract, CONTRACTS)
        check_int("LinearConfig", "max_tokens", self.max_tokens, min=1, max=16)
        for name in ("split_tiles", "draft_plane"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"LinearConfig.{name} must be true or false, "
                                 f"not {getattr(self, name)!r}")
        if self.contract == "dspfp32" and self.fmt_out != "fp32":
            raise ValueError(f"LinearConfig.fmt_out must be 'fp32' with contract 'dspfp32' "
                             f"(DSPFP32 accumulates in binary32), not {self.fmt_out!r}")
        # The exact array has no weight ports of column beats: the field does not apply.
        allowed = (self.WEIGHT_BEATS if self.contract != "dspfp32" else
                   tuple(w for w in self.WEIGHT_BEATS if self.port_columns % w == 0))
        if self.weight_beats not in allowed:
            why = ("" if self.contract != "dspfp32" else
                   f" (a divisor of the {self.port_columns} columns each of the "
                   f"{self.weight_ports} weight ports feeds)")
            raise ValueError(f"LinearConfig.weight_beats must be one of "
                             f"{', '.join(map(str, allowed))}{why}, not {self.weight_beats!r}")

    @property
    def pes(self):
        """MAC slots: PEs of the ``exact`` array, DSP58 slots of the ``dspfp32`` one."""
        return self.rows * self.cols

    @property
    def token_lanes(self):
        """Most tokens one job takes."""
        return self.max_tokens if self.contract == "dspfp32" else self.cols

    @property
    def weight_ports(self):
        """Weight ports of the ``dspfp32`` array's engine: the fewest that keep every MAC
        slot busy on a job of ``max_tokens`` tokens, rounded up to a divisor of ``cols``.

        A job takes one activation a cycle, and each of the ``cols`` column beats of an
        input serves ``n_tokens`` activations, so at ``max_tokens`` the array takes
        ``cols / max_tokens`` beats a cycle (VHK158, 84 columns and 16 tokens: 5.25, so 6
        ports; the ``sim`` and VCK190 arrays: 1).
        """
        need = -(-self.cols // self.max_tokens)
        return next(p for p in range(need, self.cols + 1) if self.cols % p == 0)

    @property
    def port_columns(self):
        """Columns each weight port feeds (``cols / weight_ports``)."""
        return self.cols // self.weight_ports

    @property
    def tile_rows(self):
        """Output rows one job computes."""
        return self.rows * self.cols if self.contract == "dspfp32" else self.rows


@dataclass(frozen=True, kw_only=True)
class PipelineConfig:
    """Pipeline registers of the arithmetic: timing only, no result depends on them.

    Parameters
    ----------
    fp_mul_stages : int
        Registers of every binary32 multiplier of the SSM unit (``hw.fp_arith.FPMul``
        boundaries ``classify, product, lzc, normalize, round``, filled from the
        end), 0 … 5.
    fp_add_stages : int
        Registers of every binary32 adder of the SSM unit (``hw.fp_arith.FPAdd``:
        ``classify, align, add, lzc, normalize, round``), 0 … 6.
    pe_round_stages : int
        Registers of each dual-mode PE's final rounding (``NormalizeRound``:
        ``magnitude, lzc, shift, round``), 1 … 4.

    The board presets register every boundary; ``docs/estimate.md`` has the
    logic levels per stage that this buys.
    """

    fp_mul_stages: int = 2
    fp_add_stages: int = 2
    pe_round_stages: int = 2

    #: Allowed ``(min, max)`` per field: the stage boundaries of the hw blocks
    #: (``tests/test_config.py`` checks them against ``hw``).
    LIMITS = {"fp_mul_stages": (0, 5), "fp_add_stages": (0, 6), "pe_round_stages": (1, 4)}

    def __post_init__(self):
        for name, (lo, hi) in self.LIMITS.items():
            check_int("PipelineConfig", name, getattr(self, name), min=lo, max=hi)


#: The decoder core's vector stages (``hw.decoder.DECODER_ENGINES``) that take
#: :attr:`VectorConfig.lanes` elements a beat: the norms, the conv1d, the residual, the
#: copies and the argmax (a vocabulary's logits, a tree of compare-and-selects a beat;
#: it was 13 % of a 2.7B verify pass's vector cycles at one). The acceptance engine stays
#: at one element a beat (a tree's nodes).
VECTOR_STAGES = ("conv1d", "copy", "norm", "gate_norm", "residual", "argmax")


@dataclass(frozen=True, kw_only=True)
class VectorConfig:
    """The decoder core's vector stages (``hw.stream_engine``).

    Parameters
    ----------
    lanes : int
        Elements a beat of each stage of :data:`VECTOR_STAGES`: 1, 2, 4, 8 or 16. Each
        lane is a copy of the stage's datapath; a norm keeps one partial sum of squares
        a lane (``golden.rmsnorm``), so its result depends on ``lanes``. It must divide
        ``linear.cols`` (the stages read a linear job's results in place, ``cols`` rows
        a record). A conv1d beat whose windows are wider than the board's widest memory
        port reads and writes them over several ports (:meth:`Config.conv1d_parts`).
    """

    lanes: int = 1

    #: Allowed lane counts: powers of two, so a beat's lanes are a power-of-two
    #: element of memory.
    LANES = (1, 2, 4, 8, 16)

    def __post_init__(self):
        check_choice("VectorConfig", "lanes", self.lanes, self.LANES)


#: Read latency (ns) the memory ports are sized for: their masters keep this
#: latency's worth of beats in flight (Little's law, docs/memory.md).
MEMORY_LATENCY_NS = 200.0
#: Read reorder buffer of an HBM_NMU: 64 entries of 64 bytes (AMD PG313, "HBM_NMU").
#: The reads one port keeps in flight at the NMU should fit in it.
READ_REORDER_BYTES = 64 * 64
#: HBM_NMU ports of a two-stack part: 32 per stack (AMD PG313, "Core Architecture").
HBM_NMU_PORTS = 64

#: AXI4 data widths (bits) of one fabric port into the memory, per ``BoardConfig.memory``.
#: HBM: an HBM_NMU takes 32-256 bits, not 512 or 1024 (AMD PG313 "AXI Considerations",
#: Table 1 "AXI Support and Restrictions for HBM_NMUs"). DDR, through the NoC: an NMU512
#: takes 32-512 bits (AMD PG313 "NMU512 (PL)"). ``none`` (simulation) follows the NMU512.
MEMORY_PORT_BITS = {"HBM": (32, 64, 128, 256), "DDR": (32, 64, 128, 256, 512),
                    "none": (32, 64, 128, 256, 512)}


def element_bits(bits):
    """Bits one element of a ``bits``-bit field takes in memory (``hw.stream_engine``'s
    operands and results): ``bits`` itself when it packs into a 32-bit word (8 or 16),
    else the power of two ≥ ``max(bits, 32)``."""
    if bits in (8, 16):
        return bits
    width = 32
    while width < bits:
        width *= 2
    return width


@dataclass(frozen=True, kw_only=True)
class BoardConfig:
    """Target board.

    Parameters
    ----------
    name : str
        Preset name.
    part : str or None
        Vivado part number; ``None`` for the simulation-only preset.
    clock_mhz : float
        Fabric clock the design is constrained to.
    memory : str
        ``"DDR"`` or ``"HBM"`` (or ``"none"`` for simulation).
    mem_bw_gbs : float
        Off-chip memory bandwidth in GB/s (the presets use the SpecMamba notes'
        figures, ``docs/sources.md``).
    dsp58 : int
        DSP58 slices on the part.
    lut, ff, bram36, uram288 : int
        CLB LUTs, CLB flip-flops, 36 Kb block RAMs and 288 Kb UltraRAMs on the
        part; 0 where the part has none or (``sim``) there is no part.
    capacity_source : str
        Where the capacities come from; values no AMD document confirmed are
        named there as assumptions.
    memory_clock_mhz : float or None
        Clock of the memory-side (``mem``) domain: the AXI4 masters and their
        ports into the NoC or HBM run on it, and clock-domain crossings join it
        to the fabric clock. ``None`` (the default) means the fabric clock.
    memory_port_bits : int or None
        AXI4 data width of one memory port, one of :data:`MEMORY_PORT_BITS`
        for ``memory``; ``None`` (the default) means the widest allowed.
    static_w : float
        Power assumption of the performance model: device static plus board power at
        idle, W (not measured: no board and no Vivado power report here; 0 without a
        memory model).
    mem_pj_per_byte : float
        Power assumption: off-chip memory energy per byte moved, pJ (DDR4 about
        20 pJ/bit, HBM2e about 4 pJ/bit).
    memory_bytes : int
        Capacity of the off-chip memory the accelerator's ports reach, bytes;
        :class:`golden.memory_map.MemoryMap` checks its layout against it. 0 (the
        default, ``sim``) means no capacity to check.
    """

    name: str
    part: str | None
    clock_mhz: float
    memory: str
    mem_bw_gbs: float
    dsp58: int
    lut: int = 0
    ff: int = 0
    bram36: int = 0
    uram288: int = 0
    capacity_source: str = ""
    memory_clock_mhz: float | None = None
    memory_port_bits: int | None = None
    static_w: float = 0.0
    mem_pj_per_byte: float = 0.0
    memory_bytes: int = 0

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"BoardConfig.name must be a non-empty string, not {self.name!r}")
        if self.part is not None and (not isinstance(self.part, str) or not self.part):
            raise TypeError(f"BoardConfig.part must be a non-empty string or None, not {self.part!r}")
        check_float("BoardConfig", "clock_mhz", self.clock_mhz, min=1.0, max=1000.0)
        check_choice("BoardConfig", "memory", self.memory, ("DDR", "HBM", "none"))
        check_float("BoardConfig", "mem_bw_gbs", self.mem_bw_gbs, min=0.0)
        for name in ("dsp58", "lut", "ff", "bram36", "uram288", "memory_bytes"):
            check_int("BoardConfig", name, getattr(self, name), min=0)
        if not isinstance(self.capacity_source, str):
            raise TypeError(f"BoardConfig.capacity_source must be a string, not "
                            f"{self.capacity_source!r}")
        check_float("BoardConfig", "static_w", self.static_w, min=0.0)
        check_float("BoardConfig", "mem_pj_per_byte", self.mem_pj_per_byte, min=0.0)
        # Resolved here, so every reader sees a number and nothing restates the defaults.
        if self.memory_clock_mhz is None:
            object.__setattr__(self, "memory_clock_mhz", self.clock_mhz)
        object.__setattr__(self, "memory_clock_mhz", check_float(
            "BoardConfig", "memory_clock_mhz", self.memory_clock_mhz, min=1.0, max=1000.0))
        widths = MEMORY_PORT_BITS[self.memory]
        if self.memory_port_bits is None:
            object.__setattr__(self, "memory_port_bits", widths[-1])
        if isinstance(self.memory_port_bits, bool) or self.memory_port_bits not in widths:
            raise ValueError(f"BoardConfig.memory_port_bits must be one of "
                             f"{', '.join(map(str, widths))} for memory {self.memory!r}, not "
                             f"{self.memory_port_bits!r}")

    @property
    def memory_port_gbs(self):
        """Bandwidth of one memory port in GB/s: its width times the memory clock."""
        return self.memory_port_bits / 8 * self.memory_clock_mhz / 1e3

    def memory_latency_cycles(self, latency_ns=MEMORY_LATENCY_NS):
        """``latency_ns`` in cycles of the memory clock, rounded up."""
        import math
        return math.ceil(latency_ns * self.memory_clock_mhz / 1e3 - 1e-9)

    @property
    def memory_ports(self):
        """Memory ports that together carry ``mem_bw_gbs`` (0 without memory)."""
        import math
        return math.ceil(self.mem_bw_gbs / self.memory_port_gbs - 1e-9) if self.mem_bw_gbs else 0

    @property
    def capacities(self):
        """``{resource: count}`` of the part (LUT, FF, DSP58, BRAM36, URAM288)."""
        return {"LUT": self.lut, "FF": self.ff, "DSP58": self.dsp58, "BRAM36": self.bram36,
                "URAM288": self.uram288}


@dataclass(frozen=True, kw_only=True)
class Config:
    """Top-level configuration: a board plus every block config.

    ``ssm`` is the SSM unit of one Mamba2 layer (:class:`golden.mamba2.SSMConfig`);
    its default is the small geometry of the ``sim`` preset.
    """

    name: str
    board: BoardConfig
    tree: TreeConfig = field(default_factory=TreeConfig)
    linear: LinearConfig = field(default_factory=LinearConfig)
    bsfp: BSFPConfig = field(default_factory=BSFPConfig)
    ssm: SSMConfig = field(default_factory=lambda: _SIM_SSM)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    vector: VectorConfig = field(default_factory=VectorConfig)

    def __post_init__(self):
        for name, cls in (("board", BoardConfig), ("tree", TreeConfig), ("linear", LinearConfig),
                          ("bsfp", BSFPConfig), ("ssm", SSMConfig), ("pipeline", PipelineConfig),
                          ("vector", VectorConfig)):
            value = getattr(self, name)
            if not isinstance(value, cls):
                raise TypeError(f"Config.{name} must be a {cls.__name__}, not {value!r}")
        lanes = self.vector.lanes
        if self.linear.cols % lanes:
            allowed = [n for n in VectorConfig.LANES if self.linear.cols % n == 0]
            raise ValueError(f"Config.vector.lanes must divide linear.cols ({self.linear.cols}: "
                             f"the vector stages read a linear job's records in place), so one "
                             f"of {', '.join(map(str, allowed))}, not {lanes}")

    def stage_lanes(self, stage, *, lanes=None):
        """Elements a beat of the decoder core's vector stage ``stage``
        (``hw.decoder.DECODER_ENGINES``): ``vector.lanes`` for :data:`VECTOR_STAGES`, 1 for
        the others. ``lanes`` prices another ``vector.lanes`` (the performance model's
        what-if; not checked against ``linear.cols``). A conv1d beat wider than a memory
        port splits its windows and taps over :meth:`conv1d_parts` ports."""
        if stage not in VECTOR_STAGES:
            return 1
        return self.vector.lanes if lanes is None else lanes

    def conv1d_parts(self, *, d_conv=4, lanes=None):
        """Memory ports (and planes) one conv1d beat's windows, taps and new windows are
        each split over: the fewest ``p`` dividing the conv1d's lanes whose
        ``lanes / p`` windows of ``d_conv − 1`` binary32 words (and taps of ``d_conv``),
        each in a power-of-two element, fit the board's widest memory port (a 256-bit
        HBM port holds two channels of Mamba2's ``d_conv = 4``, so four lanes take two
        ports each way)."""
        lanes = self.stage_lanes("conv1d", lanes=lanes)
        element = element_bits(32 * d_conv)
        widest = max(MEMORY_PORT_BITS[self.board.memory])
        least = max(1, -(-lanes * element // widest))
        return next(p for p in range(least, lanes + 1) if lanes % p == 0)

    def replace(self, **changes):
        """Return a copy with ``changes`` applied (and validated)."""
        return replace(self, **changes)

    def to_dict(self):
        """Plain-dict view for manifests and JSON reports."""
        from dataclasses import asdict
        return asdict(self)


# The sim memory clock is no board's: 150 MHz against the 100 MHz fabric clock,
# so the benches cross a clock-domain boundary at a ratio that is not an integer.
_SIM = BoardConfig(name="sim", part=None, clock_mhz=100.0, memory="none", mem_bw_gbs=0.0, dsp58=0,
                   memory_clock_mhz=150.0)
# Capacities: the DSP58 count of the xcvc1902 is AMD AM004 "Versal ACAP DSP Engine
# Architecture Manual", "Device Resources" (1,968). The LUT/FF/BRAM/URAM counts of
# either part are not in any AMD document reachable here (DS950 and the product
# tables): they are assumptions, named as such in capacity_source and
# docs/boards.md, and `get_sites` in Vivado confirms or replaces them.
_VCK190 = BoardConfig(name="vck190", part="xcvc1902-vsva2197-2MP-e-S", clock_mhz=400.0,
                      memory="DDR", mem_bw_gbs=12.0, dsp58=1968, lut=899_840, ff=1_799_680,
                      bram36=967, uram288=463,
                      capacity_source="DSP58: AMD AM004 'Device Resources'. LUT, FF, BRAM36, "
                                      "URAM288: assumption (AMD Versal AI Core product table "
                                      "as commonly quoted; not confirmed from an AMD document "
                                      "here)",
                      # One 512-bit NMU512 port (AMD PG313 "NMU512 (PL)") at 300 MHz is
                      # 19.2 GB/s at the AXI side; a NoC physical link carries 16.0 GB/s of
                      # reads at the -2MP part's 1,000 MHz NoC clock (AMD PG313 "Physical
                      # Link (Raw) Bandwidth", Tables 1-2): one port covers the 12 GB/s.
                      memory_clock_mhz=300.0,
                      # The 8 GB DDR4 component memory of the board (AMD VCK190 product
                      # page), which the DDR port reaches; the board's LPDDR4 is not counted.
                      # Assumption: GB read as GiB, as DRAM densities are binary.
                      memory_bytes=8 * 2**30,
                      static_w=20.0, mem_pj_per_byte=160.0)
_VHK158 = BoardConfig(name="vhk158", part="xcvh1582-vsva3697-2MP-e-S", clock_mhz=250.0,
                      memory="HBM", mem_bw_gbs=819.0, dsp58=7392, lut=1_753_984,
                      ff=3_507_968, bram36=2541, uram288=1301,
                      capacity_source="DSP58: SpecMamba's VHK158 table (7,392 = 5,093 / 68.8 %), "
                                      "as AMD Vivado's device model has it. "
                                      "LUT, FF, BRAM36, URAM288: AMD Vivado 2024.2 "
                                      "report_utilization, 'Available' column, for "
                                      "xcvh1582-vsva3697-2MP-e-S (CLB LUTs, registers, "
                                      "RAMB36E5, URAM; read from a placed design's report, "
                                      "not an AMD data sheet; docs/boards.md)",
                      # 64 HBM_NMU ports of 256 bits (AMD PG313 "Core Architecture": 32 per
                      # stack; "AXI Considerations": 32-256 bits) reach 819 GB/s only at
                      # >= 400 MHz; the HBM AXI clock of a -2 part is at most 500 MHz (AMD
                      # DS960, Table 1 "Maximum Performance for High Bandwidth Memory
                      # Controller", FACLK). 450 MHz leaves margin both ways.
                      memory_clock_mhz=450.0,
                      # 32 GB HBM2e in two stacks (AMD VHK158 product page). Assumption: GB
                      # read as GiB, as DRAM densities are binary.
                      memory_bytes=32 * 2**30,
                      static_w=30.0, mem_pj_per_byte=32.0)

# The sim preset's SSM tables keep the contract's ranges at step 1/8 instead of
# 1/128: ROMs of 257-361 words instead of 4097-5761, so the unit builds and
# simulates in seconds (the tables are part of the config, so golden follows).
_SIM_SSM = SSMConfig(
    nheads=2, headdim=2, d_state=8, lanes=4,
    exp_lut=LUTSpec(function="exp", lo=-20.0, hi=12.0, step_log2=3),
    softplus_lut=LUTSpec(function="softplus", lo=-25.0, hi=20.0, step_log2=3),
    silu_lut=LUTSpec(function="silu", lo=-25.0, hi=20.0, step_log2=3))

# Board presets register every stage boundary of the FP units and the PE's
# rounding (docs/estimate.md: the worst stage went from about 30 logic levels
# to 11-14); the sim preset keeps the shorter pipelines its benches were built on.
_BOARD_PIPELINE = PipelineConfig(fp_mul_stages=5, fp_add_stages=6, pe_round_stages=4)

PRESETS = {
    "sim": Config(name="sim", board=_SIM, tree=TreeConfig(fifo_depth=16, tile_size=8, max_nodes=64),
                  linear=LinearConfig(rows=2, cols=4, quant_lanes=3, max_k=16,
                                        contract="dspfp32", max_tokens=16, weight_beats=2,
                                        draft_plane=True),
                  ssm=_SIM_SSM,
                  vector=VectorConfig(lanes=2)),
    # Board-scale arrays (sizing in docs/boards.md): DSPFP32 MAC slots in columns
    # of 64, 84 columns (5,376 DSP58, 73 % of the part) on VHK158 and 8 (512 DSP58;
    # DDR feeds 15 FP16 weights per cycle) on VCK190; the SSM unit is one
    # Mamba2-2.7B layer (80 heads x 64 x 128) with two rows of a head a cycle (256 EMU
    # lanes, two reduction trees of 128) on VHK158 and half a row on the smaller VCK190,
    # on DSPFP32 slices, fed 8 binary32 words (256 bits) a cycle so that a token's 5,456
    # input words (682 beats) arrive well within its 2,560-cycle sweep. VHK158's 256 lanes
    # take and give 8,192 state bits a 250 MHz cycle: 16 of its 256-bit HBM ports each way
    # at 450 MHz carry 90 % of them (the masters pack and split 512-bit slices), so a pass
    # that streams its state runs at that rate and a tree pass, which reads it once for
    # all its nodes, at the lanes'; the part's spare DSP58 took the second row (450 more:
    # 86 % of the part with the vector stages; the model: SPEQ 69.5 -> 77.4 tok/s,
    # docs/perf-model.md). VCK190's DDR is one port and binds first: 64 lanes. The vector
    # stages take 4 elements a beat (the most that divides VHK158's 84 columns; with one,
    # they were half of the modeled verify pass, docs/perf.md); the sim preset 2, so
    # every bench and the RTL generation run lanes. VHK158 runs a layer's SSM work as two
    # head groups of 40 (ssm.head_groups): group 0's pass starts after in_proj's first
    # 5,376-row tile, beside the second (docs/decoder.md; the model puts the verify pass
    # 11 % shorter, docs/perf-model.md). VCK190's passes are memory-bound: one group.
    # A weight port hands the linear unit two column beats a transfer on VHK158 (a 256-bit
    # HBM port at 450 MHz carries 1.8 sub-beats of 64 nibbles a 250 MHz cycle), so a pass
    # of fewer than 14 tokens takes 7 cycles an input instead of 14; VCK190's DDR feeds
    # less than one a cycle, so one. The sim preset takes two, so every bench runs them.
    # VCK190 waits on its DDR, not on its slots: its last partial tiles are cut into
    # pieces that pack further (linear.split_tiles; 118 MB less a SpecMamba step,
    # docs/perf.md). VHK158's short passes wait on the weight ports' feed, where a piece
    # costs as much as a whole tile: it keeps one job a tile. VHK158's one-token draft
    # passes wait on those transfers: SPEQ's draft reads a second copy of the nibble plane
    # striped over each stream's four masters (linear.draft_plane), four times the nibbles
    # a transfer for a quarter more weight bytes; VCK190's DDR, not its transfers, binds,
    # so it keeps one copy. The sim preset has the draft plane, so every bench runs it.
    "vck190": Config(name="vck190", board=_VCK190, tree=TreeConfig(fifo_depth=16, tile_size=64),
                     linear=LinearConfig(rows=64, cols=8, quant_lanes=3, max_k=8192,
                                         contract="dspfp32", max_tokens=16, split_tiles=True),
                     ssm=SSMConfig(nheads=80, headdim=64, d_state=128, lanes=64,
                                   contract="dspfp32", input_words=8),
                     pipeline=_BOARD_PIPELINE, vector=VectorConfig(lanes=4)),
    "vhk158": Config(name="vhk158", board=_VHK158, tree=TreeConfig(fifo_depth=16, tile_size=64),
                     linear=LinearConfig(rows=64, cols=84, quant_lanes=3, max_k=8192,
                                         contract="dspfp32", max_tokens=16, weight_beats=2,
                                         draft_plane=True),
                     ssm=SSMConfig(nheads=80, headdim=64, d_state=128, lanes=256,
                                   contract="dspfp32", input_words=8, state_ports=16,
                                   head_groups=2),
                     pipeline=_BOARD_PIPELINE, vector=VectorConfig(lanes=4)),
}


def preset_names():
    """Names accepted by :func:`preset`, in a stable order."""
    return tuple(PRESETS)


def preset(name):
    """Return the named preset ``Config``.

    Raises
    ------
    ValueError
        If ``name`` is not a preset; the message lists the allowed names.
    """
    if name not in PRESETS:
        allowed = ", ".join(preset_names())
        raise ValueError(f"unknown board {name!r}; allowed: {allowed}")
    return PRESETS[name]
