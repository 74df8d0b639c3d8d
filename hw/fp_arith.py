"""Pipelined IEEE 754 multiply and add for any binary format: ``FPMul`` and ``FPAdd``.

These are the hardware images of :func:`golden.fp.mul` and :func:`golden.fp.add`
(and :class:`FPNarrow` of :func:`golden.fp.convert` to a narrower format):
one rounding, round to nearest even (IEEE 754 §4.3.1), gradual underflow
(§7.5, subnormals honoured on input and output, nothing flushed to zero),
overflow to ±Inf (§7.4), signs of zero per §6.3, and every NaN result the
canonical quiet NaN of the format (``0x7FC00000`` for binary32; §7.2 invalid
operations ``Inf·0`` and ``Inf − Inf`` included). No exception flags.

Both units are parameterized only by a :class:`golden.fp.FPFormat` (exponent and
fraction widths), as in berkeley-hardfloat and FPnew, and their datapaths are
split into named stages; ``stages`` pipeline registers are placed on the last
``stages`` stage boundaries (:attr:`FPMul.BOUNDARIES`, :attr:`FPAdd.BOUNDARIES`),
so ``stages = 1`` registers only the result. Every register loads while ``en``
is high and holds while it is low: a consumer stalls a whole pipeline built of
these units with one signal. ``valid`` travels beside the data.
"""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib.wiring import In, Out

from specgen.hw.bits import shift_left, wire, zero_extend
from specgen.hw.fp_datapath import StagedFPUnit, fp_fields, ge_const, pipeline_stage

__all__ = [
    "FPAdd",
    "FPMul",
    "FPNarrow",
    "add_const",
    "count_leading_zeros",
    "delay_line",
    "shift_right_sticky",
    "sub_mod",
]


def add_const(value, k, width):
    """``(value + k) mod 2**width`` for an integer constant ``k`` (may be negative).

    Yosys shrinks constants to their minimal width, and Verilator's ``-Wall``
    rejects the width mismatch; a constant whose top bit is set keeps its full
    width, so ``k`` is split into two such constants when needed.
    """
    v = zero_extend(value, width)
    k %= 1 << width
    top = 1 << (width - 1)
    if k == 0:
        return v
    if k & top:
        return (v + C(k, width))[:width]
    v = (v + C(top, width))[:width]
    return (v + C(k + top, width))[:width]


def sub_mod(a, b, width):
    """``(a − b) mod 2**width`` with both operands zero-extended to ``width`` bits."""
    return (zero_extend(a, width) - zero_extend(b, width))[:width]


