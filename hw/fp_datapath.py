"""Exact floating-point dot-product datapath: multiplier, accumulator, normalize-and-round.

These are the hardware images of the two stages of :mod:`golden.dot`:

* :class:`ExactMultiplier` is :func:`golden.dot.product_terms` for one pair: it
  forms the exact product term ``(sign, sig, exp, nan, inf)`` of two numbers of
  any :class:`golden.fp.FPFormat` (the fields of :class:`golden.dot.Terms`).
* :class:`ExactAccumulator` is :func:`golden.dot.accumulate`: it aligns each
  term into a two's complement fixed-point register sized by
  :class:`golden.dot.AccumulatorSpec` (never retyped here) and keeps the sticky
  special-value flags beside it.
* :class:`NormalizeRound` is :func:`golden.dot.round_accumulator`: magnitude,
  leading-one detection, normalizing shift, round to nearest even with guard and
  sticky, gradual underflow, overflow to Inf, and the NaN/Inf/zero-sign rules.

The stages are named as in berkeley-hardfloat and FPnew (classify -> special
cases -> exponent -> product -> align -> add -> normalize -> round). Each block
takes ``stages``, the number of pipeline registers, placed from the output
backwards over the block's stage boundaries (:attr:`BOUNDARIES`); every register
holds while ``en`` is low, so a stream wrapper stalls the whole datapath with one
signal. ``docs/blocks-pe.md`` has the ports, timing and worked widths.
"""

from amaranth import C, Cat, Module, Mux, Signal, Value, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from specgen.golden.dot import AccumulatorSpec
from specgen.golden.fp import FPFormat
from specgen.golden.validate import check_int
from specgen.hw.bits import shift_left
from specgen.hw.pipeline import Staged

__all__ = [
    "ExactAccumulator",
    "ExactMultiplier",
    "NormalizeRound",
    "extend",
    "fp_unpack",
    "ge_const",
    "negate_if",
    "pipeline_stage",
    "StagedFPUnit",
    "term_exp_range",
]


def _check_fmt(owner, field, fmt):
    if not isinstance(fmt, FPFormat):
        raise TypeError(f"{owner}.{field} must be an FPFormat, not {fmt!r}")
    return fmt


def _check_spec(owner, spec):
    if not isinstance(spec, AccumulatorSpec):
        raise TypeError(f"{owner}.spec must be a golden.dot.AccumulatorSpec, not {spec!r}")
    return spec


def _registered(boundaries, stages):
    """The boundaries that get a register: the last ``stages`` of them."""
    return set(boundaries[len(boundaries) - stages:]) if stages else set()


class StagedFPUnit(Staged, wiring.Component):
    """Base of a block of one FP format whose datapath is split at named stage boundaries.

    ``stages`` pipeline registers sit on the last ``stages`` of the subclass's
    ``BOUNDARIES``. A subclass defines ``BOUNDARIES`` and ``members(fmt)``, its
    signature members.
    """

    BOUNDARIES = ()

    def __init__(self, *, fmt, stages):
        owner = type(self).__name__
        self._fmt = _check_fmt(owner, "fmt", fmt)
        self._stages = check_int(owner, "stages", stages, min=0, max=len(self.BOUNDARIES))
        super().__init__(self.members(fmt))

    def members(self, fmt):
        """The signature members of a unit of ``fmt``; every subclass defines its own."""
        raise TypeError(f"{type(self).__name__} must define members(fmt): StagedFPUnit is a "
                        f"base class, not a unit")

    @property
    def fmt(self):
        return self._fmt

    @property
    def module_name(self):
        """Verilog module name encoding the parameters, e.g. ``FPMul_e8_m23_s3``."""
        return (f"{type(self).__name__}_e{self._fmt.exp_bits}_m{self._fmt.man_bits}"
                f"_s{self._stages}")

    def _regs(self):
        return _registered(self.BOUNDARIES, self._stages)


def pipeline_stage(m, en, registered, name, **values):
    """Pass ``values`` through, or through registers that load while ``en`` is high."""
    if not registered:
        return values
    out = {}
    for key, value in values.items():
        value = Value.cast(value)
        reg = Signal(value.shape(), name=f"{name}_{key}")
        with m.If(en):
            m.d.sync += reg.eq(value)
        out[key] = reg
    return out


