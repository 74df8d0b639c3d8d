"""``LinearEngine``: the DSP linear unit fed from memory and writing its results to it.

One descriptor is one job of :class:`hw.dsp_linear_unit.DSPLinearUnit` (an output tile
of ``n_rows`` rows for ``n_tokens`` tokens over ``steps`` inputs) with every word in
memory: the weights stream from their BSFP planes through
:class:`hw.weight_stream.WeightStream` (four AXI4 read ports: the nibble plane alone in
the draft pass, both planes merged by the FP16 reconstructor in the verify pass, as SPEQ
shares one copy of the weights, arXiv 2510.18525), the activations through a fifth read
port and the results leave through a write port. The host (or a layer sequencer) writes
descriptors, never a data word. Jobs queue: a job's reads start while the previous job
computes, and the unit's two partial-sum banks let one tile drain while the next runs
(SpecMamba's linear-parallel dataflow, arXiv 2509.19873, streams every weight once).

Memory layouts (addresses in bytes, each aligned to its port's beat; the low bits are
ignored):

* weights at ``nibble_addr`` and ``residue_addr``: one job of
  :func:`golden.weight_planes.job_images`, the regions of weight port ``p`` (its
  ``steps · cols / weight_ports`` column beats, :func:`golden.weight_planes.column_beats`,
  packed ``q`` to a sub-beat input by input when ``n_rows ≤ rows·cols/q``:
  :func:`golden.weight_planes.pack_factor`, which the engine derives from ``n_rows``,
  and :func:`golden.weight_planes.job_sub_beats`) at ``nibble_addr + p·R`` and
  ``residue_addr + 3p·R``, ``R`` the port's nibble region
  (:func:`golden.weight_planes.job_port_bytes` of that packing); the weight streams hand
  the sub-beats to the unit packed, so a job packed ``q`` takes about ``1/q`` of the
  weight transfers of a full one;
* with ``linear.draft_plane``, a draft job's weights at ``draft_addr`` instead: one job
  of :func:`golden.weight_planes.job_draft_image`, port ``p``'s four stripes at
  ``draft_addr + p·D`` (``D`` :func:`golden.weight_planes.job_draft_port_bytes`), each
  stream reading stripe ``m`` on its master ``m`` (``wide``), four times the nibbles a
  transfer of the nibble plane;
* activations at ``x_addr``, token-major as the norms write them: ``x_t[k]`` binary16
  at ``x_addr + t·x_stride + 2k`` (``x_addr`` and ``x_stride`` multiples of 8 bytes);
  :class:`hw.activation_reader.ActivationReader` turns them into the unit's order;
* results at ``y_addr``: one record of :attr:`y_record_bytes` per result beat (output
  group ``h`` ascending, token ``t`` within it): row ``h·cols + g`` of token ``t`` is the
  binary32 word at ``y_addr + (h·n_tokens + t)·y_record_bytes + 4·g``; rows at or above
  ``n_rows`` hold padding results.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from specgen.golden.config import Config
from specgen.golden.weight_planes import (PACKS, PLANE_SLICES, draft_input_sub_beats,
                                          engine_weight_ports, input_sub_beats, port_count)
from specgen.golden.validate import check_int

from .activation_reader import CHUNK_BEATS, X_PORT_BITS, ActivationReader
from .axi_master import AXI4WriteMaster, axi4_read_signature
from .dsp_linear_unit import COUNTER_BITS, PACK_BITS, DSPLinearUnit, cmd_layout
from .dual_mode_pe import SCALE_BITS
from .hierarchy import submodule
from .ssm_engine import StreamDownsizer
from .weight_stream import JOB_DEPTH, WeightStream

__all__ = ["LinearEngine", "descriptor_layout", "X_PORT_BITS", "JOBS_IN_FLIGHT", "WEIGHT_PORTS"]

#: AXI read ports of one weight stream: the nibble plane and the three residue slices.
WEIGHT_PORTS = PLANE_SLICES
#: Jobs accepted and not yet written back, at most (the result marks' FIFO).
JOBS_IN_FLIGHT = 2 * JOB_DEPTH


def descriptor_layout(*, slots, max_tokens, max_k, addr_width, draft_plane=False):
    """One job: the unit's command (``mode``, ``steps``, ``n_rows``, ``n_tokens``), the scale
    exponent ``k`` of its weights and the byte addresses of the module docstring
    (``draft_addr`` with ``draft_plane``)."""
    return data.StructLayout({
        "mode": 1, "steps": range(1, max_k + 1), "n_rows": range(1, slots + 1),
        "n_tokens": range(1, max_tokens + 1), "k": SCALE_BITS,
        "nibble_addr": addr_width, "residue_addr": addr_width,
        **({"draft_addr": addr_width} if draft_plane else {}),
        "x_addr": addr_width, "x_stride": addr_width, "y_addr": addr_width,
    })


class LinearEngine(wiring.Component):
    """:class:`hw.dsp_linear_unit.DSPLinearUnit` with its weights, activations and results
    in memory.

    Parameters
    ----------
    config : golden.config.Config
        ``linear`` (contract ``"dspfp32"``), ``bsfp`` and the board's memory ports.
    weight_ports : int, optional
        The unit's weight ports, each fed by a :class:`hw.weight_stream.WeightStream`
        of its own (four AXI ports each); a divisor of ``cols``. Default
        :func:`golden.weight_planes.engine_weight_ports`: enough to keep every slot
        busy on a job of ``max_tokens`` tokens (VHK158: 6; ``sim``, VCK190: 1). Each
        takes ``linear.weight_beats`` column beats a transfer, which must divide the
        columns a port feeds.
    addr_width : int
        Byte-address width of every AXI port (default 40).
    x_chunk_beats : int
        The activation reader's beats a token and chunk
        (:data:`hw.activation_reader.CHUNK_BEATS` by default).
    **master_overrides
        Overrides of every AXI master's ``max_burst``, ``max_outstanding`` and
        ``fifo_depth`` (as in :meth:`hw.axi_master.AXI4ReadMaster.from_config`).

    Attributes
    ----------
    desc : In(stream.Signature(descriptor_layout(...))), domain ``sync``
        A job. Taken when the engine's descriptor stage is empty; the job is then
        handed to the weight streams, the activation reader, the unit's command queue
        and the result writer together, at the earliest two cycles after it is taken
        (five with several weight ports: their region offsets are computed), when all
        have room and fewer than :data:`JOBS_IN_FLIGHT` jobs are unfinished.
    busy : Out(1)
        Some accepted job has not had every result write answered.
    jobs_done : Out(32)
        Jobs whose every result write has its B response, since reset; it steps
        a few cycles after the last one.
    error : Out(1)
        Sticky: an AXI response other than OKAY on any port, or a read beat that
        found its FIFO full (impossible by the masters' credits).
    busy_cycles, stall_cycles, useful_macs : Out(48)
        The unit's counters (:class:`hw.dsp_linear_unit.DSPLinearUnit`).
    op_fire : Out(1)
        The unit issues an operation this cycle (takes an activation: one MAC in
        each of its slots).
    op_draft : Out(1)
        The job whose operations issue is a draft job (valid with ``op_fire``).
    m_axi_w : Out(axi4_read_signature).array(4 · weight_ports), domain ``mem``
        The weight streams' plane ports (:class:`hw.weight_stream.WeightStream`): port
        ``4p + j`` is plane slice ``j`` of weight port ``p``.
    m_axi_x : Out(axi4_read_signature), domain ``mem``
        Activations, :data:`X_PORT_BITS` bits.
    m_axi_y : Out(axi4_write_signature), domain ``mem``
        Results, the board's port width.

    Notes
    -----
    Reset: ``sync`` and ``mem`` together; jobs in flight are dropped (their results may
    be partly written) and every later job runs whole.
    """

    def __init__(self, *, config, weight_ports=None, addr_width=40, x_chunk_beats=CHUNK_BEATS,
                 **master_overrides):
        if not isinstance(config, Config):
            raise TypeError(f"LinearEngine.config must be a golden.config.Config, not "
                            f"{config!r}")
        if config.linear.contract != "dspfp32":
            raise ValueError(f"LinearEngine needs linear.contract 'dspfp32' (the "
                             f"DSPLinearUnit), not {config.linear.contract!r}")
        self._config = config
        self._aw = check_int("LinearEngine", "addr_width", addr_width, min=12, max=64)
        kw = dict(master_overrides, addr_width=self._aw)
        ports = engine_weight_ports(config) if weight_ports is None else weight_ports
        self._ports = port_count(config.linear.cols, ports, owner="LinearEngine",
                                 name="weight_ports")
        # Each weight stream hands the unit linear.weight_beats column beats a transfer.
        per_port, beats = config.linear.cols // self._ports, config.linear.weight_beats
        if per_port % beats:
            raise ValueError(f"LinearEngine.weight_ports {self._ports} leaves {per_port} "
                             f"column(s) a port, which linear.weight_beats {beats} must divide")
        self._draft_plane = config.linear.draft_plane
        self._unit = DSPLinearUnit.from_config(config, weight_ports=self._ports,
                                               weight_beats=config.linear.weight_beats,
                                               draft_plane=self._draft_plane)
        u = self._unit
        # A job's sub-beats a port: max_k inputs of its columns, or of the draft plane's
        # sub-beats an input (whole draft transfers) when that is more.
        per_input = per_port
        if self._draft_plane:
            per_input = max(per_input, draft_input_sub_beats(per_port, 1, beats))
        self._streams = [WeightStream.from_config(config, max_beats=u.max_k * per_input, **kw)
                         for _ in range(self._ports)]
        self._ws = self._streams[0]
        self._x_rd = ActivationReader.from_config(config, chunk_beats=x_chunk_beats, **kw)
        self._y_wr = AXI4WriteMaster.from_config(config, **kw)
        dw = self._y_wr.data_width
        self._y_rec_bits = -(-32 * u.cols // dw) * dw
        x, y = self._x_rd.signature.members, self._y_wr.signature.members
        super().__init__({
            "desc": In(stream.Signature(descriptor_layout(
                slots=u.rows * u.cols, max_tokens=u.max_tokens, max_k=u.max_k,
                addr_width=self._aw, draft_plane=self._draft_plane))),
            "busy": Out(1), "jobs_done": Out(32), "error": Out(1),
            "busy_cycles": Out(COUNTER_BITS), "stall_cycles": Out(COUNTER_BITS),
            "useful_macs": Out(COUNTER_BITS), "op_fire": Out(1), "op_draft": Out(1),
            "m_axi_w": Out(axi4_read_signature(
                addr_width=self._ws.master.addr_width, data_width=self._ws.master.data_width,
                id_width=self._ws.master.id_width)).array(WEIGHT_PORTS * self._ports),
            "m_axi_x": x["axi"], "m_axi_y": y["axi"],
        })

    unit = property(lambda self: self._unit)
    weight_stream = property(lambda self: self._ws)
    weight_ports = property(lambda self: self._ports)
    addr_width = property(lambda self: self._aw)

    @property
    def y_record_bytes(self):
        """Bytes of one result record: ``4·cols`` rounded up to whole beats of the
        result port."""
        return self._y_rec_bits // 8

    @property
    def port_widths(self):
        """Data bits of each AXI port: ``w`` (each of ``4 · weight_ports``), ``x``, ``y``."""
        return {"w": self._ws.master.data_width, "x": X_PORT_BITS, "y": self._y_wr.data_width}

    @property
    def module_name(self):
        return (f"LinearEngine_{self._unit.module_name.removeprefix('DSPLinearUnit_')}"
                f"_w{self._ws.master.data_width}_y{self._y_wr.data_width}"
                f"_c{self._x_rd.chunk_beats}")

    def elaborate(self, platform):
        m = Module()
        u = self._unit
        # The unit is one clock domain (one Verilog module of its own); the masters and the
        # weight stream run in two: plain submodules.
        unit = submodule(m, "unit", u)
        P = self._ports
        streams = self._streams
        for p, ws in enumerate(streams):
            m.submodules[f"weights{p}" if P > 1 else "weights"] = ws
            for j in range(WEIGHT_PORTS):
                wiring.connect(m, wiring.flipped(self.m_axi_w[WEIGHT_PORTS * p + j]), ws.axi[j])
            wiring.connect(m, ws.w, unit.w[p])
        ws = streams[0]
        m.submodules.x_rd = x_rd = self._x_rd
        m.submodules.y_wr = y_wr = self._y_wr
        wiring.connect(m, wiring.flipped(self.m_axi_x), x_rd.axi)
        wiring.connect(m, wiring.flipped(self.m_axi_y), y_wr.axi)
        m.d.comb += [self.busy_cycles.eq(unit.busy_cycles),
                     self.stall_cycles.eq(unit.stall_cycles),
                     self.useful_macs.eq(unit.useful_macs),
                     self.op_fire.eq(unit.x.valid & unit.x.ready)]
        # The unit takes a job only once the previous one has issued its last operation.
        with m.If(unit.cmd.valid & unit.cmd.ready):
            m.d.sync += self.op_draft.eq(unit.cmd.payload.mode)
        ws_error = Cat(*(w.error | w.overrun for w in streams)).any()
        with m.If(ws_error | x_rd.error | x_rd.overrun | y_wr.error):
            m.d.sync += self.error.eq(1)

        def beat_addr(addr, bits):
            return addr[(bits // 8 - 1).bit_length():]

        # ---- descriptor stage: latch, size the weight regions, hand out ---------------
        d = Signal.like(self.desc.payload, name="d")
        full = Signal(name="desc_full")
        m.d.comb += self.desc.ready.eq(~full)
        # The weight regions' beats (below) are registered one cycle after the latch, and
        # with several weight ports the port offsets three more: the job is handed out
        # once they have settled (settle[i] is high from the (i + 2)-th cycle after the
        # latch).
        settle = Signal(1 if P == 1 else 4, name="desc_settle")
        with m.If(self.desc.valid & ~full):
            m.d.sync += [d.eq(self.desc.payload), full.eq(1), settle.eq(0)]
        with m.Elif(full):
            m.d.sync += settle.eq(Cat(1, settle[:-1]))

        unit_q = SyncFIFOBuffered(width=len(unit.cmd.payload.as_value()), depth=JOB_DEPTH)
        y_q = SyncFIFOBuffered(width=self._aw, depth=JOB_DEPTH)
        m.submodules.unit_q, m.submodules.y_q = unit_q, y_q

        in_flight = Signal(range(JOBS_IN_FLIGHT + 1), name="jobs_in_flight")
        room = Signal(init=1, name="jobs_room")        # in_flight < JOBS_IN_FLIGHT
        idle = Signal(init=1, name="jobs_idle")        # in_flight == 0
        issue = Signal(name="issue")
        finish = Signal(name="finish")
        m.d.comb += issue.eq(full & settle[-1] & room
                             & Cat(*(w.cmd.ready for w in streams)).all()
                             & x_rd.job.ready & unit_q.w_rdy & y_q.w_rdy)
        cmd = Signal(cmd_layout(u.rows * u.cols, u.max_tokens, u.max_k), name="unit_cmd")
        m.d.comb += [cmd.mode.eq(d.mode), cmd.steps.eq(d.steps), cmd.n_rows.eq(d.n_rows),
                     cmd.n_tokens.eq(d.n_tokens)]
        # Port p's regions start p (nibble) and 3p (residue) of its nibble regions after
        # the job's bases: a region is ceil(sub-beats / sub-beats a word) words
        # (golden.weight_planes.job_port_bytes). A tile of at most slots / q rows stores q
        # beats a sub-beat (its beats use slots h < rows / q alone), input by input:
        # golden.weight_planes.pack_factor, from n_rows by compares with constants, and
        # steps · input_sub_beats(cols / P, q, B) sub-beats a port, a constant multiplier
        # (shifts and adds of steps) a pack; both registered the cycle after the latch,
        # well before the count ends. The region, its multiples (constant multiplies: one
        # adder) and the sums with the bases are each registered.
        slots = u.rows * u.cols
        per_input = {q: input_sub_beats(u.cols // P, q, u.weight_beats) for q in ws.packs}
        # A draft job with the draft plane reads it on all four masters of each stream
        # (wide): golden.weight_planes.draft_input_sub_beats an input, a quarter a stripe.
        wide = Signal(name="w_wide")
        if self._draft_plane:
            m.d.comb += wide.eq(d.mode)
            per_wide = {q: draft_input_sub_beats(u.cols // P, q, u.weight_beats)
                        for q in ws.packs}
        wbeats = Signal.like(ws.cmd.payload.beats, name="w_sub_beats")
        pack = Signal(PACK_BITS, name="w_pack")

        def sub_beats(q):
            return (Mux(wide, d.steps * per_wide[q], d.steps * per_input[q])
                    if self._draft_plane else d.steps * per_input[q])
        m.d.sync += [pack.eq(0), wbeats.eq(sub_beats(1))]
        for q in sorted(q for q in ws.packs if q > 1):
            with m.If(d.n_rows <= slots // q):
                m.d.sync += [pack.eq(PACKS.index(q)), wbeats.eq(sub_beats(q))]
        per_word = ws.word_width // ws.sub_beat_bits
        word_bytes = ws.word_width // 8
        lg_w = (per_word - 1).bit_length()
        region = Signal(len(wbeats) + (word_bytes - 1).bit_length() + 2, name="w_port_bytes")
        # A port's regions: ceil(sub-beats / per_word) words; wide, four stripes of
        # ceil(sub-beats / 4 / per_word) words each.
        narrow_bytes = ((wbeats + (per_word - 1)) >> lg_w) * word_bytes
        if self._draft_plane:
            stripe_bytes = (((wbeats >> 2) + (per_word - 1)) >> lg_w) * word_bytes
            m.d.sync += region.eq(Mux(wide, stripe_bytes << 2, narrow_bytes))
        else:
            m.d.sync += region.eq(narrow_bytes)
        for p, w in enumerate(streams):
            nib_at = (Mux(wide, d.draft_addr, d.nibble_addr) if self._draft_plane
                      else d.nibble_addr)
            res_at = d.residue_addr
            if p:
                off_n = Signal(self._aw, name=f"w{p}_nibble_off")
                off_r = Signal(self._aw, name=f"w{p}_residue_off")
                base = nib_at
                nib_at = Signal(self._aw, name=f"w{p}_nibble_addr")
                res_at = Signal(self._aw, name=f"w{p}_residue_addr")
                m.d.sync += [off_n.eq(region * p), off_r.eq(region * (3 * p)),
                             nib_at.eq(base + off_n), res_at.eq(d.residue_addr + off_r)]
            m.d.comb += [
                w.cmd.valid.eq(issue),
                w.cmd.payload.nibble_addr.eq(nib_at), w.cmd.payload.residue_addr.eq(res_at),
                w.cmd.payload.beats.eq(wbeats), w.cmd.payload.mode.eq(d.mode),
                w.cmd.payload.k.eq(d.k), w.cmd.payload.pack.eq(pack),
                w.cmd.payload.wide.eq(wide),
            ]
        m.d.comb += [
            x_rd.job.valid.eq(issue),
            x_rd.job.payload.addr.eq(d.x_addr), x_rd.job.payload.stride.eq(d.x_stride),
            x_rd.job.payload.steps.eq(d.steps), x_rd.job.payload.n_tokens.eq(d.n_tokens),
            unit_q.w_en.eq(issue), unit_q.w_data.eq(cmd),
            y_q.w_en.eq(issue), y_q.w_data.eq(d.y_addr),
        ]
        with m.If(issue):
            m.d.sync += full.eq(0)
        with m.If(issue & ~finish):
            m.d.sync += [in_flight.eq(in_flight + 1), idle.eq(0),
                         room.eq(in_flight != JOBS_IN_FLIGHT - 1)]
        with m.Elif(finish & ~issue):
            m.d.sync += [in_flight.eq(in_flight - 1), idle.eq(in_flight == 1), room.eq(1)]
        m.d.comb += self.busy.eq(~idle | full)

        # ---- the unit's commands ---------------------------------------------------
        m.d.comb += [unit.cmd.valid.eq(unit_q.r_rdy), unit.cmd.payload.eq(unit_q.r_data),
                     unit_q.r_en.eq(unit.cmd.ready)]

        # ---- activations: the reader emits every job's words in the unit's order ------
        m.d.comb += [unit.x.valid.eq(x_rd.x.valid), unit.x.payload.act.eq(x_rd.x.payload),
                     x_rd.x.ready.eq(unit.x.ready)]

        # ---- results: one write region per result beat, at a running address ----------
        dw = y_wr.data_width
        rec_beats = self._y_rec_bits // dw
        dn = StreamDownsizer(in_width=self._y_rec_bits, out_width=dw)
        m.submodules.y_down = dn
        wiring.connect(m, dn.o, y_wr.data)
        y_ptr = Signal(self._aw, name="y_ptr")           # in beats of the result port
        y_loaded = Signal(name="y_loaded")
        m.d.comb += y_q.r_en.eq(~y_loaded)
        with m.If(~y_loaded & y_q.r_rdy):
            m.d.sync += [y_ptr.eq(beat_addr(y_q.r_data, dw)), y_loaded.eq(1)]
        y = unit.y
        values = Cat(y.payload.value)
        m.d.comb += [dn.i.payload.eq(values),           # zero padding above the values
                     dn.i.valid.eq(y.valid & y_loaded & y_wr.cmd.ready),
                     y_wr.cmd.valid.eq(y.valid & y_loaded & dn.i.ready),
                     y_wr.cmd.payload.addr.eq(y_ptr), y_wr.cmd.payload.beats.eq(rec_beats),
                     y.ready.eq(y_loaded & dn.i.ready & y_wr.cmd.ready)]
        y_fire = y.valid & y.ready
        issued = Signal(32, name="y_regions_issued")
        marks = SyncFIFOBuffered(width=32, depth=JOBS_IN_FLIGHT)
        m.submodules.y_marks = marks
        with m.If(y_fire):
            m.d.sync += [y_ptr.eq(y_ptr + rec_beats), issued.eq(issued + 1)]
            with m.If(y.payload.last):
                m.d.sync += y_loaded.eq(0)
        # A job's mark is the count of regions issued up to its last; the job is done
        # when the master's B count reaches it (wrap-safe: the sign of the difference).
        m.d.comb += [marks.w_en.eq(y_fire & y.payload.last), marks.w_data.eq(issued + 1)]
        reached = Signal(name="y_mark_reached")
        m.d.sync += reached.eq(marks.r_rdy & ~(y_wr.done - marks.r_data)[31] & ~finish)
        m.d.comb += [finish.eq(reached), marks.r_en.eq(finish)]
        with m.If(finish):
            m.d.sync += self.jobs_done.eq(self.jobs_done + 1)
        return m
