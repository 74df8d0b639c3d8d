"""Stream pipeline registers shared by the streaming blocks."""

from amaranth import Signal

__all__ = ["Staged", "stream_stages"]


class Staged:
    """Mixin of a block with ``stages`` pipeline registers (``self._stages``) and as many
    cycles of latency."""

    @property
    def stages(self):
        return self._stages

    @property
    def latency(self):
        """Cycles (enabled clock edges) from an input to its output: ``stages``."""
        return self._stages


def stream_stages(m, *, i, o, payload, stages):
    """Carry ``i.valid`` and ``payload`` (a function of ``i.payload``) to ``o`` through
    ``stages`` register stages with valid/ready handshakes.

    A stage loads when it is empty or its successor takes its item this cycle, so a
    full pipeline moves one item per cycle. Payload registers have no reset and load
    only on a transfer: reset clears the valid bits, which is all the protocol needs.
    """
    valid, value = i.valid, payload
    regs = []
    for n in range(stages):
        regs.append((Signal(name=f"stage{n}_valid"),
                     Signal(len(payload), name=f"stage{n}_payload", reset_less=True)))
    ready = o.ready
    takes = []
    for n, (v, _) in reversed(list(enumerate(regs))):
        take = Signal(name=f"stage{n}_ready")
        m.d.comb += take.eq(~v | ready)
        takes.append(take)
        ready = take
    takes.reverse()
    m.d.comb += i.ready.eq(ready)
    for (v, d), take in zip(regs, takes):
        with m.If(take):
            m.d.sync += v.eq(valid)
        with m.If(take & valid):
            m.d.sync += d.eq(value)
        valid, value = v, d
    m.d.comb += [o.valid.eq(valid), o.payload.eq(value)]
