"""AXI4-Stream ports and thin adapters to and from :mod:`amaranth.lib.stream`.

The accelerator moves its data over AXI4-Stream (AMBA IHI 0051A) so that IP
Integrator can connect it to DMA engines; inside, every block speaks
``lib.stream`` with a structured payload. :class:`AXI4StreamSignature` is the
bus (``tdata``/``tvalid``/``tready``/``tlast`` and an optional ``tuser``),
:func:`stream_to_axis` and :func:`axis_to_stream` are the combinational glue:
a payload of ``n`` bits travels in the low ``n`` bits of ``tdata``, which is
``n`` rounded up to whole bytes (:func:`tdata_width`); the padding bits are
driven as 0 and ignored on input.
"""

from amaranth import Cat, Const, Shape, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from specgen.golden.validate import check_int

__all__ = ["AXI4StreamSignature", "tdata_width", "payload_width", "stream_to_axis",
           "axis_to_stream"]


def payload_width(shape):
    """Bits of a ``lib.stream`` payload shape (an int, a ``range``, a ``Shape`` or a layout)."""
    if isinstance(shape, int) and not isinstance(shape, bool):
        return check_int("payload_width", "shape", shape, min=1)
    if isinstance(shape, data.Layout):
        return shape.size
    return Shape.cast(shape).width


def tdata_width(shape):
    """``tdata`` bits that carry ``shape``: its width rounded up to whole bytes (≥ 8)."""
    return max(8, -(-payload_width(shape) // 8) * 8)


class AXI4StreamSignature(wiring.Signature):
    """AXI4-Stream, from the transmitter's side (flip it for a receiver).

    Members are the AMBA names in lower case, so a port ``s_axis_w`` appears in
    Verilog as ``s_axis_w__tdata`` and so on (``AxiStreamBus.from_prefix(dut,
    "s_axis_w_")`` in cocotbext-axi). ``tkeep``, ``tstrb``, ``tid`` and
    ``tdest`` are not used: every beat carries whole words.

    Parameters
    ----------
    data_width : int
        ``tdata`` bits: a positive multiple of 8, at most 4096.
    user_width : int
        ``tuser`` bits, 0 … 1024 (0: no ``tuser`` member).

    Attributes
    ----------
    tdata : Out(data_width)
    tvalid : Out(1)
    tready : In(1)
        A beat moves in a cycle with ``tvalid`` and ``tready`` both high.
    tlast : Out(1)
        Ends a packet (what a packet is, is the port's documented meaning).
    tuser : Out(user_width)
        Sideband of the beat (only when ``user_width > 0``).
    """

    def __init__(self, *, data_width, user_width=0):
        self._data_width = check_int("AXI4StreamSignature", "data_width", data_width,
                                     min=8, max=4096)
        if data_width % 8:
            raise ValueError(f"AXI4StreamSignature.data_width must be a multiple of 8 "
                             f"(whole bytes), not {data_width!r}")
        self._user_width = check_int("AXI4StreamSignature", "user_width", user_width,
                                     min=0, max=1024)
        members = {"tdata": Out(data_width), "tvalid": Out(1), "tready": In(1),
                   "tlast": Out(1)}
        if user_width:
            members["tuser"] = Out(user_width)
        super().__init__(members)

    @property
    def data_width(self):
        return self._data_width

    @property
    def user_width(self):
        return self._user_width

    def __eq__(self, other):
        return (isinstance(other, AXI4StreamSignature) and other.data_width == self.data_width
                and other.user_width == self.user_width)

    def __hash__(self):
        return hash((AXI4StreamSignature, self._data_width, self._user_width))

    def __repr__(self):
        return (f"AXI4StreamSignature(data_width={self._data_width}, "
                f"user_width={self._user_width})")


def _check_pair(func, axis, strm):
    sig = getattr(axis, "signature", None)
    if not isinstance(sig, AXI4StreamSignature):
        raise TypeError(f"{func}: axis must be an AXI4StreamSignature interface, not {axis!r}")
    ssig = getattr(strm, "signature", None)
    if not isinstance(ssig, stream.Signature):
        raise TypeError(f"{func}: stream must be a lib.stream interface, not {strm!r}")
    width = len(Value.cast(strm.payload))
    if width > sig.data_width:
        raise ValueError(f"{func}: a payload of {width} bits does not fit tdata of "
                         f"{sig.data_width} bits; use data_width >= {tdata_width(width)}")
    return width


def stream_to_axis(m, strm, axis, *, last=0, user=None):
    """Drive transmitter ``axis`` from ``lib.stream`` source ``strm`` (combinational).

    Parameters
    ----------
    m : Module
    strm : lib.stream interface (the producer's ``Out`` side)
        Its payload goes to the low bits of ``tdata``; the rest are 0.
    axis : AXI4StreamSignature interface, driven (a component's ``Out`` port)
    last, user : Value or int
        ``tlast`` and ``tuser`` of every beat (``user`` only if ``axis`` has ``tuser``).

    Raises
    ------
    ValueError
        If the payload is wider than ``tdata``.
    """
    width = _check_pair("stream_to_axis", axis, strm)
    pad = axis.signature.data_width - width
    tdata = Cat(Value.cast(strm.payload), Const(0, pad)) if pad else Value.cast(strm.payload)
    m.d.comb += [axis.tdata.eq(tdata), axis.tvalid.eq(strm.valid), strm.ready.eq(axis.tready),
                 axis.tlast.eq(last)]
    if axis.signature.user_width:
        m.d.comb += axis.tuser.eq(0 if user is None else user)
    elif user is not None:
        raise ValueError("stream_to_axis: user given, but the AXI4-Stream port has no tuser")


def axis_to_stream(m, axis, strm, *, valid=None, ready=None):
    """Drive ``lib.stream`` sink ``strm`` from receiver ``axis`` (combinational).

    Parameters
    ----------
    m : Module
    axis : AXI4StreamSignature interface, received (a component's ``In`` port)
    strm : lib.stream interface (the consumer's ``In`` side)
        Takes the low bits of ``tdata``; the padding bits are ignored.
    valid, ready : Value, optional
        Gates: the beat is offered only while ``valid`` and ``tready`` is
        high only while ``ready`` (both default to 1), so a caller can hold a
        stream without a buffer.

    Raises
    ------
    ValueError
        If the payload is wider than ``tdata``.
    """
    width = _check_pair("axis_to_stream", axis, strm)
    gate_v = 1 if valid is None else valid
    gate_r = 1 if ready is None else ready
    m.d.comb += [Value.cast(strm.payload).eq(axis.tdata[:width]),
                 strm.valid.eq(axis.tvalid & gate_v),
                 axis.tready.eq(strm.ready & gate_r)]

