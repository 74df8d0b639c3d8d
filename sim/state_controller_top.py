"""A test top for :class:`hw.state_controller.StateController` with the real SSM unit.

:class:`StateControllerTop` is :class:`hw.ssm_unit.SSMUnit` + the controller +
a conv-window RAM, with debug ports that a bench uses while the controller is
idle; :class:`DebugHooks` are the scenario hooks
(:class:`sim.state_scenario.HostProgram`) that load and read the state and
the conv window through them.
"""

from types import SimpleNamespace

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from specgen.hw.bits import index_width
from specgen.hw.hierarchy import submodule
from specgen.hw.ssm_unit import SSMUnit
from specgen.hw.state_controller import StateController, connect_ssm

__all__ = ["StateControllerTop", "DebugHooks"]


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
            "dbg_hold": In(1), "dbg_addr": In(index_width(c.state_tiles)), "dbg_we": In(1),
            "dbg_wdata": In(32 * L), "dbg_rdata": Out(32 * L),
            "conv_busy": In(1),
            "cdbg_addr": In(index_width(max(c.conv_depth, 1))), "cdbg_we": In(1),
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
