"""Benches of :class:`hw.state_controller.StateController`.

Two designs under test share one scenario, one driver and one scoreboard:

``StateController`` alone, against :class:`SSMUnitBFM`
    A cycle-level Python stand-in for the :class:`hw.ssm_unit.SSMUnit` ports
    (fill banks, commit, sweeps of random length, ``y`` rows, ``hold``/``idle``,
    a synchronous tile port that returns garbage while a sweep runs) and for a
    conv-window unit that is busy at random. Its token update is a toy integer
    recurrence (:func:`toy_step`) that, like Mamba2's, does not depend on C.
    The BFM asserts the port protocol (tile writes only with ``hold`` and
    ``idle``, no write into a committed bank, ...). Fast to build on Verilator.

:class:`StateControllerTop`: ``SSMUnit`` + ``StateController`` + a conv-window RAM
    The real unit: every ``y`` and the state are compared bit for bit with
    :func:`golden.mamba2.ssm_step_hw_bits` run from the right states. A debug
    tile port (used only while the controller is idle) loads and reads the state.

The scenario (:func:`make_scenario`) runs speculative steps under the three
on-chip policies of :mod:`golden.backtrack`: checkpoint the committed state,
run draft tokens (capturing their inputs into records, checkpointing their
states into slots), then restore the accepted node's state by a restore
(store), a restore plus replays (replay) or a restore plus the path's tokens
again (recompute); plus commands that must fail, random idle cycles, conv-window
changes, and a reset in the middle of a command or token after which the
controller must answer from a clean state.

The driver is a set of *participants*, generators that yield the inputs they
drive for one cycle and receive every output of that cycle
(:func:`run_amaranth`: Amaranth's simulator; the cocotb tests: Verilator), so
the same code runs on both.
"""

import random
from collections import deque
from dataclasses import dataclass
from types import SimpleNamespace

import cocotb
import numpy as np
from amaranth import ClockDomain, Elaboratable, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from golden.mamba2 import SSMParams, mamba2_init_params, ssm_step_hw_bits
from hw.hierarchy import port_name, submodule
from hw.ssm_unit import SEL_A, SEL_B, SEL_C, SEL_D, SEL_DT, SEL_DT_BIAS, SEL_X, SSMUnit
from hw.state_controller import Op, StateController, connect_ssm

__all__ = [
    "StateControllerTop", "SSMUnitBFM", "toy_step", "Expect", "make_scenario", "run_amaranth",
    "run_bfm_pysim", "run_system_pysim", "TokenItem", "CmdItem", "LoadItem", "CheckItem",
    "IdleItem", "ResetItem", "ParamItem",
]

M32 = 0xFFFFFFFF


def _bits(n):
    return max(1, (n - 1).bit_length())


# -- the full-system test top -----------------------------------------------------------

class StateControllerTop(wiring.Component):
    """``SSMUnit`` + ``StateController`` + a conv-window RAM, for benches.

    Host ports as :class:`hw.state_controller.StateController` (``wr_*``,
    ``fill_free``, ``token_valid``/``token_ready``, ``y``, ``cmd``, ``resp``,
    counters) plus: ``ssm_hold``/``ssm_idle`` (observed), a debug tile port
    ``dbg_hold``, ``dbg_addr``, ``dbg_we``, ``dbg_wdata``, ``dbg_rdata`` that the
    bench uses only while the controller is idle (``dbg_hold`` holds the unit,
    the bench waits for ``ssm_idle``), ``conv_busy`` (the conv window's
    ``idle`` is its inverse) and a debug port of the conv RAM ``cdbg_*``.
    """

    def __init__(self, *, ssm_cfg, slots, records=0, conv_width=None, conv_depth=None,
                 mul_stages=1, add_stages=1):
        self.ssm = SSMUnit(cfg=ssm_cfg, mul_stages=mul_stages, add_stages=add_stages)
        self.ctrl = StateController(ssm_cfg=ssm_cfg, slots=slots, records=records,
                                    conv_width=conv_width, conv_depth=conv_depth)
        c = self.ctrl
        members = {name: m for name, m in c.signature.members.items()
                   if not name.startswith(("ssm_", "conv_"))}
        L = ssm_cfg.lanes
        members.update({
            "ssm_hold": Out(1), "ssm_idle": Out(1),
            "dbg_hold": In(1), "dbg_addr": In(_bits(c.state_tiles)), "dbg_we": In(1),
            "dbg_wdata": In(32 * L), "dbg_rdata": Out(32 * L),
            "conv_busy": In(1),
            "cdbg_addr": In(_bits(max(c.conv_depth, 1))), "cdbg_we": In(1),
            "cdbg_wdata": In(c.conv_width), "cdbg_rdata": Out(c.conv_width),
        })
        super().__init__(members)

    @property
    def module_name(self):
        c = self.ctrl
        return f"StateControllerTop_{self.ssm.module_name[len('SSMUnit_'):]}_s{c.slots}_r{c.records}"

    def elaborate(self, platform):
        m = Module()
        ssm, ctrl = self.ssm, self.ctrl
        submodule(m, "ssm", ssm)
        submodule(m, "ctrl", ctrl)
        for name in self.signature.members:
            if name in ctrl.signature.members and not name.startswith(("ssm_", "conv_")):
                port, inner = getattr(self, name), getattr(ctrl, name)
                if name in ("cmd", "y", "resp"):
                    wiring.connect(m, wiring.flipped(port), inner) if name == "cmd" else \
                        wiring.connect(m, inner, wiring.flipped(port))
                elif ctrl.signature.members[name].flow == In:
                    m.d.comb += inner.eq(port)
                else:
                    m.d.comb += port.eq(inner)
        # The controller's tile port, multiplexed with the bench's debug port.
        proxy = SimpleNamespace(
            wr_en=ssm.wr_en, wr_sel=ssm.wr_sel, wr_addr=ssm.wr_addr, wr_data=ssm.wr_data,
            fill_free=ssm.fill_free, token_valid=ssm.token_valid, token_ready=ssm.token_ready,
            y=ssm.y, idle=ssm.idle, st_rdata=ssm.st_rdata,
            hold=Signal(name="ctrl_hold"), st_addr=Signal.like(ssm.st_addr, name="ctrl_st_addr"),
            st_we=Signal(name="ctrl_st_we"), st_wdata=Signal.like(ssm.st_wdata, name="ctrl_st_wdata"))
        connect_ssm(m, ctrl, proxy)
        h, dh = proxy.hold, self.dbg_hold
        m.d.comb += [
            ssm.hold.eq(h | dh),
            ssm.st_addr.eq(Mux(dh, self.dbg_addr, proxy.st_addr)),
            ssm.st_we.eq(Mux(dh, self.dbg_we, proxy.st_we)),
            ssm.st_wdata.eq(Mux(dh, self.dbg_wdata, proxy.st_wdata)),
            self.dbg_rdata.eq(ssm.st_rdata), self.ssm_hold.eq(h), self.ssm_idle.eq(ssm.idle),
            ctrl.conv_idle.eq(~self.conv_busy),
        ]
        if ctrl.conv_depth:
            mem = Memory(shape=ctrl.conv_width, depth=max(ctrl.conv_depth, 2), init=[])
            m.submodules.conv_ram = mem
            rp, wp = mem.read_port(domain="sync"), mem.write_port()
            ch = ctrl.conv_hold
            m.d.comb += [
                rp.addr.eq(Mux(ch, ctrl.conv_addr, self.cdbg_addr)), rp.en.eq(1),
                ctrl.conv_rdata.eq(rp.data), self.cdbg_rdata.eq(rp.data),
                wp.addr.eq(Mux(ch, ctrl.conv_addr, self.cdbg_addr)),
                wp.data.eq(Mux(ch, ctrl.conv_wdata, self.cdbg_wdata)),
                wp.en.eq(Mux(ch, ctrl.conv_we, self.cdbg_we)),
            ]
        return m


