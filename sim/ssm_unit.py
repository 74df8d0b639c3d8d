"""cocotb bench of :class:`hw.ssm_unit.SSMUnit` against
:func:`golden.mamba2.ssm_step_hw_bits`, bit for bit, over sequences of tokens.

The bench loads the layer parameters (Mamba2 initialization) and a random
initial state through the state tile port, then streams ``tokens`` tokens: a
producer writes each token's B, C, x and dt into the fill bank and commits it,
a consumer takes ``y`` under random back-pressure. Every ``y[h, p]`` of every
token is compared with the golden model, which carries its own state across
the tokens; at the end the whole state is read back through the tile port and
compared too. Tokens near the end carry special values (NaN/±Inf in x and dt,
subnormal x/B/C, x = Inf with B = 0) so their effects are checked without
poisoning the earlier tokens.

The timing without back-pressure is measured by :class:`sim.perf_probes.SSMProbe`
(:mod:`gen.perf.calibrate`), on both simulators.
"""

import dataclasses

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from specgen.golden.mamba2 import SSMConfig, SSMParams, mamba2_init_params, ssm_step_hw_bits
from specgen.golden.nonlinear import LUTSpec
from specgen.hw.ssm_unit import SEL_A, SEL_B, SEL_C, SEL_D, SEL_DT, SEL_DT_BIAS, SEL_X
from specgen.sim.bench import TB, params
from specgen.sim.ssm_unit_bfm import pack_tiles, unpack_tiles

__all__ = ["config_from_params", "lut_params", "make_tokens", "pack_tiles", "unpack_tiles"]


def lut_params(luts):
    """``{"exp_lut": LUTSpec, ...}`` as bench parameters (JSON): each spec's fields."""
    return {k: dataclasses.asdict(v) for k, v in luts.items()}


def config_from_params(p):
    """The ``SSMConfig`` of a bench's parameters: geometry ``cfg``, tables ``luts``
    (:func:`lut_params`)."""
    luts = {k: LUTSpec(**v) for k, v in p.get("luts", {}).items()}
    return SSMConfig(**p["cfg"], **luts)


def _f32(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32)


def _beats(sel, words, W):
    words = [int(w) for w in np.asarray(words, dtype=np.uint32).ravel()]
    return [(sel, a, sum(w << (32 * i) for i, w in enumerate(words[a * W:(a + 1) * W])))
            for a in range(len(words) // W)]


def token_beats(cfg, x, B, C, dt):
    """``(wr_sel, wr_addr, wr_data)`` of one token: B, C, x, dt, ``input_words`` a beat."""
    W = cfg.input_words
    return (_beats(SEL_B, B, W) + _beats(SEL_C, C, W) + _beats(SEL_X, x, W)
            + _beats(SEL_DT, dt, W))


def param_beats(cfg, prm):
    """``(wr_sel, wr_addr, wr_data)`` of the layer parameters A, dt_bias and D."""
    W = cfg.input_words
    return [b for sel, arr in ((SEL_A, prm.A), (SEL_DT_BIAS, prm.dt_bias), (SEL_D, prm.D))
            for b in _beats(sel, _f32(arr), W)]


def initial_state(rng, cfg):
    """A random initial state (uint32) with a −0, subnormals, and one row of smallest
    normals: with the first token's ``x`` of that row (:func:`make_tokens`) also the
    smallest normal, every product of the row underflows, so the row's ``h'`` and ``y``
    are nonzero under the ``"ieee"`` contract and zero under ``"dspfp32"``."""
    state = _f32(rng.standard_normal(cfg.state_shape) * 0.5)
    state.ravel()[rng.integers(0, state.size, 3)] = [0x80000000, 0x00000001, 0x80400000]
    state[-1, -1, :] = 0x0080_0000 | rng.integers(0, 1 << 20, cfg.d_state, dtype=np.uint32)
    return state


def make_tokens(rng, cfg, prm, count, *, specials=True):
    """``count`` tokens of uint32 arrays ``(x, B, C, dt)``, specials in the last ones."""
    H, P, N = cfg.state_shape
    out = []
    for t in range(count):
        x = rng.standard_normal((H, P)).astype(np.float32)
        B = rng.standard_normal(N).astype(np.float32)
        C = rng.standard_normal(N).astype(np.float32)
        delta = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), H))
        dt = (delta + np.log(-np.expm1(-delta)) - prm.dt_bias).astype(np.float32)
        if t % 5 == 4:       # out of the usual range: strong decay, or nearly frozen
            dt[rng.integers(0, H)] = np.float32(rng.choice([8.0, -30.0, 25.0]))
        x, B, C, dt = _f32(x), _f32(B), _f32(C), _f32(dt)
        if t == 0:
            x[-1, -1] = 0x0080_0000      # see initial_state
        if t % 7 == 3:       # subnormal operands
            x[rng.integers(0, H), rng.integers(0, P)] = rng.integers(1, 1 << 23)
            B[rng.integers(0, N)] = rng.integers(1, 1 << 23) | (1 << 31)
            C[rng.integers(0, N)] = rng.integers(1, 1 << 23)
            # The smallest normal: u = delta·x and h'·C round to subnormals, which
            # the "dspfp32" contract flushes (the FTZ boundary from both sides).
            x[rng.integers(0, H), rng.integers(0, P)] = 0x0080_0000
            C[rng.integers(0, N)] = 0x8080_0000
        tail = count - t
        if specials and tail <= 4:
            h, p = H - 1, rng.integers(0, P)
            if tail == 4:
                x[h, p] = 0x7FC00123                      # NaN with a payload
            elif tail == 3:
                x[h, p] = 0xFF800000                      # −Inf ...
                B[rng.integers(0, N)] = 0x80000000        # ... with a −0 column
            elif tail == 2:
                dt[h] = 0x7F800000                        # dt = +Inf
            else:
                dt[0] = 0xFF800000                        # dt = −Inf: head 0 frozen
        out.append((x, B, C, dt))
    return out


