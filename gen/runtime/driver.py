"""The host's driver of the decoder core (:class:`hw.decoder_top.DecoderTop`), over registers.

:class:`CoreDriver` is everything the host does to the core: it writes the SSM engine's
node table, starts a program, waits for its end (the core's interrupt, or polling),
aborts one, and reads the performance counters. It only uses a
:class:`gen.runtime.regbus.Registers` (named access over any
:class:`gen.runtime.regbus.RegisterBus`) and an optional interrupt, so the same code runs

* in simulation: the bus is the cocotb bench's ``AxiLiteMaster`` on the top's
  ``s_axi`` (:mod:`gen.runtime.rtl_host`), the interrupt the top's ``irq`` pin;
* on a board: the bus is :class:`gen.runtime.regbus.MMIO` over ``/dev/uioN`` or
  ``/dev/mem`` at the addresses of the generated header, the interrupt
  :class:`gen.runtime.regbus.UIOInterrupt` (``/dev/uioN``) or none (polling). The
  tests run this path against a mapping whose words forward to the simulation.

The data (weights, state, programs, tables) is never written through registers: the
host writes it into the memory the core's AXI4 masters read.
"""

import time

__all__ = ["CoreDriver", "CoreError", "PERF_NAMES"]

#: The counters :meth:`CoreDriver.counters` reads, as their lower-case keys.
PERF_NAMES = ("PERF_CYCLES", "PERF_BUSY", "PERF_LINEAR_BUSY", "PERF_SSM_BUSY", "PERF_OVERLAP")


class CoreError(RuntimeError):
    """A program stopped on an error (``STATUS.ERROR_CODE`` or ``STATUS.ENGINE_ERROR``), or
    did not end in time."""


class CoreDriver:
    """Run programs on a decoder core through its registers.

    Parameters
    ----------
    regs : gen.runtime.regbus.Registers
        Over the core's map (:func:`hw.decoder_top.decoder_regmap`).
    irq : object, optional
        With ``wait(timeout_s) -> bool`` (True: the interrupt fired): the top's ``irq``
        (``EVENT.END``). ``None``: poll ``EVENT`` every ``poll_s`` seconds.
    timeout_s : float
        Wall-clock seconds a program may take before :meth:`wait` gives up.
    poll_s : float
        Seconds between polls without an interrupt.
    """

    def __init__(self, *, regs, irq=None, timeout_s=600.0, poll_s=1e-4):
        from .regbus import Registers
        if not isinstance(regs, Registers):
            raise TypeError(f"CoreDriver.regs must be a gen.runtime.regbus.Registers, "
                            f"not {regs!r}")
        if irq is not None and not callable(getattr(irq, "wait", None)):
            raise TypeError(f"CoreDriver.irq must have a wait(timeout_s) method, not {irq!r}")
        if not timeout_s > 0 or not poll_s >= 0:
            raise ValueError(f"CoreDriver: timeout_s must be > 0 and poll_s >= 0, not "
                             f"{timeout_s!r}, {poll_s!r}")
        self.regs, self.irq = regs, irq
        self.timeout_s, self.poll_s = float(timeout_s), float(poll_s)
        regs.check_identity()
        caps = regs.fields("CAPS_PROGRAM")
        self.max_records, self.record_bytes = caps["MAX_RECORDS"], caps["RECORD_BYTES"]

    def write_table(self, entries):
        """Write the node table: ``entries`` of ``(node, entry, src)``, ``entry`` packed
        (:func:`hw.tree_ssm.table_layout`). One register write each."""
        for node, entry, src in entries:
            self.regs.write("TBL", NODE=int(node), SRC=int(src), ENTRY=int(entry), WRITE=1)

    def start(self, addr, records):
        """Clear ``EVENT.END`` and the counters, and start the program of ``records``
        records at byte ``addr`` (a multiple of the record size).

        Raises
        ------
        ValueError
            An address off the record grid, or a length outside ``1 .. CAPS_PROGRAM.MAX_RECORDS``.
        """
        if isinstance(addr, bool) or not isinstance(addr, int) or addr < 0 \
                or addr % self.record_bytes:
            raise ValueError(f"CoreDriver.start: addr must be a multiple of the record size "
                             f"{self.record_bytes} (>= 0), not {addr!r}")
        if isinstance(records, bool) or not isinstance(records, int) \
                or not 1 <= records <= self.max_records:
            raise ValueError(f"CoreDriver.start: records must be in [1, {self.max_records}] "
                             f"(CAPS_PROGRAM.MAX_RECORDS), not {records!r}")
        shift = self.regs.regmap["PROG_ADDR_LO"].field("ADDR").lsb
        self.regs.write("PROG_ADDR_LO", ADDR=(addr & 0xFFFF_FFFF) >> shift)
        self.regs.write("PROG_ADDR_HI", ADDR=addr >> 32)
        self.regs.write("PROG_RECORDS", RECORDS=records)
        self.regs.write("EVENT", END=1)
        self.regs.write("PERF_CTRL", CLEAR=1)
        self.regs.write("CTRL", START=1)

    def _ended(self):
        return bool(self.regs.fields("EVENT")["END"])

    def wait_end(self):
        """Block until the program ends (``EVENT.END``)."""
        deadline = time.monotonic() + self.timeout_s
        while not self._ended():
            left = deadline - time.monotonic()
            if left <= 0:
                raise CoreError(f"CoreDriver: the program did not end in {self.timeout_s} s "
                                f"(STATUS {self.regs.status()})")
            if self.irq is not None:
                self.irq.wait(left)
            elif self.poll_s:
                time.sleep(self.poll_s)

    def wait(self):
        """Wait for the program to end; its cycles (``PERF_PROGRAM``).

        Raises
        ------
        CoreError
            The program stopped on an error (named), or an engine's AXI port answered an
            error response.
        """
        self.wait_end()
        st = self.regs.status()
        if st["ERROR"]:
            raise CoreError(f"CoreDriver: the program stopped with STATUS.ERROR_CODE "
                            f"{st['error']}")
        if st["ENGINE_ERROR"]:
            raise CoreError(f"CoreDriver: an engine's AXI port answered an error response "
                            f"(STATUS.ENGINE_ERROR {st['ENGINE_ERROR']:#x})")
        return self.counter("PERF_PROGRAM")

    def abort(self):
        """``CTRL.ABORT``, then wait until the core is idle and check that the program
        stopped as aborted (the rollback is to run it again)."""
        self.regs.write("CTRL", ABORT=1)
        self.wait_end()
        deadline = time.monotonic() + self.timeout_s
        while not self.regs.fields("STATUS")["IDLE"]:
            if time.monotonic() > deadline:
                raise CoreError("CoreDriver.abort: the core did not go idle")
        st = self.regs.status()
        if st["error"] != "ABORTED":
            raise CoreError(f"CoreDriver.abort: the program ended with {st['error']}, not "
                            "ABORTED")

    def counter(self, name):
        """The 64-bit value of counter ``name`` (its ``_LO``/``_HI`` pair as last taken)."""
        return self.regs.read(f"{name}_LO") | self.regs.read(f"{name}_HI") << 32

    def counters(self):
        """Snapshot the counters (``PERF_CTRL.SNAPSHOT``) and read them:
        ``{"perf_cycles": n, ...}`` for :data:`PERF_NAMES`."""
        self.regs.write("PERF_CTRL", SNAPSHOT=1)
        return {name.lower(): self.counter(name) for name in PERF_NAMES}
