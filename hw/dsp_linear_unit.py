"""``DSPLinearUnit``: SpecMamba's linear unit on DSP58 slices, numerics contract ``"dspfp32"``.

SpecMamba verifies a whole draft tree in one pass by reading each weight once
and using it for every token of the tree (SpecMamba, arXiv 2509.19873,
"Dataflow"). A spatial broadcast to ``T`` token lanes leaves ``lanes − T`` of
them idle whenever a tree is smaller than the array (and 63 of 64 in the draft
pass, ``T = 1``). This array broadcasts in *time* instead:

* the array is ``cols`` columns of ``rows`` **MAC slots**, one DSP58 in DSPFP32
  mode each (:class:`hw.dsp58.DSPFP32`); slot ``(h, g)`` computes output row
  ``r = h·cols + g`` of the job's tile;
* each slot holds its row's weight ``W[r, k]`` in the DSP's B register for ``T``
  cycles while the ``T`` tokens' activations ``x_0[k] … x_{T−1}[k]`` pass on one
  broadcast bus, one per cycle, so every slot does one useful MAC per cycle for
  every ``T`` from 1 to ``max_tokens``: there is no lane rounding at all;
* the ``T`` partial sums of a slot live in a small LUT-RAM (two banks of
  ``max_tokens`` words, so a finished tile drains while the next one runs). For
  ``T = 1`` the DSP accumulates on its own P register (``P = M + P``); for
  ``T ≥ 2`` thread ``t``'s partial sum enters the C port from the LUT-RAM
  (``P = M + C``), ``T`` cycles after its previous read: the P register and the
  write back take the two cycles that ``T ≥ 2`` leaves;
* the draft pass is the same array at ``T = 1`` with the weight path fed from
  the BSFP nibble plane (SPEQ, arXiv 2510.18525): SPEQ's dual mode is a
  property of each slot's weight path, not of its multiplier.

Each output is the ``dspfp32`` contract of :mod:`golden.dsp` bit for bit: an
ascending-``k`` fold of DSPFP32 multiplies and adds from ``−0``, independent of
``T`` (a node's result does not depend on the size of its verification batch).
Rounding and normalization happen inside the DSPs; the fabric holds weights'
exponent fold, partial sums and the drain.
"""

from amaranth import Array, C, Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from specgen.golden.bsfp import BSFPConfig
from specgen.golden.fp import FP16, FP32
from specgen.golden.validate import check_choice, check_int
from specgen.golden.weight_planes import DRAFT_STRIPES, PACKS, input_transfers

from .bits import eq_const, index_width
from .dsp58 import DSPFP32, OP_ACC_C, OP_ACC_P, OP_START
from .dual_mode_pe import PE_DRAFTS, SCALE_BITS, WEIGHT_BITS
from .exponent_decoder import ExponentDecoder
from .hierarchy import submodule, template

__all__ = ["DSPLinearUnit", "MACColumn", "MACSlot", "slot_weight_layout", "op_layout",
           "weight_port_layout", "PACK_BITS",
           "memory_weight_ports"]

COUNTER_BITS = 48


def slot_weight_layout():
    """One slot's share of a weight beat: full-pass word, draft nibble and scale ``k``."""
    return data.StructLayout({"weight": WEIGHT_BITS, "nibble": 4, "k": SCALE_BITS})


def op_layout(max_tokens):
    """What a column needs of one operation ``(k, t)``: activation and its control."""
    return data.StructLayout({
        "valid": 1,
        "load": 1,          # t == 0: a new weight enters the B registers
        "first": 1,         # k == 0: the sum starts from −0
        "single": 1,        # T == 1: accumulate on P, not through C
        "last": 1,          # the job's last operation
        "mode": 1,          # 0 full pass, 1 draft pass
        "bank": 1,
        "t": range(max(max_tokens, 2)),
        "act": FP16.width,
    })


def _select(values, index):
    """``values[index]`` as a full case statement (padded to a power of two with the last
    value: Verilator's -Wall rejects an incomplete case)."""
    values = list(values)
    values += [values[-1]] * ((1 << len(index)) - len(values))
    return Array(values)[index]


def _addr(bank, t, max_tokens):
    """Partial-sum word of thread ``t`` in ``bank``: banks are ``max_tokens`` words apart."""
    if max_tokens == 1:
        return bank
    if max_tokens & (max_tokens - 1) == 0:
        return Cat(t[:(max_tokens - 1).bit_length()], bank)
    return (bank * max_tokens + t)[:(2 * max_tokens - 1).bit_length()]


