"""AXI4-Lite transactions from an Amaranth testbench (``ctx``) on a subordinate's ``s_axi``.

The tests' own manager, written from the AMBA AXI4-Lite handshake rules (each channel's
beat moves in a cycle with its valid and ready high; AW and W independently), not from
the register file under test.
"""

__all__ = ["axil_read", "axil_write"]


async def axil_write(ctx, bus, offset, value, *, strb=0xF):
    """One write; asserts an ``OKAY`` response."""
    ctx.set(bus.awaddr, offset)
    ctx.set(bus.wdata, value)
    ctx.set(bus.wstrb, strb)
    ctx.set(bus.awvalid, 1)
    ctx.set(bus.wvalid, 1)
    ctx.set(bus.bready, 1)
    aw = w = False
    while not (aw and w):
        aw_now, w_now = ctx.get(bus.awready), ctx.get(bus.wready)
        await ctx.tick()
        if aw_now:
            aw = True
            ctx.set(bus.awvalid, 0)
        if w_now:
            w = True
            ctx.set(bus.wvalid, 0)
    while not ctx.get(bus.bvalid):
        await ctx.tick()
    assert ctx.get(bus.bresp) == 0, f"write at {offset:#x} answered {ctx.get(bus.bresp)}"
    await ctx.tick()


async def axil_read(ctx, bus, offset):
    """One read; its data (asserts an ``OKAY`` response)."""
    ctx.set(bus.araddr, offset)
    ctx.set(bus.arvalid, 1)
    ctx.set(bus.rready, 1)
    while not ctx.get(bus.arready):
        await ctx.tick()
    await ctx.tick()
    ctx.set(bus.arvalid, 0)
    while not ctx.get(bus.rvalid):
        await ctx.tick()
    data = ctx.get(bus.rdata)
    assert ctx.get(bus.rresp) == 0, f"read at {offset:#x} answered {ctx.get(bus.rresp)}"
    await ctx.tick()
    return data
