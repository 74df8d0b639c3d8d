# amaranth: UnusedElaboratable=no
"""``StreamEngine``: the decoder's vector stages (conv1d, norms, residual, argmax) with their
operands and results in memory, against the golden models."""

import dataclasses

import pytest
from amaranth.back import verilog
from specgen.golden.config import VectorConfig, preset
from specgen.golden.fp import FP16, FP32
from specgen.hw.conv1d import Conv1d
from specgen.hw.residual import Residual
from specgen.hw.stream_engine import (
    Field,
    Lanes,
    StreamEngine,
    StreamUpsizer,
    acceptance_engine,
    argmax_engine,
    conv1d_engine,
    conv1d_plane_order,
    copy_engine,
    element_bits,
    norm_engine,
    residual_engine,
)
from specgen.sim.runner import BenchFailure, run_bench

SIM = preset("sim")
#: The sim preset with the boards' SSM contract: the DSPFP32 vector stages of VCK190/VHK158.
DSP = dataclasses.replace(SIM, ssm=dataclasses.replace(SIM.ssm, contract="dspfp32"))


def _params(eng, config, kind, **kw):
    blk = getattr(eng.block, "lane_block", eng.block)
    p = {"kind": kind, "reads": [[f.name, f.bits, f.parts] for f in eng.reads],
         "writes": [[f.name, f.bits, f.parts] for f in eng.writes], "read_bytes": eng.read_bytes,
         "write_bytes": eng.write_bytes, "pack": eng.pack, "max_vectors": eng.max_vectors,
         "max_elements": eng.max_elements, "fixed_elements": kind in ("norm", "argmax"),
         "lanes": eng.lanes,
         "addr_width": eng.addr_width, "sync_mhz": config.board.clock_mhz,
         "mem_mhz": config.board.memory_clock_mhz, "latency": 24, "stall": 0.3,
         "contract": config.ssm.contract, "silu_lut": dataclasses.asdict(config.ssm.silu_lut),
         "runs": 4, "cut_run": 1}
    if kind == "conv1d":
        p["d_conv"] = blk.d_conv
    if kind == "norm":
        p.update(gate=blk.gate, out16=blk.out_fmt is FP16, eps=blk._eps,
                 rsqrt_lut=dataclasses.asdict(blk._rsqrt_spec))
    p.update(kw)
    return p


def _run(eng, config, kind, seed, **kw):
    run_bench(eng, name=eng.module_name, module="specgen.sim.stream_engine", testcase="runs",
              params=_params(eng, config, kind, **kw), seed=seed)


@pytest.mark.sim
def test_residual_engine(seed):
    """Residual adds of up to 4 vectors of up to 48 elements, every layout, a reset in
    mid-write."""
    eng = residual_engine(DSP, max_vectors=4, max_elements=48, addr_width=20)
    _run(eng, DSP, "residual", seed)


@pytest.mark.sim
def test_conv1d_engine(seed):
    """The conv1d of up to 3 nodes of up to 40 channels: window, x, taps and bias on four
    read ports (taps and bias shared by the nodes as often as not), y and the new window
    forked to two write ports."""
    eng = conv1d_engine(DSP, max_vectors=3, max_elements=40, addr_width=20)
    _run(eng, DSP, "conv1d", seed)


@pytest.mark.sim
def test_conv1d_engine_in_planes(seed):
    """Four channels a beat on 256-bit HBM ports (VHK158's): window, taps and new window
    each split over two ports (``Config.conv1d_parts``), every part a plane of its own in
    memory, against the same golden beats; a reset in mid-write."""
    hbm = DSP.replace(vector=VectorConfig(lanes=4),
                      board=dataclasses.replace(DSP.board, memory="HBM", memory_port_bits=256))
    eng = conv1d_engine(hbm, max_vectors=3, max_elements=10, addr_width=20)
    assert [(f.name, f.parts) for f in eng.reads] == [("window", 2), ("x", 1), ("taps", 2),
                                                      ("bias", 1)]
    assert [n for n in eng.signature.members if n.startswith("m_axi_")] == [
        "m_axi_window0", "m_axi_window1", "m_axi_x", "m_axi_taps0", "m_axi_taps1",
        "m_axi_bias", "m_axi_y", "m_axi_new_window0", "m_axi_new_window1"]
    assert "window_pstride" in eng.descriptor_layout.members
    _run(eng, hbm, "conv1d", seed)


