"""hw.hierarchy: the emitted Verilog does not depend on the interpreter's string hashing."""

import json
import os
import subprocess
import sys

from specgen.hw.hierarchy import stable_headers

# Converts a two-domain block (the weight stream: four AXI read masters in the memory
# clock) and prints the digests of Amaranth's raw text and of the emitted one.
SCRIPT = """
import hashlib, json, warnings
warnings.simplefilter("ignore")
from amaranth.back import verilog
from specgen.golden.config import preset
from specgen.hw import hierarchy
from specgen.hw.weight_stream import WeightStream
ws = WeightStream.from_config(preset("sim"))
text = hierarchy.convert(ws, name=ws.module_name)[0]
raw = verilog.convert(WeightStream.from_config(preset("sim")), name="top", emit_src=False)
print(json.dumps([hashlib.sha256(t.encode()).hexdigest() for t in (raw, text)]))
"""


def digests(seed):
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=os.environ | {"PYTHONHASHSEED": str(seed)})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_emission_is_the_same_under_any_string_hashing():
    (raw0, text0), (raw2, text2) = digests(0), digests(2)
    # Under these two seeds Amaranth orders the clock-domain ports differently ...
    assert raw0 != raw2
    # ... and the emitted text is the same.
    assert text0 == text2


def test_stable_headers_orders_ports_as_declared():
    text = ("module a(y, clk, x);\n  input clk;\n  wire clk;\n  input [3:0] x;\n"
            "  output reg y;\nendmodule\n"
            "module \\a.b (\\p$1 , q);\n  input q;\n  output [1:0] \\p$1 ;\nendmodule\n")
    assert stable_headers(text) == (
        "module a(clk, x, y);\n  input clk;\n  wire clk;\n  input [3:0] x;\n"
        "  output reg y;\nendmodule\n"
        "module \\a.b (q, \\p$1 );\n  input q;\n  output [1:0] \\p$1 ;\nendmodule\n")
    # A header whose ports the declarations do not account for is left alone.
    odd = "module c(x, z);\n  input x;\nendmodule\n"
    assert stable_headers(odd) == odd


def test_silence_marks_every_block_a_component_holds():
    """``silence`` (a block built for its layouts only, as the RTL host's copy of the
    decoder core) marks every block the component holds, through lists, tuples and dicts:
    found here by the garbage collector's referents, not by ``silence``'s own walk. A
    core the host never elaborates made Amaranth warn about each of its ~60 blocks at the
    end of every ``specgen generate --engine rtl``."""
    import gc

    from amaranth.hdl import Elaboratable

    from specgen.gen.runtime.runtime import rtl_design
    from specgen.golden.config import preset
    from specgen.golden.lm import lm_preset
    from specgen.hw.decoder import DecoderCore
    from specgen.hw.hierarchy import silence

    def blocks(top):
        found, seen, todo = [], set(), [top]
        while todo:
            obj = todo.pop()
            if id(obj) in seen or not isinstance(obj, (Elaboratable, list, tuple, dict)):
                continue
            seen.add(id(obj))
            if isinstance(obj, Elaboratable):
                found.append(obj)
                todo.extend(gc.get_referents(vars(obj)))
            else:
                todo.extend(gc.get_referents(obj))
        return found

    model = lm_preset("micro")
    cores = [DecoderCore(config=rtl_design(preset("sim"), model), model=model, max_records=64,
                         addr_width=20, max_nodes=3) for _ in range(2)]
    loud = blocks(cores[0])
    # (a Conv1d silences its own table, built for its latency)
    assert sum(not b._MustUse__silence for b in loud) > 40
    assert silence(cores[1]) is cores[1]
    quiet = blocks(cores[1])
    assert len(quiet) == len(loud) and all(b._MustUse__silence for b in quiet)
    silence(cores[0])


def test_a_duplicate_block_and_what_it_holds_are_silenced():
    """``submodule``: a block whose module the library already holds is not elaborated,
    nor is anything it holds; both are silenced (a second lane's Conv1d and its SiLU
    table), while the first copy, elaborated, is marked used and its table is not
    silenced (a block it forgot to elaborate would still warn)."""
    from specgen.golden.config import preset
    from specgen.hw.conv1d import Conv1d
    from specgen.hw.hierarchy import convert
    from specgen.hw.stream_engine import Field, Lanes

    cfg = preset("sim")
    lanes = Lanes(blocks=[Conv1d.from_config(cfg) for _ in range(2)],
                  reads=(Field("window", 96), Field("x", 32), Field("taps", 128),
                         Field("bias", 32)), writes=(Field("y", 32), Field("new_window", 96)))
    convert(lanes, name=lanes.module_name)
    first, second = lanes._blocks
    assert first._MustUse__used and not first._MustUse__silence
    assert first._silu._MustUse__used and not first._silu._MustUse__silence
    assert second._MustUse__silence and second._silu._MustUse__silence
