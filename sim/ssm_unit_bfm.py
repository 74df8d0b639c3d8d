"""A cycle-level model of the :class:`hw.ssm_unit.SSMUnit` ports, for benches of what drives them.

:class:`SSMUnitBFM` stands in for the unit's ports (fill banks, commit,
sweeps of random length, ``y`` rows, ``hold``/``idle``, a synchronous tile
port that returns garbage while a sweep runs) and for a conv-window unit that
is busy at random. It is a participant of :mod:`sim.loop` and asserts the
protocol of the side that drives it (tile writes only with ``hold`` and
``idle``, no write into a committed bank, ...). Its token update is a toy
integer recurrence (:func:`toy_step`) that, like Mamba2's, does not depend
on C; a bench may pass the real one.

The state travels through the tile port as words of ``lanes`` uint32
elements (:func:`pack_tiles`, :func:`unpack_tiles`).
"""

from collections import deque

import numpy as np

from specgen.golden.memory_map import stripe_state, unstripe_state
from specgen.hw.ssm_unit import SEL_B, SEL_C, SEL_DT, SEL_X

__all__ = ["SSMUnitBFM", "BFMHooks", "toy_step", "pack_tiles", "unpack_tiles", "get_tile", "set_tile",
           "state_to_memory", "state_from_memory"]

M32 = 0xFFFFFFFF


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


def pack_tiles(cfg, state):
    """Tile-port words of a ``(H, P, N)`` uint32 state: with ``lanes ≤ N``, tile ``k`` of
    row ``r`` at ``r·⌈N/lanes⌉ + k``, column ``k·lanes + i`` in bits ``32i…`` (lanes past
    column ``N − 1`` of a row's partial last tile are 0); with ``lanes = Q·N``, rows
    ``a·Q … a·Q + Q − 1`` at ``a``, row ``a·Q + j``'s column ``n`` in bits ``32(j·N + n)…``."""
    return [get_tile(cfg, state, a) for a in range(_words(cfg))]


def unpack_tiles(cfg, words):
    """Inverse of :func:`pack_tiles` (padding lanes are ignored)."""
    assert len(words) == _words(cfg), f"{len(words)} state words, expected {_words(cfg)}"
    out = np.zeros(cfg.state_shape, dtype=np.uint32)
    for a, w in enumerate(words):
        set_tile(cfg, out, a, w)
    return out


def _words(cfg):
    """Tile-port words of a state: ``H·P·⌈N/lanes⌉``, or ``H·P/Q`` with ``Q`` rows a word."""
    H, P, N = cfg.state_shape
    if cfg.lanes > N:
        return H * P * N // cfg.lanes
    return H * P * cfg.groups_per_row


def state_to_memory(cfg, state):
    """A state (``state_shape`` binary32 bits) as the ``uint32`` words of its memory image:
    the tile order (:func:`pack_tiles`) striped over ``cfg.state_ports``
    (:func:`golden.memory_map.stripe_state`)."""
    L = cfg.lanes
    words = np.concatenate([np.frombuffer(int(w).to_bytes(4 * L, "little"), "<u4")
                            for w in pack_tiles(cfg, state)])
    return stripe_state(words, lanes=L, ports=cfg.state_ports)


def state_from_memory(cfg, words):
    """Inverse of :func:`state_to_memory`: the state of a memory image's ``uint32`` words."""
    L = cfg.lanes
    tiles = unstripe_state(np.asarray(words, dtype="<u4"), lanes=L, ports=cfg.state_ports)
    return unpack_tiles(cfg, [int.from_bytes(tiles[a * L:(a + 1) * L].tobytes(), "little")
                              for a in range(len(tiles) // L)])


def _tile_lanes(cfg, a):
    """``(row, column, lane)`` of every element tile-port word ``a`` holds."""
    N, L = cfg.state_shape[2], cfg.lanes
    if L > N:
        return [(a * (L // N) + j, n, j * N + n) for j in range(L // N) for n in range(N)]
    r, k = divmod(a, cfg.groups_per_row)
    return [(r, c, c - k * L) for c in range(k * L, min(N, (k + 1) * L))]


def get_tile(cfg, state, a):
    """Tile-port word ``a`` of the state."""
    rows = np.asarray(state).reshape(-1, cfg.state_shape[2])
    return sum(int(rows[r, c]) << (32 * i) for r, c, i in _tile_lanes(cfg, a))


def set_tile(cfg, state, a, word):
    """Write tile-port word ``a`` into the state (in place)."""
    rows = state.reshape(-1, cfg.state_shape[2])
    for r, c, i in _tile_lanes(cfg, a):
        rows[r, c] = (int(word) >> (32 * i)) & M32


class SSMUnitBFM:
    """Cycle-level stand-in for the :class:`hw.ssm_unit.SSMUnit` ports and a conv-window unit.

    Participant (see :mod:`sim.loop`): drives the ``ssm_*`` and ``conv_*``
    inputs of a :class:`hw.state_controller.StateController`, observes its
    outputs and asserts the protocol.
    """

    def __init__(self, cfg, *, conv_depth, conv_width, rng, step=toy_step, sweep_extra=4,
                 y_latency=3, prologue=12, conv_busy=0.2):
        self.cfg, self.rng, self.step = cfg, rng, step
        H, P, N = cfg.state_shape
        self.rows = H * P
        self.T = H * P * cfg.groups_per_row
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
            self.rdata = get_tile(cfg, self.state, a)
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


class BFMHooks:
    """Scenario hooks (:class:`sim.state_scenario.HostProgram`) that load and read
    the state through the BFM's own memory, in no cycles."""

    def __init__(self, bfm):
        self.bfm = bfm

    def load_state(self, prog, words):
        self.bfm.state = unpack_tiles(self.bfm.cfg, words)
        return
        yield

    def read_state(self, prog):
        return pack_tiles(self.bfm.cfg, self.bfm.state)
        yield

    def load_conv(self, prog, words):
        self.bfm.conv = list(words)
        return
        yield

    def read_conv(self, prog):
        return list(self.bfm.conv)
        yield
