"""``golden.decoder``: the Mamba2 LM as the accelerator computes it, against the float64 model.

The oracle is :class:`golden.lm.MambaLM` (a float64 reference of the paper's
equations) on the same FP16 weights: logits within the hardware numerics' error,
and, the target of the end-to-end issue, exactly the greedy tokens of the golden
engine (``specgen generate --engine golden``).
"""

import dataclasses

import numpy as np
import pytest

from oracles import seeded_rng

from specgen.golden.argmax import argmax_hw
from specgen.golden.config import preset
from specgen.golden.decoder import HardwareLM, hardware_pair, to_fp16
from specgen.golden.dsp import draft_dot, full_dot
from specgen.golden.lm import MambaLM, lm_preset, speq_pair
from specgen.golden.speculative import speculative_generate

from specgen.gen.runtime.model import load_model
from specgen.gen.runtime.runtime import Runtime

PROMPT = list(b"def __init__(self")


@pytest.fixture(scope="module")
def target():
    return load_model("target")[0]


@pytest.fixture(scope="module")
def sim_pair(target):
    return hardware_pair(target, config=preset("sim"))


def test_to_fp16_is_ieee_convert_format():
    # numpy's float32 -> float16 cast is IEEE 754 convertFormat (RNE, gradual underflow,
    # overflow to Inf): an oracle outside golden.
    rng = seeded_rng("decoder_fp16")
    v = (rng.standard_normal(200_000) * np.exp2(rng.integers(-30, 20, 200_000))).astype(np.float32)
    edges = np.array([65504, 65519.996, 65520, 2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0000001,
                      2.0 ** -14, 2.0 ** -14 * (1 - 2.0 ** -11), 0.0, -0.0, np.inf, -np.inf],
                     np.float32)
    v = np.concatenate([v, edges, -edges])
    got = to_fp16(v)
    assert got.dtype == np.uint16
    with np.errstate(over="ignore"):
        want = v.astype(np.float16).view(np.uint16)
    assert np.array_equal(got, want)
    nan = to_fp16(np.array([np.nan, -np.nan], np.float32))
    assert nan.tolist() == [0x7E00, 0x7E00]


@pytest.mark.parametrize("board", ["sim", "vhk158"])
def test_logits_track_the_float64_model(target, board):
    # Same FP16 weights (SPEQ's target reads them back from both planes) in float64:
    # the hardware numerics (binary32, tables, DSPFP32) stay within 1e-3 of the logits' range.
    pair = hardware_pair(target, config=preset(board))
    ref = speq_pair(target, bsfp=preset(board).bsfp).target
    s, r = pair.target.initial_state(), ref.initial_state()
    worst = 0.0
    for tok in PROMPT:
        lg, s = pair.target.step(s, tok)
        lr, r = ref.step(r, tok)
        assert lg.dtype == np.float32 and lg.shape == (target.vocab,)
        worst = max(worst, float(np.max(np.abs(lg - lr)) / np.ptp(lr)))
        assert argmax_hw(lg)[0] == int(np.argmax(lr))
    assert 0 < worst < 1e-3, worst


def test_the_draft_pass_reads_the_nibble_plane(sim_pair):
    t, d = sim_pair.target, sim_pair.draft
    assert d.encoded is not t.encoded and d.encoded == t.encoded     # one encoding, shared
    rng = seeded_rng("decoder_draft")
    x = rng.standard_normal(t.lm.config.d_model).astype(np.float32)
    name = "backbone.layers.1.mixer.in_proj.weight"
    enc = t.encoded[name]
    assert np.array_equal(t._linear(t._layers[1]["w_in"], x).view(np.uint32), full_dot(enc, to_fp16(x)))
    assert np.array_equal(d._linear(d._layers[1]["w_in"], x).view(np.uint32), draft_dot(enc, to_fp16(x)))
    lt, _ = t.step(t.initial_state(), 65)
    ld, _ = d.step(d.initial_state(), 65)
    assert not np.array_equal(lt, ld)


