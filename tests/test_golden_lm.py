"""``golden.lm``: the Mamba2 language model, its weights, and SPEQ self-speculation.

The oracle is :func:`parallel_forward`, written here from the Mamba2 equations
in their full-sequence form: the whole prompt at once, matrix products over
time, the causal conv as a sliding window over a zero-padded sequence, and the
SSM as its quadratic "attention" form (SSD): ``y_t = Σ_{s≤t} (C_t·B_s)
exp(Σ_{r=s+1..t} a_r) delta_s x_s + D x_t``, with no recurrence at all.
Token-by-token decoding must agree with it to float64 rounding.
"""

import dataclasses
import json
import math
import struct

import numpy as np
import pytest

from specgen.golden.bsfp import BSFPConfig
from specgen.golden.lm import (LM_PRESETS, MAMBA2_VOCAB, SPEQ_KINDS, LMConfig, LMState, MambaLM, lm_preset,
                       load_tensors, save_tensors, speq_pair, ssm_tile, tensor_shapes)
from specgen.golden.mamba2 import SSMParams, ssm_step_ref


def sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def rms(v, w, eps):
    return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + eps) * w


def parallel_forward(cfg, t, tokens):
    """Logits of every position and the final (conv, ssm) state, from the full-sequence equations."""
    T, N, H, P = len(tokens), cfg.d_state, cfg.nheads, cfg.headdim
    di, K = cfg.d_inner, cfg.d_conv
    h = t["backbone.embedding.weight"][np.asarray(tokens)]
    conv_states, ssm_states = [], []
    for i in range(cfg.n_layer):
        g = lambda name: t[f"backbone.layers.{i}.{name}"]  # noqa: E731
        zxbcdt = rms(h, g("norm.weight"), cfg.norm_eps) @ g("mixer.in_proj.weight").T
        z, xbc, dt = zxbcdt[:, :di], zxbcdt[:, di:di + cfg.conv_dim], zxbcdt[:, di + cfg.conv_dim:]
        padded = np.vstack([np.zeros((K - 1, cfg.conv_dim)), xbc])
        windows = np.lib.stride_tricks.sliding_window_view(padded, K, axis=0)   # (T, conv_dim, K)
        pre = np.einsum("tck,ck->tc", windows, g("mixer.conv1d.weight")[:, 0, :]) + g("mixer.conv1d.bias")
        act = pre * sig(pre)
        x = act[:, :di].reshape(T, H, P)
        B, C = act[:, di:di + N], act[:, di + N:]
        delta = np.log1p(np.exp(dt + g("mixer.dt_bias")))                      # (T, H)
        a = delta * -np.exp(g("mixer.A_log"))
        cum = np.cumsum(a, axis=0)
        causal = np.tril(np.ones((T, T), bool))
        seg = np.where(causal[:, :, None], cum[:, None, :] - cum[None, :, :], -np.inf)
        L = np.exp(seg)                                                         # (t, s, H)
        y = np.einsum("tn,sn,tsh,sh,shp->thp", C, B, L, delta, x) + g("mixer.D")[None, :, None] * x
        decay_to_end = np.exp(cum[-1][None, :] - cum)                           # (s, H)
        ssm_states.append(np.einsum("sh,sh,shp,sn->hpn", decay_to_end, delta, x, B))
        conv_states.append(padded[len(padded) - (K - 1):])
        y = y.reshape(T, di) * (z * sig(z))
        h = h + rms(y, g("mixer.norm.weight"), cfg.norm_eps) @ g("mixer.out_proj.weight").T
    head = t["backbone.embedding.weight"] if cfg.tie_embeddings else t["lm_head.weight"]
    return rms(h, t["backbone.norm_f.weight"], cfg.norm_eps) @ head.T, conv_states, ssm_states


CONFIGS = [
    lm_preset("tiny"),
    lm_preset("tiny", tie_embeddings=False, n_layer=3, d_conv=2),
    LMConfig(vocab=11, d_model=12, n_layer=1, d_state=5, headdim=6, expand=1, d_conv=1),
    LMConfig(vocab=9, d_model=8, n_layer=2, d_state=6, headdim=16, expand=2, d_conv=3),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"V{c.vocab}d{c.d_model}L{c.n_layer}K{c.d_conv}")
