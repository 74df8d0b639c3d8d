"""Scenarios of speculative decoding on :class:`hw.state_controller.StateController`.

:func:`make_scenario` writes the host's side of a run as items: speculative
steps under the three on-chip policies of :mod:`golden.backtrack`
(checkpoint the committed state, run draft tokens, capturing their inputs
into records or checkpointing their states into slots, then restore the
accepted node's state by a restore (store), a restore plus replays (replay)
or a restore plus the path's tokens again (recompute)), plus commands that
must fail, random idle cycles, conv-window changes, and a reset in the
middle of a command or token after which the controller must answer from a
clean state. :class:`Expect` is the transaction-level model that gives each
item its expected ``y`` words, responses and contents.

:class:`HostProgram` runs the items on the controller's host ports (a
participant of :mod:`sim.loop`); :class:`Scoreboard` compares what comes out
and records each command's latency; :func:`check_latencies` checks them
against the controller's latency properties. The scenario does not know
which design is under test: ``hooks`` reach its state and conv window.
"""

from collections import deque
from dataclasses import dataclass

import numpy as np

from specgen.hw.bits import index_width
from specgen.hw.ssm_unit import SEL_A, SEL_B, SEL_C, SEL_D, SEL_DT, SEL_DT_BIAS, SEL_X
from specgen.hw.state_controller import Op
from specgen.sim.ssm_unit_bfm import pack_tiles, unpack_tiles

__all__ = [
    "Expect", "make_scenario", "HostProgram", "Scoreboard", "summary", "check_latencies",
    "TokenItem", "CmdItem", "LoadItem", "CheckItem", "IdleItem", "ResetItem", "ParamItem",
]


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
            kind, top = rnd(4), 1 << index_width(max(S, R, 2))
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
                yield from self.hooks.load_state(self, pack_tiles(self.cfg, item.state))
            if item.conv is not None:
                yield from self.hooks.load_conv(self, item.conv)
        elif isinstance(item, CheckItem):
            yield from self.quiesce()
            got = unpack_tiles(self.cfg, (yield from self.hooks.read_state(self)))
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


def summary(ctrl, host, sb, cycles):
    """A run's figures: cycles, the host's counts, the scoreboard's records and the
    controller's latency properties."""
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
