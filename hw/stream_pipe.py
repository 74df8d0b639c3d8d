"""A free-running pipeline between two ``lib.stream`` ports, with credit flow control.

The element-wise blocks (``Conv1d``, ``GatedRMSNorm``'s output stage, ...)
compute with :class:`hw.fp_ops.FPOps` operations whose clock enable is tied
high: nothing in their datapath stalls. Back-pressure is absorbed by an output
FIFO that has room for everything in flight, and the input takes a beat only
while the FIFO's credit allows it. So ``o.ready`` drives no datapath register
(no clock-enable fan-out into DSP ``CE`` pins) and ``i.ready`` is a compare of
one counter, with no combinational path from ``o.ready``.
"""

from amaranth import C, Signal, Value
from amaranth.lib.fifo import SyncFIFO

from specgen.hw.bits import eq_const
from specgen.hw.fp_arith import add_const, delay_line

__all__ = ["ALWAYS", "credited_output", "credit_depth"]

#: The clock enable of a free-running datapath.
ALWAYS = C(1, 1)


def credit_depth(latency):
    """Output FIFO entries that keep a ``latency``-cycle pipeline at one beat per cycle:
    ``latency + 2`` (a beat's credit returns one cycle after it leaves)."""
    return latency + 2


def credited_output(m, *, i, o, data, latency, name="out"):
    """Carry ``data`` from the pipeline into ``o`` through a credited FIFO.

    Parameters
    ----------
    m : Module
    i, o : stream interfaces
        The block's input (its ``ready`` is driven here) and output (``valid`` and
        ``payload`` driven here).
    data : Value
        The pipeline's result, ``latency`` cycles after the ``i`` beat it belongs to.
    latency : int
        Pipeline cycles from an ``i`` transfer to its ``data``.

    Returns
    -------
    Signal
        ``accept``: an ``i`` transfer this cycle.

    Notes
    -----
    A beat taken in cycle ``t`` is ``o.payload`` from cycle ``t + latency + 1``
    (one cycle in the FIFO). Reset empties the FIFO and the pipeline's valid
    tags; the datapath registers have no reset.
    """
    depth = credit_depth(latency)
    fifo = SyncFIFO(width=len(Value.cast(o.payload)), depth=depth)
    m.submodules[f"{name}_fifo"] = fifo
    accept = Signal(name=f"{name}_accept")
    inflight = Signal(range(depth + 1), name=f"{name}_inflight")
    leave = Signal(name=f"{name}_leave")
    m.d.comb += [
        i.ready.eq(~eq_const(inflight, depth)),
        accept.eq(i.valid & i.ready),
        leave.eq(o.valid & o.ready),
    ]
    with m.If(accept & ~leave):
        m.d.sync += inflight.eq(add_const(inflight, 1, len(inflight)))
    with m.Elif(leave & ~accept):
        m.d.sync += inflight.eq(add_const(inflight, -1, len(inflight)))
    valid = delay_line(m, ALWAYS, accept, latency, f"{name}_tag")
    m.d.comb += [fifo.w_en.eq(valid), fifo.w_data.eq(data),
                 o.valid.eq(fifo.r_rdy), o.payload.eq(fifo.r_data), fifo.r_en.eq(o.ready)]
    return accept