def extend(value, shape):
    """``value`` zero- or sign-extended to ``shape`` by concatenation, so the Verilog
    operand already has the full width (no implicit extension for ``-Wall`` to flag)."""
    value = Value.cast(value)
    pad = shape.width - len(value)
    fill = value[-1] if value.shape().signed else C(0, 1)
    wide = Cat(value, fill.replicate(pad)) if pad > 0 else value[:shape.width]
    return wide.as_signed() if shape.signed else wide


def term_exp_range(fmt):
    """``(lo, hi)`` of the exponent of an exact ``fmt x fmt`` product term (finite operands)."""
    return 2 * (fmt.emin - fmt.man_bits), 2 * (fmt.emax - fmt.man_bits)


def fp_fields(bits, fmt):
    """Classify an encoding and split its fields (combinational).

    Returns a dict of Amaranth values: ``sign``; ``sig``, the significand with
    its hidden bit (``precision`` bits, raw for Inf/NaN); ``exp``, the biased
    exponent, with a subnormal given the exponent of the smallest normal
    (1, IEEE 754 §3.4 d); and the class flags ``zero``, ``inf``, ``nan``.
    """
    m_bits = fmt.man_bits
    frac = bits[:m_bits]
    efield = bits[m_bits:m_bits + fmt.exp_bits]
    special = efield.all()
    bottom = ~efield.any()
    fz = ~frac.any()
    return {"sign": bits[fmt.width - 1], "sig": Cat(frac, ~bottom), "exp": Mux(bottom, 1, efield),
            "special": special, "zero": bottom & fz, "inf": special & fz, "nan": special & ~fz}


def fp_unpack(bits, fmt):
    """Classify and decode an encoding like :func:`golden.fp.decode` (combinational).

    Returns a dict of Amaranth values: ``sign``, ``sig`` (``precision`` bits, 0 for
    Inf/NaN), ``exp`` (signed, unbiased for the integer significand; a subnormal
    has the exponent of the smallest normal, IEEE 754 §3.4 d; 0 for Inf/NaN as in
    the golden), ``zero``, ``inf``, ``nan``.
    """
    f = fp_fields(bits, fmt)
    sig = Mux(f["special"], 0, f["sig"])
    exp = Mux(f["special"], 0, f["exp"] - (fmt.bias + fmt.man_bits))
    return {"sign": f["sign"], "sig": sig, "exp": exp,
            "zero": f["zero"], "inf": f["inf"], "nan": f["nan"]}


class ExactMultiplier(StagedFPUnit):
    """Exact product of two ``fmt`` numbers as a :class:`golden.dot.Terms` element.

    Parameters
    ----------
    fmt : golden.fp.FPFormat
        Format of both operands (FP16, FP32, BF16, ...).
    stages : int
        Pipeline registers, 0..2: 0 is combinational; 1 registers the product
        (boundary ``"product"``); 2 also registers the classified operands
        (``"classify"``).

    Attributes
    ----------
    en : In(1)
        Clock enable of every pipeline register (hold while low).
    a, b : In(fmt.width)
        Operand encodings.
    sign, sig, exp, nan, inf : Out
        The exact term ``(-1)**sign * sig * 2**exp`` with ``sig`` of
        ``2 * precision`` bits and ``exp`` signed, bit for bit the fields of
        :func:`golden.dot.product_terms`: ``sig = exp = 0`` contributions of an
        Inf/NaN operand, ``sign = sign_a ^ sign_b`` always, ``nan`` for a NaN
        operand or ``Inf * 0``, ``inf`` for an Inf operand when not ``nan``.
        They show the product of the operands presented :attr:`latency` enabled
        clock edges earlier.
    """

    BOUNDARIES = ("classify", "product")

    def __init__(self, *, fmt, stages=1):
        super().__init__(fmt=fmt, stages=stages)

    def members(self, fmt):
        lo, hi = term_exp_range(fmt)
        return {
            "en": In(1),
            "a": In(fmt.width),
            "b": In(fmt.width),
            "sign": Out(1),
            "sig": Out(2 * fmt.precision),
            "exp": Out(range(lo, hi + 1)),
            "nan": Out(1),
            "inf": Out(1),
        }

    def elaborate(self, platform):
        m = Module()
        self.build(m, self)
        return m

    def build(self, m, p):
        """Add the logic to module ``m`` on the ports of ``p`` (this component, or
        ``self.signature.create()`` when a parent inlines the datapath flat)."""
        regs = self._regs()
        # classify: decode both operands.
        a = fp_unpack(p.a, self._fmt)
        b = fp_unpack(p.b, self._fmt)
        # special cases: Inf * 0 is invalid (IEEE 754 §7.2); NaN payloads are dropped.
        nan = a["nan"] | b["nan"] | (a["inf"] & b["zero"]) | (a["zero"] & b["inf"])
        s = pipeline_stage(m, p.en, "classify" in regs, "classify",
                           sign=a["sign"] ^ b["sign"], sig_a=a["sig"], sig_b=b["sig"],
                           exp=a["exp"] + b["exp"], nan=nan, inf=(a["inf"] | b["inf"]) & ~nan)
        # exponent + product: the significand product is exact (2p bits).
        s = pipeline_stage(m, p.en, "product" in regs, "product",
                           sign=s["sign"], sig=s["sig_a"] * s["sig_b"], exp=s["exp"],
                           nan=s["nan"], inf=s["inf"])
        m.d.comb += [p.sign.eq(s["sign"]), p.sig.eq(s["sig"]), p.exp.eq(s["exp"]),
                     p.nan.eq(s["nan"]), p.inf.eq(s["inf"])]