@pytest.mark.sim
def test_norm_engine_binary16(seed):
    """The layer's gated norm (16 elements, "ieee") writing binary16 packed two a word,
    its weights shared by every node."""
    eng = norm_engine(SIM, size=16, gate=True, out_fmt=FP16, max_vectors=4, addr_width=20)
    _run(eng, SIM, "norm", seed)


@pytest.mark.sim
def test_argmax_engine(seed):
    """The greedy argmax of up to 4 vectors of 40 logits, two a beat (the preset's
    ``vector.lanes``): one 64-bit result a vector."""
    eng = argmax_engine(DSP, size=40, max_vectors=4, addr_width=20)
    _run(eng, DSP, "argmax", seed)


@pytest.mark.sim
def test_acceptance_engine(seed):
    """Greedy acceptance of up to 3 random trees of up to 12 nodes a descriptor: the tree
    table and the argmax beats (noise in their other fields) in, the path out."""
    eng = acceptance_engine(SIM, max_nodes=12, vocab=40, max_vectors=3, addr_width=20)
    _run(eng, SIM, "accept", seed, vocab=40)


@pytest.mark.sim
def test_copy_engine(seed):
    """Copies of up to 3 vectors of up to 40 words between every pair of layouts (the
    in_proj records' chunks into one vector a node), IEEE specials kept bit for bit."""
    eng = copy_engine(SIM, max_vectors=3, max_elements=40, addr_width=20)
    _run(eng, SIM, "copy", seed)


