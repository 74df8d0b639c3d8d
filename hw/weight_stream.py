"""``WeightStream``: the linear unit's weight beats, read from the BSFP planes in memory.

SPEQ (arXiv 2510.18525) shares one copy of the weights between the draft and the target.
The draft pass reads only the nibble plane ``{s, c}``, a quarter of the bytes; the
target (verify) pass reads the residue plane too, and the FP16 reconstructor merges the
two into the exact scaled FP16 word. SpecMamba (arXiv 2509.19873) streams every weight
once per pass, so this path runs at one beat per fabric cycle.

The planes lie in memory as :mod:`golden.weight_planes` lays them out: per job, one
nibble region and three residue regions (bits 3..0, 7..4, 11..8 of the residue), each
``4 · rows`` bits per beat. One :class:`hw.axi_master.AXI4ReadMaster` reads each region,
so every master streams one long sequential region per job and all four run at the
same rate: no width converter, and a draft job simply leaves the three residue masters
idle. A job whose tile fills at most ``1/q`` of the array's slots stores ``q`` beats a
sub-beat, input by input (:func:`golden.weight_planes.pack_beats`: its beats use the low
``rows/q`` slots alone), so it reads about ``1/q`` of the bytes; the stream hands the
sub-beats over as they are, with the job's ``pack``, and the linear unit fills ``q``
columns from each (:class:`hw.dsp_linear_unit.DSPLinearUnit`), so the job also takes
about ``1/q`` of the transfers.

A transfer to the linear unit carries ``weight_beats`` beats (the unit's columns in
groups of that many): the masters' word holds that many sub-beats, so each port's
master gives what its memory port delivers (VHK158: a 256-bit HBM port at 450 MHz
carries 1.8 sub-beats a 250 MHz cycle, so two a transfer) and the unit's columns fill
``weight_beats`` times as fast, which is what bounds a pass of fewer tokens than the
columns a port feeds.
"""

from types import SimpleNamespace

from amaranth import Array, C, Cat, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from specgen.golden.bsfp import BSFPConfig
from specgen.golden.validate import check_choice, check_int
from specgen.golden.weight_planes import PACKS, PLANE_SLICES, SLICE_BITS, stream_word_bits

from .axi_master import AXI4ReadMaster, axi4_read_signature
from .dsp_linear_unit import PACK_BITS, weight_port_layout
from .dual_mode_pe import SCALE_BITS
from .fp16_reconstructor import FP16Reconstructor
from .hierarchy import submodule, template
from .pipeline import stream_stages

__all__ = ["WeightStream", "job_layout", "MODE_VERIFY", "MODE_DRAFT", "JOB_DEPTH"]

#: ``mode`` of a job, as the linear unit's ``cmd.mode``: 0 full (verify) pass, 1 draft.
MODE_VERIFY, MODE_DRAFT = 0, 1
#: Jobs accepted and not yet fully delivered; the masters' command crossings hold 4 each.
JOB_DEPTH = 4




def job_layout(addr_width, max_beats):
    """A job descriptor: plane base byte addresses, its sub-beats (``beats``), pass, the
    scale ``k``, ``pack``, log2 of the beats each sub-beat holds
    (:func:`golden.weight_planes.pack_factor`), and ``wide``: a draft job read from the
    draft plane by all four masters (:func:`golden.weight_planes.draft_image`)."""
    return data.StructLayout({
        "nibble_addr": addr_width,
        "residue_addr": addr_width,
        "beats": range(1, max_beats + 1),
        "mode": 1,
        "k": SCALE_BITS,
        "pack": PACK_BITS,
        "wide": 1,
    })


def _pow2(x):
    return x >= 1 and x & (x - 1) == 0


