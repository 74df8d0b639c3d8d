"""``ActivationReader``: a job's binary16 activations, stored token-major, in the unit's order.

The linear unit (:class:`hw.dsp_linear_unit.DSPLinearUnit`) streams every weight once
and applies it to all the job's tokens, so it takes its activations input-major and
token-minor: ``x_0[k], x_1[k], ..., x_{T-1}[k]``, then ``k + 1`` (SpecMamba's
linear-parallel dataflow, arXiv 2509.19873). The stages that produce the activations
(the norms, :func:`hw.stream_engine.norm_engine`) write one token's vector after
another. This reader turns the one into the other: token ``t``'s element ``k`` is the
binary16 word at ``addr + t·stride + 2k`` (a job over inputs ``k0 ... k0 + steps - 1`` of
longer vectors starts at ``2·k0`` bytes into the first one and keeps the vectors' own
stride).

It reads the job in chunks of :attr:`chunk_beats` beats a token (one AXI4 burst per
token and chunk, token 0 first), writes the beats into a ring of :attr:`ring_beats`
beats in arrival order, and emits a chunk once all its beats are in: for each element
of the chunk, one word of each token. The ring holds two chunks of ``max_tokens``
tokens, so the next chunk lands while one is emitted and a chunk follows the last one
without a bubble. A command reserves its beats in the ring as it issues, so read data
never waits (the master's FIFO is only the clock crossing), and the commands run ahead
as far as the ring's free space and :data:`META_DEPTH` chunks allow: four chunks of one
token are 256 words, 256 cycles of the unit, against a memory latency of 30–90 cycles.
"""

from types import SimpleNamespace

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from specgen.golden.validate import check_int

from .axi_master import AXI4ReadMaster
from .bits import eq_const
from .fp_arith import add_const
from .stream_pipe import credited_output

__all__ = ["ActivationReader", "job_layout", "X_PORT_BITS", "CHUNK_BEATS", "META_DEPTH"]

#: Bits of the activation port's beat: the unit takes one binary16 word a cycle, which a
#: 64-bit port carries with room to spare at any memory clock ≥ the fabric clock / 4.
X_PORT_BITS = 64
#: Beats a token in one chunk: a 128-byte burst of a 64-bit port. With 16 tokens the ring
#: is 512 × 64 bits, one RAMB36 in its 512 × 72 shape (AMD AM007).
CHUNK_BEATS = 16
#: Jobs the reader holds (the weight streams' depth: a job's reads start while the
#: previous one computes).
JOB_DEPTH = 4
#: Chunks whose commands are issued and which are not yet emitted, at most.
META_DEPTH = 4


def job_layout(*, addr_width, max_steps, max_tokens):
    """A job: ``addr`` (token 0's first word) and ``stride`` (token to token), byte
    addresses whose bits below the beat are ignored; ``steps`` inputs of ``n_tokens``
    tokens."""
    return data.StructLayout({
        "addr": addr_width, "stride": addr_width,
        "steps": range(1, max_steps + 1), "n_tokens": range(1, max_tokens + 1),
    })