@pytest.mark.sim
def test_stream_engine_bench_can_fail(seed):
    """One flipped bit of one expected result makes the bench fail."""
    eng = residual_engine(DSP, max_vectors=4, max_elements=48, addr_width=20)
    with pytest.raises(BenchFailure, match="in memory, golden"):
        _run(eng, DSP, "residual", seed, runs=1, cut_run=None, corrupt=True)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_stream_engine_ports_and_errors():
    one = SIM.replace(vector=VectorConfig(lanes=1))
    conv = conv1d_engine(one, max_vectors=15, max_elements=5376)
    assert conv.read_bytes == {"window": 16, "x": 4, "taps": 16, "bias": 4} and conv.lanes == 1
    assert conv.write_bytes == {"y": 4, "new_window": 16} and conv.pack == {"y": 1,
                                                                            "new_window": 1}
    norm = norm_engine(one, size=64, gate=False, out_fmt=FP16, max_vectors=15)
    assert [f.name for f in norm.reads] == ["y", "w"] and norm.pack == {"out": 2}
    assert norm_engine(one, size=64, gate=True, out_fmt=FP32, max_vectors=2).pack == {"out": 1}
    # The sim preset's 2 lanes: every operand two elements wide, a conv window's lanes in
    # 128-bit elements; the binary16 norm output one 32-bit word a beat, 32 beats a vector.
    conv2 = conv1d_engine(SIM, max_vectors=15, max_elements=5376)
    assert conv2.read_bytes == {"window": 32, "x": 8, "taps": 32, "bias": 8}
    assert conv2.write_bytes == {"y": 8, "new_window": 32} and conv2.lanes == 2
    norm2 = norm_engine(SIM, size=64, gate=False, out_fmt=FP16, max_vectors=15)
    assert norm2.pack == {"out": 1} and norm2.max_elements == 32 and norm2.lanes == 2
    assert copy_engine(SIM, max_vectors=1, max_elements=4).read_bytes == {"x": 8}
    # VHK158: 4 lanes; a 256-bit HBM port holds two conv windows, so the conv1d's
    # windows, taps and new windows take two ports each; the acceptance engine stays at one.
    big = preset("vhk158")
    assert [big.stage_lanes(s) for s in ("conv1d", "norm", "residual", "copy", "argmax",
                                         "accept")] == [4, 4, 4, 4, 4, 1]
    assert [preset(b).conv1d_parts() for b in ("sim", "vck190", "vhk158")] == [1, 1, 2]
    conv4 = conv1d_engine(big, max_vectors=1, max_elements=1344)
    assert conv4.read_bytes == {"window0": 32, "window1": 32, "x": 16, "taps0": 32,
                                "taps1": 32, "bias": 16}
    assert conv4.write_bytes == {"y": 16, "new_window0": 32, "new_window1": 32}
    assert [int(c) for c in conv1d_plane_order(16, lanes=4, parts=2)] == [
        0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15]
    assert [int(c) for c in conv1d_plane_order(8, lanes=2, parts=1)] == list(range(8))
    with pytest.raises(ValueError, match=r"^conv1d_plane_order: parts \(3\) must divide lanes "
                                         r"\(4\) and lanes the channels \(16\)$"):
        conv1d_plane_order(16, lanes=4, parts=3)
    with pytest.raises(ValueError, match=r"^Config.vector.lanes must divide linear.cols \(84: "
                                         r".*\), so one of 1, 2, 4, not 8$"):
        big.replace(vector=VectorConfig(lanes=8))
    with pytest.raises(ValueError, match=r"^VectorConfig.lanes must be one of 1, 2, 4, 8, 16, "
                                         r"not 3$"):
        VectorConfig(lanes=3)
    with pytest.raises(ValueError, match=r"^Lanes.blocks must be at least 2 identical blocks"):
        Lanes(blocks=[Residual.from_config(SIM)], reads=[Field("h", 32), Field("d", 32)],
              writes=[Field("out", 32)])
    with pytest.raises(ValueError, match=r"^Lanes.blocks must be at least 2 identical blocks"):
        Lanes(blocks=[Residual.from_config(SIM), Residual.from_config(DSP)],
              reads=[Field("h", 32), Field("d", 32)], writes=[Field("out", 32)])
    am = argmax_engine(SIM, size=50288, max_vectors=15)
    assert am.write_bytes == {"result": 8} and am.reduce
    assert (am.lanes, am.max_elements, am.read_bytes) == (2, 50288 // 2, {"logits": 8})
    assert [element_bits(b) for b in (16, 32, 49, 96, 128)] == [16, 32, 64, 128, 128]
    members = conv.signature.members
    assert [n for n in members if n.startswith("m_axi_")] == [
        "m_axi_window", "m_axi_x", "m_axi_taps", "m_axi_bias", "m_axi_y", "m_axi_new_window"]
    blk = Residual.from_config(SIM)
    with pytest.raises(ValueError, match=r"StreamEngine.reads must sum to the block's input "
                                         r"beat \(64 bits\), not 32"):
        StreamEngine(block=blk, config=SIM, reads=[Field("h", 32)], writes=[Field("o", 32)],
                     max_vectors=1, max_elements=4)
    with pytest.raises(ValueError, match=r"StreamEngine.writes must sum to at most the block's "
                                         r"output beat \(32 bits\), not 64"):
        StreamEngine(block=blk, config=SIM, reads=[Field("h", 32), Field("d", 32)],
                     writes=[Field("o", 64)], max_vectors=1, max_elements=4)
    with pytest.raises(ValueError, match="distinct names"):
        StreamEngine(block=blk, config=SIM, reads=[Field("h", 32), Field("h", 32)],
                     writes=[Field("o", 32)], max_vectors=1, max_elements=4)
    with pytest.raises(ValueError, match=r"StreamEngine.reads.h.bits must be at least 32"):
        StreamEngine(block=blk, config=SIM, reads=[Field("h", 16), Field("d", 48)],
                     writes=[Field("o", 32)], max_vectors=1, max_elements=4)
    big = preset("vhk158")
    with pytest.raises(ValueError, match=r"StreamEngine.reads.beat.bits must fit a port of 32, "
                                         r"64, 128, 256 bits on 'vhk158' \(HBM\), not 288"):
        StreamEngine(block=Conv1d.from_config(big), config=big, reads=[Field("beat", 288)],
                     writes=[Field("y", 32)], max_vectors=1, max_elements=4)
    with pytest.raises(TypeError, match="StreamEngine.block must be a component with streams"):
        StreamEngine(block=object(), config=SIM, reads=[Field("h", 32)], writes=[Field("o", 32)],
                     max_vectors=1, max_elements=4)
    with pytest.raises(TypeError, match="StreamEngine.config must be a golden.config.Config"):
        StreamEngine(block=blk, config=SIM.ssm, reads=[], writes=[], max_vectors=1,
                     max_elements=1)
    with pytest.raises(ValueError, match="StreamEngine.max_vectors"):
        residual_engine(SIM, max_vectors=0, max_elements=4)
    with pytest.raises(ValueError, match="StreamUpsizer.out_width must be a multiple"):
        StreamUpsizer(in_width=16, out_width=40)


@pytest.mark.slow
def test_stream_engine_emits_for_the_boards():
    """Every stage at VHK158's sizes elaborates to Verilog (the conv1d's four 128-bit
    windows a beat on two 256-bit HBM ports each)."""
    big = preset("vhk158")
    for eng in (conv1d_engine(big, max_vectors=15, max_elements=5376),
                residual_engine(big, max_vectors=15, max_elements=2560)):
        text = verilog.convert(eng, name=eng.module_name)
        assert f"module {eng.module_name}" in text