# -- models -----------------------------------------------------------------------------

def toy_step(cfg, state, tok):
    """The BFM's token update: an integer recurrence on uint32 words, C-independent state.

    ``h' = h·0x01000193 + x[h, p] + 3·B[n] + dt[h]``,
    ``y[h, p] = x[h, p] + Σ_n (h'[h, p, n] XOR C[n])`` (mod 2**32).
    """
    x, B, Cc, dt = (np.asarray(a, dtype=np.uint64) for a in tok)
    h = np.asarray(state, dtype=np.uint64)
    new = (h * 0x01000193 + x[:, :, None] + 3 * B[None, None, :] + dt[:, None, None]) & M32
    y = (x + ((new ^ Cc[None, None, :]).sum(axis=2))) & M32
    return y.astype(np.uint32), new.astype(np.uint32)


def state_tiles(cfg, state):
    """The state (``(H, P, N)`` uint32) as tile-port words."""
    H, P, N = cfg.state_shape
    L = cfg.lanes
    words = []
    for row in np.asarray(state).reshape(H * P, N):
        for k in range(N // L):
            words.append(sum(int(row[k * L + i]) << (32 * i) for i in range(L)))
    return words


def tiles_state(cfg, words):
    H, P, N = cfg.state_shape
    L = cfg.lanes
    out = np.zeros(H * P * N, dtype=np.uint32)
    for a, w in enumerate(words):
        for i in range(L):
            out[a * L + i] = (int(w) >> (32 * i)) & M32
    return out.reshape(H, P, N)


class SSMUnitBFM:
    """Cycle-level stand-in for the :class:`hw.ssm_unit.SSMUnit` ports and a conv-window unit.

    Participant (see :func:`run_amaranth`): drives the ``ssm_*`` and ``conv_*``
    inputs of a :class:`hw.state_controller.StateController`, observes its
    outputs and asserts the protocol.
    """

    def __init__(self, cfg, *, conv_depth, conv_width, rng, step=toy_step, sweep_extra=4,
                 y_latency=3, prologue=12, conv_busy=0.2):
        self.cfg, self.rng, self.step = cfg, rng, step
        H, P, N = cfg.state_shape
        self.rows = H * P
        self.T = H * P * (N // cfg.lanes)
        self.state = np.zeros(cfg.state_shape, dtype=np.uint32)
        self.conv = [0] * conv_depth
        self.cd, self.cw = conv_depth, conv_width
        self.sweep_extra, self.y_latency, self.p_conv_busy = sweep_extra, y_latency, conv_busy
        self.prologue = prologue
        self.reset_control()
        self.rdata = 0
        self.crdata = 0
        self.protocol_checks = 0

    def reset_control(self):
        H, P, N = self.cfg.state_shape
        self.banks = [{SEL_X: np.zeros(H * P, np.uint32), SEL_B: np.zeros(N, np.uint32),
                       SEL_C: np.zeros(N, np.uint32), SEL_DT: np.zeros(H, np.uint32)} for _ in range(2)]
        self.fill = 0
        self.busy = [False, False]
        self.queue = deque()       # (bank, cycle its prologue is done)
        self.sweep = None          # (bank, cycles left)
        self.out = deque()         # (cycle available, y word)
        self.conv_busy = False
        self.cycle = 0

    def idle(self):
        return self.sweep is None and not self.out

    def outputs(self):
        ok = not self.busy[self.fill]
        yv = bool(self.out) and self.out[0][0] <= self.cycle
        return {"ssm_fill_free": int(ok), "ssm_token_ready": int(ok), "ssm_idle": int(self.idle()),
                "ssm_y__valid": int(yv), "ssm_y__payload": self.out[0][1] if yv else 0,
                "ssm_st_rdata": self.rdata, "conv_idle": int(not self.conv_busy),
                "conv_rdata": self.crdata}

    def run(self):
        outs = yield self.outputs()
        while True:
            if outs["rst"]:
                # memories keep the write of the reset edge; the control restarts
                if outs["ssm_st_we"]:
                    set_tile(self.cfg, self.state, outs["ssm_st_addr"], outs["ssm_st_wdata"])
                if self.cd and outs["conv_we"]:
                    self.conv[outs["conv_addr"]] = outs["conv_wdata"]
                self.reset_control()
            else:
                self.clock(outs)
            outs = yield self.outputs()

    def clock(self, o):
        cfg = self.cfg
        idle = self.idle()
        mine = self.outputs()
        # protocol of the controller's side
        if o["ssm_st_we"]:
            assert o["ssm_hold"] and idle, (f"cycle {o['cycle']}: tile write with hold={o['ssm_hold']} "
                                            f"idle={int(idle)}")
        if o["conv_we"]:
            assert o["conv_hold"] and not self.conv_busy, f"cycle {o['cycle']}: conv write while not held/idle"
        if o["ssm_wr_en"] and o["ssm_wr_sel"] in (SEL_B, SEL_C, SEL_X, SEL_DT):
            assert not self.busy[self.fill], f"cycle {o['cycle']}: token write into a committed bank"
        self.protocol_checks += 1
        # tile and conv ports (synchronous reads; garbage while the state is in use)
        a = o["ssm_st_addr"]
        if idle and a < self.T:
            self.rdata = state_tiles_one(cfg, self.state, a)
        else:
            self.rdata = self.rng.getrandbits(32 * cfg.lanes)
        if o["ssm_st_we"]:
            set_tile(cfg, self.state, a, o["ssm_st_wdata"])
        if self.cd:
            ca = o["conv_addr"]
            self.crdata = (self.conv[ca] if ca < self.cd and not self.conv_busy
                           else self.rng.getrandbits(self.cw))
            if o["conv_we"]:
                self.conv[ca] = o["conv_wdata"]
        # input port
        if o["ssm_wr_en"]:
            sel, addr = o["ssm_wr_sel"], o["ssm_wr_addr"]
            if sel in self.banks[self.fill] and addr < len(self.banks[self.fill][sel]):
                self.banks[self.fill][sel][addr] = o["ssm_wr_data"]
        if o["ssm_token_valid"] and mine["ssm_token_ready"]:
            self.busy[self.fill] = True
            # the prologue (softplus, exp per head) runs before the sweep can start,
            # and the unit is idle meanwhile
            self.queue.append((self.fill, self.cycle + self.rng.randrange(1, self.prologue + 1)))
            self.fill ^= 1
        if o["ssm_y__ready"] and mine["ssm_y__valid"]:
            self.out.popleft()
        # sweeps: one at a time, none starts under hold
        if self.sweep is not None:
            bank, left = self.sweep
            if left > 1:
                self.sweep = (bank, left - 1)
            else:
                H, P, N = cfg.state_shape
                b = self.banks[bank]
                tok = (b[SEL_X].reshape(H, P), b[SEL_B], b[SEL_C], b[SEL_DT])
                y, self.state = self.step(cfg, self.state, tok)
                for i, v in enumerate(y.ravel()):
                    self.out.append((self.cycle + self.y_latency + i, int(v)))
                self.busy[bank] = False
                self.sweep = None
        elif self.queue and self.queue[0][1] <= self.cycle and not o["ssm_hold"]:
            self.sweep = (self.queue.popleft()[0], self.T + self.rng.randrange(self.sweep_extra + 1))
        # the conv unit: busy at random, but starts nothing while held
        if self.conv_busy:
            self.conv_busy = self.rng.random() < 0.5
        elif not o["conv_hold"]:
            self.conv_busy = self.rng.random() < self.p_conv_busy
        self.cycle += 1


def state_tiles_one(cfg, state, a):
    L = cfg.lanes
    flat = np.asarray(state).reshape(-1)
    return sum(int(flat[a * L + i]) << (32 * i) for i in range(L))


def set_tile(cfg, state, a, word):
    L = cfg.lanes
    flat = state.reshape(-1)
    for i in range(L):
        flat[a * L + i] = (int(word) >> (32 * i)) & M32


# -- scenario -----------------------------------------------------------------------------

@dataclass
class TokenItem:
    """A host token (x, B, C, dt uint32 arrays); ``capture``: record armed before it."""
    tok: tuple
    y: np.ndarray
    capture: int = None
    capture_error: bool = False
    label: str = ""


@dataclass
class CmdItem:
    op: Op
    index: int
    error: bool
    label: str = ""


@dataclass
class LoadItem:
    """Load the unit's state and/or the conv window (debug port / BFM), quiescent."""
    state: np.ndarray = None
    conv: list = None


@dataclass
class CheckItem:
    """Compare the unit's state and/or the conv window, quiescent."""
    state: np.ndarray = None
    conv: list = None
    label: str = ""


@dataclass
class IdleItem:
    cycles: int


@dataclass
class ParamItem:
    """Layer parameters A, dt_bias, D through the write port (system bench)."""
    prm: object


@dataclass
class ResetItem:
    """Run ``item`` and pulse reset ``delay`` cycles after it starts (the unit quiescent before)."""
    item: object
    delay: int


UNKNOWN = None


class Expect:
    """Transaction-level model of unit + controller: expected y, responses and contents.

    ``step(state, tok) -> (y, state)`` is the unit's token update. Slots and
    records are ``"valid"``, ``"invalid"`` or ``"unknown"`` (after a reset cut a
    command short); the unit's state and conv window may be unknown after a
    reset, until a restore or load.
    """

    def __init__(self, cfg, step, *, slots, records, conv_depth):
        self.cfg, self.step = cfg, step
        self.S, self.R, self.CD = slots, records, conv_depth
        self.state = None
        self.conv = None
        self.slot = {}
        self.slot_ok = ["invalid"] * slots
        self.rec = {}
        self.rec_ok = ["invalid"] * records

    def load(self, state=None, conv=None):
        if state is not None:
            self.state = state.copy()
        if conv is not None:
            self.conv = list(conv)
        return LoadItem(state=None if state is None else state.copy(),
                        conv=None if conv is None else list(conv))

    def check(self, label=""):
        assert self.state is not None
        return CheckItem(state=self.state.copy(), conv=None if not self.CD else list(self.conv), label=label)

    def token(self, tok, capture=None, label=""):
        assert self.state is not None, "token on an unknown state"
        cap_err = False
        if capture is not None:
            cap_err = not capture < self.R
            if not cap_err:
                self.rec_ok[capture] = "valid"
                self.rec[capture] = (tok[0].copy(), tok[1].copy(), tok[3].copy())
        y, self.state = self.step(self.state, tok)
        return TokenItem(tok=tok, y=y, capture=capture, capture_error=cap_err, label=label)

    def cmd(self, op, index, label=""):
        err = False
        if op in (Op.CHECKPOINT, Op.RESTORE):
            err = not index < self.S or (op == Op.RESTORE and self.slot_ok[index] != "valid")
            assert op != Op.RESTORE or index >= self.S or self.slot_ok[index] != "unknown", \
                "scenario restores a slot of unknown validity"
            if not err and op == Op.CHECKPOINT:
                assert self.state is not None
                self.slot[index] = (self.state.copy(), None if self.conv is None else list(self.conv))
                self.slot_ok[index] = "valid"
            elif not err:
                st, cv = self.slot[index]
                self.state, self.conv = st.copy(), (None if cv is None else list(cv))
        elif op == Op.CAPTURE:
            raise ValueError("CAPTURE goes with a token (Expect.token)")
        else:
            err = not index < self.R or self.rec_ok[index] != "valid"
            assert index >= self.R or self.rec_ok[index] != "unknown", "scenario replays an unknown record"
            if not err:
                x, B, dt = self.rec[index]
                H, P, N = self.cfg.state_shape
                _, self.state = self.step(self.state, (x, B, np.zeros(N, np.uint32), dt))
        return CmdItem(op=op, index=index, error=err, label=label)

    def reset(self, item):
        """What a reset in the middle of ``item`` leaves known (see :class:`ResetItem`)."""
        if isinstance(item, CmdItem) and not item.error:
            if item.op == Op.CHECKPOINT:
                # cut short before its last write (make_scenario picks the delay)
                self.slot_ok[item.index] = "invalid"
            elif item.op == Op.RESTORE:
                self.state = self.conv = None
            elif item.op == Op.REPLAY:
                self.state = None
        elif isinstance(item, TokenItem):
            self.state = None
            if item.capture is not None and not item.capture_error:
                self.rec_ok[item.capture] = "unknown"


def make_scenario(rng, cfg, step, *, slots, records, conv_depth, conv_width, steps, token_fn,
                  resets=1, errors=True, params=None):
    """Items for :class:`HostProgram`: ``steps`` speculative steps under random policies.

    Each step: 0–2 committed tokens; ``CHECKPOINT`` of the committed state into a
    slot; a conv-window change; a first draft branch of 1–3 tokens (captured into
    records, or checkpointed into other slots), maybe a second branch from the
    checkpoint; then the accepted path (0 … all of a branch) is restored by the
    policy of the step: ``store`` (``RESTORE`` of the accepted node's slot),
    ``replay`` (``RESTORE`` + ``REPLAY`` per path node) or ``recompute``
    (``RESTORE`` + the path's tokens again). Random idles, commands that must
    fail and state/conv checks in between; ``resets`` resets cut a command or a
    token short, after which the scenario checks the torn slot answers
    ``error`` and reloads or restores a known state.
    """
    S, R, CD = slots, records, conv_depth
    T = cfg.state_elems // cfg.lanes
    ex = Expect(cfg, step, slots=S, records=R, conv_depth=CD)
    items = []
    rnd = lambda n: int(rng.integers(0, n))  # noqa: E731

    def conv_words():
        return [int(v) for v in rng.integers(0, 1 << min(conv_width, 62), CD, dtype=np.uint64)] \
            if CD else None

    def idle():
        if rng.random() < 0.4:
            items.append(IdleItem(cycles=1 + rnd(6)))

    def state0():
        return (rng.standard_normal(cfg.state_shape) * 0.5).astype(np.float32).view(np.uint32)

    if params is not None:
        items.append(ParamItem(prm=params))
    items.append(ex.load(state=state0(), conv=conv_words()))
    reset_steps = set(rng.choice(steps, size=min(resets, steps), replace=False).tolist())
    for k in range(steps):
        for _ in range(rnd(3)):
            items.append(ex.token(token_fn(), label=f"step {k} committed"))
            idle()
        base = rnd(S)
        items.append(ex.cmd(Op.CHECKPOINT, base, label=f"step {k} checkpoint"))
        idle()
        if CD:
            items.append(ex.load(conv=conv_words()))        # the conv unit moved on
        policies = ["recompute"] + (["store"] if S > 1 else []) + (["replay"] if R else [])
        policy = policies[rnd(len(policies))]
        branches = []
        free_slots = [s for s in range(S) if s != base]
        free_recs = list(range(R))
        for b in range(1 + (rng.random() < 0.5)):
            if b:
                items.append(ex.cmd(Op.RESTORE, base, label=f"step {k} branch {b}"))
                idle()
            path = []
            for i in range(1 + rnd(3)):
                tok = token_fn()
                cap = None
                if policy == "replay" and free_recs:
                    cap = free_recs.pop(0)
                items.append(ex.token(tok, capture=cap, label=f"step {k} draft {b}.{i}"))
                slot = None
                if policy == "store" and free_slots:
                    slot = free_slots.pop(0)
                    items.append(ex.cmd(Op.CHECKPOINT, slot, label=f"step {k} node {b}.{i}"))
                path.append((tok, cap, slot))
                idle()
            branches.append(path)
        if errors and rng.random() < 0.5:
            kind, top = rnd(4), 1 << _bits(max(S, R, 2))
            if kind == 0 and top > S:
                items.append(ex.cmd(Op.RESTORE, S + rnd(top - S), label="slot out of range"))
            elif kind == 1 and top > R:
                items.append(ex.cmd(Op.REPLAY, R + rnd(top - R), label="record out of range"))
            elif kind == 2 and "invalid" in ex.slot_ok:
                items.append(ex.cmd(Op.RESTORE, ex.slot_ok.index("invalid"), label="never checkpointed"))
            elif kind == 3 and "invalid" in ex.rec_ok:
                items.append(ex.cmd(Op.REPLAY, ex.rec_ok.index("invalid"), label="never captured"))
        # accept a prefix of one branch (L − 1 drafts after the root's committed state)
        path = branches[rnd(len(branches))]
        n = rnd(len(path) + 1)
        if policy == "store" and n and path[n - 1][2] is not None:
            items.append(ex.cmd(Op.RESTORE, path[n - 1][2], label=f"step {k} store-restore"))
        else:
            items.append(ex.cmd(Op.RESTORE, base, label=f"step {k} restore"))
            for tok, cap, _ in path[:n]:
                if policy == "replay" and cap is not None and ex.rec_ok[cap] == "valid":
                    items.append(ex.cmd(Op.REPLAY, cap, label=f"step {k} replay"))
                else:
                    items.append(ex.token(tok, label=f"step {k} recompute"))
        idle()
        if rng.random() < 0.4:
            items.append(ex.check(label=f"after step {k}"))
        if k in reset_steps:
            # cut a checkpoint, a restore or a token short, then recover
            what = rnd(3)
            if what == 0:
                s = rnd(S)
                it = ex.cmd(Op.CHECKPOINT, s, label="checkpoint cut by reset")
                # before its last write: cycles from its take, unit quiescent
                delay = rnd(max(1, max(T, CD)))
            elif what == 1:
                valid = [s for s in range(S) if ex.slot_ok[s] == "valid"]
                it = ex.cmd(Op.RESTORE, valid[rnd(len(valid))], label="restore cut by reset")
                delay = rnd(max(1, max(T, CD)))
            else:
                it = ex.token(token_fn(), capture=(rnd(R) if R else None), label="token cut by reset")
                delay = rnd(8)
            items.append(ResetItem(item=it, delay=delay))
            ex.reset(it)
            if isinstance(it, CmdItem) and it.op == Op.CHECKPOINT:
                items.append(ex.cmd(Op.RESTORE, it.index, label="torn slot"))   # error
            if ex.state is None:
                valid = [s for s in range(S) if ex.slot_ok[s] == "valid"]
                if valid and rng.random() < 0.7:
                    items.append(ex.cmd(Op.RESTORE, valid[rnd(len(valid))], label="recover"))
                else:
                    items.append(ex.load(state=state0(), conv=conv_words()))
            if ex.conv is None and CD:
                items.append(ex.load(conv=conv_words()))
            items.append(ex.check(label="after reset"))
    items.append(ex.check(label="final"))
    return items, ex


# -- driver -----------------------------------------------------------------------------

class Scoreboard:
    """Expected y words and responses, compared as they come; latency records."""

    def __init__(self):
        self.y = deque()           # (word, label)
        self.resp = deque()        # dict(op, index, error, take, wait0, first)
        self.records = []          # completed commands with latency
        self.y_count = 0
        self.resp_count = 0

    def clear(self):
        self.y.clear()
        self.resp.clear()

    def empty(self):
        return not self.y and not self.resp

    def on_y(self, word, cycle):
        assert self.y, f"cycle {cycle}: unexpected y {word:#010x}"
        want, label = self.y.popleft()
        assert word == want, f"cycle {cycle}: y = {word:#010x}, expected {want:#010x} ({label})"
        self.y_count += 1

    def on_resp_valid(self, o):
        assert self.resp, f"cycle {o['cycle']}: unexpected response {o['resp__payload']:#x}"
        head = self.resp[0]
        if head["first"] is None:
            head["first"] = o["cycle"]
            head["wait1"] = o["wait_cycles"]
            head["busy1"] = o["busy_cycles"]

    def on_resp(self, payload, o, ib):
        head = self.resp.popleft()
        got = (Op(payload & 3), (payload >> 2) & ((1 << ib) - 1), (payload >> (2 + ib)) & 1)
        want = (head["op"], head["index"], int(head["error"]))
        assert got == want, (f"cycle {o['cycle']}: response {got}, expected {want} "
                             f"({head['label']})")
        head["latency"] = head["first"] - head["take"]
        head["wait"] = head["wait1"] - head["wait0"]
        self.records.append(head)
        self.resp_count += 1


class Sink:
    """Random ``ready`` on a stream; hands transfers to ``on_take``."""

    def __init__(self, name, rng, stall, on_take, on_valid=None):
        self.name, self.rng, self.stall = name, rng, stall
        self.on_take, self.on_valid = on_take, on_valid

    def run(self):
        ready = int(self.rng.random() >= self.stall)
        o = yield {f"{self.name}__ready": ready}
        while True:
            if not o["rst"] and o[f"{self.name}__valid"]:
                if self.on_valid:
                    self.on_valid(o)
                if ready:
                    self.on_take(o[f"{self.name}__payload"], o)
            ready = int(self.rng.random() >= self.stall)
            o = yield {f"{self.name}__ready": ready}


class HostProgram:
    """Runs the scenario's items on the host ports; ``hooks`` load and check the state.

    ``hooks`` has generator methods ``load_state(program, words)``,
    ``read_state(program)``, ``load_conv(program, words)``, ``read_conv(program)``
    that drive the debug ports (or reach into a BFM) while the controller is idle.
    """

    HOST = ("wr_en", "wr_sel", "wr_addr", "wr_data", "token_valid", "cmd__valid", "cmd__payload",
            "rst")

    def __init__(self, cfg, items, sb, hooks, rng, *, idle=0.1, index_bits, extra_inputs=()):
        self.cfg, self.items, self.sb, self.hooks, self.rng = cfg, items, sb, hooks, rng
        self.p_idle, self.ib = idle, index_bits
        self.defaults = dict.fromkeys(self.HOST + tuple(extra_inputs), 0)
        self.stats = {"tokens": 0, "commands": 0, "resets": 0, "checks": 0}
        self.o = None

    def inputs(self, **kw):
        d = dict(self.defaults)
        d.update(kw)
        return d

    def run(self):
        self.o = yield self.inputs()
        for item in self.items:
            yield from self.do(item)
        yield from self.quiesce()

    def cycle(self, **kw):
        self.o = yield self.inputs(**kw)
        return self.o

    def do(self, item):
        if isinstance(item, TokenItem):
            yield from self.token(item)
        elif isinstance(item, CmdItem):
            yield from self.command(item.op, item.index, item.error, item.label)
        elif isinstance(item, IdleItem):
            for _ in range(item.cycles):
                yield from self.cycle()
        elif isinstance(item, LoadItem):
            yield from self.quiesce()
            if item.state is not None:
                yield from self.hooks.load_state(self, state_tiles(self.cfg, item.state))
            if item.conv is not None:
                yield from self.hooks.load_conv(self, item.conv)
        elif isinstance(item, CheckItem):
            yield from self.quiesce()
            got = tiles_state(self.cfg, (yield from self.hooks.read_state(self)))
            bad = np.argwhere(got != item.state)
            assert bad.size == 0, (f"cycle {self.o['cycle']} ({item.label}): {len(bad)} state elements "
                                   f"differ; first {tuple(bad[0])}: {int(got[tuple(bad[0])]):#010x} vs "
                                   f"expected {int(item.state[tuple(bad[0])]):#010x}")
            if item.conv is not None:
                cv = yield from self.hooks.read_conv(self)
                assert cv == item.conv, (f"cycle {self.o['cycle']} ({item.label}): conv window "
                                         f"differs at word {next(i for i, (a, b) in enumerate(zip(cv, item.conv)) if a != b)}")
            self.stats["checks"] += 1
        elif isinstance(item, ParamItem):
            yield from self.quiesce()
            for sel, arr in ((SEL_A, item.prm.A), (SEL_DT_BIAS, item.prm.dt_bias), (SEL_D, item.prm.D)):
                for h, v in enumerate(np.asarray(arr, np.float32).view(np.uint32)):
                    yield from self.cycle(wr_en=1, wr_sel=sel, wr_addr=h, wr_data=int(v))
        elif isinstance(item, ResetItem):
            yield from self.reset_during(item)
        else:  # pragma: no cover
            raise TypeError(item)

    def quiesce(self):
        for _ in range(100_000):
            if (self.sb.empty() and self.o["cmd__ready"] and not self.o["resp__valid"]
                    and not self.o["busy"]):
                return
            yield from self.cycle()
        raise AssertionError(f"cycle {self.o['cycle']}: no quiescence ({len(self.sb.y)} y, "
                             f"{len(self.sb.resp)} responses pending)")

    def command(self, op, index, error, label=""):
        while True:
            o = yield from self.cycle(cmd__valid=1, cmd__payload=int(op.value) | (index << 2))
            if o["cmd__ready"]:
                break
        self.sb.resp.append({"op": op, "index": index, "error": error, "label": label,
                             "take": o["cycle"], "wait0": o["wait_cycles"], "busy0": o["busy_cycles"],
                             "first": None})
        self.stats["commands"] += 1
        if op in (Op.REPLAY, Op.CAPTURE):
            # contract: the next token's writes start after the response
            while self.sb.resp:
                yield from self.cycle()

    def token(self, item):
        H, P, N = self.cfg.state_shape
        x, B, Cc, dt = item.tok
        if item.capture is not None:
            yield from self.command(Op.CAPTURE, item.capture, item.capture_error, item.label)
        while not (yield from self.cycle())["fill_free"]:
            pass
        writes = ([(SEL_B, n, B[n]) for n in range(N)] + [(SEL_C, n, Cc[n]) for n in range(N)]
                  + [(SEL_X, h * P + p, x[h, p]) for h in range(H) for p in range(P)]
                  + [(SEL_DT, h, dt[h]) for h in range(H)])
        for sel, addr, val in writes:
            while self.rng.random() < self.p_idle:
                yield from self.cycle()
            yield from self.cycle(wr_en=1, wr_sel=sel, wr_addr=addr, wr_data=int(val))
        while not (yield from self.cycle(token_valid=1))["token_ready"]:
            pass
        for v in np.asarray(item.y).ravel():
            self.sb.y.append((int(v), item.label))
        self.stats["tokens"] += 1

    def reset_during(self, item):
        """Run ``item.item`` from a quiescent unit and reset in its cycle ``item.delay``."""
        yield from self.quiesce()
        sub = self.do(item.item)
        inp, done = next(sub), False
        for n in range(item.delay + 1):
            if n == item.delay:
                inp = dict(inp, rst=1)
            self.o = yield inp
            if n < item.delay:
                if not done:
                    try:
                        inp = sub.send(self.o)
                    except StopIteration:       # done before the reset: idle on
                        done = True
                if done:
                    inp = self.inputs()
        sub.close()
        self.sb.clear()
        o = yield from self.cycle()
        # the controller answers from a clean state
        assert o["cmd__ready"] == 1 and o["resp__valid"] == 0 and o["ssm_hold"] == 0, \
            f"cycle {o['cycle']}: not idle after reset"
        assert o["busy_cycles"] == 0 and o["wait_cycles"] == 0 and o["done_count"] == 0, \
            f"cycle {o['cycle']}: counters not cleared by reset"
        self.stats["resets"] += 1


# -- hooks: reaching the state and the conv window ----------------------------------------

class BFMHooks:
    """Load/check through the BFM's own memory (no cycles)."""

    def __init__(self, bfm):
        self.bfm = bfm

    def load_state(self, prog, words):
        self.bfm.state = tiles_state(self.bfm.cfg, words)
        return
        yield

    def read_state(self, prog):
        return state_tiles(self.bfm.cfg, self.bfm.state)
        yield

    def load_conv(self, prog, words):
        self.bfm.conv = list(words)
        return
        yield

    def read_conv(self, prog):
        return list(self.bfm.conv)
        yield


class DebugHooks:
    """Load/check through :class:`StateControllerTop`'s debug ports (controller idle)."""

    def __init__(self, tiles, conv_depth):
        self.T, self.CD = tiles, conv_depth

    def _hold(self, prog):
        while not (yield from prog.cycle(dbg_hold=1))["ssm_idle"]:
            pass

    def load_state(self, prog, words):
        yield from self._hold(prog)
        for a, w in enumerate(words):
            yield from prog.cycle(dbg_hold=1, dbg_addr=a, dbg_we=1, dbg_wdata=w)
        yield from prog.cycle()

    def read_state(self, prog):
        yield from self._hold(prog)
        out = []
        yield from prog.cycle(dbg_hold=1, dbg_addr=0)
        for a in range(1, self.T + 1):
            o = yield from prog.cycle(dbg_hold=1, dbg_addr=min(a, self.T - 1))
            out.append(o["dbg_rdata"])
        yield from prog.cycle()
        return out

    def load_conv(self, prog, words):
        for a, w in enumerate(words):
            yield from prog.cycle(cdbg_addr=a, cdbg_we=1, cdbg_wdata=w)

    def read_conv(self, prog):
        out = []
        yield from prog.cycle(cdbg_addr=0)
        for a in range(1, self.CD + 1):
            o = yield from prog.cycle(cdbg_addr=min(a, self.CD - 1))
            out.append(o["cdbg_rdata"])
        return out


# -- runners ------------------------------------------------------------------------------

class _WithReset(Elaboratable):
    """The top in a ``sync`` domain whose reset the bench drives (``rst``)."""

    def __init__(self, top):
        self.top = top
        self.rst = Signal(name="bench_rst")

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = cd = ClockDomain("sync")
        m.d.comb += cd.rst.eq(self.rst)
        m.submodules.top = self.top
        return m


def _ports(top):
    ins, outs = {}, {}
    for path, member, value in top.signature.flatten(top):
        (ins if member.flow == In else outs)[port_name(path)] = Value.cast(value)
    return ins, outs


class Loop:
    """The cycle loop shared by the Amaranth and cocotb runners.

    Each cycle every participant yields the inputs it drives; the runner
    applies them, lets the design settle and hands every output (plus ``rst``
    and ``cycle``) back to every participant. The run ends with ``host``.
    """

    def __init__(self, participants, *, max_cycles):
        self.gens = [p.run() for p in participants]
        self.max_cycles = max_cycles
        self.cycle = 0
        self.merged = None

    def _merge(self, inputs):
        self.merged = {}
        for d in inputs:
            self.merged.update(d)
        return self.merged

    def start(self):
        return self._merge([next(g) for g in self.gens])

    def step(self, outs):
        """Outputs of this cycle in; next cycle's inputs out (``None``: the host is done)."""
        outs["rst"] = self.merged.get("rst", 0)
        outs["cycle"] = self.cycle
        try:
            inputs = [g.send(outs) for g in self.gens]
        except StopIteration:
            return None
        self.cycle += 1
        assert self.cycle < self.max_cycles, f"no end after {self.cycle} cycles"
        return self._merge(inputs)


def run_amaranth(top, participants, *, max_cycles=200_000):
    """Run participants (the host first) against ``top`` on Amaranth's simulator.

    Returns the number of cycles.
    """
    from amaranth.sim import Simulator

    wrapper = _WithReset(top)
    ins, outs = _ports(top)
    ins["rst"] = wrapper.rst
    loop = Loop(participants, max_cycles=max_cycles)

    async def bench(ctx):
        inp = loop.start()
        while inp is not None:
            for k, v in inp.items():
                ctx.set(ins[k], v)
            inp = loop.step({k: ctx.get(v) for k, v in outs.items()})
            if inp is not None:
                await ctx.tick()

    sim = Simulator(wrapper)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return loop.cycle


def bfm_setup(cfg, *, slots, records, conv_width, conv_depth, seed, steps, stall, idle,
              resets=1):
    """Scenario, BFM and participants for the controller-alone bench."""
    rng = np.random.default_rng(seed)
    pyrng = random.Random(seed)
    ctrl = StateController(ssm_cfg=cfg, slots=slots, records=records, conv_width=conv_width,
                           conv_depth=conv_depth)
    H, P, N = cfg.state_shape

    def token_fn():
        return (rng.integers(0, 1 << 32, (H, P), dtype=np.uint64).astype(np.uint32),
                rng.integers(0, 1 << 32, N, dtype=np.uint64).astype(np.uint32),
                rng.integers(0, 1 << 32, N, dtype=np.uint64).astype(np.uint32),
                rng.integers(0, 1 << 32, H, dtype=np.uint64).astype(np.uint32))

    step = lambda st, tok: toy_step(cfg, st, tok)  # noqa: E731
    items, ex = make_scenario(rng, cfg, step, slots=slots, records=records,
                              conv_depth=ctrl.conv_depth, conv_width=ctrl.conv_width, steps=steps,
                              token_fn=token_fn, resets=resets)
    bfm = SSMUnitBFM(cfg, conv_depth=ctrl.conv_depth, conv_width=ctrl.conv_width, rng=pyrng)
    sb = Scoreboard()
    host = HostProgram(cfg, items, sb, BFMHooks(bfm), pyrng, idle=idle, index_bits=ctrl.index_bits)
    ib = ctrl.index_bits
    parts = [host, bfm,
             Sink("y", pyrng, stall, lambda v, o: sb.on_y(v, o["cycle"])),
             Sink("resp", pyrng, stall, lambda v, o: sb.on_resp(v, o, ib), sb.on_resp_valid)]
    return ctrl, parts, host, sb, bfm


def run_bfm_pysim(cfg, *, slots, records=0, conv_width=None, conv_depth=None, seed, steps=6,
                  stall=0.3, idle=0.1, resets=1):
    """The controller-alone bench on Amaranth's simulator; returns a summary dict."""
    ctrl, parts, host, sb, bfm = bfm_setup(cfg, slots=slots, records=records, conv_width=conv_width,
                                           conv_depth=conv_depth, seed=seed, steps=steps,
                                           stall=stall, idle=idle, resets=resets)
    cycles = run_amaranth(ctrl, parts)
    return summary(ctrl, host, sb, cycles)


def summary(ctrl, host, sb, cycles):
    return {"cycles": cycles, **host.stats, "y": sb.y_count, "responses": sb.resp_count,
            "records": sb.records, "restore_cycles": ctrl.restore_cycles,
            "replay_cycles": ctrl.replay_cycles}


def check_latencies(out):
    """Every command's latency in a run summary: the fixed part exact, besides the
    cycles it waited for the unit (tokens to drain, ``idle``, ``fill_free``)."""
    for r in out["records"]:
        if r["error"] or r["op"] in (Op.CAPTURE, "CAPTURE"):
            want = 1
        elif r["op"] in (Op.REPLAY, "REPLAY"):
            want = out["replay_cycles"]
        else:
            want = out["restore_cycles"]
        got = r["latency"] - r["wait"]
        name = getattr(r["op"], "name", r["op"])
        assert got == want, (f"{name} {r['index']} ({r['label']}): {r['latency']} cycles, "
                             f"{r['wait']} of them waiting; expected {want} + waits")


def system_setup(cfg, *, slots, records, conv_width, conv_depth, seed, steps, stall, idle,
                 resets=1, mul_stages=1, add_stages=1, specials=True):
    """Scenario and participants for the SSMUnit + StateController bench."""
    from sim.ssm_unit import make_tokens

    rng = np.random.default_rng(seed)
    pyrng = random.Random(seed)
    top = StateControllerTop(ssm_cfg=cfg, slots=slots, records=records, conv_width=conv_width,
                             conv_depth=conv_depth, mul_stages=mul_stages, add_stages=add_stages)
    H = cfg.nheads
    prm = mamba2_init_params(cfg, rng)
    prm = SSMParams(A=prm.A, dt_bias=prm.dt_bias,
                    D=(1 + 0.25 * rng.standard_normal(H)).astype(np.float32))
    # a pool of tokens with the special ones (NaN/Inf/subnormal) spread out
    pool = deque(make_tokens(rng, cfg, prm, 200, specials=False))
    specials_pool = make_tokens(rng, cfg, prm, 4, specials=True) if specials else []

    def token_fn():
        if specials_pool and rng.random() < 0.03:
            return specials_pool.pop(0)
        return pool.popleft()

    step = lambda st, tok: ssm_step_hw_bits(cfg, prm, st, *tok)  # noqa: E731
    items, ex = make_scenario(rng, cfg, step, slots=slots, records=records,
                              conv_depth=top.ctrl.conv_depth, conv_width=top.ctrl.conv_width,
                              steps=steps, token_fn=token_fn, resets=resets, params=prm)
    sb = Scoreboard()
    host = HostProgram(cfg, items, sb, DebugHooks(top.ctrl.state_tiles, top.ctrl.conv_depth), pyrng,
                       idle=idle, index_bits=top.ctrl.index_bits,
                       extra_inputs=("dbg_hold", "dbg_addr", "dbg_we", "dbg_wdata", "cdbg_addr",
                                     "cdbg_we", "cdbg_wdata"))
    ib = top.ctrl.index_bits

    class ConvBusy:
        def run(self):
            busy = 0
            o = yield {"conv_busy": busy}
            while True:
                busy = int(pyrng.random() < (0.5 if busy else 0.1)) if not o["ssm_hold"] else 0
                o = yield {"conv_busy": busy}

    parts = [host, ConvBusy(),
             Sink("y", pyrng, stall, lambda v, o: sb.on_y(v, o["cycle"])),
             Sink("resp", pyrng, stall, lambda v, o: sb.on_resp(v, o, ib), sb.on_resp_valid)]
    return top, parts, host, sb


def run_system_pysim(cfg, *, slots, records=0, conv_width=None, conv_depth=None, seed, steps=4,
                     stall=0.3, idle=0.1, resets=1, mul_stages=1, add_stages=1):
    """The SSMUnit + StateController bench on Amaranth's simulator; returns a summary dict."""
    top, parts, host, sb = system_setup(cfg, slots=slots, records=records, conv_width=conv_width,
                                        conv_depth=conv_depth, seed=seed, steps=steps, stall=stall,
                                        idle=idle, resets=resets, mul_stages=mul_stages,
                                        add_stages=add_stages)
    cycles = run_amaranth(top, parts)
    return summary(top.ctrl, host, sb, cycles)



# -- restore latency ---------------------------------------------------------------------

def measure_latency(cfg, *, slots=2, records=2, conv_width=None, conv_depth=None, seed=0,
                    mul_stages=1, add_stages=1):
    """Cycles of each command on SSMUnit + StateController (Amaranth's simulator).

    A directed run, no back-pressure: a token, then (unit drained) ``CHECKPOINT``
    and ``RESTORE``; a token committed right before a ``RESTORE`` (the restore
    waits for it to drain); a captured token, ``RESTORE`` and ``REPLAY``, and the
    cycles until the replayed token has left the unit (``busy`` low). Every
    ``y`` and the state are checked as in the randomized bench.

    Returns
    -------
    dict
        ``tiles``, ``conv_depth``, ``restore_cycles`` (the property), and
        measured ``checkpoint``, ``restore`` (drained), ``restore_after_token``
        and its ``wait``, ``replay`` (to the response) and ``replay_done``
        (to ``busy`` low), all in cycles from the command being taken.
    """
    from sim.ssm_unit import make_tokens

    rng = np.random.default_rng(seed)
    pyrng = random.Random(seed)
    top = StateControllerTop(ssm_cfg=cfg, slots=slots, records=records, conv_width=conv_width,
                             conv_depth=conv_depth, mul_stages=mul_stages, add_stages=add_stages)
    c = top.ctrl
    H = cfg.nheads
    prm = mamba2_init_params(cfg, rng)
    prm = SSMParams(A=prm.A, dt_bias=prm.dt_bias, D=(1 + 0.25 * rng.standard_normal(H)).astype(np.float32))
    toks = make_tokens(rng, cfg, prm, 6, specials=False)
    step = lambda st, tok: ssm_step_hw_bits(cfg, prm, st, *tok)  # noqa: E731
    ex = Expect(cfg, step, slots=slots, records=records, conv_depth=c.conv_depth)
    st0 = (rng.standard_normal(cfg.state_shape) * 0.5).astype(np.float32).view(np.uint32)
    conv0 = [int(v) for v in rng.integers(0, 1 << min(c.conv_width, 62), c.conv_depth, dtype=np.uint64)]
    items = [ParamItem(prm=prm), ex.load(state=st0, conv=conv0 if c.conv_depth else None),
             ex.token(toks[0]), IdleItem(cycles=1)]
    items.append(LoadItem())                                     # quiesce
    items += [ex.cmd(Op.CHECKPOINT, 0, label="checkpoint"), ex.token(toks[1]), LoadItem(),
              ex.cmd(Op.RESTORE, 0, label="restore"), ex.check("restored"),
              ex.token(toks[2]), ex.cmd(Op.RESTORE, 0, label="restore_after_token"),
              ex.check("restored after a token")]
    if records:
        items += [ex.token(toks[3], capture=0), LoadItem(), ex.cmd(Op.RESTORE, 0, label="restore"),
                  ex.cmd(Op.REPLAY, 0, label="replay"), ex.check("replayed")]
    sb = Scoreboard()
    host = HostProgram(cfg, items, sb, DebugHooks(c.state_tiles, c.conv_depth), pyrng, idle=0.0,
                       index_bits=c.index_bits,
                       extra_inputs=("dbg_hold", "dbg_addr", "dbg_we", "dbg_wdata", "cdbg_addr",
                                     "cdbg_we", "cdbg_wdata"))
    busy_low = []

    class Spy:
        def run(self):
            o = yield {"conv_busy": 0}
            was = 0
            while True:
                if was and not o["busy"]:
                    busy_low.append(o["cycle"])
                was = o["busy"]
                o = yield {"conv_busy": 0}

    parts = [host, Spy(), Sink("y", pyrng, 0.0, lambda v, o: sb.on_y(v, o["cycle"])),
             Sink("resp", pyrng, 0.0, lambda v, o: sb.on_resp(v, o, c.index_bits), sb.on_resp_valid)]
    cycles = run_amaranth(top, parts)
    check_latencies(summary(c, host, sb, cycles))
    rec = {r["label"]: r for r in sb.records}
    out = {"tiles": c.state_tiles, "conv_depth": c.conv_depth, "restore_cycles": c.restore_cycles,
           "checkpoint": rec["checkpoint"]["latency"], "restore": rec["restore"]["latency"],
           "restore_after_token": rec["restore_after_token"]["latency"],
           "wait": rec["restore_after_token"]["wait"]}
    if records:
        r = rec["replay"]
        out["replay"] = r["latency"]
        out["replay_done"] = min(b for b in busy_low if b > r["take"]) - r["take"]
        out["replay_cycles"] = c.replay_cycles
    return out


LATENCY_CONFIGS = (
    ("sim preset: H2 P4 N16, 4 lanes", dict(nheads=2, headdim=4, d_state=16, lanes=4), {}),
    ("H2 P4 N16, 2 lanes", dict(nheads=2, headdim=4, d_state=16, lanes=2), {}),
    ("H2 P2 N8, 4 lanes", dict(nheads=2, headdim=2, d_state=8, lanes=4), {}),
    ("H2 P2 N8, 4 lanes, no conv window", dict(nheads=2, headdim=2, d_state=8, lanes=4),
     {"conv_depth": 0}),
)


def latency_table(clock_mhz=400):
    """Markdown rows of :func:`measure_latency` over :data:`LATENCY_CONFIGS`."""
    from golden.nonlinear import LUTSpec
    coarse = {"exp_lut": LUTSpec(function="exp", lo=-20.0, hi=12.0, step_log2=3),
              "softplus_lut": LUTSpec(function="softplus", lo=-25.0, hi=20.0, step_log2=3),
              "silu_lut": LUTSpec(function="silu", lo=-25.0, hi=20.0, step_log2=3)}
    from golden.mamba2 import SSMConfig
    rows = ["| config | tiles T | conv words | CHECKPOINT | RESTORE, unit drained | = T/conv + fixed "
            f"| ns at {clock_mhz} MHz | RESTORE right after a token (of it: waiting) "
            "| REPLAY: response / token out of the unit |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, geom, kw in LATENCY_CONFIGS:
        r = measure_latency(SSMConfig(**geom, **coarse), **kw)
        copy = max(r["tiles"], r["conv_depth"])
        rows.append(f"| {name} | {r['tiles']} | {r['conv_depth']} | {r['checkpoint']} | {r['restore']} "
                    f"| {copy} + {r['restore'] - copy} | {r['restore'] * 1000 / clock_mhz:.1f} "
                    f"| {r['restore_after_token']} ({r['wait']}) "
                    f"| {r.get('replay', '–')} / {r.get('replay_done', '–')} |")
    return "\n".join(rows)


# -- cocotb -------------------------------------------------------------------------------
#
# The same participants on an HDL simulator. The cocotb side rebuilds the
# component object from the run's parameters only to learn its port names.

def _cocotb_config(p):
    from golden.mamba2 import SSMConfig
    from golden.nonlinear import LUTSpec
    luts = {k: LUTSpec(**v) for k, v in p.get("luts", {}).items()}
    return SSMConfig(**p["cfg"], **luts)


async def _run_cocotb(dut, top, parts, *, max_cycles=500_000):
    from cocotb.triggers import ReadOnly, RisingEdge

    from hw.hierarchy import template
    from sim.bench import TB

    template(top)
    ins, outs = _ports(top)
    tb = TB(dut)
    handles_in = {k: getattr(dut, k) for k in ins}
    handles_in["rst"] = dut.rst
    handles_out = {k: getattr(dut, k) for k in outs}
    for h in handles_in.values():
        h.value = 0
    await tb.reset()
    loop = Loop(parts, max_cycles=max_cycles)
    inp = loop.start()
    while inp is not None:
        for k, v in inp.items():
            handles_in[k].value = v
        await ReadOnly()
        inp = loop.step({k: int(h.value) for k, h in handles_out.items()})
        if inp is not None:
            await RisingEdge(dut.clk)
    return loop.cycle


def _report(dut, p, ctrl, host, sb, cycles):
    import json
    from pathlib import Path

    s = summary(ctrl, host, sb, cycles)
    check_latencies(s)
    dut._log.info("%s", {k: v for k, v in s.items() if k != "records"})
    if p.get("result_file"):
        recs = [{"op": r["op"].name, "index": r["index"], "error": r["error"],
                 "latency": r["latency"], "wait": r["wait"], "label": r["label"]} for r in sb.records]
        Path(p["result_file"]).write_text(json.dumps({**{k: v for k, v in s.items() if k != "records"},
                                                      "records": recs}))


@cocotb.test()
async def bfm(dut):
    """StateController alone against SSMUnitBFM: the scenario of make_scenario."""
    from sim.bench import params, seed
    p = params()
    cfg = _cocotb_config(p)
    kw = dict(slots=p["slots"], records=p.get("records", 0), conv_width=p.get("conv_width"),
              conv_depth=p.get("conv_depth"))
    ctrl, parts, host, sb, _bfm = bfm_setup(cfg, **kw, seed=seed(), steps=p.get("steps", 6),
                                            stall=p.get("stall", 0.3), idle=p.get("idle", 0.1),
                                            resets=p.get("resets", 1))
    cycles = await _run_cocotb(dut, ctrl, parts)
    _report(dut, p, ctrl, host, sb, cycles)


@cocotb.test()
async def system(dut):
    """SSMUnit + StateController: every y and the state bit for bit ssm_step_hw_bits."""
    from sim.bench import params, seed
    p = params()
    cfg = _cocotb_config(p)
    kw = dict(slots=p["slots"], records=p.get("records", 0), conv_width=p.get("conv_width"),
              conv_depth=p.get("conv_depth"))
    top, parts, host, sb = system_setup(cfg, **kw, seed=seed(), steps=p.get("steps", 4),
                                        stall=p.get("stall", 0.3), idle=p.get("idle", 0.1),
                                        resets=p.get("resets", 1), mul_stages=p.get("mul_stages", 1),
                                        add_stages=p.get("add_stages", 1))
    cycles = await _run_cocotb(dut, top, parts)
    _report(dut, p, top.ctrl, host, sb, cycles)


if __name__ == "__main__":
    print(latency_table())