class SSMBench:
    def __init__(self, dut, cfg):
        self.dut, self.cfg = dut, cfg
        self.tb = TB(dut)
        self.rng = np.random.default_rng(self.tb.rng.getrandbits(64))
        self.cycle = 0
        self.y_log = []          # (cycle, value)

    async def clock_counter(self):
        while True:
            await RisingEdge(self.dut.clk)
            self.cycle += 1

    async def write(self, sel, addr, data):
        d = self.dut
        d.wr_en.value, d.wr_sel.value, d.wr_addr.value, d.wr_data.value = 1, sel, addr, int(data)
        await RisingEdge(d.clk)
        d.wr_en.value = 0

    async def wait_for(self, signal):
        while True:
            await ReadOnly()
            if int(signal.value):
                break
            await RisingEdge(self.dut.clk)
        await RisingEdge(self.dut.clk)

    async def producer(self, tokens, idle):
        d = self.dut
        for x, B, C, dt in tokens:
            await ReadOnly()
            while not int(d.fill_free.value):
                await RisingEdge(d.clk)
                await ReadOnly()
            await RisingEdge(d.clk)
            for sel, addr, val in token_beats(self.cfg, x, B, C, dt):
                while self.tb.rng.random() < idle:
                    await RisingEdge(d.clk)
                await self.write(sel, addr, val)
            d.token_valid.value = 1
            await ReadOnly()
            while not int(d.token_ready.value):
                await RisingEdge(d.clk)
                await ReadOnly()
            await RisingEdge(d.clk)
            d.token_valid.value = 0

    async def consumer(self, count, stall):
        d = self.dut
        while len(self.y_log) < count:
            await RisingEdge(d.clk)
            d.y__ready.value = int(self.tb.rng.random() >= stall)
            await ReadOnly()
            if int(d.y__valid.value) and int(d.y__ready.value):
                self.y_log.append((self.cycle, int(d.y__payload.value)))

    async def load_params(self, prm):
        for sel, addr, v in param_beats(self.cfg, prm):
            await self.write(sel, addr, v)

    async def wiggle_st_addr(self):
        """Move the tile port's address every cycle while tokens run (a don't-care
        then), so a state read that leaks into a sweep shows up."""
        tiles = self.cfg.nheads * self.cfg.headdim * self.cfg.groups_per_row
        while True:
            self.dut.st_addr.value = int(self.rng.integers(tiles))
            await RisingEdge(self.dut.clk)

    async def write_state(self, state):
        d = self.dut
        d.hold.value = 1
        await self.wait_for(d.idle)
        for a, w in enumerate(pack_tiles(self.cfg, state)):
            d.st_addr.value, d.st_wdata.value, d.st_we.value = a, w, 1
            await RisingEdge(d.clk)
        d.st_we.value = 0
        d.hold.value = 0

    async def read_state(self):
        d = self.dut
        d.hold.value = 1
        await self.wait_for(d.idle)
        words = []
        for a in range(self.cfg.nheads * self.cfg.headdim * self.cfg.groups_per_row):
            d.st_addr.value = a
            await RisingEdge(d.clk)
            await ReadOnly()
            words.append(int(d.st_rdata.value))
            await RisingEdge(d.clk)
        d.hold.value = 0
        return unpack_tiles(self.cfg, words)


