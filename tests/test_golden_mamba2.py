import dataclasses
import math

import numpy as np
import pytest

from specgen.golden.mamba2 import (MAMBA2_SIZES, SSMConfig, SSMParams, mamba2_init_params, ssm_preset,
                           ssm_preset_names, ssm_step_hw, ssm_step_hw_bits, ssm_step_ref)
from specgen.golden.nonlinear import DEFAULT_LUTS, LUTSpec, lut_eval

SMALL = dict(nheads=3, headdim=4, d_state=8, lanes=4)


def bits(a):
    a = np.asarray(a)
    return a.view(np.uint16 if a.dtype == np.float16 else np.uint32)


def draw(cfg, rng, *, scale_dt=1.0):
    """One token's binary32 inputs."""
    H, P, N = cfg.state_shape
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return dict(x=f(H, P), B=f(N), C=f(N), dt=(f(H) * np.float32(scale_dt)), z=f(H, P))


def setup(cfg, seed):
    rng = np.random.default_rng(seed)
    params = mamba2_init_params(cfg, rng)
    state = (rng.standard_normal(cfg.state_shape) * 0.3).astype(cfg.state_dtype)
    return rng, params, state


# -- config --------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,exc,message", [
    (dict(nheads=0), ValueError, "SSMConfig.nheads must be an integer >= 1, not 0"),
    (dict(nheads=True), TypeError, "SSMConfig.nheads must be an integer >= 1, not True"),
    (dict(nheads=2, headdim="64"), TypeError,
     "SSMConfig.headdim must be an integer >= 1, not '64'"),
    (dict(nheads=2, lanes=192), ValueError,
     "SSMConfig.lanes must be at most d_state (128) or a power-of-two multiple of a "
     "power-of-two d_state, not 192"),
    (dict(nheads=2, d_state=96, lanes=128), ValueError,
     "SSMConfig.lanes must be at most d_state (96) or a power-of-two multiple of a "
     "power-of-two d_state, not 128"),
    (dict(nheads=2, state_format="bf16"), ValueError,
     "SSMConfig.state_format must be one of 'fp32', 'fp16', not 'bf16'"),
    (dict(nheads=2, exp_lut=DEFAULT_LUTS["silu"]), TypeError,
     f"SSMConfig.exp_lut must be a LUTSpec with function 'exp', not {DEFAULT_LUTS['silu']!r}"),
])
def test_config_rejects_bad_parameters(kwargs, exc, message):
    with pytest.raises(exc) as info:
        SSMConfig(**kwargs)
    assert str(info.value) == message