class WeightStream(wiring.Component):
    """Job descriptors in, the linear unit's weight beats out, read from four AXI4 ports.

    Parameters
    ----------
    rows : int
        Weights per beat (MAC slots of a column of
        :class:`hw.dsp_linear_unit.DSPLinearUnit`); ``4 · rows`` must be a power of
        two of at least 8 bits.
    max_beats : int
        Most sub-beats in one job, ≥ 1.
    addr_width, data_width, max_burst, max_outstanding, fifo_depth, memory
        Of each of the four :class:`hw.axi_master.AXI4ReadMaster`\\ s. Their word is
        ``weight_beats`` sub-beats (``4 · rows`` bits each) when that is wider than
        ``data_width``, else one beat of ``data_width`` bits holding
        ``data_width / (4 · rows)`` sub-beats.
    weight_beats : int
        Beats per transfer on ``w``, one of 1, 2, 4, 8 (default 1).
    config : golden.bsfp.BSFPConfig, optional
        The BSFP v1 config whose remap the reconstructor undoes.
    draft_plane : bool
        Take ``wide`` jobs too (default False): draft jobs read from the draft plane
        (``golden.config.LinearConfig.draft_plane``), stripe ``m`` on master ``m``.
    stages : int
        Output registers, ≥ 1 (the beat is a mux and the reconstructor's logic away
        from the masters' FIFOs).

    Attributes
    ----------
    cmd : In(stream.Signature(job_layout(addr_width, max_beats))), domain ``sync``
        A job: ``nibble_addr`` and ``residue_addr``, byte addresses of its nibble
        region and of its three residue regions (back to back, each
        :func:`golden.weight_planes.region_bytes` long), aligned to ``data_width / 8``
        bytes (the low bits are ignored); ``beats``, the sub-beats of each region
        (:func:`golden.weight_planes.job_sub_beats`, a multiple of ``weight_beats``);
        ``mode`` (0 verify: both planes, 1 draft: the nibble plane alone); ``k``, the
        scale exponent put in every slot; ``pack``: the regions hold ``2**pack`` beats a
        sub-beat (:func:`golden.weight_planes.pack_beats`), passed on with every
        transfer. Taken into a one-job register (with its regions' size) when that is
        empty or passes its job on; a job passes on when the job queue
        (:data:`JOB_DEPTH`) and the command crossings of the masters it uses have room.
    w : Out(stream.Signature(dsp_linear_unit.weight_port_layout(rows, weight_beats))), domain ``sync``
        ``beats / weight_beats`` transfers per job, in job order and memory order, a
        transfer's element ``j`` its ``j``-th sub-beat and ``pack`` the job's. Slot
        ``h`` holds weight ``h`` of the sub-beat: in verify ``weight`` is the
        reconstructed 15-bit scaled word and ``nibble`` its ``{s, c}``; in draft
        ``weight`` is 0. Up to one transfer per cycle (:attr:`rate` sub-beats), back to
        back across jobs; a transfer is valid :attr:`latency` cycles after the last of
        its plane words is at the head of its master's FIFO.
    axi : Out(axi4_read_signature).array(4), domain ``mem``
        ``axi[0]`` reads nibble regions, ``axi[1 + j]`` residue slice ``j``. A draft
        job issues nothing on ``axi[1..3]``.
    error, overrun : Out(1), domain ``sync``
        OR of the masters' sticky flags.

    Notes
    -----
    Reset: ``sync`` and ``mem`` together, as for the masters; jobs in flight are
    dropped and every later job is delivered exactly once.
    """

    def __init__(self, *, rows, max_beats, addr_width, data_width, max_burst, max_outstanding,
                 fifo_depth, memory="DDR", config=None, stages=1, weight_beats=1,
                 draft_plane=False):
        self._rows = check_int("WeightStream", "rows", rows, min=2)
        self._draft_plane = check_choice("WeightStream", "draft_plane", draft_plane,
                                         (False, True))
        self._beats = check_choice("WeightStream", "weight_beats", weight_beats, (1, 2, 4, 8))
        self._sub = SLICE_BITS * self._rows
        if not _pow2(self._sub):
            raise ValueError(f"WeightStream.rows must make 4 * rows a power of two (2, 4, 8, "
                             f"16, 32, 64, ...), not {rows!r}")
        self._max_beats = check_int("WeightStream", "max_beats", max_beats, min=1)
        self._stages = check_int("WeightStream", "stages", stages, min=1, max=4)
        self._config = BSFPConfig() if config is None else config
        if not isinstance(self._config, BSFPConfig):
            raise TypeError(f"WeightStream.config must be a golden.bsfp.BSFPConfig, not "
                            f"{config!r}")
        out_width = (max(self._beats * self._sub, data_width) if isinstance(data_width, int)
                     else None)
        self._master_args = dict(addr_width=addr_width, data_width=data_width,
                                 max_burst=max_burst, max_outstanding=max_outstanding,
                                 fifo_depth=fifo_depth, memory=memory, out_width=out_width)
        self._master = template(AXI4ReadMaster(**self._master_args))
        self._word = self._master.out_width
        self._per_word = self._word // self._sub          # sub-beats per master word
        # A job's four regions must fit the address space.
        span = PLANE_SLICES * self.region_beats(self._max_beats) * (self._master.data_width // 8)
        if span > 1 << self._master.addr_width:
            raise ValueError(f"WeightStream.max_beats must leave a job's four regions within "
                             f"addr_width ({self._master.addr_width} bits), not "
                             f"{self._max_beats!r} ({span} bytes)")
        self._recon = template(FP16Reconstructor(config=self._config, stages=0))
        m = self._master
        super().__init__({
            "cmd": In(stream.Signature(job_layout(m.addr_width, self._max_beats))),
            "w": Out(stream.Signature(weight_port_layout(self._rows, self._beats))),
            "axi": Out(axi4_read_signature(addr_width=m.addr_width, data_width=m.data_width,
                                           id_width=m.id_width)).array(PLANE_SLICES),
            "error": Out(1),
            "overrun": Out(1),
        })

    @classmethod
    def from_config(cls, config, **overrides):
        """The stream of one weight port of ``config``'s linear unit, with masters sized by
        :meth:`hw.axi_master.AXI4ReadMaster.from_config` for one port of its board.

        ``max_beats`` defaults to ``linear.max_k × linear.cols``: a whole job on one weight
        port; ``weight_beats`` to ``linear.weight_beats``. ``overrides`` replace any
        parameter. Only the ``dspfp32`` array takes these
        beats; another contract raises ``ValueError``.
        """
        lin = config.linear
        if lin.contract != "dspfp32":
            # The beats are DSPLinearUnit's; the exact array takes quant_lanes nibbles a row.
            raise ValueError(f"WeightStream.from_config needs linear.contract 'dspfp32' "
                             f"(the DSPLinearUnit's weight beats), not {lin.contract!r}")
        port = {k: overrides.pop(k) for k in ("addr_width", "data_width", "max_burst",
                                               "max_outstanding", "fifo_depth")
                if k in overrides}
        width = port.get("data_width", config.board.memory_port_bits)
        # The masters as from_config sizes them for one port, with the stream's word.
        probe = template(AXI4ReadMaster.from_config(
            config, out_width=stream_word_bits(config, width), **port))
        kwargs = dict(rows=lin.rows, max_beats=lin.max_k * lin.cols, config=config.bsfp,
                      weight_beats=lin.weight_beats, draft_plane=lin.draft_plane,
                      addr_width=probe.addr_width, data_width=probe.data_width,
                      max_burst=probe.max_burst, max_outstanding=probe.max_outstanding,
                      fifo_depth=probe.fifo_depth, memory=probe.memory)
        kwargs.update(overrides)
        return cls(**kwargs)

    rows = property(lambda self: self._rows)
    max_beats = property(lambda self: self._max_beats)
    weight_beats = property(lambda self: self._beats)
    draft_plane = property(lambda self: self._draft_plane)
    master = property(lambda self: self._master)

    @property
    def word_width(self):
        """Bits of each master's word (:attr:`hw.axi_master.AXI4ReadMaster.out_width`)."""
        return self._word

    @property
    def sub_beat_bits(self):
        """Bits of one beat in one plane slice: ``4 · rows``."""
        return self._sub

    @property
    def rate(self):
        """Beats per ``sync`` cycle at most: :attr:`weight_beats`."""
        return self._beats

    @property
    def packs(self):
        """The ``2**pack`` a job may have: :data:`golden.weight_planes.PACKS` that divide
        ``rows`` (the linear unit's :attr:`hw.dsp_linear_unit.DSPLinearUnit.packs`)."""
        return tuple(q for q in PACKS if self._rows % q == 0)

    @property
    def latency(self):
        """``sync`` cycles from the beat's plane words at their FIFO heads to ``w.valid``:
        the sub-beat register and the output registers."""
        return 1 + self._stages

    @property
    def module_name(self):
        beats = f"x{self._beats}" if self._beats > 1 else ""
        beats += "d" if self._draft_plane else ""
        return (f"WeightStream_r{self._rows}_b{self._max_beats}_s{self._stages}{beats}_"
                f"{self._master.module_name}_{self._recon.module_name}")

    def region_beats(self, beats):
        """Master beats of one slice region of ``beats`` sub-beats (Python ints)."""
        words = -(-beats // self._per_word)
        return words * (self._word // self._master.data_width)

    def elaborate(self, platform):
        m = Module()
        masters = []
        for j in range(PLANE_SLICES):
            master = AXI4ReadMaster(**self._master_args)
            m.submodules[f"plane{j}"] = master
            wiring.connect(m, wiring.flipped(self.axi[j]), master.axi)
            masters.append(master)
        m.d.comb += [self.error.eq(Cat(x.error for x in masters).any()),
                     self.overrun.eq(Cat(x.overrun for x in masters).any())]

        # ---- descriptors: one region command per master the job reads --------------------
        c_in = self.cmd.payload
        size = (self._master.data_width // 8 - 1).bit_length()
        per_word_log = (self._per_word - 1).bit_length()
        beats_per_word_log = (self._word // self._master.data_width - 1).bit_length()
        region_in = Signal(self._master.command_layout["beats"].shape, name="region_in")
        # ceil(sub-beats / per_word) words, each word_width / data_width master beats; a
        # wide job's four stripes a quarter of its sub-beats each.
        # (A stream built without the draft plane takes every job as narrow.)
        in_wide = c_in.wide if self._draft_plane else C(0, 1)
        mine = Mux(in_wide, c_in.beats >> 2, c_in.beats)
        m.d.comb += region_in.eq(((mine + (self._per_word - 1)) >> per_word_log)
                                 << beats_per_word_log)
        # The job is registered with its region size, then (with the draft plane) once
        # more with master j's offset from its base, in master beats: j − 1 regions for
        # residue slice j (its base the residue plane's), j regions for a wide job's
        # stripe j (its base the draft plane's). Each address is then one adder after a
        # register, and each offset (a constant multiple of the region and a mux) one
        # after the region's (7.8 levels at VHK158's 250 MHz when both followed the
        # register, over its 7).
        staged_a = data.StructLayout({**{n: f.shape for n, f in c_in.shape()},
                                      "region": region_in.shape()})
        cmd_a = stream.Signature(staged_a).flip().create()
        stream_stages(m, i=self.cmd, o=cmd_a, stages=1,
                      payload=Cat(Value.cast(c_in), region_in))
        a = cmd_a.payload
        a_wide = a.wide if self._draft_plane else C(0, 1)
        offs = []
        for j in range(1, PLANE_SLICES):
            off = Signal(len(region_in) + 2, name=f"offset{j}")
            narrow = (j - 1) * a.region
            m.d.comb += off.eq(Mux(a_wide, j * a.region, narrow) if self._draft_plane
                               else narrow)
            offs.append(off)
        staged_layout = data.StructLayout({**{n: f.shape for n, f in staged_a},
                                           "offsets": data.ArrayLayout(len(offs[0]),
                                                                       len(offs))})
        if self._draft_plane:
            cmd_r = stream.Signature(staged_layout).flip().create()
            stream_stages(m, i=cmd_a, o=cmd_r, stages=1, payload=Cat(Value.cast(a), *offs))
        else:
            # One register: the offsets are a shift of the registered region.
            cmd_r = SimpleNamespace(valid=cmd_a.valid, ready=cmd_a.ready,
                                    payload=data.View(staged_layout, Cat(Value.cast(a), *offs)))
        cmd, region = cmd_r.payload, cmd_r.payload.region
        cmd_wide = cmd.wide if self._draft_plane else C(0, 1)
        wide_bits = 1 if self._draft_plane else 0
        m.submodules.jobs = jobs = SyncFIFOBuffered(
            width=len(cmd.beats) + 1 + SCALE_BITS + PACK_BITS + wide_bits, depth=JOB_DEPTH)
        # A draft job reads the nibble plane on master 0 alone, or the draft plane's four
        # stripes on all four (wide).
        draft = (cmd.mode == MODE_DRAFT) & ~cmd_wide
        residue_ready = Cat(x.cmd.ready for x in masters[1:]).all()
        m.d.comb += cmd_r.ready.eq(jobs.w_rdy & masters[0].cmd.ready
                                   & (draft | residue_ready))
        take = cmd_r.valid & cmd_r.ready
        # A job's commands go out together in the cycle it is taken: every crossing it
        # uses has room then (their ready is a registered FIFO flag, so this valid does
        # not feed back into it).
        m.d.comb += [jobs.w_en.eq(take),
                     jobs.w_data.eq(Cat(cmd.beats, cmd.mode, cmd.k, cmd.pack,
                                        cmd_wide if self._draft_plane else C(0, 0)))]
        for j, master in enumerate(masters):
            # The residue slices after the residue base, or a wide job's stripes after the
            # nibble (draft plane) base: master j at j regions.
            base = (cmd.nibble_addr if j == 0 else
                    Mux(cmd_wide, cmd.nibble_addr, cmd.residue_addr))[size:]
            addr = base if j == 0 else base + cmd.offsets[j - 1]
            m.d.comb += [master.cmd.payload.addr.eq(addr), master.cmd.payload.beats.eq(region),
                         master.cmd.valid.eq(take if j == 0 else take & ~draft)]

        # ---- merge: weight_beats sub-beats a transfer, as the words hold them ------------
        # A transfer takes sub-beats sidx … sidx + B − 1 of the masters' words (B divides
        # the word's W sub-beats); the masters pop after the word's last transfer, or the
        # job's (a job's region ends with its last word).
        B = self._beats
        lg_b = (B - 1).bit_length()
        W = self._per_word
        active = Signal()
        mode = Signal()
        k = Signal(SCALE_BITS)
        pack = Signal(PACK_BITS)
        wide = Signal()
        left = Signal.like(cmd.beats)                # transfers of the job after this one
        sidx = Signal(range(max(W, 2)), name="sub_beat")
        sidx_last = Signal(name="sub_beat_last")     # the transfer ends its word: pop after it
        mid = stream.Signature(data.StructLayout({
            "planes": data.ArrayLayout(data.ArrayLayout(self._sub, PLANE_SLICES), B),
            "mode": 1, "k": SCALE_BITS, "pack": PACK_BITS, "wide": 1})).flip().create()
        # Master 0 alone in a draft job on the nibble plane; all four otherwise.
        alone = Signal(name="master0_alone")
        m.d.comb += alone.eq(mode & ~wide)
        have = masters[0].data.valid & (alone | Cat(x.data.valid for x in masters[1:]).all())
        fire = Signal()
        m.d.comb += [mid.valid.eq(active & have), fire.eq(mid.valid & mid.ready)]
        # left == 0, as a register: a wide zero test would sit between the handshake and
        # the FIFO pops (7 logic levels at vck190's 400 MHz; docs/estimate.md).
        last = Signal(name="last_beat")
        pop = fire & (last | sidx_last)
        for j, master in enumerate(masters):
            m.d.comb += master.data.ready.eq(pop if j == 0 else pop & ~alone)
        load = ~active | (fire & last)
        m.d.comb += jobs.r_en.eq(load)
        nb = len(left)
        # A transfer takes B sub-beats of every master it reads: a wide job's 4·B.
        j_wide = (jobs.r_data[nb + 1 + SCALE_BITS + PACK_BITS] if self._draft_plane
                  else C(0, 1))
        j_transfers = Mux(j_wide, jobs.r_data[:nb] >> (lg_b + 2), jobs.r_data[:nb] >> lg_b)
        with m.If(load & jobs.r_rdy):
            m.d.sync += [active.eq(1), left.eq(j_transfers - 1), last.eq(j_transfers == 1),
                         mode.eq(jobs.r_data[nb]), k.eq(jobs.r_data[nb + 1:nb + 1 + SCALE_BITS]),
                         pack.eq(jobs.r_data[nb + 1 + SCALE_BITS:nb + 1 + SCALE_BITS + PACK_BITS]),
                         wide.eq(j_wide), sidx.eq(0),
                         sidx_last.eq(B == W)]
        with m.Elif(fire):
            with m.If(last):
                m.d.sync += active.eq(0)
            m.d.sync += [left.eq(left - 1), last.eq(left == 1)]
            if W > B:
                with m.If(sidx_last):
                    m.d.sync += [sidx.eq(0), sidx_last.eq(0)]
                with m.Else():
                    m.d.sync += [sidx.eq(sidx + B), sidx_last.eq(sidx + 2 * B == W)]

        for j, master in enumerate(masters):
            word = master.data.payload
            parts = [word[n * self._sub:(n + 1) * self._sub] for n in range(W)]
            for e in range(B):
                # Sub-beat sidx + e of the word (sidx a multiple of B: a mux over W / B).
                opts = parts[e::B]
                m.d.comb += mid.payload.planes[e][j].eq(
                    Array(opts)[sidx[lg_b:]] if len(opts) > 1 else opts[0])
        m.d.comb += [mid.payload.mode.eq(mode), mid.payload.k.eq(k),
                     mid.payload.pack.eq(pack), mid.payload.wide.eq(wide)]
        # The sub-beat mux ends in a register (stream_stages), before the reconstructors.
        mid_r = stream.Signature(mid.payload.shape()).flip().create()
        stream_stages(m, i=mid, o=mid_r, payload=mid.payload.as_value(), stages=1)

        out = stream.Signature(weight_port_layout(self._rows, B)).flip().create()
        m.d.comb += [out.valid.eq(mid_r.valid), mid_r.ready.eq(out.ready)]
        for e in range(B):
            planes = mid_r.payload.planes[e]
            for h in range(self._rows):
                f = slice(SLICE_BITS * h, SLICE_BITS * (h + 1))
                recon = submodule(m, f"recon{h}" if B == 1 else f"recon{e}_{h}",
                                  FP16Reconstructor(config=self._config, stages=0))
                nibble = planes[0][f]
                m.d.comb += [recon.i.valid.eq(1), recon.o.ready.eq(1),
                             recon.i.payload.nibble.eq(nibble),
                             recon.i.payload.residue.eq(Cat(planes[1][f], planes[2][f],
                                                            planes[3][f]))]
                word16 = recon.o.payload
                slot = out.payload.beat[e].slot[h]
                # Draft: no weight, or in a wide job the nibbles of stripes 1, 2, 3 (the
                # draft transfer's other three groups) in its low 12 bits.
                draft_w = Mux(mid_r.payload.wide,
                              Cat(planes[1][f], planes[2][f], planes[3][f], C(0, 3)), C(0, 15))
                m.d.comb += [slot.weight.eq(Mux(mid_r.payload.mode, draft_w,
                                                Cat(word16[:14], word16[15]))),
                             slot.nibble.eq(nibble), slot.k.eq(mid_r.payload.k)]
        m.d.comb += [out.payload.pack.eq(mid_r.payload.pack),
                     out.payload.wide.eq(mid_r.payload.wide)]
        stream_stages(m, i=out, o=self.w, payload=out.payload.as_value(), stages=self._stages)
        return m