async def _setup(dut):
    p = params()
    cfg = config_from_params(p)
    b = SSMBench(dut, cfg)
    d = dut
    for name in ("wr_en", "wr_sel", "wr_addr", "wr_data", "token_valid", "y__ready", "hold",
                 "st_addr", "st_we", "st_wdata"):
        getattr(d, name).value = 0
    await b.tb.reset()
    cocotb.start_soon(b.clock_counter())
    prm = mamba2_init_params(cfg, b.rng)
    prm = SSMParams(A=prm.A, dt_bias=prm.dt_bias, D=(1 + 0.25 * b.rng.standard_normal(cfg.nheads))
                    .astype(np.float32))
    await b.load_params(prm)
    return p, cfg, b, prm


# tests/test_ssm_unit.py::test_ssm_unit_verilator runs this on the shipped Verilog; the
# unit's timing on Verilator is sim.perf_probes.SSMProbe's (gen.perf.calibrate).
@cocotb.test()
async def tokens(dut):
    """``tokens`` tokens under random back-pressure; y and the final state bit for bit."""
    p, cfg, b, prm = await _setup(dut)
    H, P, _N = cfg.state_shape
    state = _f32(b.rng.standard_normal(cfg.state_shape) * 0.5)
    state.ravel()[b.rng.integers(0, state.size, 3)] = [0x80000000, 0x00000001, 0x80400000]
    await b.write_state(state)
    toks = make_tokens(b.rng, cfg, prm, p["tokens"], specials=p.get("specials", True))
    want_y = []
    for x, B, C, dt in toks:
        y, state = ssm_step_hw_bits(cfg, prm, state, x, B, C, dt)
        want_y.append(y)
    cocotb.start_soon(b.producer(toks, p.get("idle", 0.1)))
    wiggle = cocotb.start_soon(b.wiggle_st_addr())
    await b.consumer(len(toks) * H * P, p.get("stall", 0.3))
    wiggle.cancel()
    for t, y in enumerate(want_y):
        for h in range(H):
            for q in range(P):
                got = b.y_log[(t * H + h) * P + q][1]
                assert got == int(y[h, q]), (f"token {t} y[{h},{q}] = {got:#010x}, "
                                             f"ssm_step_hw_bits says {int(y[h, q]):#010x}")
    await RisingEdge(dut.clk)
    got_state = await b.read_state()
    bad = np.argwhere(got_state != state)
    assert bad.size == 0, (f"{len(bad)} state elements differ after {len(toks)} tokens; first "
                           f"{tuple(bad[0])}: {int(got_state[tuple(bad[0])]):#010x} vs golden "
                           f"{int(state[tuple(bad[0])]):#010x}")
    dut._log.info("checked %d tokens, %d y values and the final state", len(toks), len(b.y_log))


# -- Amaranth Python-simulator driver ---------------------------------------------
#
# The same scenario as the cocotb tests, on amaranth.sim: no Verilator build, so
# the default suite and gen/bench/ssm.py can run the full unit in seconds.

def stream_inputs(cfg, rng, *, tokens, specials=True, init_state=True):
    """A token stream's inputs, drawn from ``rng`` in one order: Mamba2-initialized
    parameters (``D`` drawn too), the initial state (random, or zero), ``tokens`` tokens
    (:func:`make_tokens`); and golden's answer, :func:`golden.mamba2.ssm_step_hw_bits`
    carrying the state across them. ``(prm, state0, toks, want_y, final state)``."""
    prm = mamba2_init_params(cfg, rng)
    prm = SSMParams(A=prm.A, dt_bias=prm.dt_bias,
                    D=(1 + 0.25 * rng.standard_normal(cfg.nheads)).astype(np.float32))
    state0 = initial_state(rng, cfg) if init_state else np.zeros(cfg.state_shape, np.uint32)
    toks = make_tokens(rng, cfg, prm, tokens, specials=specials)
    want_y, st = [], state0
    for x, B, C, dt in toks:
        y, st = ssm_step_hw_bits(cfg, prm, st, x, B, C, dt)
        want_y.append(y)
    return prm, state0, toks, want_y, st


