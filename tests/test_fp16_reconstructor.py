# amaranth: UnusedElaboratable=no
"""``FP16Reconstructor``: parameter checks, lint, and the exhaustive cocotb bench
(``sim/fp16_reconstructor.py``)."""

import pytest

from bsfp_streams import lint_block, run_icarus, run_verilator

from specgen.golden.bsfp import BSFPConfig
from specgen.hw.fp16_reconstructor import FP16Reconstructor

# (id, config, stages): the seed's table, no remapping (W is only cleared), a
# non-default three-target table, and four targets that merge into one cube.
CONFIGS = [
    ("e3m0-s1", BSFPConfig(), 1),
    ("noremap-s0", BSFPConfig(draft="E3M0-noremap"), 0),
    ("remap3-s1", BSFPConfig(remap=((1, 0b101), (6, 0b000), (14, 0b011))), 1),
    ("remap4-s2", BSFPConfig(remap=((2, 0b100), (5, 0b101), (8, 0b110), (12, 0b111))), 2),
]


@pytest.mark.sim
@pytest.mark.parametrize("case_id,config,stages", [pytest.param(*c, id=c[0]) for c in CONFIGS])
def test_fp16_reconstructor_verilator(case_id, config, stages):
    run_verilator(FP16Reconstructor, "sim.fp16_reconstructor", config, stages)


@pytest.mark.sim
def test_fp16_reconstructor_icarus():
    run_icarus(FP16Reconstructor, "sim.fp16_reconstructor", BSFPConfig())


@pytest.mark.parametrize("case_id,config,stages", [pytest.param(*c, id=c[0]) for c in CONFIGS])
def test_fp16_reconstructor_lint(case_id, config, stages, tmp_path):
    lint_block(FP16Reconstructor, config, stages, tmp_path)


def test_default_table_is_a_nor():
    """The seed's targets 000 and 010 with W = 1: one NOR term, NOR(~W, c2, c0)."""
    assert FP16Reconstructor(config=BSFPConfig()).remap_cover == [(0b1101, 0b1000)]
    assert FP16Reconstructor(config=BSFPConfig(draft="E3M0-noremap")).remap_cover == []
    assert FP16Reconstructor(config=BSFPConfig(draft="E1M2")).remap_cover == []


def test_every_valid_single_remap_elaborates():
    for src in range(16):
        for tgt in range(8):
            if tgt != src >> 1:
                rec = FP16Reconstructor(config=BSFPConfig(remap=((src, tgt),)), stages=0)
                assert rec.remap_cover == [(0b1111, 8 | tgt)]


def test_module_names_encode_the_parameters():
    assert FP16Reconstructor(config=BSFPConfig()).module_name == "fp16_reconstructor_r9to0_11to2_s1"
    assert FP16Reconstructor(config=BSFPConfig(draft="E2M1"),
                             stages=0).module_name == "fp16_reconstructor_plain_s0"


def test_fp16_reconstructor_properties():
    rec = FP16Reconstructor(config=BSFPConfig(), stages=0)
    assert (rec.stages, rec.latency, rec.config) == (0, 0, BSFPConfig())
    assert FP16Reconstructor(config=BSFPConfig()).latency == 1
    assert rec.i.payload.shape().size == 16 and rec.o.payload.shape().width == 16


@pytest.mark.parametrize("kwargs,exc,message", [
    ({"config": None}, TypeError, "FP16Reconstructor.config must be a BSFPConfig, not None"),
    ({"config": {"draft": "E3M0"}}, TypeError,
     "FP16Reconstructor.config must be a BSFPConfig, not {'draft': 'E3M0'}"),
    ({"config": BSFPConfig(), "stages": -1}, ValueError,
     "FP16Reconstructor.stages must be an integer >= 0, not -1"),
    ({"config": BSFPConfig(), "stages": "1"}, TypeError,
     "FP16Reconstructor.stages must be an integer >= 0, not '1'"),
    ({"config": BSFPConfig(), "stages": False}, TypeError,
     "FP16Reconstructor.stages must be an integer >= 0, not False"),
])
def test_fp16_reconstructor_rejects_bad_parameters(kwargs, exc, message):
    with pytest.raises(exc) as info:
        FP16Reconstructor(**kwargs)
    assert str(info.value) == message


def test_fp16_reconstructor_parameters_are_keyword_only():
    with pytest.raises(TypeError):
        FP16Reconstructor(BSFPConfig())
