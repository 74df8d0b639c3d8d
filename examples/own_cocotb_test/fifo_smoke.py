"""A user's own cocotb test of an emitted RingFIFO (``specgen verilog --only ring_fifo``).

Plain cocotb 2.x: a clock, a synchronous reset, three words in, three words out in
order. Amaranth names a stream's fields ``<port>__<field>`` (``w__payload``).
"""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge


@cocotb.test()
async def three_words_in_order(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.w__valid.value = 0
    dut.r__ready.value = 0
    dut.w__payload.value = 0
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    words = [0x3, 0xA, 0x5]
    for word in words:
        dut.w__valid.value = 1
        dut.w__payload.value = word
        await RisingEdge(dut.clk)
    dut.w__valid.value = 0
    await RisingEdge(dut.clk)
    assert int(dut.level.value) == len(words)
    got = []
    dut.r__ready.value = 1
    while len(got) < len(words):
        await ReadOnly()
        if int(dut.r__valid.value):
            got.append(int(dut.r__payload.value))
        await RisingEdge(dut.clk)
    assert got == words, f"read {got}, wrote {words}"