class MACSlot(wiring.Component):
    """One MAC slot: a DSPFP32, its weight path and its partial-sum LUT-RAM.

    All timing is the column's: it drives the DSP's controls and the memory
    addresses, shared by every slot of the column; the slot holds only what is
    its own (the weight fold, the DSP, the memory).

    Attributes
    ----------
    weight : In(slot_weight_layout())
        The slot's weight for the operation on ``act``; read when ``ceb``.
    mode : In(1)
        0: ``weight`` is the scaled binary16 word of the full pass; 1: the draft
        nibble ``{s, c}`` (SPEQ E3M0).
    act, cea, ceb, fpopmode, cefpa : In
        The DSP's ports (:class:`hw.dsp58.DSPFP32`).
    rd_addr : In
        Partial sum read into the C port, in the DSP's adder cycle.
    wr_en, wr_addr : In
        Write of the DSP's P register, one cycle after the adder cycle.
    drain_addr : In
        Second read port: the word on ``drain_data`` in the same cycle.
    drain_data : Out(32)
    """

    def __init__(self, *, max_tokens, config):
        self._max_tokens = check_int("MACSlot", "max_tokens", max_tokens, min=1, max=16)
        if not isinstance(config, BSFPConfig):
            raise TypeError(f"MACSlot.config must be a golden.bsfp.BSFPConfig, not {config!r}")
        check_choice("MACSlot", "config.draft", config.draft, PE_DRAFTS)
        self._config = config
        self._decoder = template(ExponentDecoder(config=config, stages=0))
        depth = 2 * self._max_tokens
        super().__init__({
            "weight": In(slot_weight_layout()), "mode": In(1), "act": In(FP16.width),
            "cea": In(1), "ceb": In(1), "fpopmode": In(7), "cefpa": In(1),
            "rd_addr": In(range(depth)), "wr_en": In(1), "wr_addr": In(range(depth)),
            "drain_addr": In(range(depth)), "drain_data": Out(32),
        })

    @property
    def module_name(self):
        return f"MACSlot_t{self._max_tokens}_{self._decoder.module_name}"

    def elaborate(self, platform):
        m = Module()
        w = self.weight
        # Full pass: s | e[3:0] | m (e4 = 0 after BSFP scaling). A zero exponent
        # field is a zero or a subnormal scaled word: both read as ±0 (golden.dsp).
        sign_f, exp_f, man_f = w.weight[14], w.weight[10:14], w.weight[:10]
        # Draft pass: the exponent decoder maps the code c to the exponent E[c].
        m.submodules.decoder = dec = ExponentDecoder(config=self._config, stages=0)
        m.d.comb += [dec.i.valid.eq(1), dec.i.payload.c.eq(w.nibble[:3]),
                     dec.i.payload.s.eq(w.nibble[3]), dec.o.ready.eq(1)]
        exp16 = Mux(self.mode, dec.o.payload.exp, exp_f)
        sign = Mux(self.mode, dec.o.payload.sign, sign_f)
        man = Mux(self.mode, C(0, 10), man_f)
        # binary32 exponent of the original weight: E16 − 15 + k + 127.
        e32 = (exp16 + w.k + (FP32.bias - FP16.bias))[:8]
        zero = ~self.mode & ~exp_f.any()
        b = Signal(32)
        m.d.comb += b.eq(Mux(zero, Cat(C(0, 31), sign), Cat(C(0, 13), man, e32, sign)))

        dsp = submodule(m, "dsp", DSPFP32(a_fmt=FP16, b_fmt=FP32))
        m.submodules.psum = psum = Memory(shape=32, depth=2 * self._max_tokens, init=[])
        wr = psum.write_port()
        rd = psum.read_port(domain="comb")
        dr = psum.read_port(domain="comb")
        m.d.comb += [
            dsp.a.eq(self.act), dsp.b.eq(b), dsp.cea.eq(self.cea), dsp.ceb.eq(self.ceb),
            dsp.fpopmode.eq(self.fpopmode), dsp.cefpa.eq(self.cefpa),
            rd.addr.eq(self.rd_addr), dsp.c.eq(rd.data),
            wr.addr.eq(self.wr_addr), wr.data.eq(dsp.p), wr.en.eq(self.wr_en),
            dr.addr.eq(self.drain_addr), self.drain_data.eq(dr.data),
        ]
        return m


