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

from specgen.golden.config import VectorConfig
from specgen.golden.mamba2 import MAMBA2_VOCAB
from specgen.golden.nonlinear import CANONICAL_NAN32
from specgen.golden.validate import check_choice, check_int
from specgen.hw.bits import eq_const, index_width
from specgen.hw.fp_arith import add_const

__all__ = ["Argmax", "argmax_out_layout"]


def argmax_out_layout(size):
    """Result beat: ``index`` (``⌈log2 size⌉`` bits), ``value`` (the logit's word), ``nan``."""
    return data.StructLayout({"index": index_width(size), "value": 32, "nan": 1})


class Argmax(wiring.Component):
    """``argmax_hw`` of ``size``-logit vectors on valid/ready streams, ``lanes`` a beat.

    Parameters
    ----------
    size : int
        Logits per vector (the vocabulary; Mamba2: 50,288), >= 2.
    lanes : int
        Logits a beat: 1, 2, 4, 8 or 16, dividing ``size``, with at least
        :attr:`latency` beats a vector (so no vector's last beat reaches the result
        register while the previous result waits). A beat's lanes are reduced by a
        registered tree of compare-and-selects (the greater key; on a tie the lower
        lane, the lower index), then compared with the running best as one logit is:
        the result is ``argmax_hw``'s whatever ``lanes`` is.

    Attributes
    ----------
    i : In(stream.Signature(32 · lanes))
        The logits in index order, lane ``j`` in bits ``32j …``, ``size / lanes`` beats
        per vector. ``i.ready`` is low only while a result waits on ``o`` (a registered
        condition).
    o : Out(stream.Signature(argmax_out_layout(size)))
        One result per vector, offered :attr:`latency` cycles after the vector's last
        beat until taken.

    Notes
    -----
    At full rate a vector takes ``size / lanes + 1`` cycles (:attr:`vector_cycles`):
    the input holds for the one cycle its result is offered. Synchronous reset
    abandons the vector in flight and any result not yet taken.
    """

    def __init__(self, *, size=MAMBA2_VOCAB, lanes=1):
        self._n = check_int("Argmax", "size", size, min=2)
        # The vector stages' lane counts (powers of two: a beat is a whole element).
        self._lanes = check_choice("Argmax", "lanes", lanes, VectorConfig.LANES)
        if size % lanes or size // lanes < self.latency:
            raise ValueError(f"Argmax.lanes ({lanes}) must divide size ({size}) into at least "
                             f"{self.latency} beats (the pipeline's depth)")
        super().__init__({"i": In(stream.Signature(32 * lanes)),
                          "o": Out(stream.Signature(argmax_out_layout(self._n)))})

    @classmethod
    def from_config(cls, config, *, size):
        """The argmax of a :class:`golden.config.Config`'s decoder core:
        ``config.stage_lanes("argmax")`` logits a beat."""
        return cls(size=size, lanes=config.stage_lanes("argmax"))

    @property
    def size(self):
        return self._n

    @property
    def lanes(self):
        return self._lanes

    @property
    def latency(self):
        """Cycles from a vector's last beat transfer to its result on ``o``: the key
        register, one register a level of the lanes' tree (``log2 lanes``) and the
        compare-and-select register."""
        return 2 + (self._lanes - 1).bit_length()

    @property
    def vector_cycles(self):
        """Cycles per vector at full rate: ``size / lanes`` beats and the result's cycle."""
        return self._n // self._lanes + 1

    @property
    def module_name(self):
        return f"Argmax_n{self._n}" + (f"_l{self._lanes}" if self._lanes > 1 else "")

    def elaborate(self, platform):
        m = Module()
        n, L, iw = self._n, self._lanes, index_width(self._n)
        lw = (L - 1).bit_length()                   # index bits of a lane
        beats = n // L
        bw = index_width(beats) if beats > 1 else 1
        m.d.comb += self.i.ready.eq(~self.o.valid)
        accept = self.i.valid & self.i.ready
        cnt = Signal(bw, name="beat")
        last = eq_const(cnt, beats - 1)
        with m.If(accept):
            m.d.sync += cnt.eq(Mux(last, 0, add_const(cnt, 1, bw)))

        # -- stage 1: each lane's total-order key (−0 and +0 one key) and NaN flag
        lanes, nans = [], []
        for j in range(L):
            x = self.i.payload[32 * j:32 * (j + 1)]
            nan = x[23:31].all() & x[:23].any()
            nans.append(nan)
            neg = x[31] & x[:31].any()
            key = Mux(neg, Cat(~x[:31], C(0, 1)), Cat(x[:31], C(1, 1)))
            lane = {"key": Signal(32, name=f"key1_{j}", reset_less=True),
                    "bits": Signal(32, name=f"bits1_{j}", reset_less=True),
                    "lane": C(j, max(lw, 1)),
                    "ok": Signal(name=f"ok1_{j}", reset_less=True)}
            with m.If(accept):
                m.d.sync += [lane["key"].eq(key), lane["bits"].eq(x), lane["ok"].eq(~nan)]
            lanes.append(lane)
        f1 = Signal(4, name="flags1")                    # valid, first, last, a NaN seen
        m.d.sync += f1.eq(Cat(accept, eq_const(cnt, 0), last, Cat(*nans).any()))
        c1 = Signal(bw, name="beat1", reset_less=True)
        with m.If(accept):
            m.d.sync += c1.eq(cnt)
        flags, beat = f1, c1

        # -- the lanes' tree: a registered level of compare-and-selects per halving,
        # the lower lane first (it wins a tie: the lower index)
        level = 0
        while len(lanes) > 1:
            level += 1
            nxt = []
            for k in range(0, len(lanes), 2):
                a, b = lanes[k], lanes[k + 1]
                pick_a = a["ok"] & (~b["ok"] | (a["key"] >= b["key"]))
                w = {"key": Signal(32, name=f"key{level + 1}_{k // 2}", reset_less=True),
                     "bits": Signal(32, name=f"bits{level + 1}_{k // 2}", reset_less=True),
                     "lane": Signal(max(lw, 1), name=f"lane{level + 1}_{k // 2}",
                                    reset_less=True),
                     "ok": Signal(name=f"ok{level + 1}_{k // 2}", reset_less=True)}
                m.d.sync += [w["key"].eq(Mux(pick_a, a["key"], b["key"])),
                             w["bits"].eq(Mux(pick_a, a["bits"], b["bits"])),
                             w["lane"].eq(Mux(pick_a, a["lane"], b["lane"])),
                             w["ok"].eq(a["ok"] | b["ok"])]
                nxt.append(w)
            lanes = nxt
            f_n = Signal(4, name=f"flags{level + 1}")
            c_n = Signal(bw, name=f"beat{level + 1}", reset_less=True)
            m.d.sync += [f_n.eq(flags), c_n.eq(beat)]
            flags, beat = f_n, c_n
        top = lanes[0]
        valid1, first1, last1, nan1 = flags[0], flags[1], flags[2], flags[3]
        index1 = Cat(top["lane"][:lw], beat)[:iw] if lw else beat[:iw]
        if len(index1) < iw:
            index1 = Cat(index1, C(0, iw - len(index1)))

        # -- last stage: compare with the running best and keep the greater (first on ties)
        have = Signal(name="have_best")
        best_k = Signal(32, name="best_key", reset_less=True)
        best_b = Signal(32, name="best_bits", reset_less=True)
        best_i = Signal(iw, name="best_index", reset_less=True)
        seen = Signal(name="nan_seen")
        cur_have = have & ~first1
        take = top["ok"] & (~cur_have | (top["key"] > best_k))
        nxt_b = Mux(take, top["bits"], Mux(cur_have, best_b, int(CANONICAL_NAN32)))
        nxt_i = Mux(take, index1, Mux(cur_have, best_i, 0))
        nxt_nan = (seen & ~first1) | nan1
        with m.If(valid1):
            m.d.sync += [have.eq(cur_have | top["ok"]), seen.eq(nxt_nan), best_b.eq(nxt_b),
                         best_i.eq(nxt_i), best_k.eq(Mux(take, top["key"], best_k))]
        with m.If(valid1 & last1):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.index.eq(nxt_i),
                         self.o.payload.value.eq(nxt_b), self.o.payload.nan.eq(nxt_nan)]
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        return m