@pytest.mark.parametrize("init_std", [0.02, 1.0])
def test_step_matches_parallel_oracle(cfg, init_std):
    lm = MambaLM.from_seed(cfg, seed=5, init_std=init_std, head_gain=6.0)
    tokens = np.random.default_rng(1).integers(0, cfg.vocab, 24)
    logits, state = lm.prefill(tokens)
    want, conv, ssm = parallel_forward(cfg, lm.tensors, tokens)
    scale = np.abs(want).max()
    np.testing.assert_allclose(logits, want, rtol=1e-9, atol=1e-11 * scale)
    for layer in range(cfg.n_layer):
        np.testing.assert_allclose(state.conv[layer], conv[layer], rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(state.ssm[layer], ssm[layer], rtol=1e-9, atol=1e-13)


def test_oracle_sees_a_changed_equation():
    """The oracle comparison can fail: D dropped from one layer changes the logits."""
    cfg = lm_preset("tiny")
    lm = MambaLM.from_seed(cfg, seed=5)
    tokens = [1, 2, 3, 4, 5, 6]
    t = dict(lm.tensors)
    t["backbone.layers.1.mixer.D"] = np.zeros(cfg.nheads)
    want, _, _ = parallel_forward(cfg, t, tokens)
    got, _ = lm.prefill(tokens)
    assert not np.allclose(got, want, rtol=1e-6, atol=0)


def test_ssm_stage_matches_mamba2_reference():
    """The LM's SSM stage against golden.mamba2.ssm_step_ref on the same inputs."""
    cfg = lm_preset("tiny")
    lm = MambaLM.from_seed(cfg, seed=2)
    _, state = lm.prefill([3, 1, 4, 1, 5])
    h = lm.embed(9)
    z, xbc_raw, dt = lm.layer_in(1, h)
    xbc, _ = lm.conv(1, state.conv[1], xbc_raw)
    inputs = lm.ssm_inputs(1, xbc, dt)
    acc = np.zeros(cfg.nheads * cfg.headdim)
    new = ssm_tile(cfg, inputs, state.ssm[1].reshape(-1), lo=0, hi=cfg.state_elems, acc=acc)
    p = "backbone.layers.1.mixer."
    params = SSMParams(A=-np.exp(lm.tensors[p + "A_log"]), dt_bias=lm.tensors[p + "dt_bias"],
                       D=lm.tensors[p + "D"])
    ref = ssm_step_ref(cfg.ssm_config, params, state.ssm[1], inputs.x, inputs.B, inputs.C, dt)
    # Same element-wise operations: the state agrees bit for bit; y only to rounding
    # (einsum's reduction order against the sequential running sum).
    assert np.array_equal(new.reshape(cfg.nheads, cfg.headdim, cfg.d_state), ref.state)
    y = acc.reshape(cfg.nheads, cfg.headdim) + params.D[:, None] * inputs.x
    np.testing.assert_allclose(y, ref.y, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("tile", [1, 3, 5, 8, 13, 100, 128, 200])
def test_ssm_tile_is_tiling_invariant(tile):
    cfg = lm_preset("tiny")
    rng = np.random.default_rng(tile)
    lm = MambaLM.from_seed(cfg, seed=2)
    inputs = lm.ssm_inputs(0, rng.standard_normal(cfg.conv_dim), rng.standard_normal(cfg.nheads))
    old = rng.standard_normal(cfg.state_elems)
    whole_acc = np.zeros(cfg.nheads * cfg.headdim)
    whole = ssm_tile(cfg, inputs, old, lo=0, hi=cfg.state_elems, acc=whole_acc)
    acc = np.zeros_like(whole_acc)
    parts = [ssm_tile(cfg, inputs, old[lo:lo + tile], lo=lo, hi=min(cfg.state_elems, lo + tile), acc=acc)
             for lo in range(0, cfg.state_elems, tile)]
    assert np.array_equal(np.concatenate(parts), whole)
    assert np.array_equal(acc, whole_acc)
    # And the running sum is the row sum (independent order, to rounding).
    ref = (whole.reshape(-1, cfg.d_state) * inputs.C).sum(axis=1)
    np.testing.assert_allclose(acc, ref, rtol=1e-12, atol=1e-14)


def test_step_does_not_touch_its_input_state():
    lm = MambaLM.from_seed(lm_preset("tiny"), seed=3)
    _, state = lm.prefill([1, 2, 3])
    before = [a.copy() for a in state.conv + state.ssm]
    a, s1 = lm.step(state, 7)
    b, s2 = lm.step(state, 7)
    c, _ = lm.step(state, 8)
    assert np.array_equal(a, b) and s1.equal(s2) and not np.array_equal(a, c)
    assert all(np.array_equal(x, y) for x, y in zip(before, state.conv + state.ssm))
    with pytest.raises(ValueError, match="read-only"):
        state.ssm[0][0, 0, 0] = 1.0
    # A state built from writable arrays copies them: later writes to the source do not leak in.
    src = np.zeros((lm.config.d_conv - 1, lm.config.conv_dim))
    st = LMState(conv=(src, src), ssm=tuple(np.zeros((4, 4, 8)) for _ in range(2)))
    src[0, 0] = 5.0
    assert st.conv[0][0, 0] == 0.0


def test_prefill_splits_exactly():
    lm = MambaLM.from_seed(lm_preset("tiny"), seed=4)
    tokens = [5, 9, 2, 2, 7, 1, 0, 15]
    whole, s = lm.prefill(tokens)
    first, s1 = lm.prefill(tokens[:3])
    rest, s2 = lm.prefill(tokens[3:], state=s1)
    assert np.array_equal(np.vstack([first, rest]), whole) and s2.equal(s)


def test_seeded_weights_are_reproducible_and_mamba_like():
    cfg = lm_preset("small")
    a, b = MambaLM.from_seed(cfg, seed=7), MambaLM.from_seed(cfg, seed=7)
    c = MambaLM.from_seed(cfg, seed=8)
    assert all(np.array_equal(a.tensors[k], b.tensors[k]) for k in a.tensors)
    assert not np.array_equal(a.tensors["backbone.embedding.weight"], c.tensors["backbone.embedding.weight"])
    t = a.tensors
    assert set(t) == set(tensor_shapes(cfg)) and "lm_head.weight" not in t
    A = np.exp(t["backbone.layers.0.mixer.A_log"])
    assert ((A >= 1) & (A <= 16)).all()                                  # A_init_range (1, 16)
    dt = np.log1p(np.exp(t["backbone.layers.0.mixer.dt_bias"]))
    assert ((dt >= 0.001 * 0.999) & (dt <= 0.1 * 1.001)).all()           # softplus(dt_bias) in [dt_min, dt_max]
    assert abs(np.std(t["backbone.embedding.weight"]) - 0.02) < 0.004
    bound = 1 / math.sqrt(cfg.d_inner) / math.sqrt(cfg.n_layer)
    assert np.abs(t["backbone.layers.0.mixer.out_proj.weight"]).max() <= bound


def test_config_properties():
    cfg = lm_preset("small")
    assert (cfg.d_inner, cfg.nheads, cfg.conv_dim, cfg.d_in_proj) == (64, 8, 96, 168)
    assert cfg.state_elems == 8 * 8 * 16 and cfg.conv_elems == 3 * 96
    # One layer of it, as golden.backtrack and its cost model see it.
    m = cfg.mixer
    assert (m.d_model, m.d_inner, m.nheads, m.conv_dim, m.d_in_proj) == (32, 64, 8, 96, 168)
    assert (m.ssm.state_elems, m.conv_rows, m.n_layer) == (8 * 8 * 16, 3, 2)
    big = LMConfig.from_model("2.7B")
    assert (big.vocab, big.nheads, big.state_elems) == (MAMBA2_VOCAB, 80, 655_360)
    assert set(LM_PRESETS) <= {"micro", "tiny", "small"}
    micro = lm_preset("micro")
    assert (micro.d_model, micro.d_inner, micro.nheads, micro.headdim) == (8, 16, 2, 8)


@pytest.mark.parametrize("kwargs,exc,message", [
    (dict(vocab=1), ValueError, "LMConfig.vocab must be an integer >= 2, not 1"),
    (dict(n_layer=0), ValueError, "LMConfig.n_layer must be an integer >= 1, not 0"),
    (dict(d_conv=2.0), TypeError, "LMConfig.d_conv must be an integer >= 1, not 2.0"),
    (dict(d_model=10, headdim=8), ValueError,
     "LMConfig.headdim must divide d_inner = expand·d_model = 20, not 8"),
    (dict(norm_eps=0.0), ValueError, "LMConfig.norm_eps must be a finite number > 0, not 0.0"),
    (dict(norm_eps=-1e-5), ValueError, "LMConfig.norm_eps must be a finite number > 0, not -1e-05"),
    (dict(norm_eps=float("nan")), ValueError, "LMConfig.norm_eps must be a finite number > 0, not nan"),
    (dict(norm_eps="1e-5"), TypeError, "LMConfig.norm_eps must be a finite number > 0, not '1e-5'"),
    (dict(tie_embeddings=1), TypeError, "LMConfig.tie_embeddings must be True or False, not 1"),
])
def test_config_rejects_bad_parameters(kwargs, exc, message):
    with pytest.raises(exc) as info:
        LMConfig(**kwargs)
    assert str(info.value) == message


def test_preset_and_model_errors():
    with pytest.raises(ValueError, match="lm_preset.name must be one of 'micro', 'tiny', 'small', '130M'"):
        lm_preset("huge")
    with pytest.raises(ValueError, match=r"LMConfig.from_model.size must be one of"):
        LMConfig.from_model("7B")
    lm = MambaLM.from_seed(lm_preset("tiny"), seed=0)
    with pytest.raises(ValueError, match=r"MambaLM.step.token must be an integer in \[0, 15\], not 16"):
        lm.step(lm.initial_state(), 16)
    with pytest.raises(ValueError, match=r"MambaLM.prefill.tokens\[1\] must be an integer in \[0, 15\]"):
        lm.prefill([1, -1])
    other = MambaLM.from_seed(lm_preset("tiny", n_layer=1), seed=0)
    with pytest.raises(ValueError, match="MambaLM.step state must hold 2 layers"):
        lm.step(other.initial_state(), 1)
    with pytest.raises(TypeError, match="MambaLM.step state must be an LMState, not tuple"):
        lm.step((), 1)
    with pytest.raises(ValueError, match=r"MambaLM.from_seed.seed must be an integer >= 0, not -1"):
        MambaLM.from_seed(lm_preset("tiny"), seed=-1)
    with pytest.raises(ValueError, match=r"MambaLM.truncated.n_layer must be an integer in \[1, 2\], not 3"):
        lm.truncated(3)


def test_truncated_model_shares_weights():
    lm = MambaLM.from_seed(lm_preset("tiny", n_layer=3), seed=1)
    small = lm.truncated(1)
    assert small.config.n_layer == 1
    tokens = [1, 5, 9]
    # The truncated model is the oracle's first layer with the same head.
    t = {k: v for k, v in lm.tensors.items() if not k.startswith(("backbone.layers.1.", "backbone.layers.2."))}
    want, _, _ = parallel_forward(small.config, t, tokens)
    np.testing.assert_allclose(small.prefill(tokens)[0], want, rtol=1e-9, atol=1e-12)
    assert np.array_equal(lm.truncated(3).prefill(tokens)[0], lm.prefill(tokens)[0])


# -- weight files -------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_weights_round_trip(tmp_path, suffix):
    cfg = lm_preset("tiny", tie_embeddings=False)
    lm = MambaLM.from_seed(cfg, seed=9)
    path = tmp_path / f"w{suffix}"
    lm.save(path)
    back = MambaLM.load(path, config=cfg)
    assert all(np.array_equal(back.tensors[k], lm.tensors[k]) for k in lm.tensors)
    lm.save(path, dtype="float16")
    half = MambaLM.load(path, config=cfg)
    for k, v in lm.tensors.items():
        assert np.array_equal(half.tensors[k], v.astype(np.float16).astype(np.float64))


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_safetensors_against_the_reference_library(tmp_path, dtype):
    st = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(0)
    tensors = {"a.weight": rng.standard_normal((3, 5)), "b": rng.standard_normal(7),
               "c.scalarish": rng.standard_normal((2, 1, 4))}
    ours = tmp_path / "ours.safetensors"
    save_tensors(ours, tensors, dtype=dtype)
    theirs = st.load_file(str(ours))
    for k, v in tensors.items():
        assert theirs[k].dtype == np.dtype(dtype) and np.array_equal(theirs[k], v.astype(dtype))
    ref = tmp_path / "ref.safetensors"
    st.save_file({k: v.astype(dtype) for k, v in tensors.items()}, str(ref), metadata={"format": "np"})
    back = load_tensors(ref)
    for k, v in tensors.items():
        assert np.array_equal(back[k], v.astype(dtype))


def _safetensors_bytes(header, body):
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + body


def test_safetensors_bfloat16(tmp_path):
    # bfloat16 1.0 = 0x3F80, -2.5 = 0xC020, 2**-128 (subnormal in bf16) = 0x0020.
    raw = np.array([0x3F80, 0xC020, 0x0020], dtype="<u2").tobytes()
    path = tmp_path / "bf.safetensors"
    path.write_bytes(_safetensors_bytes({"x": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]}}, raw))
    assert load_tensors(path)["x"].tolist() == [1.0, -2.5, 2.0 ** -128]