def ge_const(value, k):
    """``value >= k`` for a constant ``k``, as bit logic (no narrow constant operand)."""
    if k <= 0:
        return C(1, 1)
    if k >> len(value):
        return C(0, 1)
    ge = C(1, 1)   # over no bits, value == k
    for i in range(len(value)):
        ge = (value[i] & ge) if (k >> i) & 1 else (value[i] | ge)
    return ge


def negate_if(value, neg):
    """Two's complement ``-value`` if ``neg`` else ``value``, same width (mod 2**width)."""
    return (value ^ neg.replicate(len(value))) + neg


def _tree_sum(values, width):
    """Balanced adder tree modulo ``2**width`` (SPEQ's Wallace/adder tree)."""
    values = list(values)
    while len(values) > 1:
        nxt = [(values[i] + values[i + 1])[:width] for i in range(0, len(values) - 1, 2)]
        if len(values) % 2:
            nxt.append(values[-1])
        values = nxt
    return values[0]


class ExactAccumulator(wiring.Component):
    """Exact two's complement fixed-point accumulator of ``lanes`` terms per beat.

    Parameters
    ----------
    spec : golden.dot.AccumulatorSpec
        Register range: bit 0 weighs ``2**spec.lsb_exp``; the register is
        ``spec.width`` bits. Every live finite term must be a multiple of
        ``2**lsb_exp`` below ``2**msb_exp`` in magnitude (the contract of
        :func:`golden.dot.accumulate`), and at most ``spec.n`` terms are summed.
    sig_bits : int
        Width of each term significand (``2 * precision`` for FP products).
    lanes : int
        Terms per beat (>= 1); they are added by an adder tree.
    stages : int
        0 or 1: a register after the align step (boundary ``"align"``). The
        accumulator register itself is always there.

    Attributes
    ----------
    en : In(1)
        Clock enable of every register.
    valid, first, last : In(1)
        A beat of terms; ``first`` starts a new sum (the register restarts from
        the beat), ``last`` ends it.
    lane_valid : In(lanes)
        Per-lane term present; absent lanes count for nothing (padding).
    sign, nan, inf : In(lanes)
    sig : In(ArrayLayout(sig_bits, lanes))
    exp : In(ArrayLayout(signed, lanes))
        Lane ``i``'s term, the fields of :class:`golden.dot.Terms`; ``exp`` holds
        any exponent in ``[lsb_exp, msb_exp]``.
    done : Out(1)
        High for one enabled cycle, :attr:`latency` enabled edges after a beat
        with ``valid & last``; the outputs below then hold that sum (until the
        next enabled edge).
    acc : Out(signed(spec.width))
        The exact sum in units of ``2**lsb_exp``.
    acc_nan, pos_inf, neg_inf, all_neg_zero, empty : Out(1)
        ``golden.dot.Accumulator`` flags (``acc_nan`` is its ``nan``): a NaN term, a +Inf term, a -Inf
        term, every live term is a zero with sign 1 (true for an empty sum), no
        live term at all (``count == 0``).
    """

    BOUNDARIES = ("align",)

    def __init__(self, *, spec, sig_bits, lanes=1, stages=1):
        self._spec = _check_spec("ExactAccumulator", spec)
        self._sig_bits = check_int("ExactAccumulator", "sig_bits", sig_bits, min=1)
        self._lanes = check_int("ExactAccumulator", "lanes", lanes, min=1)
        self._stages = check_int("ExactAccumulator", "stages", stages, min=0, max=1)
        self._exp_shape = Value.cast(C(0, range(spec.lsb_exp, spec.msb_exp + 1))).shape()
        if not self._exp_shape.signed:
            self._exp_shape = signed(self._exp_shape.width + 1)
        lanes = self._lanes
        super().__init__({
            "en": In(1),
            "valid": In(1),
            "first": In(1),
            "last": In(1),
            "lane_valid": In(lanes),
            "sign": In(lanes),
            "sig": In(data.ArrayLayout(self._sig_bits, lanes)),
            "exp": In(data.ArrayLayout(self._exp_shape, lanes)),
            "nan": In(lanes),
            "inf": In(lanes),
            "done": Out(1),
            "acc": Out(signed(spec.width)),
            "acc_nan": Out(1),
            "pos_inf": Out(1),
            "neg_inf": Out(1),
            "all_neg_zero": Out(1),
            "empty": Out(1),
        })

    @property
    def spec(self):
        return self._spec

    @property
    def lanes(self):
        return self._lanes

    @property
    def exp_shape(self):
        return self._exp_shape

    @property
    def latency(self):
        """Enabled edges from a beat with ``last`` to ``done``."""
        return self._stages + 1

    @property
    def module_name(self):
        s = self._spec
        return (f"ExactAccumulator_l{-s.lsb_exp if s.lsb_exp < 0 else s.lsb_exp}"
                f"_h{s.msb_exp}_w{s.width}_x{self._lanes}_s{self._stages}")

    def elaborate(self, platform):
        m = Module()
        self.build(m, self)
        return m

    def build(self, m, p):
        """Add the logic to module ``m`` on the ports of ``p`` (this component, or
        ``self.signature.create()`` when a parent inlines the datapath flat)."""
        spec = self._spec
        width = spec.width
        regs = _registered(self.BOUNDARIES, self._stages)
        lsb = Signal(self._exp_shape, name="lsb_exp")
        m.d.comb += lsb.eq(spec.lsb_exp)

        # align: each live finite term, shifted to its offset from the LSB, negated if
        # negative. Zero, NaN, Inf and absent lanes contribute 0.
        aligned, t_nan, t_pinf, t_ninf, t_negz, t_live = [], [], [], [], [], []
        for i in range(self._lanes):
            live = p.valid & p.lane_valid[i]
            # exponent - lsb_exp, with the constant in a signal of the same width.
            offset = (p.exp[i] - lsb).as_unsigned()[:(spec.magnitude_bits).bit_length()]
            shifted = Signal(width, name=f"shifted{i}")
            m.d.comb += shifted.eq(shift_left(p.sig[i], offset, spec.magnitude_bits))
            finite = live & ~p.nan[i] & ~p.inf[i]
            term = Signal(width, name=f"aligned{i}")
            m.d.comb += term.eq(Mux(finite, negate_if(shifted, p.sign[i])[:width], 0))
            aligned.append(term)
            t_nan.append(live & p.nan[i])
            t_pinf.append(live & p.inf[i] & ~p.sign[i])
            t_ninf.append(live & p.inf[i] & p.sign[i])
            t_negz.append(~live | (~p.nan[i] & ~p.inf[i] & ~p.sig[i].any()
                                   & p.sign[i]))
            t_live.append(live)
        s = pipeline_stage(
            m, p.en, "align" in regs, "align",
            valid=p.valid, first=p.first, last=p.last,
            nan=Cat(*t_nan).any(), pinf=Cat(*t_pinf).any(), ninf=Cat(*t_ninf).any(),
            negz=Cat(*t_negz).all(), live=Cat(*t_live).any(),
            **{f"t{i}": t for i, t in enumerate(aligned)})

        # add: adder tree plus the accumulator register (restarts on `first`).
        beat = _tree_sum((s[f"t{i}"] for i in range(self._lanes)), width)
        acc = p.acc.as_unsigned()
        start = s["first"]
        with m.If(p.en):
            m.d.sync += p.done.eq(s["valid"] & s["last"])
            with m.If(s["valid"]):
                m.d.sync += [
                    p.acc.eq((Mux(start, 0, acc) + beat)[:width]),
                    p.acc_nan.eq((p.acc_nan & ~start) | s["nan"]),
                    p.pos_inf.eq((p.pos_inf & ~start) | s["pinf"]),
                    p.neg_inf.eq((p.neg_inf & ~start) | s["ninf"]),
                    p.all_neg_zero.eq((p.all_neg_zero | start) & s["negz"]),
                    p.empty.eq((p.empty | start) & ~s["live"]),
                ]