class ActivationReader(wiring.Component):
    """Token-major binary16 vectors in memory, the unit's ``x`` stream out.

    Parameters
    ----------
    max_tokens : int
        Tokens of a job at most (the unit's ``max_tokens``), ≥ 1.
    max_steps : int
        Inputs of a job at most (the unit's ``max_k``), ≥ 1.
    chunk_beats : int
        Beats a token in one chunk, a power of two ≥ 1 (default :data:`CHUNK_BEATS`).
    **master
        The :class:`hw.axi_master.AXI4ReadMaster`'s parameters; ``data_width`` a
        multiple of 16 bits, its ``out_width`` equal to it.

    Attributes
    ----------
    job : In(stream.Signature(job_layout(...))), domain ``sync``
        A job, held in a :data:`JOB_DEPTH`-entry FIFO. Each chunk's commands start four
        cycles after the previous chunk's last (or the job reaches the FIFO's head),
        once the chunk's beats fit in the ring.
    x : Out(stream.Signature(16)), domain ``sync``
        Each job's ``steps · n_tokens`` words in order ``k`` ascending, ``t`` within it,
        the jobs one after another. A chunk's first word follows its last beat's ring
        write through the registers of :attr:`latency`, and the words of a job follow
        at one a cycle while ``x.ready`` holds.
    axi : Out(axi4_read_signature), domain ``mem``
    error, overrun : Out(1)
        The master's (:class:`hw.axi_master.AXI4ReadMaster`).

    Notes
    -----
    Reset: ``sync`` and ``mem`` together; jobs in flight are dropped.
    """

    def __init__(self, *, max_tokens, max_steps, chunk_beats=CHUNK_BEATS, **master):
        self._max_tokens = check_int("ActivationReader", "max_tokens", max_tokens, min=1)
        self._max_steps = check_int("ActivationReader", "max_steps", max_steps, min=1)
        self._cb = check_int("ActivationReader", "chunk_beats", chunk_beats, min=1, max=256)
        if self._cb & (self._cb - 1):
            raise ValueError(f"ActivationReader.chunk_beats must be a power of two from 1 to "
                             f"256, not {chunk_beats!r}")
        self._master = AXI4ReadMaster(**master)
        dw = self._master.data_width
        if dw % 16 or self._master.out_width != dw:
            raise ValueError(f"ActivationReader's read master must have a data_width that is "
                             f"a multiple of 16 and out_width equal to it, not data_width "
                             f"{dw}, out_width {self._master.out_width}")
        self._per = dw // 16
        if self._per & (self._per - 1):
            raise ValueError(f"ActivationReader's read master data_width must be 16 times a "
                             f"power of two, not {dw}")
        ring = 2 * self._max_tokens * self._cb
        self._ring = 1 << (ring - 1).bit_length()
        self._aw = self._master.addr_width
        super().__init__({
            "job": In(stream.Signature(job_layout(addr_width=self._aw, max_steps=max_steps,
                                                  max_tokens=max_tokens))),
            "x": Out(stream.Signature(16)),
            "axi": self._master.signature.members["axi"],
            "error": Out(1), "overrun": Out(1),
        })

    @classmethod
    def from_config(cls, config, **overrides):
        """The reader of ``config``'s linear unit: its ``max_tokens`` and ``max_k``, a
        :data:`X_PORT_BITS`-bit port of the board's memory (``overrides`` replace any
        master parameter or ``chunk_beats``)."""
        lin = config.linear
        chunk = overrides.pop("chunk_beats", CHUNK_BEATS)
        master = AXI4ReadMaster.config_kwargs(config, **{"data_width": X_PORT_BITS,
                                                         "out_width": X_PORT_BITS, **overrides})
        return cls(max_tokens=lin.max_tokens, max_steps=lin.max_k, chunk_beats=chunk, **master)

    master = property(lambda self: self._master)
    chunk_beats = property(lambda self: self._cb)
    ring_beats = property(lambda self: self._ring)
    max_tokens = property(lambda self: self._max_tokens)

    @property
    def latency(self):
        """Registers from the ring write of a chunk's last beat to its first ``x`` word,
        with ``x.ready`` high and the previous chunk emitted: ``ring_ahead``, the
        readiness flag, the emitter's hand-over, the ring's read port and the output
        FIFO (counted from the design, not measured by a bench)."""
        return 5

    @property
    def module_name(self):
        return (f"ActivationReader_t{self._max_tokens}_k{self._max_steps}_c{self._cb}_"
                f"{self._master.module_name}")

    def elaborate(self, platform):
        m = Module()
        m.submodules.master = rd = self._master
        wiring.connect(m, wiring.flipped(self.axi), rd.axi)
        m.d.comb += [self.error.eq(rd.error), self.overrun.eq(rd.overrun)]
        per, cb_max, ring = self._per, self._cb, self._ring
        lb = (per - 1).bit_length()                     # log2 words a beat
        beat_shift = (self._master.data_width // 8 - 1).bit_length()
        bw = self._aw - beat_shift                      # beat-address bits
        rw = ring.bit_length() - 1                      # ring index bits
        steps_w = len(self.job.payload.steps)
        tok_w = len(self.job.payload.n_tokens)
        cbw = cb_max.bit_length()                       # beats of a chunk: 1 ... cb_max
        elw = (cb_max * per).bit_length()               # words of a chunk: 1 ... cb_max·per
        szw = (self._max_tokens * cb_max).bit_length()  # beats of a chunk, all tokens
        meta_layout = data.StructLayout({"cb": cbw, "n_el": elw, "n_tok": tok_w, "size": szw})

        jobs = SyncFIFOBuffered(width=len(self.job.payload.as_value()), depth=JOB_DEPTH)
        meta = SyncFIFOBuffered(width=meta_layout.size, depth=META_DEPTH)
        m.submodules.jobs, m.submodules.meta = jobs, meta
        m.d.comb += [jobs.w_en.eq(self.job.valid), jobs.w_data.eq(self.job.payload),
                     self.job.ready.eq(jobs.w_rdy)]

        # ---- commands: chunk by chunk, one burst a token ------------------------------
        # Per chunk: size it (``cb``, ``n_el``), multiply out its beats (``csize =
        # n_tokens · cb``), reserve them in the ring once they fit, then issue one
        # command a token into a 4-entry queue before the master. Every step's condition
        # is a register, so no compare or handshake of the master sits before the
        # FSM's updates.
        j = data.View(self.job.payload.shape(), jobs.r_data)
        busy = Signal(name="cmd_busy")         # a job is being issued
        phase = Signal(range(4), name="cmd_phase")     # 0 size, 1 multiply, 2 reserve, 3 issue
        waited = Signal(name="cmd_waited")     # in phase 2: chunk_room reflects csize
        chunk_at = Signal(bw, name="chunk_addr")       # token 0's beat of this chunk
        tok_at = Signal(bw, name="tok_addr")
        stride = Signal(bw, name="stride_beats")
        rem_beats = Signal(steps_w + 1, name="rem_beats")   # a token's beats from this chunk
        rem_el = Signal(steps_w + 1, name="rem_words")
        n_tok = Signal(tok_w, name="n_tok")
        t_last = Signal(name="cmd_t_last")
        t = Signal(tok_w, name="cmd_t")
        cb = Signal(cbw, name="chunk_beats")
        n_el = Signal(elw, name="chunk_words")
        c_last = Signal(name="chunk_last")
        csize = Signal(szw, name="chunk_size")         # beats of the chunk, all tokens
        mv = Signal(meta_layout, name="meta_w")
        m.d.comb += jobs.r_en.eq(~busy)
        with m.If(~busy & jobs.r_rdy):
            m.d.sync += [busy.eq(1), phase.eq(0),
                         chunk_at.eq(j.addr[beat_shift:]), stride.eq(j.stride[beat_shift:]),
                         rem_beats.eq((j.steps + (per - 1)) >> lb), rem_el.eq(j.steps),
                         n_tok.eq(j.n_tokens)]

        # Ring space is reserved a chunk at a time and freed as the chunk is emitted, so
        # the ring has room for every beat in flight: R data is never held, and the read
        # master's FIFO is only the clock crossing. chunk_room is registered from
        # registers; reserved grows only in phase 2, which the FSM leaves at once.
        reserved = Signal(rw + 1, name="ring_reserved")
        release = Signal(szw, name="ring_release")      # a chunk emitted last cycle
        chunk_room = Signal(name="chunk_room")
        reserve = Signal(name="cmd_reserve")
        m.d.sync += [chunk_room.eq(reserved + csize <= ring),
                     reserved.eq(reserved + Mux(reserve, csize, 0) - release)]
        cmd_q = SyncFIFOBuffered(width=len(rd.cmd.payload.as_value()), depth=4)
        m.submodules.cmd_q = cmd_q
        m.d.comb += [rd.cmd.valid.eq(cmd_q.r_rdy), rd.cmd.payload.eq(cmd_q.r_data),
                     cmd_q.r_en.eq(rd.cmd.ready)]
        fire = Signal(name="cmd_fire")
        cmd = Signal(rd.cmd.payload.shape(), name="cmd_w")
        m.d.comb += [cmd.addr.eq(tok_at), cmd.beats.eq(cb)]
        m.d.comb += [
            reserve.eq(busy & eq_const(phase, 2) & waited & chunk_room),
            fire.eq(busy & eq_const(phase, 3) & cmd_q.w_rdy & (~t_last | meta.w_rdy)),
            cmd_q.w_en.eq(fire), cmd_q.w_data.eq(cmd),
            mv.cb.eq(cb), mv.n_el.eq(n_el), mv.n_tok.eq(n_tok), mv.size.eq(csize),
            meta.w_en.eq(fire & t_last), meta.w_data.eq(mv),
        ]
        with m.If(busy & eq_const(phase, 0)):
            small = rem_beats <= cb_max
            m.d.sync += [phase.eq(1), tok_at.eq(chunk_at), t.eq(0),
                         t_last.eq(eq_const(n_tok, 1)), c_last.eq(small),
                         cb.eq(Mux(small, rem_beats, cb_max)),
                         n_el.eq(Mux(rem_el <= cb_max * per, rem_el, cb_max * per))]
        with m.If(busy & eq_const(phase, 1)):
            # n_tokens · cb as a sum of shifted copies of n_tokens: a few LUT levels,
            # where a ``*`` would take a DSP58 for a 5 × 5-bit product.
            prod = sum(Mux(cb[i], n_tok << i, 0) for i in range(cbw))
            m.d.sync += [phase.eq(2), waited.eq(0), csize.eq(prod)]
        with m.If(busy & eq_const(phase, 2)):
            m.d.sync += waited.eq(1)
            with m.If(reserve):
                m.d.sync += phase.eq(3)
        with m.If(fire):
            m.d.sync += [tok_at.eq(tok_at + stride),
                         t.eq(add_const(t, 1, tok_w)), t_last.eq(t + 2 == n_tok)]
            with m.If(t_last):
                m.d.sync += [chunk_at.eq(chunk_at + cb_max), rem_beats.eq(rem_beats - cb_max),
                             rem_el.eq(rem_el - cb_max * per), phase.eq(0)]
                with m.If(c_last):
                    m.d.sync += busy.eq(0)

        # ---- the ring: beats in arrival order (their room is reserved) ----------------
        m.submodules.ring = mem = Memory(shape=self._master.data_width, depth=ring, init=[])
        wp = mem.write_port()
        w_ptr = Signal(rw, name="ring_w")
        ahead = Signal(rw + 1, name="ring_ahead")      # beats written, not yet claimed
        wrote = Signal(name="ring_wrote")
        m.d.comb += [rd.data.ready.eq(1), wrote.eq(rd.data.valid),
                     wp.addr.eq(w_ptr), wp.data.eq(rd.data.payload), wp.en.eq(wrote)]
        with m.If(wrote):
            m.d.sync += w_ptr.eq(add_const(w_ptr, 1, rw))

        # ---- the emitter: a chunk once all its beats are in, a word a cycle ------------
        cur = Signal(meta_layout, name="emit_chunk")
        active = Signal(name="emit_active")
        claim = Signal(rw, name="ring_claim")          # the next chunk's first beat
        row = Signal(rw, name="emit_row")              # token 0's beat of word k
        raddr = Signal(rw, name="emit_addr")           # token t's beat of word k
        et = Signal(tok_w, name="emit_t")
        e_t_last = Signal(name="emit_t_last")
        k = Signal(elw, name="emit_k")
        issue_port = SimpleNamespace(valid=Signal(name="emit_valid"),
                                     ready=Signal(name="emit_ready"))
        rp = mem.read_port(domain="sync")
        sel = Signal(max(lb, 1), name="emit_sel")
        words = [rp.data[16 * n:16 * (n + 1)] for n in range(per)]
        slice_ = Signal(16, name="emit_word")
        with m.Switch(sel):
            for n in range(per):
                with m.Case(n):
                    m.d.comb += slice_.eq(words[n])
        m.d.comb += [issue_port.valid.eq(active), rp.addr.eq(raddr), rp.en.eq(1)]
        go = credited_output(m, i=issue_port, o=self.x, data=slice_, latency=1, name="x")
        if lb:
            m.d.sync += sel.eq(k[:lb])
        # The chunk's last word and the next chunk's readiness are registers: the
        # emitter's hand-over reads no wide compare.
        k_last = Signal(name="emit_k_last")            # k == n_el - 1
        n_el_m2 = Signal(elw, name="emit_k_before_last")
        ending = go & e_t_last & k_last
        head = data.View(meta_layout, meta.r_data)
        # ahead >= the head's size, from last cycle's registers: ahead only grows
        # between starts and the head only changes at one, so it is exact except in the
        # cycle after a start, when no start is allowed.
        head_ok = Signal(name="emit_head_ok")
        started = Signal(name="emit_started")
        start = Signal(name="emit_start")
        m.d.sync += [head_ok.eq(meta.r_rdy & (ahead >= head.size)), started.eq(start),
                     release.eq(Mux(ending, cur.size, 0))]
        m.d.comb += [start.eq(meta.r_rdy & head_ok & ~started & (~active | ending)),
                     meta.r_en.eq(start)]
        with m.If(start):
            m.d.sync += [cur.eq(head), active.eq(1), row.eq(claim), raddr.eq(claim),
                         claim.eq(claim + head.size), et.eq(0), k.eq(0),
                         e_t_last.eq(eq_const(head.n_tok, 1)), k_last.eq(eq_const(head.n_el, 1)),
                         n_el_m2.eq(head.n_el - 2)]
        with m.Elif(ending):
            m.d.sync += active.eq(0)
        with m.Elif(go):
            with m.If(e_t_last):
                next_row = Mux(eq_const(k[:lb], per - 1), row + 1, row) if lb else row + 1
                m.d.sync += [et.eq(0), e_t_last.eq(eq_const(cur.n_tok, 1)),
                             k.eq(add_const(k, 1, elw)), k_last.eq(k == n_el_m2),
                             row.eq(next_row), raddr.eq(next_row)]
            with m.Else():
                m.d.sync += [et.eq(add_const(et, 1, tok_w)), e_t_last.eq(et + 2 == cur.n_tok),
                             raddr.eq(raddr + cur.cb)]
        m.d.sync += ahead.eq(ahead + wrote - Mux(start, head.size, 0))
        return m