class MACColumn(wiring.Component):
    """``height`` MAC slots behind one register stage, with their shared control and drain mux.

    Attributes
    ----------
    op : In(op_layout(max_tokens))
        The operation of this cycle, broadcast to every column; registered here
        (one fan-out stage of ``height`` loads).
    weights : In(ArrayLayout(slot_weight_layout(), height))
        Slot ``h``'s weight of the operation, registered with ``op``.
    drain_h, drain_addr : In
        A drain read: slot ``drain_h``'s word ``drain_addr``, registered here;
        ``value`` shows it three cycles after the request.
    value : Out(32)
        The drained word.
    done : Out(1)
        Pulses when the write of an operation marked ``last`` happens: from the
        next cycle on, that job's partial sums are final.
    """

    def __init__(self, *, height, max_tokens, config):
        self._height = check_int("MACColumn", "height", height, min=1)
        self._max_tokens = check_int("MACColumn", "max_tokens", max_tokens, min=1, max=16)
        self._slot = template(MACSlot(max_tokens=max_tokens, config=config))
        self._config = config
        depth = 2 * self._max_tokens
        super().__init__({
            "op": In(op_layout(self._max_tokens)),
            "weights": In(data.ArrayLayout(slot_weight_layout(), self._height)),
            "drain_h": In(range(max(self._height, 2))),
            "drain_addr": In(range(depth)),
            "value": Out(32),
            "done": Out(1),
        })

    @property
    def module_name(self):
        return f"MACColumn_h{self._height}_{self._slot.module_name}"

    #: Cycles from ``op`` to the write of its sum: column register, DSP to the adder, P register.
    write_delay = 1 + DSPFP32.adder_stage + 1

    def elaborate(self, platform):
        m = Module()
        T = self._max_tokens
        op = Signal(op_layout(T))
        weights = Signal(data.ArrayLayout(slot_weight_layout(), self._height))
        m.d.sync += [op.eq(self.op), weights.eq(self.weights)]
        # The operation's control, delayed to the DSP's adder cycle and to the write.
        stages = [op]
        for i in range(DSPFP32.adder_stage + 1):
            nxt = Signal(op_layout(T), name=f"op_d{i + 1}")
            m.d.sync += [nxt.valid.eq(stages[-1].valid), nxt.t.eq(stages[-1].t),
                         nxt.bank.eq(stages[-1].bank), nxt.last.eq(stages[-1].last)]
            stages.append(nxt)
        at_add, at_write = stages[DSPFP32.adder_stage], stages[DSPFP32.adder_stage + 1]
        fpopmode = Mux(op.first, OP_START, Mux(op.single, OP_ACC_P, OP_ACC_C))

        drain_h = Signal.like(self.drain_h)
        drain_addr = Signal.like(self.drain_addr)
        m.d.sync += [drain_h.eq(self.drain_h), drain_addr.eq(self.drain_addr)]
        data_out = []
        for h in range(self._height):
            slot = submodule(m, f"slot{h}", MACSlot(max_tokens=T, config=self._config))
            m.d.comb += [
                slot.weight.eq(weights[h]), slot.mode.eq(op.mode), slot.act.eq(op.act),
                slot.cea.eq(op.valid), slot.ceb.eq(op.valid & op.load),
                slot.fpopmode.eq(fpopmode), slot.cefpa.eq(at_add.valid),
                slot.rd_addr.eq(_addr(at_add.bank, at_add.t, T)),
                slot.wr_en.eq(at_write.valid), slot.wr_addr.eq(_addr(at_write.bank, at_write.t, T)),
                slot.drain_addr.eq(drain_addr),
            ]
            data_out.append(slot.drain_data)
        # The rows:1 drain mux in two registered stages of at most 8:1 (a 64:1 mux
        # of 32-bit words is 5 LUT levels, over the 4 of a 400 MHz stage).
        group = 8
        n_low = min(len(drain_h), (group - 1).bit_length()) if self._height > 1 else 0
        low, high = drain_h[:n_low], drain_h[n_low:]
        high_d = Signal(max(len(high), 1))
        m.d.sync += high_d.eq(high if len(high) else 0)
        firsts = []
        for i in range(0, self._height, group):
            part = data_out[i:i + group]
            reg = Signal(32, name=f"drain_grp{i // group}")
            m.d.sync += reg.eq(_select(part, low[:index_width(len(part))])
                               if len(part) > 1 else part[0])
            firsts.append(reg)
        m.d.sync += self.value.eq(_select(firsts, high_d[:index_width(len(firsts))])
                                  if len(firsts) > 1 else firsts[0])
        m.d.comb += self.done.eq(at_write.valid & at_write.last)
        return m