def run_pysim(dut, cfg, *, tokens, seed, stall=0.0, idle=0.0, specials=True, init_state=True,
              max_cycles=200_000):
    """Drive ``dut`` (an :class:`hw.ssm_unit.SSMUnit`) for ``tokens`` tokens on amaranth.sim.

    Returns
    -------
    dict
        ``y`` (list of uint32 arrays per token), ``want_y``, ``state`` (read back
        through the tile port), ``want_state``, ``y_cycles`` (cycle of every y
        transfer), ``cycles``.
    """
    import random

    from amaranth.sim import Simulator

    pyrng = random.Random(seed)
    H, P, N = cfg.state_shape
    prm, state0, toks, want_y, st = stream_inputs(cfg, np.random.default_rng(seed),
                                                  tokens=tokens, specials=specials,
                                                  init_state=init_state)
    out = {"want_y": want_y, "want_state": st, "y": [], "y_cycles": []}

    async def bench(ctx):
        d = dut
        cycle = 0

        async def tick():
            nonlocal cycle
            await ctx.tick()
            cycle += 1

        for sel, a, v in param_beats(cfg, prm):
            ctx.set(d.wr_en, 1), ctx.set(d.wr_sel, sel), ctx.set(d.wr_addr, a)
            ctx.set(d.wr_data, v)
            await tick()
        ctx.set(d.wr_en, 0)
        ctx.set(d.hold, 1)
        for a, w in enumerate(pack_tiles(cfg, state0)):
            ctx.set(d.st_addr, a), ctx.set(d.st_wdata, w), ctx.set(d.st_we, 1)
            await tick()
        ctx.set(d.st_we, 0)
        ctx.set(d.hold, 0)
        start = cycle
        # producer program: per token, wait for fill_free, write, commit
        ops = []
        for x, B, C, dt in toks:
            ops.append(("wait",))
            ops += [("w", *b) for b in token_beats(cfg, x, B, C, dt)]
            ops.append(("commit",))
        pc = 0
        ys = []
        total = tokens * H * P
        while len(ys) < total:
            assert cycle < max_cycles, f"no progress after {cycle} cycles ({len(ys)} of {total} y)"
            op = ops[pc] if pc < len(ops) else ("done",)
            # The tile port's address is a don't-care while the unit runs: move
            # it every cycle, so a state read that leaks through shows up.
            ctx.set(d.st_addr, pyrng.randrange(H * P * cfg.groups_per_row))
            wr = op[0] == "w" and pyrng.random() >= idle
            ctx.set(d.wr_en, int(wr))
            if wr:
                ctx.set(d.wr_sel, op[1]), ctx.set(d.wr_addr, op[2]), ctx.set(d.wr_data, int(op[3]))
            ctx.set(d.token_valid, int(op[0] == "commit"))
            ready = int(pyrng.random() >= stall)
            ctx.set(d.y.ready, ready)
            if op[0] == "wait" and ctx.get(d.fill_free) or op[0] == "commit" and ctx.get(d.token_ready) or wr:
                pc += 1
            if ctx.get(d.y.valid) and ready:
                ys.append(ctx.get(d.y.payload))
                out["y_cycles"].append(cycle - start)
            await tick()
        ctx.set(d.token_valid, 0), ctx.set(d.y.ready, 0), ctx.set(d.wr_en, 0)
        out["cycles"] = cycle - start
        out["y"] = [np.array(ys[t * H * P:(t + 1) * H * P], dtype=np.uint32).reshape(H, P)
                    for t in range(tokens)]
        # checkpoint: hold, wait idle, read every tile
        ctx.set(d.hold, 1)
        while not ctx.get(d.idle):
            await tick()
        words = []
        for a in range(H * P * cfg.groups_per_row):
            ctx.set(d.st_addr, a)
            await tick()
            words.append(ctx.get(d.st_rdata))
        out["state"] = unpack_tiles(cfg, words)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


def check_pysim(out):
    """Assert a :func:`run_pysim` result equals the golden model bit for bit."""
    for t, (got, want) in enumerate(zip(out["y"], out["want_y"])):
        bad = np.argwhere(got != want)
        assert bad.size == 0, (f"token {t} y{tuple(bad[0])} = {int(got[tuple(bad[0])]):#010x}, "
                               f"ssm_step_hw_bits says {int(want[tuple(bad[0])]):#010x} "
                               f"({len(bad)} rows differ)")
    bad = np.argwhere(out["state"] != out["want_state"])
    assert bad.size == 0, (f"{len(bad)} state elements differ; first {tuple(bad[0])}: "
                           f"{int(out['state'][tuple(bad[0])]):#010x} vs golden "
                           f"{int(out['want_state'][tuple(bad[0])]):#010x}")