class NormalizeRound(wiring.Component):
    """Round an exact accumulator once to ``fmt_out``: :func:`golden.dot.round_accumulator`.

    Parameters
    ----------
    spec : golden.dot.AccumulatorSpec
        The accumulator's range (width and LSB weight ``2**lsb_exp``).
    fmt_out : golden.fp.FPFormat
        Result format (FP32 or FP16 in the PE; any format works).
    stages : int
        Pipeline registers, 0..4, placed from the output backwards over the
        boundaries ``"magnitude"`` (after negation), ``"lzc"`` (after
        leading-one detection), ``"shift"`` (after the normalizing shift) and
        ``"round"`` (the result).

    Attributes
    ----------
    en : In(1)
        Clock enable of every register.
    valid : In(1)
        ``acc`` and the flags carry a sum to round.
    acc : In(signed(spec.width))
    nan, pos_inf, neg_inf, all_neg_zero, empty : In(1)
        The accumulator and its flags (:class:`ExactAccumulator` outputs).
    done : Out(1)
    result : Out(fmt_out.width)
        The rounded result of the sum presented :attr:`latency` enabled edges
        earlier, with ``done`` high: canonical NaN for a NaN term or +Inf and
        -Inf together; else the Inf; else RNE of the exact sum (gradual
        underflow, overflow to Inf); an exact zero is -0 only for a non-empty
        sum of negative zeros.
    """

    BOUNDARIES = ("magnitude", "lzc", "shift", "round")

    def __init__(self, *, spec, fmt_out, stages=2):
        self._spec = _check_spec("NormalizeRound", spec)
        self._fmt = _check_fmt("NormalizeRound", "fmt_out", fmt_out)
        self._stages = check_int("NormalizeRound", "stages", stages, min=0,
                                 max=len(self.BOUNDARIES))
        # Keep at least m + 3 bits (significand, guard, one sticky position).
        self._pad = max(0, fmt_out.man_bits + 3 - spec.width)
        top_exp = spec.width + self._pad - 1 + spec.lsb_exp - self._pad
        if top_exp < fmt_out.emin:
            raise ValueError(f"NormalizeRound.spec must reach the normal range of fmt_out "
                             f"(top bit weight 2**{top_exp} < 2**{fmt_out.emin})")
        super().__init__({
            "en": In(1),
            "valid": In(1),
            "acc": In(signed(spec.width)),
            "nan": In(1),
            "pos_inf": In(1),
            "neg_inf": In(1),
            "all_neg_zero": In(1),
            "empty": In(1),
            "done": Out(1),
            "result": Out(fmt_out.width),
        })

    @property
    def spec(self):
        return self._spec

    @property
    def fmt_out(self):
        return self._fmt

    @property
    def latency(self):
        """Enabled edges from ``valid`` to ``done``."""
        return self._stages

    @property
    def module_name(self):
        return (f"NormalizeRound_w{self._spec.width}_e{self._fmt.exp_bits}"
                f"_m{self._fmt.man_bits}_s{self._stages}")

    def elaborate(self, platform):
        m = Module()
        self.build(m, self)
        return m

    def build(self, m, p):
        """Add the logic to module ``m`` on the ports of ``p`` (this component, or
        ``self.signature.create()`` when a parent inlines the datapath flat)."""
        fmt, spec, en = self._fmt, self._spec, p.en
        regs = _registered(self.BOUNDARIES, self._stages)
        man = fmt.man_bits
        wp = spec.width + self._pad
        lsb_p = spec.lsb_exp - self._pad

        # magnitude: |acc| (the most negative value's magnitude still fits `width` bits).
        neg = p.acc[-1]
        mag = Signal(wp, name="mag")
        m.d.comb += mag.eq(Cat(C(0, self._pad), negate_if(p.acc.as_unsigned(), neg)[:spec.width]))
        nan = p.nan | (p.pos_inf & p.neg_inf)
        s = pipeline_stage(m, en, "magnitude" in regs, "magnitude",
                           valid=p.valid, mag=mag, neg=neg, nan=nan,
                           inf=p.pos_inf | p.neg_inf, ninf=p.neg_inf,
                           negz=p.all_neg_zero & ~p.empty)

        # lzc: leading zeros, capped so the leading exponent never drops below emin
        # (gradual underflow, IEEE 754 §7.5: the quantum stays 2**(emin - m)).
        cap = wp - 1 + lsb_p - fmt.emin
        lz = Signal(range(wp + 1), name="lz")
        # The biased exponent of the leading bit after the shift, (wp - 1 + lsb_p) - lz
        # + bias, is a constant per case: never below 1 thanks to the cap.
        top = wp - 1 + lsb_p + fmt.bias
        biased = Signal(range(max(2, top + 1)), name="biased")
        m.d.comb += [lz.eq(min(wp, cap)), biased.eq(top - min(wp, cap))]
        for i in range(wp):   # lowest priority first: the highest set bit wins
            with m.If(s["mag"][i]):
                m.d.comb += [lz.eq(min(wp - 1 - i, cap)), biased.eq(top - min(wp - 1 - i, cap))]
        s = pipeline_stage(m, en, "lzc" in regs, "lzc", lz=lz, biased=biased,
                           zero=~s["mag"].any(),
                           **{k: s[k] for k in ("valid", "mag", "neg", "nan", "inf", "ninf",
                                                "negz")})

        # shift: normalize; keep m + 1 bits, the guard bit and the sticky OR below.
        norm = Signal(wp, name="norm")
        m.d.comb += norm.eq(shift_left(s["mag"], s["lz"], wp))
        s = pipeline_stage(m, en, "shift" in regs, "shift",
                           sig=norm[wp - 1 - man:], guard=norm[wp - 2 - man],
                           sticky=norm[:wp - 2 - man].any(), biased=s["biased"],
                           **{k: s[k] for k in ("valid", "neg", "nan", "inf", "ninf", "negz",
                                                "zero")})

        # round: RNE; a carry out of the fraction bumps the exponent field, up to Inf.
        sig = s["sig"]
        up = s["guard"] & (s["sticky"] | sig[0])
        field = Mux(sig[man], s["biased"][:fmt.exp_bits], 0)
        word = (Cat(sig[:man], field) + up)[:fmt.width - 1]
        overflow = ge_const(s["biased"], fmt.exp_mask)
        sign_bit = fmt.width - 1
        result = Signal(fmt.width, name="rounded")
        with m.If(s["nan"]):
            m.d.comb += result.eq(fmt.nan_bits)
        with m.Elif(s["inf"]):
            m.d.comb += result.eq(Cat(C(fmt.inf_bits, sign_bit), s["ninf"]))
        with m.Elif(s["zero"]):
            m.d.comb += result.eq(Cat(C(0, sign_bit), s["negz"]))
        with m.Elif(overflow):
            m.d.comb += result.eq(Cat(C(fmt.inf_bits, sign_bit), s["neg"]))
        with m.Else():
            m.d.comb += result.eq(Cat(word, s["neg"]))
        s = pipeline_stage(m, en, "round" in regs, "round", valid=s["valid"], result=result)
        m.d.comb += [p.done.eq(s["valid"]), p.result.eq(s["result"])]