def test_safetensors_malformed(tmp_path):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(b"\x01\x00")
    with pytest.raises(ValueError, match="not a safetensors file"):
        load_tensors(path)
    path.write_bytes(_safetensors_bytes({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}},
                                        bytes(16)))
    with pytest.raises(ValueError, match=r"tensor 'x' has data_offsets \[0, 12\] that do not hold 4 F32"):
        load_tensors(path)
    path.write_bytes(_safetensors_bytes({"x": {"dtype": "I8", "shape": [1], "data_offsets": [0, 1]}},
                                        bytes(8)))
    with pytest.raises(ValueError, match="tensor 'x' has dtype 'I8'; allowed: F64, F32, F16, BF16"):
        load_tensors(path)
    with pytest.raises(ValueError, match="load_tensors.path suffix must be one of '.npz', '.safetensors'"):
        load_tensors(tmp_path / "w.bin")
    with pytest.raises(ValueError, match="save_tensors: tensor 'big' overflows float16"):
        save_tensors(tmp_path / "w.npz", {"big": np.array([1e6])}, dtype="float16")


def test_load_rejects_bad_tensors(tmp_path):
    cfg = lm_preset("tiny")
    lm = MambaLM.from_seed(cfg, seed=1)
    path = tmp_path / "w.npz"
    name = "backbone.layers.1.mixer.in_proj.weight"

    def write(t):
        save_tensors(path, t)

    t = dict(lm.tensors)
    del t[name]
    write(t)
    with pytest.raises(ValueError, match=rf"w.npz: missing tensor '{name}' \(shape \(88, 16\)\)"):
        MambaLM.load(path, config=cfg)
    t = dict(lm.tensors, **{name: np.zeros((88, 15))})
    write(t)
    with pytest.raises(ValueError, match=rf"tensor '{name}' must have shape \(88, 16\), not \(88, 15\)"):
        MambaLM.load(path, config=cfg)
    bad = lm.tensors[name].copy()
    bad[3, 4] = np.nan
    bad[0, 0] = np.inf
    write(dict(lm.tensors, **{name: bad}))
    with pytest.raises(ValueError, match=rf"tensor '{name}' has 2 NaN/Inf value\(s\)"):
        MambaLM.load(path, config=cfg)
    write(dict(lm.tensors, **{"lm_head.weight": np.zeros((16, 16))}))
    with pytest.raises(ValueError, match="unexpected tensor 'lm_head.weight'"):
        MambaLM.load(path, config=cfg)
    write(dict(lm.tensors))
    with pytest.raises(ValueError, match="missing tensor 'lm_head.weight'"):
        MambaLM.load(path, config=dataclasses.replace(cfg, tie_embeddings=False))


