"""golden.mamba2.ssm_step_hw under contract "dspfp32" against an independent oracle.

The oracle reads the contract element by element: every multiply and add is SoftFloat's
binary32 operation with a flush to zero written from the encoding (tests/oracles.py), the
tables' index and residual are exact rationals, and the Horner steps flush like the
DSP. Only the ROM contents (lut_tables) and the saturation rules are read from golden:
they are data, not arithmetic.
"""

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

from specgen.golden.mamba2 import SSMConfig, SSMParams, mamba2_init_params, ssm_step_hw
from specgen.golden.nonlinear import SATURATION, lut_tables
from oracles import ftz_add32, ftz_mul32, is_nan32, seeded_rng

NAN = 0x7FC0_0000


def _b(v):
    return int(np.float32(v).view(np.uint32))


def _f(u):
    return float(np.uint32(u).view(np.float32))


def oracle_lut(spec, x):
    """The table function of ``spec`` on binary32 bits ``x``, Horner steps flushing."""
    if is_nan32(x):
        return NAN
    below, above = SATURATION[spec.function]
    fx = _f(x)
    if fx in (float("inf"), float("-inf")):
        return {"inf": 0x7F80_0000, "identity": x}[above] if fx > 0 else \
            {"zero": 0, "-zero": 0x8000_0000}[below]
    v = Fraction(fx)
    if v < Fraction(spec.lo):
        return {"zero": 0, "-zero": 0x8000_0000}[below]
    if v > Fraction(spec.hi):
        return {"inf": 0x7F80_0000, "identity": x}[above]
    scale = 1 << spec.step_log2
    i = int(v * scale)                                  # truncates toward zero
    r = _b(float(v - Fraction(i, scale)))               # exact, +0 at a node
    table = lut_tables(spec).view(np.uint32)[:, i - spec.first_index]
    y = int(table[spec.degree])
    for k in range(spec.degree - 1, -1, -1):
        y = ftz_add32(ftz_mul32(y, r), int(table[k]))
    return NAN if is_nan32(y) else y


def oracle_step(cfg, params, state, x, B, C, dt):
    """One decode step on bits, scalar, in the contract's order of operations."""
    H, P, N = cfg.state_shape
    g = cfg.tree_width
    A, bias, D = ([_b(v) for v in getattr(params, n)] for n in ("A", "dt_bias", "D"))
    delta = [oracle_lut(cfg.softplus_lut, ftz_add32(int(dt[h]), bias[h])) for h in range(H)]
    dA = [oracle_lut(cfg.exp_lut, ftz_mul32(delta[h], A[h])) for h in range(H)]
    new = np.zeros((H, P, N), np.uint32)
    y = np.zeros((H, P), np.uint32)
    for h in range(H):
        for p in range(P):
            u = ftz_mul32(delta[h], int(x[h, p]))
            acc = None
            for t0 in range(0, N, g):
                level = []
                for n in range(t0, min(t0 + g, N)):
                    hn = ftz_add32(ftz_mul32(dA[h], int(state[h, p, n])), ftz_mul32(u, int(B[n])))
                    new[h, p, n] = NAN if is_nan32(hn) else hn
                    level.append(ftz_mul32(hn, int(C[n])))
                while len(level) > 1:
                    level = [ftz_add32(level[j], level[j + 1]) if j + 1 < len(level) else level[j]
                             for j in range(0, len(level), 2)]
                acc = level[0] if acc is None else ftz_add32(acc, level[0])
            out = ftz_add32(acc, ftz_mul32(D[h], int(x[h, p])))
            y[h, p] = NAN if is_nan32(out) else out
    return y, new


def _inputs(cfg, rng):
    """Random binary32 inputs with values that underflow in every operation."""
    H, P, N = cfg.state_shape
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    x, B, C, dt = f(H, P), f(N), f(N), f(H)
    state = (f(H, P, N) * np.float32(0.3))
    tiny = np.float32(2.0 ** -127)                          # subnormal operand
    x[0, 0], B[1], C[2] = tiny, -tiny, tiny
    state[0, 1, :] = np.float32(2.0 ** -126)               # dA·h underflows (dA < 1)
    x[1, 2] = np.float32(2.0 ** -126)                      # u = delta·x underflows
    C[3] = np.float32(2.0 ** -126)                         # h'·C underflows (|h'| < 1)
    x[0, 2], B[4] = np.inf, 0.0                            # Inf·0 -> NaN
    dt[1] = -np.inf                                        # delta = +0, dA = 1
    v = lambda a: a.view(np.uint32)  # noqa: E731
    return v(state), v(x), v(B), v(C), v(dt)


@pytest.mark.parametrize("lanes,d_state", [(4, 8), (3, 8), (8, 8), (5, 12), (1, 6)])
def test_dspfp32_contract_matches_the_softfloat_oracle(lanes, d_state):
    rng = seeded_rng(f"ssm-dsp-{lanes}-{d_state}")
    cfg = SSMConfig(nheads=2, headdim=3, d_state=d_state, lanes=lanes, contract="dspfp32")
    params = mamba2_init_params(cfg, rng)
    state, x, B, C, dt = _inputs(cfg, rng)
    got = ssm_step_hw(cfg, params, state, x, B, C, dt)
    y, new = oracle_step(cfg, params, state, x, B, C, dt)
    assert np.array_equal(got.state.view(np.uint32), new)
    assert np.array_equal(got.y.view(np.uint32), y)
    assert got.flushes[0] > 0 and got.flushes[1] > 0, got.flushes
    # The same inputs under "ieee" keep the subnormals: the contracts differ here,
    # so the comparison above can fail.
    ieee = ssm_step_hw(dataclasses.replace(cfg, contract="ieee"), params, state, x, B, C, dt)
    assert not np.array_equal(ieee.state.view(np.uint32), new)
    assert ieee.flushes == (0, 0)


def test_horner_flushes_a_subnormal_residual():
    """A subnormal input to exp is inside its range; its residual reaches the DSP and is
    read as zero, so the result is the node's c_0 (exactly 1.0 for exp at 0)."""
    cfg = SSMConfig(nheads=1, headdim=1, d_state=1, lanes=1, contract="dspfp32")
    sub = _b(np.float32(2.0 ** -140))
    assert oracle_lut(cfg.exp_lut, sub) == _b(1.0)
    params = SSMParams(A=np.float32([-1.0]), dt_bias=np.float32([0.0]), D=np.float32([0.0]))
    zero = np.zeros(1, np.uint32)
    out = ssm_step_hw(cfg, params, np.zeros((1, 1, 1), np.uint32), np.zeros((1, 1), np.uint32),
                      zero, zero, np.uint32([0x8000_0000 | sub]))
    # dt = −2**-140 flushes in the adder: delta = softplus(dt_bias + (−0)) = softplus(0).
    assert out.delta[0] == np.float32(_f(oracle_lut(cfg.softplus_lut, 0)))


def test_contract_is_validated():
    with pytest.raises(ValueError, match="SSMConfig.contract must be one of 'ieee', "
                                         "'dspfp32', not 'ftz'"):
        SSMConfig(nheads=1, contract="ftz")
