"""``LinearUnit``: SpecMamba's linear unit, a rows × cols array of SPEQ ``DualModePE``\\ s.

SpecMamba verifies a whole draft tree in one pass: the T tree nodes share every
weight, so the linear unit reads each weight once and broadcasts it to all T
tokens (SpecMamba's linear-parallel dataflow, arXiv 2509.19873). Here the array is output-stationary:

* PE ``(r, c)`` computes the dot product of weight row ``r`` of the current
  output tile with token ``c``'s activations;
* one weight beat carries column ``j`` of the tile (``rows`` weights, or
  ``rows × quant_lanes`` draft nibbles) and is broadcast along each PE row to
  all ``cols`` token lanes;
* one activation beat carries input ``j`` of every token and is broadcast down
  each PE column to all ``rows`` PEs.

The draft pass (quantized mode) streams only the nibble plane of the BSFP v1
split layout and ``quant_lanes`` inputs per beat; the target pass (full mode)
streams the reconstructed 15-bit scaled weights (nibble + residue planes,
merged by :class:`hw.fp16_reconstructor.FP16Reconstructor` upstream).
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from specgen.golden.fp import FORMATS, FP32
from specgen.golden.validate import check_int

from .dual_mode_pe import SCALE_BITS, WEIGHT_BITS, DualModePE
from .hierarchy import submodule, template
from .ring_fifo import RingFIFO

__all__ = ["LinearUnit", "PERow", "linear_unit_for", "row_beat_layout", "weight_layout", "act_layout", "cmd_layout", "result_layout"]

COUNTER_BITS = 48


def weight_layout(rows, lanes):
    """One weight beat: column ``j`` of the output tile, for every PE row."""
    return data.StructLayout({
        "weight": data.ArrayLayout(WEIGHT_BITS, rows),                  # full mode
        "nibble": data.ArrayLayout(data.ArrayLayout(4, lanes), rows),    # quantized mode
        "k": data.ArrayLayout(data.ArrayLayout(SCALE_BITS, lanes), rows),
    })


def act_layout(cols, lanes):
    """One activation beat: input ``j`` (``lanes`` inputs in quantized mode) of every token."""
    return data.StructLayout({
        "act": data.ArrayLayout(data.ArrayLayout(16, lanes), cols),
        "lane_valid": lanes,
    })


def cmd_layout(rows, cols, max_k):
    """One job: an output tile of ``n_rows`` rows times ``n_tokens`` tokens, ``steps`` beats."""
    return data.StructLayout({
        "mode": 1,
        "steps": range(1, max_k + 1),
        "n_rows": range(1, rows + 1),
        "n_tokens": range(1, cols + 1),
    })


def result_layout(rows, cols, fmt_out):
    """One result beat: a row of the output tile for every token lane."""
    return data.StructLayout({
        "value": data.ArrayLayout(fmt_out.width, cols),
        # At least one bit: a one-row array still numbers its rows, and a
        # zero-width field is not legal Verilog.
        "row": range(max(rows, 2)),
        "token_valid": cols,
        "last": 1,
    })



def row_beat_layout(cols, lanes):
    """What a beat gives one PE row: its weight row's column ``j`` and every token's input."""
    return data.StructLayout({
        "weight": WEIGHT_BITS,
        "nibble": data.ArrayLayout(4, lanes),
        "k": data.ArrayLayout(SCALE_BITS, lanes),
        "act": data.ArrayLayout(data.ArrayLayout(16, lanes), cols),
        "lane_valid": lanes,
        "mode": 1,
        "last": 1,
    })


class PERow(wiring.Component):
    """One row of the linear unit: ``cols`` ``DualModePE`` sharing a weight row.

    The row is the unit of the hierarchy (PE -> row -> array): the array
    instantiates one ``PERow`` module ``rows`` times and each row one PE module
    ``cols`` times, so the Verilog grows with ``rows + cols``, not their product.
    Its result registers are one stage of the array's drain shift chain.

    Parameters
    ----------
    cols : int
        PEs (token lanes) in the row, >= 1.
    pe_args : dict
        Keyword arguments of every PE's ``DualModePE`` constructor.

    Attributes
    ----------
    beat : In(row_beat_layout(cols, quant_lanes).size)
        The beat's weight column ``j`` for this row and input ``j`` of every token;
        taken by every PE in a cycle with ``fire``.
    fire : In(1)
        A beat moves (the array holds ``fire`` low unless ``ready``).
    ready : Out(1)
        Every PE of the row can take a beat.
    results_valid : Out(1)
        The PEs hold rounded results (all PEs run in lock step).
    capture : In(1)
        Take the results into ``value`` (the PEs are released in the same cycle).
    shift, shift_in : In(1), In(cols·fmt_out.width)
        Load ``shift_in`` (the next row's ``value``) into ``value``: the drain.
    value : Out(cols·fmt_out.width)
        The row's results (token ``c`` in bits ``c·width …``), one cycle after
        ``capture`` or ``shift``. ``beat_view()`` / ``value_view()`` give the
        layouts of these plain ports.
    """

    def __init__(self, *, cols, pe_args):
        self._cols = check_int("PERow", "cols", cols, min=1)
        self._pe_args = dict(pe_args)
        # Validates pe_args and names the PE module; the row builds its own PEs.
        self._pe0 = template(DualModePE(**self._pe_args))
        lanes, width = self._pe_args["quant_lanes"], self._pe0.fmt_out.width
        self._beat_layout = row_beat_layout(cols, lanes)
        self._value_layout = data.ArrayLayout(width, cols)
        # Plain bit vectors at the row boundary: a layout-typed port makes
        # Amaranth write a named wire per field per instance in the parent
        # (about 45,000 lines for a 64x64 array). Views give the fields back.
        super().__init__({
            "beat": In(self._beat_layout.size),
            "fire": In(1),
            "ready": Out(1),
            "results_valid": Out(1),
            "capture": In(1),
            "shift": In(1),
            "shift_in": In(self._value_layout.size),
            "value": Out(self._value_layout.size),
        })

    def beat_view(self):
        """:attr:`beat` as a ``row_beat_layout`` view."""
        return data.View(self._beat_layout, self.beat)

    def value_view(self):
        """:attr:`value` as an ``ArrayLayout(fmt_out.width, cols)`` view."""
        return data.View(self._value_layout, self.value)

    @property
    def module_name(self):
        return f"PERow_c{self._cols}_{self._pe0.module_name}"

    def elaborate(self, platform):
        m = Module()
        pes = [DualModePE(**self._pe_args) for _ in range(self._cols)]
        b, value = self.beat_view(), self.value_view()
        for c, pe in enumerate(pes):
            submodule(m, f"pe_c{c}", pe)
            i = pe.i
            m.d.comb += [
                i.valid.eq(self.fire),
                i.payload.weight.eq(b.weight),
                i.payload.mode.eq(b.mode),
                i.payload.last.eq(b.last),
                i.payload.lane_valid.eq(b.lane_valid),
                i.payload.act.eq(b.act[c]),
                i.payload.nibble.eq(b.nibble),
                i.payload.k.eq(b.k),
                pe.o.ready.eq(self.capture),
            ]
        m.d.comb += [self.ready.eq(Cat(pe.i.ready for pe in pes).all()),
                     self.results_valid.eq(pes[0].o.valid)]
        with m.If(self.capture):
            m.d.sync += [value[c].eq(pe.o.payload) for c, pe in enumerate(pes)]
        with m.Elif(self.shift):
            m.d.sync += self.value.eq(self.shift_in)
        return m


def linear_unit_for(config, *, weight_ports=None):
    """The linear unit of a ``golden.config.Config``, by ``config.linear.contract``:
    :class:`LinearUnit` (``"exact"``) or :class:`hw.dsp_linear_unit.DSPLinearUnit`
    (``"dspfp32"``, with ``weight_ports`` weight streams). Both have the ports ``cmd``,
    ``w``, ``x``, ``y`` and the counters."""
    if config.linear.contract == "dspfp32":
        from .dsp_linear_unit import DSPLinearUnit
        return DSPLinearUnit.from_config(config, weight_ports=weight_ports)
    return LinearUnit.from_config(config)


class LinearUnit(wiring.Component):
    """y = W·x for up to ``cols`` tokens on a ``rows × cols`` grid of ``DualModePE``.

    Parameters
    ----------
    rows : int
        Output rows per tile (PE rows), ≥ 1.
    cols : int
        Token lanes (PE columns), ≥ 1: the most tokens one job verifies.
    quant_lanes : int
        Draft products per PE per beat in quantized mode (SPEQ: 3).
    max_k : int
        Most beats per job; sizes each PE's exact accumulator
        (``golden.dot.accumulator_spec(FP16, max_k * quant_lanes)``).
    fmt_out : golden.fp.FPFormat
        ``FP32`` (default) or ``FP16``.
    config : golden.bsfp.BSFPConfig, optional
        BSFP v1 config of the draft (its exponent table).
    jobs_in_flight : int
        Depth of the job-descriptor FIFO: jobs accepted whose results are not all out, ≥ 1.
    round_stages : int
        Pipeline registers of each PE's final rounding, 1 … 4
        (:class:`hw.dual_mode_pe.DualModePE`); each adds one cycle of :attr:`latency`.

    Attributes
    ----------
    cmd : In(stream.Signature(cmd_layout(...)))
        Starts a job: ``mode`` (0 full, 1 quantized), ``steps`` beats, ``n_rows``
        valid output rows (the rest are padding), ``n_tokens`` valid token lanes.
        Accepted when no job is running, or in the cycle the running job
        issues its last beat (no bubble between jobs).
    w : In(stream.Signature(weight_layout(rows, quant_lanes)))
        ``steps`` weight beats per job. Padding rows carry zero weights.
    x : In(stream.Signature(act_layout(cols, quant_lanes)))
        ``steps`` activation beats per job, in step with ``w``; ``lane_valid``
        marks the valid quantized lanes (the last beat of a draft dot product
        may be partial), and is ignored in full mode. Padding token lanes
        should carry zeros.
    y : Out(stream.Signature(result_layout(rows, cols, fmt_out)))
        ``n_rows`` beats per job, rows in order, each with the rounded dot
        products of all token lanes; ``token_valid`` marks the ``n_tokens``
        valid lanes and ``last`` the job's last row.
    busy_cycles, stall_cycles, useful_macs : Out(48)
        Performance counters since reset: cycles in which the array took a
        beat; cycles inside a job in which it did not (waiting for ``w``,
        ``x`` or ``y``); products of valid rows × valid tokens × valid lanes.

    Notes
    -----
    A beat moves when ``w.valid`` and ``x.valid`` are both high and every PE is
    ready; ``w`` and ``x`` are then taken together. The array never stalls on
    its own: with both streams valid and ``y`` ready it takes one beat per
    cycle, back to back across jobs. A job's rows appear on ``y`` from
    :attr:`latency` cycles after its last beat; while they drain, the next
    job's beats keep flowing, and the array holds only if a tile of results
    is still draining when the next one is done (``steps < n_rows``).
    """

    def __init__(self, *, rows, cols, quant_lanes=3, max_k=64, fmt_out=FP32, config=None,
                 jobs_in_flight=8, round_stages=2):
        self._rows = check_int("LinearUnit", "rows", rows, min=1)
        self._cols = check_int("LinearUnit", "cols", cols, min=1)
        self._lanes = check_int("LinearUnit", "quant_lanes", quant_lanes, min=1, max=8)
        self._max_k = check_int("LinearUnit", "max_k", max_k, min=1)
        self._jobs = check_int("LinearUnit", "jobs_in_flight", jobs_in_flight, min=1)
        # The PE validates fmt_out and config; build one here so errors surface now.
        self._pe_args = dict(fmt_out=fmt_out, n=self._max_k * self._lanes,
                             quant_lanes=self._lanes, config=config, round_stages=round_stages)
        self._pe0 = template(DualModePE(**self._pe_args))
        self._fmt_out = fmt_out
        super().__init__({
            "cmd": In(stream.Signature(cmd_layout(self._rows, self._cols, self._max_k))),
            "w": In(stream.Signature(weight_layout(self._rows, self._lanes))),
            "x": In(stream.Signature(act_layout(self._cols, self._lanes))),
            "y": Out(stream.Signature(result_layout(self._rows, self._cols, fmt_out))),
            "busy_cycles": Out(COUNTER_BITS),
            "stall_cycles": Out(COUNTER_BITS),
            "useful_macs": Out(COUNTER_BITS),
        })

    @classmethod
    def from_config(cls, config):
        """The unit of a ``golden.config.Config`` whose ``linear.contract`` is ``"exact"``."""
        lin = config.linear
        return cls(rows=lin.rows, cols=lin.cols, quant_lanes=lin.quant_lanes, max_k=lin.max_k,
                   fmt_out=FORMATS[lin.fmt_out], config=config.bsfp,
                   round_stages=config.pipeline.pe_round_stages)

    rows = property(lambda self: self._rows)
    cols = property(lambda self: self._cols)
    quant_lanes = property(lambda self: self._lanes)
    max_k = property(lambda self: self._max_k)
    fmt_out = property(lambda self: self._fmt_out)

    @property
    def pes(self):
        return self._rows * self._cols

    @property
    def module_name(self):
        """Verilog name encoding the parameters, e.g. ``LinearUnit_r2_c4_q3_k16_e8m23_j8_s2``
        (``s``: the PEs' ``round_stages``)."""
        return (f"LinearUnit_r{self._rows}_c{self._cols}_q{self._lanes}_k{self._max_k}"
                f"_e{self._fmt_out.exp_bits}m{self._fmt_out.man_bits}_j{self._jobs}"
                f"_s{self._pe0.round_stages}")

    @property
    def pe_latency(self):
        """:attr:`hw.dual_mode_pe.DualModePE.latency` of every PE of the array."""
        return self._pe0.latency

    @property
    def latency(self):
        """Cycles from the job's last beat to its first ``y.valid`` (no stall): the PEs'
        latency and the capture into the result buffer."""
        return self.pe_latency + 1

    def elaborate(self, platform):
        m = Module()
        R, Ccols, Q = self._rows, self._cols, self._lanes

        rows = [PERow(cols=Ccols, pe_args=self._pe_args) for r in range(R)]
        for r in range(R):
            submodule(m, f"row{r}", rows[r])

        # ---- job control -------------------------------------------------------------
        running = Signal()
        mode = Signal()
        steps = Signal.like(self.cmd.payload.steps)
        n_rows = Signal.like(self.cmd.payload.n_rows)
        n_tokens = Signal.like(self.cmd.payload.n_tokens)
        step = Signal(range(self._max_k + 1))

        # Job descriptors wait here for their results (rows and tokens to emit).
        m.submodules.jobs = jobs = RingFIFO(width=len(n_rows) + len(n_tokens), depth=self._jobs)

        last = Signal()
        m.d.comb += last.eq(step == steps - 1)
        all_ready = Signal()
        m.d.comb += all_ready.eq(Cat(row.ready for row in rows).all())
        fire = Signal()
        m.d.comb += [
            fire.eq(running & self.w.valid & self.x.valid & all_ready),
            self.w.ready.eq(running & self.x.valid & all_ready),
            self.x.ready.eq(running & self.w.valid & all_ready),
            # A new job may start in the cycle the current one issues its last beat,
            # so back-to-back jobs leave no bubble.
            self.cmd.ready.eq((~running | (fire & last)) & jobs.w.ready),
            jobs.w.valid.eq(self.cmd.valid & self.cmd.ready),
            jobs.w.payload.eq(Cat(self.cmd.payload.n_rows, self.cmd.payload.n_tokens)),
        ]
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += [running.eq(1), mode.eq(self.cmd.payload.mode), step.eq(0),
                         steps.eq(self.cmd.payload.steps), n_rows.eq(self.cmd.payload.n_rows),
                         n_tokens.eq(self.cmd.payload.n_tokens)]
        with m.Elif(fire):
            m.d.sync += step.eq(step + 1)
            with m.If(last):
                m.d.sync += running.eq(0)

        # ---- broadcast: weights along rows, activations down columns -------------------
        w, x = self.w.payload, self.x.payload
        for r in range(R):
            b = rows[r].beat_view()
            m.d.comb += [
                rows[r].fire.eq(fire),
                b.weight.eq(w.weight[r]),
                b.nibble.eq(w.nibble[r]),
                b.k.eq(w.k[r]),
                b.act.eq(x.act),
                b.lane_valid.eq(x.lane_valid),
                b.mode.eq(mode),
                b.last.eq(last),
            ]

        # ---- performance counters ------------------------------------------------------
        lanes_used = Signal(range(Q + 1))
        m.d.comb += lanes_used.eq(Mux(mode, sum(x.lane_valid[j] for j in range(Q)), 1))
        with m.If(fire):
            m.d.sync += [self.busy_cycles.eq(self.busy_cycles + 1),
                         self.useful_macs.eq(self.useful_macs + n_rows * n_tokens * lanes_used)]
        with m.Elif(running):
            m.d.sync += self.stall_cycles.eq(self.stall_cycles + 1)

        # ---- results: capture a whole tile, then drain it row by row -------------------
        # The rows' result registers form a shift chain towards row 0, which is
        # always the row on y: no rows-to-one multiplexer of cols·width bits.
        buf_valid = Signal()
        buf_rows = Signal.like(n_rows)
        buf_tokens = Signal.like(n_tokens)
        row = Signal(range(max(R, 2)))
        # Every PE runs in lock step, so all results of a tile appear in the same cycle.
        capture = Signal()
        m.d.comb += [capture.eq(rows[0].results_valid & ~buf_valid), jobs.r.ready.eq(capture)]
        drain = Signal()
        m.d.comb += drain.eq(self.y.valid & self.y.ready)
        for r in range(R):
            m.d.comb += [rows[r].capture.eq(capture), rows[r].shift.eq(drain)]
            if r + 1 < R:
                m.d.comb += rows[r].shift_in.eq(rows[r + 1].value)
        with m.If(capture):
            m.d.sync += [buf_valid.eq(1), row.eq(0),
                         buf_rows.eq(jobs.r.payload[:len(n_rows)]),
                         buf_tokens.eq(jobs.r.payload[len(n_rows):])]

        y = self.y.payload
        m.d.comb += [
            self.y.valid.eq(buf_valid),
            y.row.eq(row),
            y.last.eq(row == buf_rows - 1),
            y.token_valid.eq(Cat(Const(c, range(Ccols + 1)) < buf_tokens for c in range(Ccols))),
        ]
        m.d.comb += y.value.eq(rows[0].value)
        with m.If(self.y.valid & self.y.ready):
            m.d.sync += row.eq(row + 1)
            with m.If(y.last):
                m.d.sync += buf_valid.eq(0)
        return m