def test_config_is_keyword_only_and_frozen():
    with pytest.raises(TypeError):
        SSMConfig(2)
    cfg = SSMConfig(nheads=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.nheads = 3


@pytest.mark.parametrize("size,nheads", [("130M", 24), ("370M", 32), ("780M", 48),
                                         ("1.3B", 64), ("2.7B", 80)])
def test_from_model(size, nheads):
    cfg = SSMConfig.from_model(size)
    assert (cfg.nheads, cfg.headdim, cfg.d_state) == (nheads, 64, 128)
    assert cfg.d_inner == 2 * MAMBA2_SIZES[size][0]


def test_from_model_derived_sizes_and_errors():
    cfg = SSMConfig.from_model("2.7B", lanes=64)
    assert cfg.state_elems == 655_360
    assert (cfg.tree_width, cfg.tree_depth, cfg.groups_per_row) == (64, 6, 2)
    assert cfg.cycles_per_token == 10_240
    assert SSMConfig.from_model("130M", lanes=256).tree_width == 128
    with pytest.raises(ValueError) as info:
        SSMConfig.from_model("7B")
    assert str(info.value) == ("SSMConfig.from_model.size must be one of '130M', '370M', "
                               "'780M', '1.3B', '2.7B', not '7B'")
    with pytest.raises(ValueError) as info:
        SSMConfig.from_model("130M", headdim=100)
    assert str(info.value) == "SSMConfig.headdim must divide d_inner (1536), not 100"


def test_presets():
    assert ssm_preset_names() == ("sim", "130M", "370M", "780M", "1.3B", "2.7B")
    assert ssm_preset("sim").state_shape == (2, 4, 16)
    assert ssm_preset("2.7B", lanes=128).lanes == 128
    with pytest.raises(ValueError, match="ssm_preset.name must be one of 'sim', '130M'"):
        ssm_preset("vck190")


def test_init_params_follow_mamba2(seed):
    cfg = SSMConfig.from_model("2.7B")
    p = mamba2_init_params(cfg, np.random.default_rng(seed))
    assert p.A.dtype == np.float32 and ((p.A <= -1) & (p.A >= -16)).all()
    dt = np.logaddexp(0, p.dt_bias.astype(np.float64))
    assert ((dt > 0.001 * (1 - 1e-5)) & (dt < 0.1 * (1 + 1e-5))).all()
    assert (p.D == 1).all()


def test_shape_errors():
    cfg = SSMConfig(**SMALL)
    rng, params, state = setup(cfg, 0)
    inp = draw(cfg, rng)
    with pytest.raises(ValueError, match=r"B must have shape \(8,\), not \(7,\)"):
        ssm_step_hw(cfg, params, state, **{**inp, "B": inp["B"][:7]})
    with pytest.raises(ValueError, match=r"SSMParams.D must have shape \(3,\), not \(2,\)"):
        ssm_step_ref(cfg, dataclasses.replace(params, D=params.D[:2]), state, **inp)


# -- float64 reference vs an independent formulation ----------------------------

def loop_reference(A, dt_bias, D, h, x, B, C, dt, z):
    """The Mamba2 step (``Mamba2.step``) written out element by element with Python floats and math."""
    H, P, N = len(h), len(h[0]), len(h[0][0])
    new = [[[0.0] * N for _ in range(P)] for _ in range(H)]
    y = [[0.0] * P for _ in range(H)]
    for hh in range(H):
        s = dt[hh] + dt_bias[hh]
        delta = s + math.log1p(math.exp(-s)) if s > 0 else math.log1p(math.exp(s))
        dA = math.exp(delta * A[hh])
        for p in range(P):
            terms = []
            for n in range(N):
                new[hh][p][n] = dA * h[hh][p][n] + delta * B[n] * x[hh][p]
                terms.append(new[hh][p][n] * C[n])
            acc = math.fsum(terms) + D[hh] * x[hh][p]
            if z is not None:
                zz = z[hh][p]
                acc *= zz / (1.0 + math.exp(-zz))
            y[hh][p] = acc
    return np.array(y), np.array(new)


@pytest.mark.parametrize("gated", [True, False])
def test_reference_matches_loop_formulation(gated, seed):
    cfg = SSMConfig(**SMALL)
    rng, params, state = setup(cfg, seed)
    h_ref = state.astype(np.float64)
    h_loop = h_ref.tolist()
    for _ in range(5):
        inp = draw(cfg, rng, scale_dt=3.0)
        z = inp.pop("z")
        z = z if gated else None
        r = ssm_step_ref(cfg, params, h_ref, z=z, **inp)
        y, h_new = loop_reference(*(np.float64(a).tolist() for a in (params.A, params.dt_bias,
                                                                       params.D)),
                                  h_loop, *(np.float64(inp[k]).tolist()
                                            for k in ("x", "B", "C", "dt")),
                                  None if z is None else np.float64(z).tolist())
        np.testing.assert_allclose(r.state, h_new, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(r.y, y, rtol=1e-12, atol=1e-13)
        h_ref, h_loop = r.state, h_new.tolist()


# -- hardware model vs float64 --------------------------------------------------

@pytest.mark.parametrize("state_format,tol_y,tol_h", [("fp32", 2e-5, 3e-6), ("fp16", 0.2, 5e-3)])
def test_hw_close_to_reference(state_format, tol_y, tol_h, seed):
    # y is gated by silu(z), so a head's ‖y‖ can be small and its relative
    # error heavy-tailed; the state error is the sharp measure.
    cfg = SSMConfig(nheads=4, headdim=8, d_state=32, lanes=8, state_format=state_format)
    rng, params, state = setup(cfg, seed)
    h_hw, h_ref = state, state.astype(np.float64)
    for _ in range(30):
        inp = draw(cfg, rng)
        hw = ssm_step_hw(cfg, params, h_hw, **inp)
        ref = ssm_step_ref(cfg, params, h_ref, **inp)
        h_hw, h_ref = hw.state, ref.state
        assert hw.state.dtype == cfg.state_dtype and hw.y.dtype == np.float32
        ey = np.linalg.norm(hw.y - ref.y, axis=1) / np.linalg.norm(ref.y, axis=1)
        eh = (np.linalg.norm((hw.state - ref.state).reshape(cfg.nheads, -1), axis=1)
              / np.linalg.norm(ref.state.reshape(cfg.nheads, -1), axis=1))
        assert ey.max() < tol_y and eh.max() < tol_h
        np.testing.assert_allclose(hw.delta, ref.delta, rtol=1e-6)
        np.testing.assert_allclose(hw.dA, ref.dA, rtol=1e-6)


def test_error_budget_stays_bounded(seed):
    # The reduced version of docs/ssm-numerics.md: 100 steps on small dims.
    from specgen.gen.studies.ssm_error_budget import run_error_budget
    cfg = SSMConfig(nheads=4, headdim=8, d_state=32, lanes=8)
    res = run_error_budget(cfg, steps=100, seed=seed, variants=("hw",))
    rel_y, rel_h = res["hw"]["rel_y"], res["hw"]["rel_h"]
    print("max rel y", rel_y.max(), "max rel h", rel_h.max())
    assert rel_h.max() < 2e-6 and rel_y.max() < 2e-5
    # No growth: the last 30 steps are no worse than twice the middle 30.
    assert (rel_h[-30:].mean(axis=0) <= 2 * rel_h[35:65].mean(axis=0)).all()


def test_write_error_budget_is_deterministic(tmp_path):
    from specgen.gen.studies.ssm_error_budget import write_error_budget
    cfg = SSMConfig(nheads=2, headdim=8, d_state=16, lanes=4)
    a = write_error_budget(out=tmp_path / "a", steps=12, seed=3, cfg=cfg).read_bytes()
    b = write_error_budget(out=tmp_path / "b", steps=12, seed=3, cfg=cfg).read_bytes()
    assert a == b and b"| `hw`" in a


# -- exactness properties of the hardware model ---------------------------------

def test_deterministic(seed):
    cfg = SSMConfig(**SMALL)
    rng, params, state = setup(cfg, seed)
    inp = draw(cfg, rng)
    a, b = ssm_step_hw(cfg, params, state, **inp), ssm_step_hw(cfg, params, state.copy(), **inp)
    for u, v in zip(a, b):
        assert np.array_equal(bits(u), bits(v))


def test_heads_and_rows_are_independent(seed):
    cfg = SSMConfig(**SMALL)
    rng, params, state = setup(cfg, seed)
    inp = draw(cfg, rng)
    base = ssm_step_hw(cfg, params, state, **inp)
    # Change everything that belongs to head 1 only.
    s2 = state.copy()
    s2[1] = rng.standard_normal(s2[1].shape)
    inp2 = {k: v.copy() for k, v in inp.items()}
    inp2["x"][1] = 7.0
    inp2["z"][1] = -3.0
    inp2["dt"][1] = np.nan
    p2 = SSMParams(A=params.A.copy(), dt_bias=params.dt_bias.copy(), D=params.D.copy())
    p2.A[1], p2.D[1] = -2.0, 5.0
    other = ssm_step_hw(cfg, p2, s2, **inp2)
    keep = [0, 2]
    assert np.array_equal(bits(base.y[keep]), bits(other.y[keep]))
    assert np.array_equal(bits(base.state[keep]), bits(other.state[keep]))
    # A row's x changes that row only.
    inp3 = {k: v.copy() for k, v in inp.items()}
    inp3["x"][0, 2] = 1e3
    third = ssm_step_hw(cfg, params, state, **inp3)
    mask = np.ones((cfg.nheads, cfg.headdim), bool)
    mask[0, 2] = False
    assert np.array_equal(bits(base.y[mask]), bits(third.y[mask]))
    assert np.array_equal(bits(base.state[mask]), bits(third.state[mask]))


def test_state_is_independent_of_lanes_and_y_of_wider_lanes(seed):
    cfg = SSMConfig(nheads=2, headdim=4, d_state=16, lanes=1)
    rng, params, state = setup(cfg, seed)
    inp = draw(cfg, rng)
    results = {lanes: ssm_step_hw(dataclasses.replace(cfg, lanes=lanes), params, state, **inp)
               for lanes in (1, 2, 4, 8, 16, 32, 64)}
    for r in results.values():
        assert np.array_equal(bits(r.state), bits(results[1].state))
    # lanes ≥ d_state all use one full-width tree per row.
    assert np.array_equal(bits(results[16].y), bits(results[32].y))
    assert np.array_equal(bits(results[16].y), bits(results[64].y))


def emu_pipeline(cfg, params, state, x, B, C, dt, z, order):
    """An independent, cycle-by-cycle reading of the contract.

    Scalar binary32 operations only. Tiles of ``g`` state elements of one row
    are processed in the given (shuffled) row order; each tile feeds ``g``
    EMUs and one adder tree, and the row accumulator receives the tile sums
    in ascending n.
    """
    f32 = np.float32
    H, P, N = cfg.state_shape
    g = cfg.tree_width
    sp, ex, si = (lambda spec: (lambda v: lut_eval(spec, f32(v))[()]))(cfg.softplus_lut), \
        (lambda spec: (lambda v: lut_eval(spec, f32(v))[()]))(cfg.exp_lut), \
        (lambda spec: (lambda v: lut_eval(spec, f32(v))[()]))(cfg.silu_lut)
    delta = [sp(f32(dt[h]) + f32(params.dt_bias[h])) for h in range(H)]
    dA = [ex(delta[h] * f32(params.A[h])) for h in range(H)]
    new = np.zeros((H, P, N), np.float32)
    y = np.zeros((H, P), np.float32)
    for h, p in order:
        u = delta[h] * x[h, p]
        acc = None
        for t0 in range(0, N, g):
            prods = []
            for n in range(t0, min(t0 + g, N)):
                hn = f32(dA[h] * state[h, p, n]) + f32(u * B[n])
                new[h, p, n] = hn
                prods.append(f32(hn * C[n]))
            while len(prods) > 1:
                # An odd value out at the end of a level moves up unchanged.
                prods = [f32(prods[i] + prods[i + 1]) if i + 1 < len(prods) else prods[i]
                         for i in range(0, len(prods), 2)]
            acc = prods[0] if acc is None else f32(acc + prods[0])
        out = f32(acc + f32(f32(params.D[h]) * x[h, p]))
        y[h, p] = f32(out * si(z[h, p]))
    return y, new


@pytest.mark.parametrize("lanes,d_state", [(1, 8), (2, 8), (8, 8), (16, 8), (3, 8), (5, 8),
                                           (6, 8), (7, 8), (3, 6), (5, 12)])
def test_matches_independent_emu_pipeline_in_any_tile_order(lanes, d_state, seed):
    """Including lanes that divide neither d_state nor the state (partial last groups,
    trees with odd levels)."""
    cfg = SSMConfig(nheads=2, headdim=3, d_state=d_state, lanes=lanes)
    rng, params, state = setup(cfg, seed)
    inp = draw(cfg, rng)
    # Sprinkle special values in.
    inp["x"][1, 2] = np.inf
    inp["B"][3] = 0.0
    inp["C"][5] = np.float32(1e-41)                   # subnormal
    order = [(h, p) for h in range(cfg.nheads) for p in range(cfg.headdim)]
    rng.shuffle(order)
    with np.errstate(all="ignore"):
        y, new = emu_pipeline(cfg, params, state, **inp, order=order)
    hw = ssm_step_hw(cfg, params, state, **inp)
    canon = lambda a: np.where(np.isnan(a), np.uint32(0x7FC00000), bits(a))  # noqa: E731
    assert np.array_equal(bits(hw.state), canon(new))
    assert np.array_equal(bits(hw.y), canon(y))


def test_bits_api_matches_float_api(seed):
    cfg = SSMConfig(**SMALL)
    rng, params, state = setup(cfg, seed)
    inp = draw(cfg, rng)
    y, s = ssm_step_hw_bits(cfg, params, bits(state), **{k: bits(v) for k, v in inp.items()})
    ref = ssm_step_hw(cfg, params, state, **inp)
    assert y.dtype == np.uint32 and s.dtype == np.uint32
    assert np.array_equal(y, bits(ref.y)) and np.array_equal(s, bits(ref.state))
    with pytest.raises(TypeError, match="x must be a uint32 bit array, not float32"):
        ssm_step_hw_bits(cfg, params, bits(state), **{**{k: bits(v) for k, v in inp.items()},
                                                      "x": inp["x"]})


def test_fp16_state_rounds_once_and_feeds_y(seed):
    cfg = SSMConfig(**SMALL, state_format="fp16")
    rng, params, state = setup(cfg, seed)
    inp = draw(cfg, rng)
    r = ssm_step_hw(cfg, params, state, **inp)
    r32 = ssm_step_hw(dataclasses.replace(cfg, state_format="fp32"), params,
                      state.astype(np.float32), **inp)
    assert r.state.dtype == np.float16
    assert np.array_equal(bits(r.state), bits(r32.state.astype(np.float16)))
    y, s = ssm_step_hw_bits(cfg, params, bits(state), **{k: bits(v) for k, v in inp.items()})
    assert s.dtype == np.uint16 and np.array_equal(s, bits(r.state))


# -- special values ---------------------------------------------------------------

def canonical(a):
    return (bits(a) == 0x7FC00000).all()


def test_nan_in_x_poisons_its_row_only(seed):
    cfg = SSMConfig(**SMALL)
    rng, params, state = setup(cfg, seed)
    inp = draw(cfg, rng)
    inp["x"][2, 1] = np.nan
    r = ssm_step_hw(cfg, params, state, **inp)
    assert canonical(r.state[2, 1]) and canonical(r.y[2, 1])
    mask = np.ones(r.y.shape, bool)
    mask[2, 1] = False
    assert np.isfinite(r.y[mask]).all() and np.isfinite(r.state[mask]).all()


def test_nan_in_dt_poisons_its_head_only(seed):
    cfg = SSMConfig(**SMALL)
    rng, params, state = setup(cfg, seed)
    inp = draw(cfg, rng)
    inp["dt"][1] = np.float32(np.nan)
    r = ssm_step_hw(cfg, params, state, **inp)
    assert canonical(r.state[1]) and canonical(r.y[1]) and canonical(r.delta[1])
    assert np.isfinite(r.state[[0, 2]]).all() and np.isfinite(r.y[[0, 2]]).all()


def test_dt_plus_inf(seed):
    cfg = SSMConfig(**SMALL)
    rng, params, state = setup(cfg, seed)
    inp = draw(cfg, rng)
    inp["dt"][0] = np.inf
    inp["x"][0, 0] = 0.0
    inp["B"][2] = 0.0
    r = ssm_step_hw(cfg, params, state, **inp)
    assert r.delta[0] == np.inf and bits(r.dA[0]) == 0
    xb = inp["x"][0][:, None] * inp["B"][None, :]
    new = r.state[0]
    assert canonical(new[xb == 0])
    assert (new[xb != 0] == np.copysign(np.inf, xb[xb != 0])).all()


def test_dt_minus_inf_freezes_the_head(seed):
    cfg = SSMConfig(**SMALL)
    rng, params, state = setup(cfg, seed)
    inp = draw(cfg, rng)
    inp["dt"][2] = -np.inf
    r = ssm_step_hw(cfg, params, state, **inp)
    assert bits(r.delta[2]) == 0 and r.dA[2] == 1
    assert np.array_equal(bits(r.state[2]), bits(state[2]))


def test_inf_x_times_zero_b_is_nan(seed):
    cfg = SSMConfig(**SMALL)
    rng, params, state = setup(cfg, seed)
    inp = draw(cfg, rng)
    inp["x"][0, 3] = -np.inf
    inp["B"][4] = 0.0
    r = ssm_step_hw(cfg, params, state, **inp)
    row = r.state[0, 3]
    assert canonical(row[4])
    others = np.delete(np.arange(cfg.d_state), 4)
    assert (row[others] == np.copysign(np.inf, -inp["B"][others])).all()
    assert canonical(r.y[0, 3])                   # ±Inf summed with NaN


def test_subnormals_are_not_flushed():
    cfg = SSMConfig(nheads=1, headdim=1, d_state=4, lanes=4)
    params = SSMParams(A=np.float32([-1.0]), dt_bias=np.float32([0.0]), D=np.float32([0.0]))
    tiny = np.float32(np.ldexp(1.0, -140))
    r = ssm_step_hw(cfg, params, np.zeros((1, 1, 4), np.float32), x=np.float32([[tiny]]),
                    B=np.ones(4, np.float32), C=np.ones(4, np.float32), dt=np.float32([0.0]))
    delta = lut_eval(cfg.softplus_lut, np.float32(0.0))
    expect = np.float32(delta * tiny)
    assert expect != 0 and (r.state == expect).all()
    assert r.y[0, 0] == np.float32(np.float32(expect + expect) + np.float32(expect + expect))


def test_fp16_state_nan_is_canonical(seed):
    cfg = SSMConfig(**SMALL, state_format="fp16")
    rng, params, state = setup(cfg, seed)
    inp = draw(cfg, rng)
    inp["dt"][0] = np.nan
    r = ssm_step_hw(cfg, params, state, **inp)
    assert (bits(r.state[0]) == 0x7E00).all()


def test_lut_parameters_flow_from_config(seed):
    # A config with coarser tables changes delta/dA: the model reads cfg's tables.
    cfg = SSMConfig(**SMALL)
    coarse = dataclasses.replace(cfg, exp_lut=LUTSpec(function="exp", lo=-20.0, hi=12.0,
                                                      step_log2=2, degree=1))
    rng, params, state = setup(cfg, seed)
    inp = draw(cfg, rng)
    a, b = ssm_step_hw(cfg, params, state, **inp), ssm_step_hw(coarse, params, state, **inp)
    assert not np.array_equal(bits(a.dA), bits(b.dA))
    assert np.array_equal(bits(b.dA), bits(lut_eval(coarse.exp_lut, a.delta * params.A)))


@pytest.mark.slow
def test_docs_ssm_numerics_is_current(tmp_path):
    # The full 1,000-step budget (about 30 s): docs/ssm-numerics.md must be what
    # the generator writes today.
    from pathlib import Path
    from specgen.gen.studies.ssm_error_budget import write_error_budget
    docs = Path(__file__).resolve().parent.parent / "docs" / "ssm-numerics.md"
    assert write_error_budget(out=tmp_path).read_bytes() == docs.read_bytes()


def test_rows_per_word_and_one_row():
    """Lanes beyond d_state sweep several rows a word; ``one_row`` is the unit at one row a
    cycle (its latencies), the config itself when it already is."""
    two = SSMConfig(nheads=4, headdim=4, d_state=4, lanes=8, input_words=4)
    assert (two.rows_per_word, two.tree_width, two.row_words, two.cycles_per_token) == (2, 4, 4, 8)
    one = two.one_row
    assert (one.lanes, one.input_words, one.rows_per_word, one.nheads) == (4, 4, 1, 4)
    part = SSMConfig(nheads=2, headdim=3, d_state=6, lanes=4)
    assert part.one_row is part and (part.row_words, part.cycles_per_token) == (8, 12)
