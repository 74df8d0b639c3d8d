# amaranth: UnusedElaboratable=no
# (The datapath components are elaborated flat into the PE through their ``build``
# methods, so Verilog gets one module per PE and no hierarchical module names.)
"""``DualModePE``: SPEQ's dual-mode processing element on the exact dot-product datapath.

SPEQ (arXiv 2510.18525) computes the FP16 target model and its 4-bit BSFP draft on one
PE (its reconfigurable PE array; ``docs/bsfp.md``):

* **Full mode**: one FP16 activation x scaled FP16 weight product per cycle. The weight
  path is 15 bits: after Algorithm 1's scaling the stored exponent is <= 15, so ``e4`` is
  always 0 (``docs/bsfp.md`` §4). The per-weight scale ``k`` is added to the product
  exponent, which is exact (:func:`golden.bsfp.full_terms`).
* **Quantized mode**: ``quant_lanes`` draft-weight x FP16 products per cycle. A draft
  weight is ``±2**(D[c] - 15) * 2**k``, so each product is an exponent add
  (:func:`golden.bsfp.draft_terms_with`); the lanes are summed by an adder tree.

Both modes feed one exact fixed-point accumulator sized by
:func:`golden.dot.accumulator_spec` for FP16 x FP16 (the draft range of
:func:`golden.bsfp.draft_product_range` lies inside it) and one rounding to
``fmt_out``: the contract of :func:`golden.bsfp.full_dot` and :func:`golden.bsfp.draft_dot`.
"""

from amaranth import Array, C, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from specgen.golden.bsfp import BSFPConfig, draft_product_range, draft_table
from specgen.golden.dot import accumulator_spec
from specgen.golden.fp import FP16, FP32, FPFormat
from specgen.golden.validate import check_choice, check_int

from .fp_datapath import (
    ExactAccumulator,
    ExactMultiplier,
    NormalizeRound,
    extend,
    fp_unpack,
    pipeline_stage,
)

__all__ = [
    "MODE_FULL",
    "MODE_QUANT",
    "PE_DRAFTS",
    "SCALE_BITS",
    "WEIGHT_BITS",
    "DualModePE",
    "input_layout",
]

#: Draft formats the PE implements: E3M0 drafts have a 1-bit significand (an exponent add).
PE_DRAFTS = ("E3M0", "E3M0-noremap")

MODE_FULL = 0
MODE_QUANT = 1

#: Full-mode weight bits: the FP16 word without ``e4`` (always 0 after scaling).
WEIGHT_BITS = FP16.width - 1

#: Bits of a scale exponent k. Algorithm 1 scales the largest finite FP16 exponent
#: (``exp_mask - 1``) down to the bias, so ``k <= exp_mask - 1 - bias = 15``.
SCALE_BITS = (FP16.exp_mask - 1 - FP16.bias).bit_length()


def input_layout(quant_lanes):
    """Payload layout of :attr:`DualModePE.i` for ``quant_lanes`` lanes (LSB first)."""
    return data.StructLayout({
        "act": data.ArrayLayout(FP16.width, quant_lanes),
        "nibble": data.ArrayLayout(4, quant_lanes),
        "k": data.ArrayLayout(SCALE_BITS, quant_lanes),
        "lane_valid": quant_lanes,
        "weight": WEIGHT_BITS,
        "mode": 1,
        "last": 1,
    })


