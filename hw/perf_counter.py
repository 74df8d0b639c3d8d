"""``PerfCounter``: a wide event counter split for the clock, with a consistent snapshot.

A 48-bit counter with an increment, a clear and a snapshot register is one
48-bit carry chain after the event logic. Here the event logic ends at a
register (the pending increment), and the count is kept in two parts: a
``low_bits`` low part that adds the pending increment, and the upper part,
which adds the low part's carry one cycle later from a register. No path then
spans more than the low part's adder or the upper part's ``+ carry``.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from specgen.golden.validate import check_int

__all__ = ["PerfCounter"]


class PerfCounter(wiring.Component):
    """Event counter of ``width`` bits, split at ``low_bits``, with a snapshot register.

    Parameters
    ----------
    width : int
        Bits of the count (it wraps modulo ``2**width``); > ``low_bits``.
    low_bits : int
        Bits of the low part (≥ 2).
    step_bits : int
        Bits of :attr:`inc` (``< low_bits``, so the low part carries at most once
        per cycle; 1 for an event counter).

    Attributes
    ----------
    inc : In(step_bits)
        Added to the count at the clock edge (0: no event).
    clear : In(1)
        The count becomes 0 at the edge (``inc`` of that cycle is dropped).
    snap : In(1)
        :attr:`value` takes the count of this cycle (before this cycle's ``inc``)
        at the edge.
    value : Out(width)
        The last snapshot, registered.

    Notes
    -----
    The count of a cycle is ``(hi + c)·2**low_bits + lo + q``: ``q`` the
    registered increment of the previous cycle, ``lo`` the low part, ``c`` its
    registered carry and ``hi`` the upper part, which adds ``c`` at the next
    edge. The snapshot takes, in one edge, ``(lo + q) mod 2**low_bits`` (the
    low part's own next value) and ``hi + c + carry(lo + q)`` (``hi``, ``hi + 1``
    or ``hi + 2``, chosen by the two carries): exactly that count, the same
    value a single 48-bit register would hold. So a host reading :attr:`value`
    (low word, then high word) always sees one consistent count, and every
    event up to the cycle before ``snap`` is in it. Latency from ``snap`` to
    ``value``: 1 cycle (:attr:`latency`), as from a single register.
    """

    def __init__(self, *, width=48, low_bits=12, step_bits=1):
        self._width = check_int("PerfCounter", "width", width, min=3)
        self._low = check_int("PerfCounter", "low_bits", low_bits, min=2, max=self._width - 1)
        self._step = check_int("PerfCounter", "step_bits", step_bits, min=1, max=self._low - 1)
        super().__init__({"inc": In(self._step), "clear": In(1), "snap": In(1),
                          "value": Out(self._width)})

    width = property(lambda self: self._width)
    low_bits = property(lambda self: self._low)

    @property
    def latency(self):
        """Cycles from ``snap`` to the snapshot on :attr:`value`."""
        return 1

    def elaborate(self, platform):
        m = Module()
        q = Signal(self._step)
        lo = Signal(self._low)
        c = Signal()
        hi = Signal(self._width - self._low)
        lo_sum = Signal(self._low + 1)
        m.d.comb += lo_sum.eq(lo + q)
        co = lo_sum[self._low]
        m.d.sync += [q.eq(self.inc), lo.eq(lo_sum[:self._low]), c.eq(co), hi.eq(hi + c)]
        with m.If(self.clear):
            m.d.sync += [q.eq(0), lo.eq(0), c.eq(0), hi.eq(0)]
        with m.If(self.snap):
            # hi + 1 and hi + 2 from the register; the carries only select.
            hi_snap = Mux(c & co, hi + 2, Mux(c | co, hi + 1, hi))[:len(hi)]
            m.d.sync += self.value.eq(Cat(lo_sum[:self._low], hi_snap))
        return m
