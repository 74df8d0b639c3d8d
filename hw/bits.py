"""Bit-level helpers shared by the blocks: widths, extension, shifters, one-hot states.

Every helper builds operands of the result's full width by concatenation, so
the emitted Verilog has no implicit extension and no narrow constant for
Verilator's ``-Wall`` width checks to flag.
"""

from amaranth import C, Cat, Mux, Signal, Value

__all__ = ["index_width", "value_width", "zero_extend", "wire", "shift_left", "eq_const", "OneHot"]


def index_width(n):
    """Bits of an index in ``range(n)``; at least 1 (a zero-width port is not legal Verilog)."""
    return max(1, (int(n) - 1).bit_length())


def value_width(n):
    """Bits of an unsigned value up to and including ``n``; at least 1."""
    return max(1, int(n).bit_length())


def zero_extend(value, width):
    """``value`` zero-extended (or truncated) to ``width`` bits."""
    value = Value.cast(value)
    if len(value) >= width:
        return value[:width]
    return Cat(value, C(0, width - len(value)))


def wire(m, value, name):
    """``value`` as a named combinational wire of ``m``, so a value used twice is built once."""
    value = Value.cast(value)
    sig = Signal(len(value), name=name)
    m.d.comb += sig.eq(value)
    return sig


def eq_const(value, k):
    """``value == k`` for a constant ``k``, as bit logic (no narrowed constant operand,
    which Verilator's -Wall would read as a width mismatch)."""
    value = Value.cast(value)
    if k >> len(value):
        return C(0, 1)
    return Cat(*(value[i] if (k >> i) & 1 else ~value[i] for i in range(len(value)))).all()


def shift_left(value, amount, width, *, m=None, name="shl"):
    """``(value << amount)`` truncated to ``width`` bits, as a logarithmic shifter.

    One multiplexer of a constant shift per bit of ``amount``. With ``m``, the
    output of every level is a named wire of ``m`` (``<name>_<level>``), which
    keeps the levels apart in the netlist and in waveforms.
    """
    v = zero_extend(value, width)
    for j in range(len(amount)):
        step = 1 << j
        shifted = C(0, width) if step >= width else Cat(C(0, step), v[:width - step])
        v = Mux(amount[j], shifted, v)
        if m is not None:
            v = wire(m, v, f"{name}_{j}")
    return v


class OneHot:
    """The states of a one-hot state machine: one flip-flop per state.

    Verilator's ``-Wall`` rejects the comparisons with 0 and the incomplete
    case statements of a binary-encoded ``m.FSM``; a flip-flop per state
    avoids both.

    Parameters
    ----------
    names : sequence of str
        The states; each is a ``Signal`` named ``<prefix><name>``.
    init : str
        The state after reset.
    prefix : str
        Prefix of the signal names.
    """

    def __init__(self, names, *, init, prefix=""):
        names = tuple(names)
        if init not in names:
            raise ValueError(f"OneHot.init must be one of {names}, not {init!r}")
        self.states = {n: Signal(init=(n == init), name=f"{prefix}{n}") for n in names}

    def __getitem__(self, name):
        return self.states[name]

    def goto(self, m, name):
        """Enter state ``name`` at the next clock edge (leaving every other)."""
        if name not in self.states:
            raise ValueError(f"state must be one of {tuple(self.states)}, not {name!r}")
        m.d.sync += [sig.eq(n == name) for n, sig in self.states.items()]
