"""A Vivado-side check of the DSPFP32 primitive against the golden contract.

The simulators in this project (Verilator, Icarus) run the behavioural model of
:class:`hw.dsp58.DSPFP32`; Vivado builds the AMD primitive instead. Whether the
two agree bit for bit can only be checked where AMD's simulation library is:
this module writes, next to the primitive sources, golden vectors from
:mod:`golden.dsp` and a SystemVerilog bench that runs them through the
primitive-backed module under Vivado's simulator (xsim). Its README holds the
three commands.
"""

import numpy as np

from specgen.golden import dsp
from specgen.golden.fp import FP16, FP32
from specgen.hw.dsp58 import DSPFP32, OP_ACC_C, OP_START

__all__ = ["dsp_vectors", "write_dsp_check"]

_A16 = np.array([0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF,
                 0x7C00, 0xFC00, 0x7E00], dtype=np.uint16)
_B32 = np.array([0x0000_0000, 0x8000_0000, 0x0000_0001, 0x007F_FFFF, 0x0080_0000, 0x3F80_0000,
                 0xBF80_0000, 0x7F7F_FFFF, 0x7F80_0000, 0xFF80_0000, 0x7FC0_0000],
                dtype=np.uint32)


def dsp_vectors(*, seed=0, n=2000):
    """``(a, b, c, fpopmode, p)`` arrays: random and special operands, golden ``P``.

    ``P = M + (−0)`` for :data:`hw.dsp58.OP_START`, ``P = M + C`` for
    :data:`hw.dsp58.OP_ACC_C`, with ``M = A × B`` (``A`` binary16, ``B`` binary32).
    """
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n).astype(np.float16).view(np.uint16)
    b = (rng.standard_normal(n) * np.exp2(rng.integers(-140, 120, n))).astype(np.float32).view(np.uint32)
    c = (rng.standard_normal(n) * np.exp2(rng.integers(-140, 120, n))).astype(np.float32).view(np.uint32)
    # Specials in every position, and sums that cancel into the flush range.
    k = len(_A16) * len(_B32)
    a[:k] = np.repeat(_A16, len(_B32))
    b[:k] = np.tile(_B32, len(_A16))
    m, _, _ = dsp.mul(a, b, fmt_a=FP16, fmt_b=FP32)
    near = rng.random(n) < 0.2
    c = np.where(near, m ^ np.uint32(0x8000_0000) ^ rng.integers(0, 4, n).astype(np.uint32), c)
    op = np.where(rng.random(n) < 0.3, OP_START, OP_ACC_C).astype(np.uint8)
    addend = np.where(op == OP_START, dsp.NEG_ZERO, c).astype(np.uint32)
    p, _, _ = dsp.add(m, addend)
    return a, b.astype(np.uint32), c.astype(np.uint32), op, p


_TB = """\
// Runs golden vectors (golden/dsp.py) through {module}, whose body is AMD's
// DSPFP32 primitive. One vector every {period} cycles: A, B and FPOPMODE in
// cycle 0, C and CEFPA in cycle {adder}, P compared after cycle {latency}.
`timescale 1ns/1ps
module tb_dspfp32;
  reg clk = 1'b0, rst = 1'b1;
  always #2 clk = ~clk;
  reg [15:0] a = 0; reg [31:0] b = 0, c = 0; reg [7:0] op = 0;
  reg cea = 0, ceb = 0, cefpa = 0;
  wire [31:0] p;
  {module} dut (.clk(clk), .rst(rst), .a(a), .b(b), .cea(cea), .ceb(ceb),
                .fpopmode(op[6:0]), .c(c), .cefpa(cefpa), .p(p));
  reg [119:0] vec [0:{count}];
  integer i, j, errors;
  initial begin
    $readmemh("vectors.hex", vec);
    errors = 0;
    repeat (4) @(posedge clk);
    rst <= 1'b0;
    for (i = 0; i < {n}; i = i + 1) begin
      {{a, b, c, op}} <= vec[i][119:32];
      cea <= 1'b1; ceb <= 1'b1;
      @(posedge clk); cea <= 1'b0; ceb <= 1'b0;
      for (j = 1; j < {adder}; j = j + 1) @(posedge clk);
      cefpa <= 1'b1;
      @(posedge clk); cefpa <= 1'b0;
      #1;
      if (p !== vec[i][31:0]) begin
        errors = errors + 1;
        if (errors <= 10)
          $display("MISMATCH %0d: a=%h b=%h c=%h op=%h: DSPFP32 %h, golden %h",
                   i, vec[i][119:104], vec[i][103:72], vec[i][71:40], vec[i][39:32], p, vec[i][31:0]);
      end
    end
    if (errors == 0) $display("PASS: %0d vectors, DSPFP32 equals golden/dsp.py", {n});
    else $display("FAIL: %0d of %0d vectors differ", errors, {n});
    $finish;
  end
endmodule
"""

_README = """\
# DSPFP32 primitive against the golden contract (needs Vivado)

`tb_dspfp32.sv` runs `vectors.hex` ({n} operand sets from `golden/dsp.py`, seed
{seed}: specials, subnormals, overflow and sums that cancel into the flush
range) through `{module}` as Vivado builds it, the AMD `DSPFP32` primitive
(`../{source}`). From this folder:

```
xvlog -sv ../{source} tb_dspfp32.sv
xelab -L unisims_ver tb_dspfp32 glbl -s tb_dspfp32 -debug off
xsim tb_dspfp32 -R
```

It prints `PASS` or the first ten mismatches. The project's own simulators run
the behavioural model of the same module, which matches `golden/dsp.py` bit for
bit; a mismatch here means the primitive and the contract differ (for example in
the NaN sign or where a flush is decided), and golden is what must change.
(`glbl` comes with Vivado: `$XILINX_VIVADO/data/verilog/src/glbl.v`; add it to
the `xvlog` line if your install does not compile it by default.)
"""


def write_dsp_check(folder, *, source, seed=0, n=2000):
    """Write ``vectors.hex``, ``tb_dspfp32.sv`` and ``README.md`` into ``folder``.

    ``source`` is the primitive-backed Verilog, relative to ``folder``'s parent.
    """
    a, b, c, op, p = dsp_vectors(seed=seed, n=n)
    lines = [f"{int(x):04x}{int(y):08x}{int(z):08x}{int(o):02x}{int(r):08x}"
             for x, y, z, o, r in zip(a, b, c, op, p)]
    # a 16 | b 32 | c 32 | fpopmode 8 (top bit 0) | p 32 bits: 120 bits a line.
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vectors.hex").write_text("\n".join(lines) + "\n")
    module = DSPFP32(a_fmt=FP16, b_fmt=FP32)
    module._MustUse__silence = True
    kw = dict(module=module.module_name, n=n, count=n - 1, period=DSPFP32.latency + 1,
              adder=DSPFP32.adder_stage, latency=DSPFP32.latency, seed=seed, source=source)
    (folder / "tb_dspfp32.sv").write_text(_TB.format(**kw))
    (folder / "README.md").write_text(_README.format(**kw))
    return folder