# -- SPEQ self-speculation -------------------------------------------------------------

def e3m0_oracle(w16):
    """BSFP v1 (``docs/bsfp.md``) read by hand: the E3M0 draft value of FP16 weights below 2 in magnitude
    (no scaling: k = 0), with the default remap table (``docs/bsfp.md``)."""
    bits = w16.view(np.uint16).astype(np.int64)
    assert (bits & 0x7FFF).max() >> 10 <= 15, "the oracle covers k = 0 only"
    e = (bits & 0x7FFF) >> 10
    # Encoder: exponents 9 and 11 get codes 0b000 and 0b010; others their natural e >> 1.
    code = np.where(e == 9, 0, np.where(e == 11, 2, e >> 1))
    # Decoder: the remap targets 0 and 2 read as 9 and 11; codes 4 and 5 lost one
    # exponent of their pair to the remap and read as the one left (8, 10); the
    # other codes as the lower exponent of their pair.
    rep = np.array([9, 2, 11, 6, 8, 10, 12, 14])[code]
    return np.where(bits & 0x8000, -1.0, 1.0) * np.exp2(rep - 15.0)


def test_speq_pair_target_and_draft_weights():
    lm = MambaLM.from_seed(lm_preset("tiny", tie_embeddings=False), seed=6, head_gain=4.0)
    pair = speq_pair(lm)
    names = [n for n in lm.tensors if n.endswith(("in_proj.weight", "out_proj.weight", "lm_head.weight"))]
    assert sorted(pair.encoded) == sorted(names)
    for name, w in lm.tensors.items():
        w16 = w.astype(np.float16)
        # The target reads the FP16 checkpoint back exactly (no weight is scaled out).
        assert pair.inexact.get(name, 0) == 0
        assert np.array_equal(pair.target.tensors[name], w16.astype(np.float64))
        want = e3m0_oracle(w16) if name in names else w16.astype(np.float64)
        assert np.array_equal(pair.draft.tensors[name], want), name
    assert all(v >= 0 for v in pair.misread.values())
    # The draft is a different model, close enough to agree on some argmaxes.
    tokens = list(range(16))
    a, b = pair.target.prefill(tokens)[0], pair.draft.prefill(tokens)[0]
    assert not np.array_equal(a, b)


