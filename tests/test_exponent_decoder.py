# amaranth: UnusedElaboratable=no
"""``ExponentDecoder``: parameter checks, lint, and the exhaustive cocotb bench
(``sim/exponent_decoder.py``)."""

import pytest

from bsfp_streams import lint_block, run_icarus, run_verilator

from specgen.golden.bsfp import BSFPConfig, draft_exponent_table
from specgen.hw.exponent_decoder import ExponentDecoder
from specgen.hw.remap_logic import prime_cover

# (id, config, stages). The seed's table, no remapping, a non-default table (three
# targets that merge into no common cube, "upper" pairs) and the 5-bit E3M0+W draft.
CONFIGS = [
    ("e3m0-s1", BSFPConfig(), 1),
    ("noremap-s1", BSFPConfig(draft="E3M0-noremap"), 1),
    ("remap3-upper-s0", BSFPConfig(remap=((1, 0b101), (6, 0b000), (14, 0b011)),
                                   pair_representative="upper"), 0),
    ("remap4-s2", BSFPConfig(remap=((2, 0b100), (5, 0b101), (8, 0b110), (12, 0b111))), 2),
    ("e3m0w-s1", BSFPConfig(draft="E3M0+W"), 1),
]


@pytest.mark.sim
@pytest.mark.parametrize("case_id,config,stages", [pytest.param(*c, id=c[0]) for c in CONFIGS])
def test_exponent_decoder_verilator(case_id, config, stages):
    run_verilator(ExponentDecoder, "sim.exponent_decoder", config, stages)


@pytest.mark.sim
def test_exponent_decoder_icarus():
    run_icarus(ExponentDecoder, "sim.exponent_decoder", BSFPConfig())


@pytest.mark.parametrize("case_id,config,stages", [pytest.param(*c, id=c[0]) for c in CONFIGS])
def test_exponent_decoder_lint(case_id, config, stages, tmp_path):
    lint_block(ExponentDecoder, config, stages, tmp_path)


def test_default_table_is_the_papers_nor():
    """The seed's targets 000 and 010 merge into one NOR term: NOR(c2, c0)."""
    assert ExponentDecoder(config=BSFPConfig()).remap_cover == [(0b101, 0b000)]
    assert ExponentDecoder(config=BSFPConfig(draft="E3M0+W")).remap_cover == [(0b1101, 0b1000)]
    assert ExponentDecoder(config=BSFPConfig(draft="E3M0-noremap")).remap_cover == []


@pytest.mark.parametrize("codes,width", [
    ([], 3), ([0, 2], 3), ([0, 3, 5], 3), ([4, 5, 6, 7], 3), (list(range(8)), 3),
    ([1, 3, 5, 7, 8], 4), ([0, 1, 2, 5, 6, 7], 3), ([8, 10, 12, 13, 14, 15], 4),
])
def test_prime_cover_is_exact(codes, width):
    cover = prime_cover(codes, width)
    got = {x for x in range(1 << width) if any(x & mask == value for mask, value in cover)}
    assert got == set(codes)


def test_every_valid_single_remap_elaborates():
    """The decoder's structure holds for every one-entry table and both representatives."""
    for src in range(16):
        for tgt in range(8):
            if tgt == src >> 1:
                continue
            for rep in ("lower", "upper"):
                for draft in ("E3M0", "E3M0+W"):
                    config = BSFPConfig(remap=((src, tgt),), pair_representative=rep, draft=draft)
                    dec = ExponentDecoder(config=config, stages=0)
                    offset = 8 if draft == "E3M0+W" else 0
                    assert dec.remap_cover == [((1 << (3 + bool(offset))) - 1, offset | tgt)]
                    assert len(draft_exponent_table(config)) == 8 + offset


def test_module_names_encode_the_parameters():
    default = ExponentDecoder(config=BSFPConfig())
    assert default.module_name == "exponent_decoder_e3m0_r9to0_11to2_lo_s1"
    assert ExponentDecoder(config=BSFPConfig(draft="E3M0-noremap", pair_representative="upper"),
                           stages=0).module_name == "exponent_decoder_e3m0_noremap_up_s0"
    assert ExponentDecoder(config=BSFPConfig(draft="E3M0+W", remap=((3, 0b111),)),
                           stages=2).module_name == "exponent_decoder_e3m0w_r3to7_lo_s2"
    names = {ExponentDecoder(config=c, stages=s).module_name for _, c, s in CONFIGS}
    assert len(names) == len(CONFIGS)


def test_exponent_decoder_properties():
    dec = ExponentDecoder(config=BSFPConfig(), stages=2)
    assert (dec.stages, dec.latency, dec.config) == (2, 2, BSFPConfig())
    assert ExponentDecoder(config=BSFPConfig()).latency == 1
    assert dec.i.payload.shape().size == 4 and dec.o.payload.shape().size == 5
    assert ExponentDecoder(config=BSFPConfig(draft="E3M0+W")).i.payload.shape().size == 5


@pytest.mark.parametrize("kwargs,exc,message", [
    ({"config": BSFPConfig(draft="E2M1")}, ValueError,
     "ExponentDecoder.config.draft must be one of 'E3M0', 'E3M0-noremap', 'E3M0+W', not 'E2M1'"),
    ({"config": BSFPConfig(draft="E1M2")}, ValueError,
     "ExponentDecoder.config.draft must be one of 'E3M0', 'E3M0-noremap', 'E3M0+W', not 'E1M2'"),
    ({"config": None}, TypeError, "ExponentDecoder.config must be a BSFPConfig, not None"),
    ({"config": "E3M0"}, TypeError, "ExponentDecoder.config must be a BSFPConfig, not 'E3M0'"),
    ({"config": BSFPConfig(), "stages": -1}, ValueError,
     "ExponentDecoder.stages must be an integer >= 0, not -1"),
    ({"config": BSFPConfig(), "stages": 1.0}, TypeError,
     "ExponentDecoder.stages must be an integer >= 0, not 1.0"),
    ({"config": BSFPConfig(), "stages": True}, TypeError,
     "ExponentDecoder.stages must be an integer >= 0, not True"),
])
def test_exponent_decoder_rejects_bad_parameters(kwargs, exc, message):
    with pytest.raises(exc) as info:
        ExponentDecoder(**kwargs)
    assert str(info.value) == message


def test_exponent_decoder_parameters_are_keyword_only():
    with pytest.raises(TypeError):
        ExponentDecoder(BSFPConfig())
    with pytest.raises(TypeError):
        ExponentDecoder()