def test_step_leaves_its_state_and_keeps_formats(sim_pair):
    t = sim_pair.target
    s0 = t.initial_state()
    _, s1 = t.step(s0, 3)
    assert all(not a.any() for a in s0.conv + s0.ssm)
    # LMState holds float64 arrays: the binary32 values, exactly.
    assert all(np.array_equal(a.astype(np.float32).astype(np.float64), a) for a in s1.conv + s1.ssm)
    assert any(a.any() for a in s1.ssm)
    _, again = t.step(s0, 3)
    assert again.equal(s1)


def test_speculative_decoding_on_it_is_lossless(sim_pair):
    # Greedy tree speculation over the hardware pair gives the hardware target's own
    # argmax_hw continuation (what an RTL run must print).
    t = sim_pair.target
    state, tok, greedy = t.initial_state(), None, []
    for tok in PROMPT[:-1]:
        _, state = t.step(state, tok)
    tok = PROMPT[-1]
    for _ in range(16):
        logits, state = t.step(state, tok)
        tok = t.greedy(logits)
        greedy.append(tok)
    res = speculative_generate(t, sim_pair.draft, PROMPT, 16, tree=(2, 2, 1, 1), verify="paths",
                               backtrack="pure-store")
    assert list(res.tokens) == greedy


@pytest.mark.parametrize("board,draft,tree", [
    ("sim", "speq", (2, 2, 1, 1)),
    ("sim", "draft", (2, 2, 1, 1)),
    ("sim", "speq", (1, 1, 1, 1, 1, 1)),
    ("vhk158", "draft", (1, 1, 1, 1)),
])
def test_tokens_equal_the_golden_engine(target, board, draft, tree):
    # The end-to-end target: the accelerator's numerics generate exactly the tokens of
    # `specgen generate --engine golden`, step for step, on the shipped 4-layer model.
    config = preset(board)
    rt = Runtime(config=config, engine="golden")
    rt.load_model("target")
    rt.load_draft(draft)
    want = rt.generate(PROMPT, 16, tree=tree)
    pair = hardware_pair(target, config=config)
    d = pair.draft if draft == "speq" else HardwareLM(load_model("draft")[0], config=config)
    got = speculative_generate(pair.target, d, PROMPT, 16, tree=tree, verify="paths",
                               backtrack="pure-store")
    assert got.tokens == want.tokens
    assert got.tokens_per_step == want.tokens_per_step


def test_bad_inputs_name_the_field(target):
    cfg = preset("sim")
    with pytest.raises(ValueError, match=r"HardwareLM.linear_pass must be one of"):
        HardwareLM(target, config=cfg, linear_pass="nibble")
    with pytest.raises(TypeError, match=r"HardwareLM.lm must be a golden.lm.MambaLM"):
        HardwareLM("target", config=cfg)
    with pytest.raises(TypeError, match=r"HardwareLM.config must be a golden.config.Config"):
        HardwareLM(target, config="sim")
    odd = MambaLM.from_seed(lm_preset("tiny", d_state=3), seed=0)
    with pytest.raises(ValueError, match=r"d_state 3\) does not fit the design's SSM unit: "
                                         r"SSMConfig.lanes must be"):
        HardwareLM(odd, config=cfg)
    # The norms' partial sums: a d_model of 6 does not split into beats of 4 lanes.
    narrow = MambaLM.from_seed(lm_preset("tiny", d_model=6), seed=0)
    with pytest.raises(ValueError, match=r"^HardwareLM: the model's d_model \(6\) is not a "
                                         r"multiple of the design's vector.lanes \(4\)"):
        HardwareLM(narrow, config=cfg.replace(vector=dataclasses.replace(cfg.vector, lanes=4)))
    lm = MambaLM.from_seed(lm_preset("tiny"), seed=0)
    tensors = {k: np.array(v) for k, v in lm.tensors.items()}
    tensors["backbone.layers.1.mixer.out_proj.weight"][0, 0] = 1e6
    with pytest.raises(ValueError, match=r"tensor 'backbone.layers.1.mixer.out_proj.weight' is NaN "
                                         r"or beyond FP16 .*allowed: finite weights within"):
        HardwareLM(MambaLM(lm.config, tensors), config=cfg)
    t = HardwareLM(lm, config=cfg)
    with pytest.raises(ValueError, match=r"HardwareLM.step.token must be an integer in \[0, 15\], not 16"):
        t.step(t.initial_state(), 16)