class DualModePE(wiring.Component):
    """Dual-mode PE: exact dot products of FP16 activations with BSFP weights.

    Parameters
    ----------
    fmt_out : golden.fp.FPFormat
        ``FP32`` (default) or ``FP16``: the format of each rounded dot product.
    n : int
        Longest dot product in products (>= 1); sizes the accumulator
        (``accumulator_spec(FP16, n)``). Longer dot products may wrap.
    quant_lanes : int
        Draft products per cycle in quantized mode, 1..8 (SPEQ notes: 3).
    config : golden.bsfp.BSFPConfig
        BSFP v1 config; ``config.draft`` must be one of :data:`PE_DRAFTS`. The draft
        exponent table comes from :func:`golden.bsfp.draft_table`.
    mul_stages : int
        Pipeline registers of the full-mode multiplier (0..2); the draft lanes are
        delayed to match.
    acc_stages : int
        0 or 1: a register between align and add in the accumulator.
    round_stages : int
        Registers in normalize/round, 1..4; the last one is the output register.

    Attributes
    ----------
    i : In(stream.Signature(input_layout(quant_lanes)))
        One beat per cycle. Fields: ``act[j]`` FP16 activations; ``weight`` the
        15-bit scaled weight ``{s, e3..e0, m9..m0}`` (full mode, with ``act[0]``);
        ``nibble[j]`` draft nibbles ``s << 3 | c`` (quantized mode); ``k[j]`` scale
        exponents (full mode uses ``k[0]``); ``lane_valid[j]`` which quantized lanes
        hold a product (padding lanes count for nothing, not even for the zero
        sign; ignored in full mode); ``mode`` (:data:`MODE_FULL` or
        :data:`MODE_QUANT`, sampled on the first beat of a dot product, ignored on
        the others); ``last`` ends the dot product.
    o : Out(stream.Signature(fmt_out.width))
        One rounded dot product per beat with ``last``, in order.

    Notes
    -----
    A beat accepted on the rising edge *t* with ``last`` set shows its result
    on ``o`` with ``o.valid`` from edge *t + latency* on (:attr:`latency`), when
    ``o`` is not stalled. ``i.ready = ~o.valid | o.ready``: while a result waits on
    ``o``, the whole pipeline holds, so nothing is lost or duplicated, and with
    ``o.ready`` high it takes a beat every cycle, including the first beat of
    the next dot product right after a ``last``. A dot product whose quantized
    beats have no valid lane sums to +0. A synchronous reset discards the dot
    product in progress and every result in flight.
    """

    def __init__(self, *, fmt_out=FP32, n=128, quant_lanes=3, config=None, mul_stages=1,
                 acc_stages=1, round_stages=2):
        if not isinstance(fmt_out, FPFormat) or fmt_out not in (FP16, FP32):
            raise ValueError(f"DualModePE.fmt_out must be one of FP16, FP32, not {fmt_out!r}")
        self._fmt_out = fmt_out
        self._n = check_int("DualModePE", "n", n, min=1)
        self._lanes = check_int("DualModePE", "quant_lanes", quant_lanes, min=1, max=8)
        config = BSFPConfig() if config is None else config
        if not isinstance(config, BSFPConfig):
            raise TypeError(f"DualModePE.config must be a BSFPConfig, not {config!r}")
        check_choice("DualModePE", "config.draft", config.draft, PE_DRAFTS)
        self._config = config
        self._mul_stages = check_int("DualModePE", "mul_stages", mul_stages, min=0, max=2)
        self._acc_stages = check_int("DualModePE", "acc_stages", acc_stages, min=0, max=1)
        self._round_stages = check_int("DualModePE", "round_stages", round_stages, min=1, max=4)
        self._spec = accumulator_spec(FP16, self._n)
        # One accumulator serves both modes (docs/bsfp.md §7): check it, never assume it.
        r = draft_product_range(config)
        if r["lsb_exp"] < self._spec.lsb_exp or r["msb_exp"] > self._spec.msb_exp:
            raise ValueError(f"DualModePE.config draft products [{r['lsb_exp']}, {r['msb_exp']}) "
                             f"do not fit the FP16 accumulator [{self._spec.lsb_exp}, "
                             f"{self._spec.msb_exp})")
        self._layout = input_layout(self._lanes)
        super().__init__({
            "i": In(stream.Signature(self._layout)),
            "o": Out(stream.Signature(fmt_out.width)),
        })

    @property
    def fmt_out(self):
        return self._fmt_out

    @property
    def n(self):
        return self._n

    @property
    def quant_lanes(self):
        return self._lanes

    @property
    def config(self):
        return self._config

    @property
    def spec(self):
        """The accumulator's :class:`golden.dot.AccumulatorSpec`."""
        return self._spec

    @property
    def layout(self):
        return self._layout

    @property
    def round_stages(self):
        return self._round_stages

    @property
    def latency(self):
        """Edges from accepting a ``last`` beat to ``o.valid`` (no stall)."""
        return 1 + self._mul_stages + self._acc_stages + 1 + self._round_stages

    @property
    def module_name(self):
        """Verilog name encoding the parameters, e.g. ``DualModePE_e8m23_n128_q3_s1122``."""
        return (f"DualModePE_e{self._fmt_out.exp_bits}m{self._fmt_out.man_bits}_n{self._n}"
                f"_q{self._lanes}_s{self._mul_stages}{self._acc_stages}{self._round_stages}")

    def elaborate(self, platform):
        m = Module()
        lanes = self._lanes
        en = Signal()
        # One stall signal: the datapath moves unless a result waits on a stalled output.
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en)]

        # input register; the mode is sampled on the first beat of a dot product.
        beat = Signal(self._layout)
        beat_valid, beat_first, beat_mode = Signal(), Signal(), Signal()
        in_dot, dot_mode = Signal(), Signal()
        # Scale exponents are registered at the adder width: Amaranth would otherwise emit
        # a zero-extended k as a narrower operand, which Verilator's -Wall flags.
        exp_shape = ExactAccumulator(spec=self._spec, sig_bits=1, lanes=1).exp_shape
        beat_k = [Signal(exp_shape, name=f"beat_k{j}") for j in range(lanes)]
        mode_now = Mux(in_dot, dot_mode, self.i.payload.mode)
        with m.If(en):
            m.d.sync += beat_valid.eq(self.i.valid)
            with m.If(self.i.valid):
                m.d.sync += [beat.eq(self.i.payload), beat_first.eq(~in_dot),
                             beat_mode.eq(mode_now), dot_mode.eq(mode_now),
                             in_dot.eq(~self.i.payload.last)]
                m.d.sync += [beat_k[j].eq(self.i.payload.k[j]) for j in range(lanes)]

        acc_block = ExactAccumulator(spec=self._spec, sig_bits=2 * FP16.precision, lanes=lanes,
                                     stages=self._acc_stages)
        acc = acc_block.signature.create(path=("acc",))

        # full mode: FP16 x scaled weight (e4 = 0 re-inserted), exact.
        mul_block = ExactMultiplier(fmt=FP16, stages=self._mul_stages)
        mul = mul_block.signature.create(path=("mul",))
        mul_block.build(m, mul)
        m.d.comb += [mul.en.eq(en), mul.a.eq(beat.act[0]),
                     mul.b.eq(Cat(beat.weight[:WEIGHT_BITS - 1], C(0, 1),
                                  beat.weight[WEIGHT_BITS - 1]))]

        # quantized mode: per lane, an exponent add with the draft table of golden.bsfp.
        _, draft_exp = draft_table(self._config)
        table = Array(C(int(e), exp_shape) for e in draft_exp)
        quant = {}
        for j in range(lanes):
            x = fp_unpack(beat.act[j], FP16)
            special = x["inf"] | x["nan"]
            x_exp, w_exp, k = (Signal(exp_shape, name=f"q{j}_{s}") for s in ("xexp", "wexp", "k"))
            m.d.comb += [x_exp.eq(extend(x["exp"], exp_shape)), w_exp.eq(table[beat.nibble[j][:3]]),
                         k.eq(beat_k[j])]
            exp = Signal(exp_shape, name=f"q{j}_exp")
            m.d.comb += exp.eq(Mux(special, 0, (x_exp + w_exp)[:exp_shape.width].as_signed() + k))
            quant.update({f"sign{j}": x["sign"] ^ beat.nibble[j][3], f"sig{j}": x["sig"],
                          f"exp{j}": exp, f"nan{j}": x["nan"], f"inf{j}": x["inf"]})
        ctrl = {"valid": beat_valid, "first": beat_first, "last": beat.last, "mode": beat_mode,
                "lane_valid": beat.lane_valid, "k0": beat_k[0]}
        # The draft lanes wait for the multiplier (its pipeline, one register per stage).
        d = {**quant, **ctrl}
        for stage in range(self._mul_stages):
            d = pipeline_stage(m, en, True, f"lanes{stage}", **d)

        # product select: lane 0 carries the full product in full mode.
        acc_block.build(m, acc)
        quant_mode = d["mode"]
        full_exp, k0 = Signal(exp_shape), Signal(exp_shape)
        m.d.comb += [full_exp.eq(extend(mul.exp, exp_shape)), k0.eq(d["k0"])]
        m.d.comb += [acc.en.eq(en), acc.valid.eq(d["valid"]), acc.first.eq(d["first"]),
                     acc.last.eq(d["last"]),
                     acc.lane_valid.eq(Mux(quant_mode, d["lane_valid"], 1))]
        for j in range(lanes):
            if j == 0:
                m.d.comb += [
                    acc.sign[0].eq(Mux(quant_mode, d["sign0"], mul.sign)),
                    acc.sig[0].eq(Mux(quant_mode, d["sig0"], mul.sig)),
                    acc.exp[0].eq(Mux(quant_mode, d["exp0"],
                                      Mux(mul.nan | mul.inf, full_exp,
                                          (full_exp + k0)[:exp_shape.width].as_signed()))),
                    acc.nan[0].eq(Mux(quant_mode, d["nan0"], mul.nan)),
                    acc.inf[0].eq(Mux(quant_mode, d["inf0"], mul.inf)),
                ]
            else:
                m.d.comb += [acc.sign[j].eq(d[f"sign{j}"]), acc.sig[j].eq(d[f"sig{j}"]),
                             acc.exp[j].eq(d[f"exp{j}"]), acc.nan[j].eq(d[f"nan{j}"]),
                             acc.inf[j].eq(d[f"inf{j}"])]

        # normalize + round; its last register is the output register.
        nr_block = NormalizeRound(spec=self._spec, fmt_out=self._fmt_out, stages=self._round_stages)
        nr = nr_block.signature.create(path=("nr",))
        nr_block.build(m, nr)
        m.d.comb += [nr.en.eq(en), nr.valid.eq(acc.done), nr.acc.eq(acc.acc),
                     nr.nan.eq(acc.acc_nan), nr.pos_inf.eq(acc.pos_inf),
                     nr.neg_inf.eq(acc.neg_inf), nr.all_neg_zero.eq(acc.all_neg_zero),
                     nr.empty.eq(acc.empty),
                     self.o.valid.eq(nr.done), self.o.payload.eq(nr.result)]
        return m
