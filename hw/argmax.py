"""``Argmax``: greedy argmax over a stream of logits, one logit per cycle.

The hardware image of :func:`golden.argmax.argmax_hw`. Each logit's binary32
word becomes a total-order key (the unsigned order of the keys is the IEEE
order of the values, with ``−0`` and ``+0`` one key: the comparison of
:func:`hw.ssm_nonlinear.order_key`); the running best is replaced only by a
strictly greater key, so ties keep the first index, and NaN logits are skipped
and flagged. The LM head's matrix-vector product is the linear unit's; this
block only reduces its output rows.
"""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from specgen.golden.mamba2 import MAMBA2_VOCAB
from specgen.golden.nonlinear import CANONICAL_NAN32
from specgen.golden.validate import check_int
from specgen.hw.bits import eq_const, index_width
from specgen.hw.fp_arith import add_const

__all__ = ["Argmax", "argmax_out_layout"]


def argmax_out_layout(size):
    """Result beat: ``index`` (``⌈log2 size⌉`` bits), ``value`` (the logit's word), ``nan``."""
    return data.StructLayout({"index": index_width(size), "value": 32, "nan": 1})


class Argmax(wiring.Component):
    """``argmax_hw`` of ``size``-logit vectors on valid/ready streams.

    Parameters
    ----------
    size : int
        Logits per vector (the vocabulary; Mamba2: 50,288), >= 2.

    Attributes
    ----------
    i : In(stream.Signature(32))
        The logits in index order, ``size`` beats per vector. ``i.ready`` is low
        only while a result waits on ``o`` (a registered condition).
    o : Out(stream.Signature(argmax_out_layout(size)))
        One result per vector, offered from 2 cycles after the vector's last
        logit (:attr:`latency`) until taken.

    Notes
    -----
    At full rate a vector takes ``size + 1`` cycles (:attr:`vector_cycles`): the
    input holds for the one cycle its result is offered. Synchronous reset
    abandons the vector in flight and any result not yet taken.
    """

    def __init__(self, *, size=MAMBA2_VOCAB):
        self._n = check_int("Argmax", "size", size, min=2)
        super().__init__({"i": In(stream.Signature(32)),
                          "o": Out(stream.Signature(argmax_out_layout(self._n)))})

    @property
    def size(self):
        return self._n

    @property
    def latency(self):
        """Cycles from a vector's last logit transfer to its result on ``o``: a key
        register and the compare-and-select register."""
        return 2

    @property
    def vector_cycles(self):
        """Cycles per vector at full rate: ``size`` logits and the result's cycle."""
        return self._n + 1

    @property
    def module_name(self):
        return f"Argmax_n{self._n}"

    def elaborate(self, platform):
        m = Module()
        n, iw = self._n, index_width(self._n)
        x = self.i.payload
        m.d.comb += self.i.ready.eq(~self.o.valid)
        accept = self.i.valid & self.i.ready
        cnt = Signal(iw, name="index")
        last = eq_const(cnt, n - 1)
        with m.If(accept):
            m.d.sync += cnt.eq(Mux(last, 0, add_const(cnt, 1, iw)))

        # -- stage 1: the total-order key (−0 and +0 one key) and the NaN flag, registered
        nan = x[23:31].all() & x[:23].any()
        neg = x[31] & x[:31].any()
        key = Mux(neg, Cat(~x[:31], C(0, 1)), Cat(x[:31], C(1, 1)))
        k1 = Signal(32, name="key1", reset_less=True)
        b1 = Signal(32, name="bits1", reset_less=True)
        i1 = Signal(iw, name="index1", reset_less=True)
        f1 = Signal(4, name="flags1")                    # valid, first, last, nan
        m.d.sync += f1.eq(Cat(accept, eq_const(cnt, 0), last, nan))
        with m.If(accept):
            m.d.sync += [k1.eq(key), b1.eq(x), i1.eq(cnt)]
        valid1, first1, last1, nan1 = f1[0], f1[1], f1[2], f1[3]

        # -- stage 2: compare with the running best and keep the greater (first on ties)
        have = Signal(name="have_best")
        best_k = Signal(32, name="best_key", reset_less=True)
        best_b = Signal(32, name="best_bits", reset_less=True)
        best_i = Signal(iw, name="best_index", reset_less=True)
        seen = Signal(name="nan_seen")
        cur_have = have & ~first1
        take = ~nan1 & (~cur_have | (k1 > best_k))
        nxt_b = Mux(take, b1, Mux(cur_have, best_b, int(CANONICAL_NAN32)))
        nxt_i = Mux(take, i1, Mux(cur_have, best_i, 0))
        nxt_nan = (seen & ~first1) | nan1
        with m.If(valid1):
            m.d.sync += [have.eq(cur_have | ~nan1), seen.eq(nxt_nan), best_b.eq(nxt_b),
                         best_i.eq(nxt_i), best_k.eq(Mux(take, k1, best_k))]
        with m.If(valid1 & last1):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.index.eq(nxt_i),
                         self.o.payload.value.eq(nxt_b), self.o.payload.nan.eq(nxt_nan)]
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        return m