def memory_weight_ports(config):
    """Column weight beats per cycle that the board's memory delivers (at least 1, at most
    every column; every column for a preset without a memory model)."""
    lin, board = config.linear, config.board
    if board.mem_bw_gbs <= 0:
        return lin.cols
    bits_per_cycle = board.mem_bw_gbs * 1e9 * 8 / (board.clock_mhz * 1e6)
    beat = weight_layout(lin.rows).size
    return max(1, min(lin.cols, int(bits_per_cycle // beat)))


def cmd_layout(slots, max_tokens, max_k):
    """One job: ``n_rows`` output rows (≤ slots) for ``n_tokens`` tokens over ``steps`` inputs."""
    return data.StructLayout({
        "mode": 1,
        "steps": range(1, max_k + 1),
        "n_rows": range(1, slots + 1),
        "n_tokens": range(1, max_tokens + 1),
    })


def weight_layout(rows):
    """One column's weight beat: input ``k`` of its ``rows`` output rows; in column ``g``,
    ``slot[h]`` is output row ``h·cols + g``."""
    return data.StructLayout({"slot": data.ArrayLayout(slot_weight_layout(), rows)})


#: Bits of a transfer's ``pack``: log2 of the column beats each of its sub-beats holds
#: (:data:`golden.weight_planes.PACKS`).
PACK_BITS = (len(PACKS) - 1).bit_length()


def weight_port_layout(rows, beats=1):
    """One transfer of a weight port: ``beats`` sub-beats (:func:`weight_layout`), the
    earlier in element 0, ``pack``: each sub-beat holds ``2**pack`` column beats
    (:func:`golden.weight_planes.pack_beats`; 0: one beat, all its slots), and ``wide``: a
    draft transfer from the draft plane, each slot's ``nibble`` and the low 12 bits of
    its ``weight`` the nibbles of four sub-beats (:func:`golden.weight_planes.draft_image`)."""
    return data.StructLayout({"beat": data.ArrayLayout(weight_layout(rows), beats),
                              "pack": PACK_BITS, "wide": 1})


def act_layout():
    """One activation beat: ``x_t[k]`` (binary16), ``k``-major, ``t``-minor."""
    return data.StructLayout({"act": FP16.width})


def result_layout(rows, cols, max_tokens):
    """One result beat: rows ``h·cols … h·cols + cols − 1`` of token ``t``."""
    return data.StructLayout({
        "value": data.ArrayLayout(FP32.width, cols),
        "row_valid": cols,
        "h": range(max(rows, 2)),
        "t": range(max(max_tokens, 2)),
        "last": 1,
    })


class DSPLinearUnit(wiring.Component):
    """y = W·x for up to ``max_tokens`` tokens on ``rows × cols`` DSPFP32 MAC slots.

    Parameters
    ----------
    rows : int
        MAC slots per column, ≥ 1 (the drain mux is ``rows``:1).
    cols : int
        Columns, ≥ 1; a result beat carries one row of each.
    max_tokens : int
        Most tokens per job (partial sums per slot), 1 … 16.
    max_k : int
        Most inputs per dot product.
    config : golden.bsfp.BSFPConfig, optional
        The draft format of the nibble plane (its exponent table).
    weight_ports : int, optional
        Weight streams, 1 … ``cols`` (default ``cols``): the memory system's
        width in column beats per cycle. A module's ports cannot be arbitrarily
        wide (Amaranth puts a module's inputs in one netlist cell of at most
        65,536 bits), and no memory feeds a board array's ``rows·cols`` weights
        per cycle anyway.
    weight_beats : int
        Column beats per transfer of a weight port, one of 1, 2, 4, 8 (default 1),
        dividing the columns of every port (``cols / weight_ports``): a weight stream
        that takes several sub-beats of its read masters' word a cycle hands them over
        together (``golden.config.LinearConfig.weight_beats``).
    draft_plane : bool
        Take ``wide`` transfers too (default False): a draft job from the draft plane
        (``golden.config.LinearConfig.draft_plane``), four sub-beats' nibbles in each slot
        of a transfer's ``weight_beats`` sub-beats, so a transfer fills ``4 · q ·
        weight_beats`` columns.

    Attributes
    ----------
    cmd : In(stream.Signature(cmd_layout(...)))
        A job: ``mode`` (0 full pass, 1 draft), ``steps`` = K inputs, ``n_rows``
        output rows (rows ≥ ``n_rows`` are padding), ``n_tokens`` = T. Taken when
        no job is issuing, or in the cycle the running job issues its last
        operation, provided one of the two partial-sum banks is free.
    w : In(stream.Signature(weight_port_layout(rows, weight_beats))).array(weight_ports)
        Column weight beats, ``weight_beats`` sub-beats a transfer: column ``g``'s beat
        ``k`` holds input ``k`` of rows ``h·cols + g`` in ``slot[h]``. Port ``p`` carries
        the columns ``g ≡ p (mod weight_ports)`` in ascending order, for ``k``
        ascending. A transfer's ``pack`` is ``log2 q``: each sub-beat holds ``q``
        column beats (a job of at most ``rows·cols/q`` rows, whose beats use slots
        ``h < rows/q`` alone, :func:`golden.weight_planes.pack_beats`), so a transfer
        fills the next ``q·weight_beats`` columns of the port's input, column ``i`` of
        it (``i`` from 0) from sub-beat ``i div q``'s slots ``(i mod q)·rows/q …``, and
        its slots ``h ≥ rows/q`` are zero; the transfer that ends an input may hold
        padding beats past the port's last column (:func:`golden.weight_planes.input_sub_beats`
        transfers an input, the next input's in the next transfer). A ``pack`` whose
        ``q`` is not in :attr:`packs` is taken as 0. Each column has a one-beat buffer;
        beat ``k`` of every column is used together, with activation ``(k, 0)``, so the
        array wants ``ceil(cols / (weight_ports · q · weight_beats))`` transfers per port
        every T cycles: a job of fewer tokens issues at that pace.
    x : In(stream.Signature(act_layout()))
        K·T beats per job: ``x_t[k]`` for ``k`` ascending and ``t`` ascending
        within each ``k``.
    y : Out(stream.Signature(result_layout(rows, cols, max_tokens)))
        ``ceil(n_rows / cols) · T`` beats per job: for ``h`` ascending and,
        within it, ``t`` ascending, rows ``h·cols + g`` of token ``t`` in
        ``value[g]``; ``row_valid`` marks rows ``< n_rows``, ``last`` the job's
        last beat.
    busy_cycles, stall_cycles, useful_macs : Out(48)
        Since reset: cycles that issued an operation; cycles of a running job
        that did not (waiting for ``x``, ``w`` or a free bank); valid rows
        summed over issued operations (one MAC each).

    Notes
    -----
    With ``x`` and ``w`` always valid and ``y`` always ready the array issues
    one operation per cycle across jobs, so its MAC slots are busy
    ``n_rows / (rows·cols)`` of the time for any T. A tile's results drain
    while the next tile runs; the drain of ``ceil(n_rows/cols)·T`` beats
    stays hidden when it is shorter than the next job (``rows ≤ K``).
    """

    def __init__(self, *, rows, cols, max_tokens=16, max_k=64, config=None, weight_ports=None,
                 weight_beats=1, draft_plane=False):
        self._rows = check_int("DSPLinearUnit", "rows", rows, min=1)
        self._cols = check_int("DSPLinearUnit", "cols", cols, min=1)
        self._max_tokens = check_int("DSPLinearUnit", "max_tokens", max_tokens, min=1, max=16)
        self._max_k = check_int("DSPLinearUnit", "max_k", max_k, min=1)
        self._config = BSFPConfig() if config is None else config
        self._ports = check_int("DSPLinearUnit", "weight_ports",
                                self._cols if weight_ports is None else weight_ports,
                                min=1, max=self._cols)
        beats = (1, 2, 4, 8) if self._cols % self._ports == 0 else (1,)
        beats = tuple(b for b in beats if (self._cols // self._ports) % b == 0)
        self._beats = check_choice("DSPLinearUnit", "weight_beats", weight_beats, beats)
        self._draft_plane = check_choice("DSPLinearUnit", "draft_plane", draft_plane,
                                         (False, True))
        self._column = template(MACColumn(height=self._rows, max_tokens=self._max_tokens,
                                          config=self._config))
        slots = self._rows * self._cols
        super().__init__({
            "cmd": In(stream.Signature(cmd_layout(slots, self._max_tokens, self._max_k))),
            "w": In(stream.Signature(weight_port_layout(self._rows, self._beats))
                    ).array(self._ports),
            "x": In(stream.Signature(act_layout())),
            "y": Out(stream.Signature(result_layout(self._rows, self._cols, self._max_tokens))),
            "busy_cycles": Out(COUNTER_BITS),
            "stall_cycles": Out(COUNTER_BITS),
            "useful_macs": Out(COUNTER_BITS),
        })

    rows = property(lambda self: self._rows)
    cols = property(lambda self: self._cols)
    max_tokens = property(lambda self: self._max_tokens)
    max_k = property(lambda self: self._max_k)
    fmt_out = FP32

    weight_ports = property(lambda self: self._ports)
    weight_beats = property(lambda self: self._beats)

    @property
    def packs(self):
        """The column beats a sub-beat may hold (a transfer's ``2**pack``): the
        :data:`golden.weight_planes.PACKS` that divide ``rows``."""
        return tuple(q for q in PACKS if self._rows % q == 0)

    draft_plane = property(lambda self: self._draft_plane)

    def transfers_per_input(self, pack=1, wide=False):
        """Transfers a port takes an input in a job packed ``pack`` (the most over the
        ports): :func:`golden.weight_planes.input_sub_beats` ``/ weight_beats``; with
        ``wide``, a draft job from the draft plane,
        :func:`golden.weight_planes.draft_input_sub_beats` ``/ (4 · weight_beats)``."""
        return input_transfers(-(-self._cols // self._ports), pack, self._beats, wide=wide)

    @classmethod
    def from_config(cls, config, *, weight_ports=None, weight_beats=1, draft_plane=False):
        """The unit of a ``golden.config.Config`` whose ``linear.contract`` is ``"dspfp32"``.

        ``weight_ports`` defaults to what the board's memory delivers per cycle, in
        column beats (every column where the preset has no memory model);
        ``weight_beats`` to 1 and ``draft_plane`` to False (``hw.linear_engine.LinearEngine``
        gives the config's).
        """
        lin = config.linear
        if weight_ports is None:
            weight_ports = memory_weight_ports(config)
        return cls(rows=lin.rows, cols=lin.cols, max_tokens=lin.max_tokens, max_k=lin.max_k,
                   config=config.bsfp, weight_ports=weight_ports, weight_beats=weight_beats,
                   draft_plane=draft_plane)

    @property
    def slots(self):
        """MAC slots (DSP58 instances)."""
        return self._rows * self._cols

    @property
    def max_rows(self):
        return self.slots

    @property
    def module_name(self):
        beats = f"x{self._beats}" if self._beats > 1 else ""
        wide = "d" if self._draft_plane else ""
        return (f"DSPLinearUnit_r{self._rows}_c{self._cols}_t{self._max_tokens}_k{self._max_k}"
                f"_w{self._ports}{beats}{wide}_{self._column.module_name.split('_', 2)[2]}")

    #: Fill of the result path: drain request register, the two stages of the columns'
    #: drain mux.
    _DRAIN = 3

    @property
    def latency(self):
        """Cycles from a job's last operation (``x`` transfer) to its first ``y.valid``,
        with a free drain and ``y`` ready: the write of the last sum
        (:attr:`MACColumn.write_delay`), the count of finished jobs and the drain's
        start (2), the column's read and mux (3), the result FIFO (2)."""
        return MACColumn.write_delay + 2 + self._DRAIN + 2

    def _weight_buffers(self, m, w_valid, use_w):
        """One-beat buffers of the columns, filled from the weight ports in turn.

        A port's transfer packed ``q`` (its ``pack``) fills the next ``q·weight_beats``
        columns of its input at once, column ``i`` of the port from the slots of its
        sub-beat and piece (fixed wiring for each ``q``, then a multiplexer over the
        transfer's ``pack`` on the slots ``h < rows/2``, which the packs share; the slots
        of a packed beat above ``rows/q`` are zero). A buffer takes its next beat in the
        cycle its beat is used, so a full stream keeps the array at one weight beat per
        cycle (T = 1). "Every buffer is full" (``w_valid``) is a register: the AND of the
        buffers' next state, formed for both values of ``use_w`` from registers and the
        ports' ``valid`` and ``pack``, so the operation only selects between the two.
        """
        G, P, B, H = self._cols, self._ports, self._beats, self._rows
        layout = weight_layout(H)
        packs = self.packs
        lgs = [PACKS.index(q) for q in packs]
        # The transfers' kinds: (q, wide) for every pack, narrow first, then wide ones (a
        # draft transfer of the draft plane, 4·B sub-beats in B elements) if built.
        kinds = [(q, False) for q in packs] + ([(q, True) for q in packs]
                                               if self._draft_plane else [])
        bufs = [Signal(layout, name=f"wbuf{g}") for g in range(G)]
        full = [Signal(name=f"wbuf{g}_full") for g in range(G)]
        # Column g's next "full", for each value of use_w: without a use it fills if
        # its port offers its beat (sel) or stays full; with a use it holds only a
        # beat arriving in the same cycle.
        next_kept = [Signal(name=f"wbuf{g}_next_kept") for g in range(G)]
        next_used = [Signal(name=f"wbuf{g}_next_used") for g in range(G)]
        # Can one transfer fill every column of every port (a pack whose transfers an
        # input are 1)? Then the used buffers may all be refilled in the cycle they are used.
        one_transfer = min(self.transfers_per_input(q, w) for q, w in kinds) == 1
        # Columns a transfer fills: q a sub-beat, B sub-beats (4·B wide).
        spans = {(q, w): q * B * (DRAFT_STRIPES if w else 1) for q, w in kinds}
        for p, port in enumerate(self.w):
            cols = list(range(p, G, P))
            counts = {kd: -(-len(cols) // spans[kd]) for kd in kinds}  # transfers an input
            most = counts[(1, False)]
            ptr = Signal(range(max(most, 2)), name=f"wport{p}_transfer")
            # The transfer's kind, as this unit takes it (a pack it does not take is 0; a
            # wide transfer is narrow to a unit without the draft plane).
            lg_in = port.payload.pack
            # (One bit at least: a zero-width signal is an empty range in Verilog.)
            pk = Signal(range(max(len(kinds), 2)), name=f"wport{p}_kind")
            wide_in = port.payload.wide if self._draft_plane else C(0, 1)
            m.d.comb += pk.eq(Mux(wide_in, len(packs), 0))
            for n, lg in enumerate(lgs[1:], start=1):
                with m.If(eq_const(lg_in, lg)):
                    m.d.comb += pk.eq(Mux(wide_in, len(packs) + n, n))
            # ready = ~full[first column of the transfer] | use_w, with the select on
            # registers and the transfer's pack alone, and use_w (late: it depends on the
            # operation) in the last gate. A transfer's columns fill and empty together
            # (every column is used at once), so its first one speaks for it.
            firsts = []
            for kd in kinds:
                ends = [full[cols[i * spans[kd]]] for i in range(counts[kd])]
                firsts.append(_select(ends, ptr) if len(ends) > 1 else ends[0])
            full_sel = _select(firsts, pk) if len(firsts) > 1 else firsts[0]
            m.d.comb += port.ready.eq(~full_sel | use_w)
            take = port.valid & port.ready
            lasts = [eq_const(ptr, counts[kd] - 1) if most > 1 else C(1, 1) for kd in kinds]
            if most > 1:
                with m.If(take):
                    last = _select(lasts, pk) if len(lasts) > 1 else lasts[0]
                    m.d.sync += ptr.eq(Mux(last, 0, ptr + 1))
            for i, g in enumerate(cols):
                # Transfer i div span of the input, for the transfer's pack.
                sels = []
                for kd in kinds:
                    t = i // spans[kd]
                    sels.append(eq_const(ptr, t) if most > 1 else C(1, 1))
                sel = _select(sels, pk) if len(sels) > 1 else sels[0]
                here = take & sel
                # The beat of column i under each kind: sub-beat s = (i mod span) div q,
                # slots (i mod q)·H/q … of it in slots 0 … H/q − 1, the rest zero. Narrow,
                # sub-beat s is element s; wide, element s mod B of group s div B, whose
                # nibbles are the slot's nibble (group 0) or its weight bits 4(m-1) … .
                beat = Signal(layout, name=f"wbuf{g}_in")
                width = len(beat.slot[0].as_value())
                for h in range(H):
                    opts = []
                    for q, wd in kinds:
                        s_ = (i % spans[(q, wd)]) // q
                        piece = i % q
                        if h >= H // q:
                            opts.append(C(0, width))
                            continue
                        src = port.payload.beat[s_ % B if wd else s_].slot[piece * (H // q) + h]
                        grp = s_ // B if wd else 0
                        if grp == 0:
                            opts.append(src.as_value() if not wd else
                                        Cat(C(0, len(src.weight)), src.nibble, src.k))
                        else:
                            opts.append(Cat(C(0, len(src.weight)),
                                            src.weight[4 * (grp - 1):4 * grp], src.k))
                    # Only the kinds that reach slot h differ; the others give zero.
                    m.d.comb += beat.slot[h].eq(_select(opts, pk) if len(opts) > 1 else opts[0])
                with m.If(here):
                    m.d.sync += bufs[g].eq(beat)
                m.d.sync += full[g].eq((full[g] & ~use_w) | here)
                m.d.comb += [next_kept[g].eq(full[g] | (port.valid & sel)),
                             next_used[g].eq(port.valid & sel)]
        # = AND of every column's next "full", with use_w (late: it depends on the
        # operation) only in the last multiplexer.
        if not one_transfer:
            # Every port fills its columns over two transfers or more, so the used
            # buffers are never all refilled at once: the AND of next_used is 0, said
            # here so that use_w is the last gate.
            m.d.sync += w_valid.eq(~use_w & Cat(next_kept).all())
        else:
            m.d.sync += w_valid.eq(Mux(use_w, Cat(next_used).all(), Cat(next_kept).all()))
        return [b.slot for b in bufs]

    def elaborate(self, platform):
        m = Module()
        H, G, T = self._rows, self._cols, self._max_tokens
        cmd = self.cmd.payload

        # ---- job control: operation (k, t) per cycle -----------------------------------
        running = Signal()
        mode = Signal()
        n_rows = Signal.like(cmd.n_rows)
        n_tok = Signal.like(cmd.n_tokens)
        k_left = Signal(range(self._max_k + 1))   # inputs after the current one: K - 1 - k
        t = Signal(range(max(T, 2)))
        bank = Signal()            # bank of the running job
        next_bank = Signal()       # bank the next job takes
        busy = Signal(2)           # a bank holds sums not yet drained
        # "t is the last token", "k is the last input", "k is the first input" and
        # "T = 1" are registers kept with the counters, so no compare lies on the
        # path from an operation to the next command.
        last_t = Signal()
        last_k = Signal()
        first_k = Signal()
        single = Signal()
        last_op = Signal()
        m.d.comb += last_op.eq(last_t & last_k)
        # "t = 0" (the operation uses a new weight beat) as a register kept with t:
        # t.any() would put a reduce before fire, the weight ports' ready and the
        # buffers' enables (logic levels, docs/estimate.md).
        need_w = Signal(init=1)
        fire = Signal()
        w_valid = Signal()
        use_w = Signal()             # every column's beat k is used in this cycle
        m.d.comb += [
            fire.eq(running & self.x.valid & (~need_w | w_valid)),
            self.x.ready.eq(running & (~need_w | w_valid)),
            use_w.eq(fire & need_w),
        ]
        col_weights = self._weight_buffers(m, w_valid, use_w)
        free = ~Mux(next_bank, busy[1], busy[0])
        m.d.comb += self.cmd.ready.eq((~running | (fire & last_op)) & free)
        take = self.cmd.valid & self.cmd.ready
        set_busy = Signal(2)
        clr_busy = Signal(2)
        with m.If(take):
            m.d.sync += [running.eq(1), mode.eq(cmd.mode),
                         n_rows.eq(cmd.n_rows), n_tok.eq(cmd.n_tokens),
                         k_left.eq(cmd.steps - 1), t.eq(0), need_w.eq(1),
                         bank.eq(next_bank), next_bank.eq(~next_bank),
                         last_t.eq(cmd.n_tokens == 1), last_k.eq(cmd.steps == 1),
                         first_k.eq(1), single.eq(cmd.n_tokens == 1)]
            m.d.comb += set_busy.eq(Mux(next_bank, 0b10, 0b01))
        with m.Elif(fire):
            m.d.sync += [t.eq(Mux(last_t, 0, t + 1)), need_w.eq(last_t)]
            with m.If(last_t):
                # k counts down (k_left): "the next k is the last" is a compare of a
                # register with 1, not an add and a compare with `steps`.
                m.d.sync += [k_left.eq(k_left - 1), first_k.eq(0), last_t.eq(single),
                             last_k.eq(k_left == 1)]
            with m.Else():
                m.d.sync += last_t.eq(t + 2 == n_tok)
            with m.If(last_op):
                m.d.sync += running.eq(0)
        m.d.sync += busy.eq((busy | set_busy) & ~clr_busy)

        # Job descriptors in issue order, for the drain: (bank, n_rows, T).
        desc_w = len(n_rows) + len(n_tok)
        m.submodules.pending = pending = fifo.SyncFIFO(width=desc_w, depth=2)
        m.d.comb += [pending.w_en.eq(take), pending.w_data.eq(Cat(cmd.n_rows, cmd.n_tokens))]

        # ---- the columns --------------------------------------------------------------
        op = Signal(op_layout(T))
        m.d.comb += [op.valid.eq(fire), op.load.eq(need_w), op.first.eq(first_k),
                     op.single.eq(single), op.last.eq(last_op), op.mode.eq(mode),
                     op.bank.eq(bank), op.t.eq(t), op.act.eq(self.x.payload.act)]
        columns = []
        drain_h = Signal(range(max(H, 2)))
        drain_t = Signal(range(max(T, 2)))
        drain_bank = Signal()
        for g in range(G):
            col = submodule(m, f"col{g}", MACColumn(height=H, max_tokens=T, config=self._config))
            m.d.comb += [col.op.eq(op), col.drain_h.eq(drain_h),
                         col.drain_addr.eq(_addr(drain_bank, drain_t, T))]
            m.d.comb += col.weights.eq(col_weights[g])
            columns.append(col)

        # ---- drain: a finished job's banks, beat by beat --------------------------------
        # A job is finished when its last write happened (column 0 says when; all
        # columns run in lock step). Finished jobs wait in `ready_jobs`.
        done_count = Signal(2)
        draining = Signal()
        d_rows = Signal.like(n_rows)
        d_tok = Signal.like(n_tok)
        h_base = Signal(range(H * G + G + 1))     # first row of the beat: drain_h * G
        m.submodules.results = results = fifo.SyncFIFOBuffered(
            width=self.y.payload.shape().size, depth=self._DRAIN + 4)
        issue = Signal()
        # "drain_t is the job's last token" and "this beat holds the job's last rows",
        # registers kept with drain_t and h_base (as last_t and last_k are with t, k),
        # so no adder lies between the drain counters and the drain's control.
        d_last_h = Signal()
        d_last_t = Signal()
        rows_left = Signal.like(d_rows)    # d_rows - h_base (wraps after the last beat)
        # Beats in the result FIFO plus beats issued and not yet arrived, kept as one
        # register (the FIFO's level moves by its writes and reads, and every beat
        # issued is written when it arrives: `room` guarantees the space), so that
        # `room` is a compare of a register, not an add and a compare.
        occupancy = Signal(range(results.depth + 1))
        room = occupancy < results.depth
        m.d.comb += issue.eq(draining & room)
        start = Signal()
        m.d.comb += [start.eq(~draining & (done_count != 0) & pending.r_rdy),
                     pending.r_en.eq(start)]
        m.d.sync += done_count.eq(done_count + columns[0].done - start)
        p_rows = pending.r_data[:len(n_rows)]
        p_tok = pending.r_data[len(n_rows):]
        drain_of = Signal()          # bank of the draining job: jobs alternate banks
        with m.If(start):
            m.d.sync += [draining.eq(1), d_rows.eq(p_rows), d_tok.eq(p_tok), h_base.eq(0),
                         drain_h.eq(0), drain_t.eq(0), drain_bank.eq(drain_of),
                         d_last_t.eq(p_tok == 1), rows_left.eq(p_rows),
                         # One slot per column: every job's rows fit one beat (and
                         # Verilator's -Wall rejects the constant compare).
                         d_last_h.eq(p_rows <= G if H > 1 else 1)]
        with m.Elif(issue):
            m.d.sync += [drain_t.eq(Mux(d_last_t, 0, drain_t + 1)),
                         d_last_t.eq(Mux(d_last_t, d_tok == 1, drain_t + 2 == d_tok))]
            with m.If(d_last_t):
                m.d.sync += [drain_h.eq(drain_h + 1), h_base.eq(h_base + G),
                             rows_left.eq(rows_left - G), d_last_h.eq(rows_left <= 2 * G)]
            with m.If(d_last_t & d_last_h):
                m.d.sync += [draining.eq(0), drain_of.eq(~drain_of)]
                # The bank may be written again: the next job's first write comes
                # at least MACColumn.write_delay cycles after it starts, after
                # this beat's read.
                m.d.comb += clr_busy.eq(Mux(drain_bank, 0b10, 0b01))

        # The beat's metadata waits beside the columns' read (three cycles).
        meta = Signal(data.StructLayout({"h": range(max(H, 2)), "t": range(max(T, 2)),
                                         "last": 1, "row_valid": G, "valid": 1}))
        row_valid = Cat((h_base + g) < d_rows for g in range(G))
        meta_d = [Signal.like(meta, name=f"meta_d{i}") for i in range(self._DRAIN)]
        m.d.comb += [meta.h.eq(drain_h), meta.t.eq(drain_t), meta.last.eq(d_last_h & d_last_t),
                     meta.row_valid.eq(row_valid), meta.valid.eq(issue)]
        m.d.sync += [meta_d[0].eq(meta)] + [meta_d[i].eq(meta_d[i - 1])
                                            for i in range(1, self._DRAIN)]
        arrive = meta_d[-1]
        beat = Signal(self.y.payload.shape())
        m.d.comb += [beat.h.eq(arrive.h), beat.t.eq(arrive.t), beat.last.eq(arrive.last),
                     beat.row_valid.eq(arrive.row_valid)]
        m.d.comb += [beat.value[g].eq(columns[g].value) for g in range(G)]
        m.d.comb += [results.w_en.eq(arrive.valid), results.w_data.eq(beat)]
        m.d.sync += occupancy.eq(occupancy + issue - (self.y.valid & self.y.ready))
        m.d.comb += [self.y.valid.eq(results.r_rdy), self.y.payload.eq(results.r_data),
                     results.r_en.eq(self.y.ready)]

        # ---- performance counters ------------------------------------------------------
        with m.If(fire):
            m.d.sync += [self.busy_cycles.eq(self.busy_cycles + 1),
                         self.useful_macs.eq(self.useful_macs + n_rows)]
        with m.Elif(running):
            m.d.sync += self.stall_cycles.eq(self.stall_cycles + 1)
        return m
