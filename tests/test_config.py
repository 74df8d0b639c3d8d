import dataclasses

import pytest

from specgen.golden.config import BoardConfig, Config, PipelineConfig, TreeConfig, preset, preset_names


# Facts of each evaluation board from AMD's documents, not from golden/config.py: the
# device (VCK190 Evaluation Board User Guide, UG1366; VHK158 Evaluation Board User
# Guide, UG1611) and its DSP58 count (Versal AI Core and Versal HBM Series Product
# Selection Guides).
AMD_BOARDS = {"vck190": ("xcvc1902", 1968), "vhk158": ("xcvh1582", 7392)}

# Mamba2-2.7B (state-spaces/mamba2-2.7b config): d_model 2560, expand 2, headdim 64,
# d_state 128; one SSM layer has d_model * expand / headdim heads.
MAMBA2_2_7B = {"nheads": 2560 * 2 // 64, "headdim": 64, "d_state": 128}


def test_presets_are_consistent():
    assert set(preset_names()) == {"sim", *AMD_BOARDS}
    for name in preset_names():
        cfg = preset(name)
        assert cfg.name == cfg.board.name == name
        assert cfg.tree.fifo_depth <= cfg.tree.max_nodes
        if cfg.board.part is None:            # the simulation preset: no device, no memory
            assert cfg.board.memory == "none" and cfg.board.dsp58 == 0


@pytest.mark.parametrize("board", sorted(AMD_BOARDS))
def test_board_presets_match_amd_documents(board):
    device, dsp58 = AMD_BOARDS[board]
    cfg = preset(board)
    assert cfg.board.part.startswith(device + "-"), cfg.board.part
    assert cfg.board.dsp58 == dsp58
    # One DSP58 per PE (docs/boards.md): the array fits the device.
    assert cfg.linear.pes <= cfg.board.dsp58
    # The SSM unit is one Mamba2-2.7B layer.
    assert {k: getattr(cfg.ssm, k) for k in MAMBA2_2_7B} == MAMBA2_2_7B


def test_unknown_preset_names_allowed_values():
    with pytest.raises(ValueError) as info:
        preset("zcu104")
    assert str(info.value) == "unknown board 'zcu104'; allowed: sim, vck190, vhk158"


def test_configs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        preset("sim").tree.fifo_depth = 3


@pytest.mark.parametrize("kwargs,exc,message", [
    ({"fifo_depth": 0}, ValueError, "TreeConfig.fifo_depth must be an integer >= 1, not 0"),
    ({"tile_size": 2.5}, TypeError, "TreeConfig.tile_size must be an integer >= 1, not 2.5"),
    ({"max_nodes": -3}, ValueError, "TreeConfig.max_nodes must be an integer >= 1, not -3"),
])
def test_tree_config_validation(kwargs, exc, message):
    with pytest.raises(exc) as info:
        TreeConfig(**kwargs)
    assert str(info.value) == message


def test_board_config_validation():
    good = dict(name="x", part=None, clock_mhz=100.0, memory="DDR", mem_bw_gbs=1.0, dsp58=1)
    with pytest.raises(ValueError) as info:
        BoardConfig(**dict(good, memory="SRAM"))
    assert str(info.value) == "BoardConfig.memory must be one of 'DDR', 'HBM', 'none', not 'SRAM'"
    with pytest.raises(ValueError) as info:
        BoardConfig(**dict(good, clock_mhz=float("nan")))
    assert str(info.value) == "BoardConfig.clock_mhz must be a finite number in [1.0, 1000.0], not nan"
    with pytest.raises(TypeError, match="BoardConfig.part must be a non-empty string or None"):
        BoardConfig(**dict(good, part=""))
    with pytest.raises(TypeError, match="Config.tree must be a TreeConfig"):
        Config(name="x", board=BoardConfig(**good), tree={"fifo_depth": 4})


def test_slot_bits():
    assert TreeConfig(fifo_depth=1).slot_bits == 1
    assert TreeConfig(fifo_depth=16).slot_bits == 4
    assert TreeConfig(fifo_depth=17).slot_bits == 5


def test_linear_config_validation():
    from specgen.golden.config import LinearConfig
    with pytest.raises(ValueError) as info:
        LinearConfig(fmt_out="bf16")
    assert str(info.value) == "LinearConfig.fmt_out must be one of 'fp32', 'fp16', not 'bf16'"
    with pytest.raises(ValueError) as info:
        LinearConfig(quant_lanes=0)
    assert str(info.value) == "LinearConfig.quant_lanes must be an integer in [1, 8], not 0"
    assert LinearConfig(rows=3, cols=5).pes == 15
    with pytest.raises(ValueError) as info:
        LinearConfig(contract="int8")
    assert str(info.value) == "LinearConfig.contract must be one of 'exact', 'dspfp32', not 'int8'"
    with pytest.raises(ValueError) as info:
        LinearConfig(max_tokens=17)
    assert str(info.value) == "LinearConfig.max_tokens must be an integer in [1, 16], not 17"
    with pytest.raises(ValueError) as info:
        LinearConfig(contract="dspfp32", fmt_out="fp16")
    assert str(info.value) == ("LinearConfig.fmt_out must be 'fp32' with contract 'dspfp32' "
                               "(DSPFP32 accumulates in binary32), not 'fp16'")
    assert LinearConfig(rows=3, cols=5, contract="dspfp32").tile_rows == 15
    assert LinearConfig(rows=3, cols=5).tile_rows == 3
    assert LinearConfig(cols=5, contract="dspfp32", max_tokens=7).token_lanes == 7
    # Column beats a weight-port transfer: a divisor of the columns a port feeds.
    assert LinearConfig(rows=64, cols=84, contract="dspfp32").port_columns == 14
    with pytest.raises(ValueError) as info:
        LinearConfig(rows=64, cols=84, contract="dspfp32", weight_beats=4)
    assert str(info.value) == ("LinearConfig.weight_beats must be one of 1, 2 (a divisor of "
                               "the 14 columns each of the 6 weight ports feeds), not 4")
    with pytest.raises(ValueError) as info:
        LinearConfig(weight_beats=3)
    assert str(info.value) == "LinearConfig.weight_beats must be one of 1, 2, 4, 8, not 3"
    assert LinearConfig(weight_beats=2).weight_beats == 2      # the exact array ignores it
    with pytest.raises(ValueError) as info:
        LinearConfig(split_tiles=1)
    assert str(info.value) == "LinearConfig.split_tiles must be true or false, not 1"


@pytest.mark.parametrize("board", ["vck190", "vhk158"])
def test_board_arrays_leave_room_on_the_part(board):
    """The board presets' DSPFP32 arrays take at most 90 % of the part's DSP58."""
    cfg = preset(board)
    assert cfg.linear.contract == "dspfp32"
    assert cfg.linear.pes <= 0.9 * cfg.board.dsp58
    assert cfg.board.capacities["DSP58"] == cfg.board.dsp58 > 0


@pytest.mark.parametrize("kwargs,exc,message", [
    ({"fp_mul_stages": 6}, ValueError, "PipelineConfig.fp_mul_stages must be an integer in [0, 5], not 6"),
    ({"fp_add_stages": -1}, ValueError, "PipelineConfig.fp_add_stages must be an integer in [0, 6], not -1"),
    ({"pe_round_stages": 0}, ValueError, "PipelineConfig.pe_round_stages must be an integer in [1, 4], not 0"),
    ({"pe_round_stages": 2.0}, TypeError, "PipelineConfig.pe_round_stages must be an integer"),
])
def test_pipeline_config_validation(kwargs, exc, message):
    with pytest.raises(exc) as info:
        PipelineConfig(**kwargs)
    assert str(info.value).startswith(message), str(info.value)


def test_pipeline_config_reaches_the_rtl():
    """The board presets register every FP and rounding boundary, and the blocks built
    from a preset carry those stages (their module names encode them)."""
    from specgen.hw.accelerator import Accelerator
    from specgen.hw.fp_arith import FPAdd, FPMul
    from specgen.hw.dual_mode_pe import DualModePE
    from specgen.gen.emit.verilog import blocks

    from specgen.hw.fp_datapath import NormalizeRound

    assert PipelineConfig.LIMITS == {"fp_mul_stages": (0, len(FPMul.BOUNDARIES)),
                                     "fp_add_stages": (0, len(FPAdd.BOUNDARIES)),
                                     "pe_round_stages": (1, len(NormalizeRound.BOUNDARIES))}
    for board in ("vck190", "vhk158"):
        pipe = preset(board).pipeline
        assert (pipe.fp_mul_stages, pipe.fp_add_stages) == (len(FPMul.BOUNDARIES), len(FPAdd.BOUNDARIES))
        assert pipe.pe_round_stages == len(NormalizeRound.BOUNDARIES)
    assert preset("sim").pipeline == PipelineConfig()
    cfg = preset("sim").replace(pipeline=PipelineConfig(fp_mul_stages=3, fp_add_stages=4,
                                                        pe_round_stages=3))
    names = set(blocks(cfg))
    assert any(n.startswith("SSMEngine_") and n.endswith("_m3a4") for n in names), names
    # The exact LinearUnit is a library block now; its rounding stages reach its name.
    from specgen.hw.linear_unit import LinearUnit
    assert LinearUnit.from_config(cfg).module_name.endswith("_s3")
    assert Accelerator(config=cfg).module_name.endswith("_p343")
    assert DualModePE(round_stages=3).latency == DualModePE(round_stages=2).latency + 1


def test_board_memory_clock_and_ports():
    # The memory clock is its own field (AXI masters, docs/memory.md); unset, it is the
    # fabric clock, and the port width the widest the memory kind allows.
    good = dict(name="x", part=None, clock_mhz=100.0, memory="DDR", mem_bw_gbs=1.0, dsp58=1)
    board = BoardConfig(**good)
    assert (board.memory_clock_mhz, board.memory_port_bits) == (100.0, 512)
    assert BoardConfig(**dict(good, memory="HBM")).memory_port_bits == 256
    with pytest.raises(ValueError) as info:
        BoardConfig(**dict(good, memory="HBM", memory_port_bits=512))
    assert str(info.value) == ("BoardConfig.memory_port_bits must be one of 32, 64, 128, 256 for "
                               "memory 'HBM', not 512")
    with pytest.raises(ValueError) as info:
        BoardConfig(**dict(good, memory_clock_mhz=0.5))
    assert str(info.value) == ("BoardConfig.memory_clock_mhz must be a finite number in "
                               "[1.0, 1000.0], not 0.5")
    # VHK158: 819 GB/s over 256-bit HBM_NMU ports needs >= 400 MHz for 64 ports; at the
    # preset's clock it needs no more than the part's 64.
    vhk = preset("vhk158").board
    assert vhk.memory_clock_mhz * 64 * 32 / 1e3 >= vhk.mem_bw_gbs
    assert vhk.memory_ports <= 64 and vhk.memory_clock_mhz <= 500.0   # DS960 FACLK, -2
    vck = preset("vck190").board
    assert vck.memory_ports == 1 and vck.memory_port_gbs >= vck.mem_bw_gbs
    assert preset("sim").board.memory_clock_mhz != preset("sim").board.clock_mhz


def test_ssm_head_groups_validation():
    """``ssm.head_groups`` splits the heads into groups of whole input beats; a bad count
    names the field and the counts allowed, from the CLI too (one line, status 2)."""
    import dataclasses
    import subprocess
    import sys
    ssm = preset("vhk158").ssm
    assert ssm.head_groups == 2 and ssm.pass_config.nheads == 40
    p = ssm.pass_config
    assert p.head_groups == 1 and p.pass_config is p
    with pytest.raises(ValueError, match=r"SSMConfig.head_groups must divide nheads \(80\) into "
                                         r"groups of a multiple of input_words \(8\) heads: one "
                                         r"of 1, 2, 5, 10, not 4"):
        dataclasses.replace(ssm, head_groups=4)
    with pytest.raises(ValueError, match="SSMConfig.head_groups must be"):
        dataclasses.replace(ssm, head_groups=0)
    r = subprocess.run([sys.executable, "-m", "specgen", "perf", "--board", "vhk158",
                        "--target", "2.7B", "--draft", "speq", "--set", "ssm.head_groups=3"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "head_groups" in err[0] and "1, 2, 5, 10" in err[0]