def test_speq_pair_tied_head():
    lm = MambaLM.from_seed(lm_preset("tiny"), seed=6, init_std=0.5)
    pair = speq_pair(lm)                     # lm_head encoded, lookup stays FP16: untied copies
    emb16 = lm.tensors["backbone.embedding.weight"].astype(np.float16)
    assert not pair.draft.config.tie_embeddings and not pair.target.config.tie_embeddings
    assert np.array_equal(pair.draft.tensors["backbone.embedding.weight"], emb16.astype(np.float64))
    assert np.array_equal(pair.draft.tensors["lm_head.weight"], e3m0_oracle(emb16))
    assert np.array_equal(pair.target.tensors["lm_head.weight"], emb16.astype(np.float64))
    both = speq_pair(lm, kinds=("lm_head", "embedding"))  # lookup and head read the draft plane
    assert both.draft.config.tie_embeddings and "lm_head.weight" not in both.encoded
    assert np.array_equal(both.draft.tensors["backbone.embedding.weight"], e3m0_oracle(emb16))


def test_speq_pair_errors():
    lm = MambaLM.from_seed(lm_preset("tiny"), seed=6)
    with pytest.raises(ValueError, match=f"speq_pair.kinds must be one of {', '.join(map(repr, SPEQ_KINDS))}, "
                                         f"not 'norm'"):
        speq_pair(lm, kinds=("in_proj", "norm"))
    with pytest.raises(TypeError, match="speq_pair bsfp must be a BSFPConfig"):
        speq_pair(lm, bsfp={"group_size": 128})
    t = dict(lm.tensors)
    t["backbone.layers.0.mixer.D"] = np.full(lm.config.nheads, 1e6)
    with pytest.raises(ValueError, match="speq_pair: tensor 'backbone.layers.0.mixer.D' overflows FP16"):
        speq_pair(MambaLM(lm.config, t))
    grouped = speq_pair(lm, bsfp=BSFPConfig(group_size=8), kinds=("in_proj",))
    assert grouped.encoded["backbone.layers.0.mixer.in_proj.weight"].scales.shape == (88, 2)