def count_leading_zeros(m, value, width, name="clz"):
    """Leading zeros of the ``width``-bit ``value`` (``width`` when it is 0), combinational.

    A balanced tree: the value is padded with ones at the bottom to a power of
    two, and each level's count is the upper half's (if it has a one) or the
    lower half's, with one more result bit saying which.
    """
    size = 2
    while size < width:
        size *= 2
    nbits = width.bit_length()
    padded = Cat(C((1 << (size - width)) - 1, size - width), value[:width]) \
        if size > width else value[:width]

    def clz(v, n, path):
        # Count of a nonzero n-bit v, log2(n) bits.
        if n == 2:
            return ~v[1]
        hi, lo = v[n // 2:], v[:n // 2]
        hi_any = wire(m, hi.any(), f"{name}_{path}_any")
        return wire(m, Cat(Mux(hi_any, clz(hi, n // 2, path + "h"), clz(lo, n // 2, path + "l")),
                            ~hi_any), f"{name}_{path}")

    count = zero_extend(clz(padded, size, "t"), nbits)
    if size > width:
        return count                                  # the padding ones stop a zero at width
    return Mux(value[:width].any(), count, C(width, nbits))


def shift_right_sticky(m, value, amount, width, name="shr"):
    """``(value >> amount, OR of the bits shifted out)`` for a ``width``-bit value.

    A logarithmic shifter of constant shifts (every operand has the result's
    width); ``amount`` may exceed ``width``, everything then goes to sticky.
    """
    v = zero_extend(value, width)
    sticky = C(0, 1)
    for j in range(len(amount)):
        step = 1 << j
        if step >= width:
            sticky = sticky | (amount[j] & v.any())
            v = wire(m, Mux(amount[j], C(0, width), v), f"{name}_{j}")
        else:
            sticky = sticky | (amount[j] & v[:step].any())
            v = wire(m, Mux(amount[j], Cat(v[step:], C(0, step)), v), f"{name}_{j}")
        sticky = wire(m, sticky, f"{name}_{j}_sticky")
    return v, sticky


def delay_line(m, en, value, cycles, name, *, reset_less=False):
    """``value`` delayed by ``cycles`` enabled clock edges (``cycles`` may be 0).

    ``reset_less=True`` for data whose validity travels in a reset tag beside it:
    a chain without reset maps to shift-register LUTs (SRLC32E) instead of flip-flops.
    """
    for k in range(cycles):
        reg = Signal.like(value, name=f"{name}_d{k + 1}", reset_less=reset_less)
        with m.If(en):
            m.d.sync += reg.eq(value)
        value = reg
    return value


def _round_pack(m, fmt, *, sign, efield_pre, mant, guard, sticky, overflow, nan, inf, inf_sign,
                zero=None):
    """Round to nearest even and pack; special classes override the rounded value.

    ``(efield_pre << man_bits) + mant`` is the truncated encoding (``mant`` holds
    the hidden bit, so a normal carries its exponent up by one); the round
    increment may carry into the exponent, which turns the largest finite
    magnitude into Inf exactly when RNE overflows.
    """
    mb, w = fmt.man_bits, fmt.width
    word = Signal(w, name="rounded")
    inc = guard & (sticky | mant[0])
    base = Cat(C(0, mb), efield_pre, C(0, 1))
    m.d.comb += word.eq(((base + zero_extend(mant, w))[:w] + zero_extend(inc, w))[:w])
    result = Signal(w, name="packed")
    inf_word = Cat(C(0, mb), C((1 << fmt.exp_bits) - 1, fmt.exp_bits))
    with m.If(nan):
        m.d.comb += result.eq(fmt.nan_bits)
    with m.Elif(inf):
        m.d.comb += result.eq(Cat(inf_word, inf_sign))
    with m.Elif(overflow):
        m.d.comb += result.eq(Cat(inf_word, sign))
    with m.Elif(zero if zero is not None else C(0, 1)):
        m.d.comb += result.eq(Cat(C(0, w - 1), sign))
    with m.Else():
        m.d.comb += result.eq(Cat(word[:w - 1], sign))
    return result


class _FPUnit(StagedFPUnit):
    """``result = op(a, b)`` in ``fmt`` with ``valid`` beside the data."""

    def members(self, fmt):
        return {
            "en": In(1),
            "valid": In(1),
            "a": In(fmt.width),
            "b": In(fmt.width),
            "result": Out(fmt.width),
            "result_valid": Out(1),
        }


class FPMul(_FPUnit):
    """``result = round(a · b)`` in ``fmt``, bit for bit :func:`golden.fp.mul`.

    Parameters
    ----------
    fmt : golden.fp.FPFormat
        Operand and result format (binary32: ``FPFormat(exp_bits=8, man_bits=23)``).
    stages : int
        Pipeline registers, 0..5, on the last ``stages`` of the boundaries
        ``classify``, ``product``, ``lzc`` (leading-one count and exponent),
        ``normalize`` (the shifts), ``round`` (``round`` is the output
        register). 0 is combinational; 5 keeps every stage within about 11
        logic levels (``docs/estimate.md``).

    Attributes
    ----------
    en : In(1)
        Clock enable of every pipeline register; the pipeline holds while low.
    valid : In(1)
        Qualifies ``a``, ``b``; travels to ``result_valid``.
    a, b : In(fmt.width)
        Operand encodings.
    result : Out(fmt.width)
        The rounded product of the operands presented :attr:`latency` enabled
        clock edges earlier.
    result_valid : Out(1)
        ``valid`` of those operands.
    """

    BOUNDARIES = ("classify", "product", "lzc", "normalize", "round")

    def elaborate(self, platform):
        m = Module()
        fmt, regs, en = self._fmt, self._regs(), self.en
        e, mb = fmt.exp_bits, fmt.man_bits
        p = mb + 1
        ew = e + 4                                   # signed exponent arithmetic width
        # classify + special cases (IEEE 754 §7.2: Inf·0 invalid; payloads dropped).
        a, b = fp_fields(self.a, fmt), fp_fields(self.b, fmt)
        nan = a["nan"] | b["nan"] | (a["inf"] & b["zero"]) | (a["zero"] & b["inf"])
        s = pipeline_stage(m, en, "classify" in regs, "classify",
                           valid=self.valid, sign=a["sign"] ^ b["sign"], sig_a=a["sig"],
                           sig_b=b["sig"], exp_sum=a["exp"] + b["exp"], nan=nan,
                           inf=a["inf"] | b["inf"], zero=a["zero"] | b["zero"])
        # exponent + product: the 2p-bit significand product is exact.
        prod = Signal(2 * p, name="prod")
        m.d.comb += prod.eq(s["sig_a"] * s["sig_b"])
        s = pipeline_stage(m, en, "product" in regs, "product",
                           valid=s["valid"], sign=s["sign"], prod=prod, exp_sum=s["exp_sum"],
                           nan=s["nan"], inf=s["inf"], zero=s["zero"])
        # lzc: leading-one detection and the shift amounts; below the normal range,
        # shift only as far as the smallest normal's exponent allows (gradual underflow).
        lz = Signal(range(2 * p + 1), name="mul_lz")
        m.d.comb += lz.eq(count_leading_zeros(m, s["prod"], 2 * p, "mul_clz"))
        # Exponents are ew-bit two's complement values (modular unsigned arithmetic).
        t = Signal(ew, name="mul_t")                # exp_sum − bias = lz + Eb − 1
        eb = Signal(ew, name="mul_eb")              # biased exponent of the normalized product
        m.d.comb += [t.eq(add_const(s["exp_sum"], -fmt.bias, ew)),
                     eb.eq(sub_mod(add_const(t, 1, ew), lz, ew))]
        normal = ~eb[ew - 1] & eb[:ew - 1].any()    # eb >= 1
        t_nonneg = ~t[ew - 1]
        # Below the normal range t < lz <= 2p, so its low bits are the whole value.
        s = pipeline_stage(m, en, "lzc" in regs, "lzc",
                           valid=s["valid"], sign=s["sign"], prod=s["prod"],
                           left=Mux(normal, lz, Mux(t_nonneg, t[:len(lz)], 0)),
                           right=Mux(normal | t_nonneg, 0, add_const(~t, 1, ew)[:ew - 1]),
                           efield_pre=Mux(normal, add_const(eb, -1, ew)[:e], 0),
                           overflow=~eb[ew - 1] & ge_const(eb[:ew - 1], (1 << e) - 1),
                           nan=s["nan"], inf=s["inf"], zero=s["zero"])
        # normalize: the shifts
        shifted = Signal(2 * p, name="mul_shl")
        m.d.comb += shifted.eq(shift_left(s["prod"], s["left"], 2 * p, m=m, name="mul_shl"))
        norm, rsticky = shift_right_sticky(m, shifted, s["right"], 2 * p, "mul_shr")
        s = pipeline_stage(m, en, "normalize" in regs, "normalize",
                           valid=s["valid"], sign=s["sign"], efield_pre=s["efield_pre"],
                           mant=norm[p:2 * p], guard=norm[p - 1],
                           sticky=norm[:p - 1].any() | rsticky, overflow=s["overflow"],
                           nan=s["nan"], inf=s["inf"], zero=s["zero"])
        # round
        result = _round_pack(m, fmt, sign=s["sign"], efield_pre=s["efield_pre"], mant=s["mant"],
                             guard=s["guard"], sticky=s["sticky"], overflow=s["overflow"],
                             nan=s["nan"], inf=s["inf"], inf_sign=s["sign"], zero=s["zero"])
        s = pipeline_stage(m, en, "round" in regs, "round", valid=s["valid"], result=result)
        m.d.comb += [self.result.eq(s["result"]), self.result_valid.eq(s["valid"])]
        return m


class FPAdd(_FPUnit):
    """``result = round(a + b)`` in ``fmt``, bit for bit :func:`golden.fp.add`.

    Parameters
    ----------
    fmt : golden.fp.FPFormat
    stages : int
        Pipeline registers, 0..6, on the last ``stages`` of the boundaries
        ``classify``, ``align``, ``add``, ``lzc`` (leading-one count and
        exponent), ``normalize`` (the shift), ``round``.

    Attributes
    ----------
    en, valid, a, b, result, result_valid
        As in :class:`FPMul`. An exact zero sum of operands of opposite signs
        is +0, ``(−0) + (−0) = −0`` (§6.3).

    Notes
    -----
    The operands are ordered by magnitude, so the aligned difference is never
    negative. Significands are widened by ``p + 2`` bits below their LSB and the
    smaller one is shifted right with the bits shifted out ORed into the LSB
    (a sticky jam at least two places below the guard bit, which keeps RNE exact
    for both effective addition and subtraction).
    """

    BOUNDARIES = ("classify", "align", "add", "lzc", "normalize", "round")

    def elaborate(self, platform):
        m = Module()
        fmt, regs, en = self._fmt, self._regs(), self.en
        e, mb, w = fmt.exp_bits, fmt.man_bits, fmt.width
        p = mb + 1
        W = 2 * p + 3                                # aligned significand width
        ew = e + 4
        # classify + special cases; order the operands by magnitude.
        a, b = fp_fields(self.a, fmt), fp_fields(self.b, fmt)
        swap = self.b[:w - 1] > self.a[:w - 1]
        x = {k: Mux(swap, b[k], a[k]) for k in ("sign", "sig", "exp")}
        y = {k: Mux(swap, a[k], b[k]) for k in ("sign", "sig", "exp")}
        nan = a["nan"] | b["nan"] | (a["inf"] & b["inf"] & (a["sign"] != b["sign"]))
        s = pipeline_stage(m, en, "classify" in regs, "classify",
                           valid=self.valid, sx=x["sign"], sy=y["sign"], sig_x=x["sig"],
                           sig_y=y["sig"], ex=x["exp"], d=(x["exp"] - y["exp"])[:e], nan=nan,
                           inf=a["inf"] | b["inf"], inf_sign=Mux(a["inf"], a["sign"], b["sign"]))
        # align
        y_al, st = shift_right_sticky(m, Cat(C(0, p + 2), s["sig_y"]), s["d"], W, "align")
        s = pipeline_stage(m, en, "align" in regs, "align",
                           valid=s["valid"], sx=s["sx"], sub=s["sx"] ^ s["sy"],
                           x_ext=Cat(C(0, p + 2), s["sig_x"]), y_ext=y_al | st, ex=s["ex"],
                           nan=s["nan"], inf=s["inf"], inf_sign=s["inf_sign"])
        # add
        total = Signal(W + 1, name="add_sum")
        m.d.comb += total.eq(Mux(s["sub"], s["x_ext"] - s["y_ext"], s["x_ext"] + s["y_ext"]))
        # An exact cancellation is +0 under roundTiesToEven (§6.3).
        sign = Mux(s["sub"] & ~total.any(), 0, s["sx"])
        s = pipeline_stage(m, en, "add" in regs, "add",
                           valid=s["valid"], sign=sign, total=total, ex=s["ex"],
                           nan=s["nan"], inf=s["inf"], inf_sign=s["inf_sign"])
        # lzc: leading-one detection and the normalized exponent.
        lz = Signal(range(W + 2), name="add_lz")
        m.d.comb += lz.eq(count_leading_zeros(m, s["total"], W + 1, "add_clz"))
        eb = Signal(ew, name="add_eb")              # two's complement, ew bits
        m.d.comb += eb.eq(sub_mod(add_const(s["ex"], 2, ew), lz, ew))
        normal = ~eb[ew - 1] & eb[:ew - 1].any() & s["total"].any()   # an exact zero packs as zero
        s = pipeline_stage(m, en, "lzc" in regs, "lzc",
                           valid=s["valid"], sign=s["sign"], total=s["total"],
                           # Below the normal range ex + 1 < lz <= W + 1.
                           shl=Mux(normal, lz, add_const(s["ex"], 1, ew)[:len(lz)]),
                           efield_pre=Mux(normal, add_const(eb, -1, ew)[:e], 0),
                           overflow=~eb[ew - 1] & ge_const(eb[:ew - 1], (1 << e) - 1),
                           nan=s["nan"], inf=s["inf"], inf_sign=s["inf_sign"])
        # normalize (left only: a carry is absorbed by the one-bit headroom).
        norm = Signal(W + 1, name="add_norm")
        m.d.comb += norm.eq(shift_left(s["total"], s["shl"], W + 1, m=m, name="add_shl"))
        s = pipeline_stage(m, en, "normalize" in regs, "normalize",
                           valid=s["valid"], sign=s["sign"], efield_pre=s["efield_pre"],
                           mant=norm[W + 1 - p:W + 1], guard=norm[W - p], sticky=norm[:W - p].any(),
                           overflow=s["overflow"], nan=s["nan"], inf=s["inf"],
                           inf_sign=s["inf_sign"])
        # round
        result = _round_pack(m, fmt, sign=s["sign"], efield_pre=s["efield_pre"], mant=s["mant"],
                             guard=s["guard"], sticky=s["sticky"], overflow=s["overflow"],
                             nan=s["nan"], inf=s["inf"], inf_sign=s["inf_sign"])
        s = pipeline_stage(m, en, "round" in regs, "round", valid=s["valid"], result=result)
        m.d.comb += [self.result.eq(s["result"]), self.result_valid.eq(s["valid"])]
        return m


class FPNarrow(StagedFPUnit):
    """``result = round(a)`` from format ``fmt`` to the narrower ``dst``, bit for bit
    :func:`golden.fp.convert` (IEEE 754 §5.4.2 convertFormat).

    The decoder's activations leave the binary32 norms for the linear engine's binary16
    port through one of these: round to nearest even, gradual underflow (a result below
    ``dst``'s normal range is its subnormal, which the DSP58 then reads as zero), overflow
    to ±Inf, zeros and Infs keeping their sign, every NaN ``dst``'s canonical NaN.

    Parameters
    ----------
    fmt : golden.fp.FPFormat
        The operand format (binary32).
    dst : golden.fp.FPFormat
        The result format (binary16): at most as many exponent and fraction bits as ``fmt``.
    stages : int
        Pipeline registers, 0..3, on the last ``stages`` of the boundaries ``classify``
        (the exponent in ``dst``'s bias and the denormalizing shift), ``shift`` and
        ``round`` (the output register).

    Attributes
    ----------
    en : In(1)
        Clock enable of every pipeline register; the pipeline holds while low.
    valid : In(1)
        Qualifies ``a``; travels to ``result_valid``.
    a : In(fmt.width)
    result : Out(dst.width)
        ``a`` rounded, :attr:`latency` enabled clock edges after it was presented.
    result_valid : Out(1)
    """

    BOUNDARIES = ("classify", "shift", "round")

    def __init__(self, *, fmt, dst, stages):
        from specgen.golden.fp import FPFormat
        if not isinstance(dst, FPFormat):
            raise TypeError(f"FPNarrow.dst must be an FPFormat, not {dst!r}")
        if isinstance(fmt, FPFormat) and (dst.exp_bits > fmt.exp_bits or dst.man_bits > fmt.man_bits):
            raise ValueError(f"FPNarrow.dst must have at most fmt's {fmt.exp_bits} exponent and "
                             f"{fmt.man_bits} fraction bits, not {dst.exp_bits} and {dst.man_bits}")
        self._dst = dst
        super().__init__(fmt=fmt, stages=stages)

    def members(self, fmt):
        return {"en": In(1), "valid": In(1), "a": In(fmt.width), "result": Out(self._dst.width),
                "result_valid": Out(1)}

    @property
    def dst(self):
        return self._dst

    @property
    def module_name(self):
        """``FPNarrow_e8_m23_to_e5_m10_s2``."""
        f, d = self._fmt, self._dst
        return f"FPNarrow_e{f.exp_bits}_m{f.man_bits}_to_e{d.exp_bits}_m{d.man_bits}_s{self._stages}"

    def elaborate(self, platform):
        m = Module()
        src, dst, regs, en = self._fmt, self._dst, self._regs(), self.en
        ps, pd = src.man_bits + 1, dst.man_bits + 1
        drop = src.man_bits - dst.man_bits          # fraction bits below dst's LSB
        ew = src.exp_bits + 2                        # signed exponent arithmetic width
        W = ps + 2                                   # significand with two bits of headroom below
        # classify: the exponent in dst's bias (signed), and how far below dst's normal
        # range it is (the extra right shift of a dst subnormal; ≥ W is all sticky).
        a = fp_fields(self.a, src)
        ed = Signal(ew, name="narrow_ed")
        m.d.comb += ed.eq(add_const(a["exp"], dst.bias - src.bias, ew))
        low = ed[ew - 1] | ~ed[:ew - 1].any()       # ed ≤ 0: a dst subnormal (or zero)
        extra = Signal(range(W + 1), name="narrow_extra")
        far = Signal(name="narrow_far")
        below = Signal(ew, name="narrow_below")      # 1 − ed
        m.d.comb += [below.eq(sub_mod(C(1, ew), ed, ew)),
                     far.eq(~below[ew - 1] & ge_const(below[:ew - 1], W)),
                     extra.eq(Mux(~low, 0, Mux(far, W, below[:len(extra)])))]
        s = pipeline_stage(m, en, "classify" in regs, "classify",
                           valid=self.valid, sign=a["sign"], sig=a["sig"], extra=extra,
                           efield_pre=Mux(low, 0, add_const(ed, -1, ew)[:dst.exp_bits]),
                           overflow=~ed[ew - 1] & ge_const(ed[:ew - 1], (1 << dst.exp_bits) - 1),
                           nan=a["nan"], inf=a["inf"])
        # shift: denormalize, keeping the bits shifted out as sticky.
        y, st = shift_right_sticky(m, Cat(C(0, 2), s["sig"]), s["extra"], W, "narrow_shr")
        s = pipeline_stage(m, en, "shift" in regs, "shift",
                           valid=s["valid"], sign=s["sign"], efield_pre=s["efield_pre"],
                           mant=y[drop + 2:drop + 2 + pd], guard=y[drop + 1],
                           sticky=y[:drop + 1].any() | st, overflow=s["overflow"],
                           nan=s["nan"], inf=s["inf"])
        # round (NaN first, then an Inf operand, then overflow: _round_pack's order)
        result = _round_pack(m, dst, sign=s["sign"], efield_pre=s["efield_pre"], mant=s["mant"],
                             guard=s["guard"], sticky=s["sticky"], overflow=s["overflow"],
                             nan=s["nan"], inf=s["inf"], inf_sign=s["sign"])
        s = pipeline_stage(m, en, "round" in regs, "round", valid=s["valid"], result=result)
        m.d.comb += [self.result.eq(s["result"]), self.result_valid.eq(s["valid"])]
        return m
