"""Register access for the board back-end: a 32-bit bus, memory-mapped I/O, and named registers.

Three layers, each replaceable:

:class:`RegisterBus`
    32-bit reads and writes at byte offsets of the AXI4-Lite register file. The
    simulation back-end (a cocotb/Verilator bench) will provide one; so does a
    test's fake.
:class:`MMIO`
    The bus over ``mmap``: ``/dev/mem`` at the physical base address that
    Vivado's Address Editor gave the accelerator's ``s_axi_lite`` port, or a
    UIO device (``/dev/uioN``, its map found with :func:`uio_map`). Accesses go
    through a ``numpy`` ``uint32`` view of the mapping, so each is one aligned
    32-bit load or store (an AXI4-Lite slave has 32-bit registers; a byte-wise
    ``memcpy`` through a slice could split an access). PYNQ's ``MMIO`` class
    does the same for the same reason.
:class:`Registers`
    Named access over a bus, from the generated register map
    (:func:`hw.regmap.accelerator_regmap`, the map ``specgen_regs.h`` is written
    from): fields by name with their access kinds checked, the 64-bit base
    addresses ``MEM_{WEIGHTS,STATE,CHECKPOINT,IO}_BASE`` of the memory map
    (:mod:`golden.memory_map`), the identity check and ``STATUS``.

On a board
----------
**Untested on hardware**: nothing in this project has run on a VCK190 or VHK158;
the tests run these classes against a file-backed ``mmap`` and a ``bytearray``,
and replay their writes over AXI4-Lite on the RTL register file
(:class:`hw.axi_lite.AXI4LiteRegisterFile`) in Amaranth's simulator.
The intended use:

* **PYNQ** (a PYNQ image for the board, if one exists for it): load the overlay
  (``pynq.Overlay("specgen.bit")``), read the IP's ``phys_addr`` and
  ``addr_range`` from the overlay's ``ip_dict``, and open
  ``MMIO(path="/dev/mem", offset=phys_addr, length=addr_range)`` (root), or use
  ``pynq.MMIO`` itself: it has the same ``read(offset)``/``write(offset, value)``
  shape as :class:`RegisterBus`. Allocate the memory image with
  ``pynq.allocate(shape=(image.size,), dtype="u1")``, copy
  :attr:`gen.runtime.image.ModelImage.data` into it and pass
  ``buffer.device_address`` to :meth:`Registers.set_bases` through
  :meth:`gen.runtime.image.ModelImage.bases`.
* **A Versal Linux image** (PetaLinux or a Yocto-built image): describe the IP in
  the device tree with ``compatible = "generic-uio"`` (and
  ``uio_pdrv_genirq.of_id=generic-uio`` on the kernel command line) so it shows
  up as ``/dev/uioN``; :func:`uio_map` reads its address and size from
  ``/sys/class/uio/uioN/maps/map0``. Without UIO, ``/dev/mem`` at the
  ``SPECGEN`` base address works as root on a kernel without
  ``CONFIG_STRICT_DEVMEM`` for that range. The register offsets are the
  ``SPECGEN_*_OFFSET`` macros of ``specgen_regs.h`` (``specgen verilog``
  writes it), the same numbers :class:`Registers` reads from the map. The
  image needs physically contiguous memory the accelerator can reach (a
  reserved-memory node, or a ``u-dma-buf`` or CMA buffer); its physical address
  is what the base registers get.
"""

import abc
import mmap
import os
from pathlib import Path

import numpy as np

__all__ = ["RegisterBus", "MMIO", "uio_map", "UIOInterrupt", "Registers", "WORD"]

#: Bytes of a register (the AXI4-Lite data width of the register file).
WORD = 4


class RegisterBus(abc.ABC):
    """32-bit register access at byte offsets; subclasses implement :meth:`_read` and
    :meth:`_write` (abstract: the base class cannot be made).

    Parameters
    ----------
    span : int
        Bytes the bus reaches; every access must lie below it.
    """

    def __init__(self, *, span):
        if isinstance(span, bool) or not isinstance(span, int) or span < WORD or span % WORD:
            raise ValueError(f"RegisterBus.span must be a positive multiple of {WORD} bytes, "
                             f"not {span!r}")
        self.span = span

    def _check(self, offset):
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
            raise TypeError(f"register offset must be an integer, not {offset!r}")
        if offset % WORD or not 0 <= offset <= self.span - WORD:
            raise ValueError(f"register offset must be a multiple of {WORD} in [0, "
                             f"{self.span - WORD:#x}], not {offset:#x}")
        return int(offset)

    def read(self, offset):
        """The 32-bit word at byte ``offset``."""
        return int(self._read(self._check(offset)))

    def write(self, offset, value):
        """Write the 32-bit ``value`` at byte ``offset``."""
        offset = self._check(offset)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                or not 0 <= value < 1 << 32:
            raise ValueError(f"register value must be an integer in [0, 0xffffffff], "
                             f"not {value!r}")
        self._write(offset, int(value))

    @abc.abstractmethod
    def _read(self, offset):
        """The word at the checked byte ``offset``."""

    @abc.abstractmethod
    def _write(self, offset, value):
        """Write the checked 32-bit ``value`` at the checked byte ``offset``."""


class MMIO(RegisterBus):
    """A :class:`RegisterBus` over a memory mapping (module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        ``/dev/mem``, ``/dev/uioN``, or (tests) any file at least ``offset +
        length`` bytes long.
    offset : int
        Byte offset of the mapping in ``path``: the physical base address for
        ``/dev/mem``, ``map_index · page size`` for UIO. A multiple of
        ``mmap.ALLOCATIONGRANULARITY``.
    length : int
        Bytes to map: the register map's span (``RegisterMap.span``).

    Use :meth:`over` for a buffer that is already mapped (a ``bytearray``, an
    ``mmap``). Close with :meth:`close` or a ``with`` block.
    """

    def __init__(self, *, path, offset=0, length):
        super().__init__(span=length)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0 \
                or offset % mmap.ALLOCATIONGRANULARITY:
            raise ValueError(f"MMIO.offset must be a multiple of the page size "
                             f"{mmap.ALLOCATIONGRANULARITY} (>= 0), not {offset!r}")
        # O_SYNC: on /dev/mem the kernel then maps the range uncached, as device registers need.
        flags = os.O_RDWR | getattr(os, "O_SYNC", 0)
        try:
            fd = os.open(os.fspath(path), flags)
        except OSError as exc:
            raise OSError(exc.errno, f"MMIO: cannot open {os.fspath(path)!r} for reading and "
                                     f"writing ({exc.strerror}); /dev/mem needs root, a UIO "
                                     "device its permissions") from None
        try:
            self._map = mmap.mmap(fd, length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE,
                                  offset=offset)
        finally:
            os.close(fd)
        self._words = np.frombuffer(self._map, dtype="<u4")
        self.path, self.offset = os.fspath(path), offset

    @classmethod
    def over(cls, buffer):
        """An MMIO over a writable buffer (``bytearray``, ``mmap``), as a test's fake device."""
        self = cls.__new__(cls)
        view = memoryview(buffer)
        if view.readonly:
            raise ValueError("MMIO.over: the buffer must be writable")
        RegisterBus.__init__(self, span=view.nbytes)
        self._map = None
        self._words = np.frombuffer(buffer, dtype="<u4")
        self.path, self.offset = None, 0
        return self

    @classmethod
    def over_words(cls, words, *, span):
        """An MMIO whose loads and stores are ``words[i]`` and ``words[i] = value`` (``i``
        a 32-bit word index below ``span // 4``): a test's model of the device behind the
        mapping, such as a simulation."""
        if not (hasattr(words, "__getitem__") and hasattr(words, "__setitem__")):
            raise TypeError(f"MMIO.over_words: words must support indexing, not {words!r}")
        self = cls.__new__(cls)
        RegisterBus.__init__(self, span=span)
        self._map, self._words = None, words
        self.path, self.offset = None, 0
        return self

    def _read(self, offset):
        return self._words[offset // WORD]

    def _write(self, offset, value):
        self._words[offset // WORD] = value

    def close(self):
        """Unmap (a no-op for :meth:`over`)."""
        self._words = None
        if self._map is not None:
            self._map.close()
            self._map = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class UIOInterrupt:
    """The interrupt of a UIO device: the decoder top's ``irq`` on a Versal Linux image.

    UIO's protocol (the kernel's "The Userspace I/O HOWTO"): writing the 32-bit value 1
    to ``/dev/uioN`` unmasks the interrupt (``uio_pdrv_genirq`` masks it on every
    interrupt), and a 4-byte read blocks until the next one and returns the interrupt
    count. :meth:`wait` does both, with a timeout through ``select``.

    Parameters
    ----------
    path : str or os.PathLike
        ``/dev/uioN``. Or ``fd``: an open file descriptor that speaks the same protocol
        (the tests' socket).
    """

    def __init__(self, *, path=None, fd=None):
        if (path is None) == (fd is None):
            raise ValueError("UIOInterrupt: give exactly one of path and fd")
        self._own = fd is None
        self.fd = os.open(os.fspath(path), os.O_RDWR) if fd is None else fd
        self.count = None

    def wait(self, timeout_s):
        """Unmask, then wait up to ``timeout_s`` seconds; True if the interrupt fired
        (:attr:`count` is then the device's interrupt count)."""
        import select
        os.write(self.fd, np.uint32(1).tobytes())
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout_s))
        if not ready:
            return False
        data = os.read(self.fd, 4)
        if len(data) != 4:
            raise OSError(f"UIOInterrupt: a read gave {len(data)} bytes, not 4")
        self.count = int(np.frombuffer(data, "<u4")[0])
        return True

    def close(self):
        if self._own and self.fd is not None:
            os.close(self.fd)
        self.fd = None


def uio_map(device, *, map_index=0, sysfs="/sys/class/uio"):
    """Where UIO device ``device`` (``"uio0"`` or ``"/dev/uio0"``) maps its region ``map_index``.

    Returns
    -------
    dict
        ``path`` (``/dev/uioN``), ``offset`` (``map_index`` pages: how UIO
        selects a map), ``length`` (the map's size) and ``addr`` (its physical
        address, for the record), read from ``sysfs``.

    Raises
    ------
    FileNotFoundError
        The device or the map is not in ``sysfs``.
    """
    name = Path(device).name
    folder = Path(sysfs) / name / "maps" / f"map{map_index}"
    if not folder.is_dir():
        raise FileNotFoundError(f"uio_map: no {folder}; is the accelerator bound to a UIO driver "
                                f"(compatible = \"generic-uio\") and is {name} its device?")
    read = lambda f: int((folder / f).read_text().strip(), 0)  # noqa: E731  sysfs writes 0x…
    return {"path": f"/dev/{name}", "offset": map_index * mmap.PAGESIZE,
            "length": read("size"), "addr": read("addr")}


class Registers:
    """Named access to the accelerator's registers over a :class:`RegisterBus`.

    Parameters
    ----------
    bus : RegisterBus
    regmap : hw.regmap.RegisterMap
        The map of the design (:func:`hw.regmap.accelerator_regmap`).
    """

    def __init__(self, *, bus, regmap):
        from specgen.hw.regmap import RegisterMap
        if not isinstance(bus, RegisterBus):
            raise TypeError(f"Registers.bus must be a RegisterBus, not {bus!r}")
        if not isinstance(regmap, RegisterMap):
            raise TypeError(f"Registers.regmap must be a hw.regmap.RegisterMap, not {regmap!r}")
        if bus.span < regmap.span:
            raise ValueError(f"Registers: the bus reaches {bus.span:#x} bytes, less than the "
                             f"register map's span {regmap.span:#x}")
        self.bus, self.regmap = bus, regmap

    def _register(self, name, at):
        reg = self.regmap[name]
        if isinstance(at, bool) or not isinstance(at, int) or not 0 <= at < reg.count:
            raise ValueError(f"Registers: {name} index must be an integer in [0, "
                             f"{reg.count - 1}], not {at!r}")
        return reg, reg.offset + WORD * at

    def read(self, name, *, at=0):
        """The whole register ``name`` (entry ``at`` of a table)."""
        _, offset = self._register(name, at)
        return self.bus.read(offset)

    def fields(self, name, *, at=0):
        """``{field: value}`` of register ``name``, read once."""
        reg, offset = self._register(name, at)
        word = self.bus.read(offset)
        return {f.name: (word & f.mask) >> f.lsb for f in reg.fields}

    def write(self, name, *, at=0, **values):
        """Write the fields ``values`` of register ``name``; the others are written as 0.

        Only ``RW`` and ``WO`` fields can be written (``W1C`` ones too: a 1
        clears the flag). Writing 0 to an omitted ``RW`` field is deliberate: a
        read-modify-write of a register with ``WO`` pulses would replay them.

        Raises
        ------
        ValueError
            An unknown field, a read-only one, or a value that does not fit.
        """
        reg, offset = self._register(name, at)
        word = 0
        for fname, value in values.items():
            try:
                f = reg.field(fname)
            except KeyError:
                raise ValueError(f"Registers: {name} has no field {fname!r}; allowed: "
                                 f"{', '.join(g.name for g in reg.fields)}") from None
            if f.access in ("RO", "CONST"):
                raise ValueError(f"Registers: {name}.{fname} is {f.access} (read-only); allowed: "
                                 f"{', '.join(g.name for g in reg.fields if g.access not in ('RO', 'CONST')) or 'none'}")
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << f.width:
                raise ValueError(f"Registers: {name}.{fname} must be an integer in [0, "
                                 f"{(1 << f.width) - 1}], not {value!r}")
            word |= value << f.lsb
        self.bus.write(offset, word)

    def check_identity(self):
        """Raise unless ``ID`` and ``VERSION`` read the map's constants (the right IP, the right map).

        Raises
        ------
        RuntimeError
            Naming the register, what was read and what the map expects.
        """
        for name in ("ID", "VERSION"):
            want, got = self.regmap[name].reset, self.read(name)
            if got != want:
                raise RuntimeError(f"Registers: {name} reads {got:#010x}, not the map's "
                                   f"{want:#010x}: wrong base address, or a bitstream of another "
                                   "register map version")

    def set_bases(self, bases):
        """Write ``MEM_<CLASS>_BASE_LO/HI`` for every class of ``bases`` (``{class: address}``).

        Raises
        ------
        ValueError
            An unknown class, or an address that is not a 64-bit multiple of
            :data:`golden.memory_map.ALIGN` (the LO register keeps bits 31..12 only).
        """
        from specgen.golden.memory_map import ALIGN, REGION_CLASSES
        for kind, addr in bases.items():
            if kind not in REGION_CLASSES:
                raise ValueError(f"Registers.set_bases: unknown class {kind!r}; allowed: "
                                 f"{', '.join(REGION_CLASSES)}")
            if isinstance(addr, bool) or not isinstance(addr, int) or not 0 <= addr < 1 << 64 \
                    or addr % ALIGN:
                raise ValueError(f"Registers.set_bases: {kind} base must be a multiple of {ALIGN} "
                                 f"in [0, 2**64), not {addr!r}")
            name = f"MEM_{kind.upper()}_BASE"
            lo = self.regmap[f"{name}_LO"].field("ADDR")
            self.write(f"{name}_LO", ADDR=(addr & 0xFFFF_FFFF) >> lo.lsb)
            self.write(f"{name}_HI", ADDR=addr >> 32)

    def bases(self):
        """``{class: address}`` as the base registers hold them."""
        from specgen.golden.memory_map import REGION_CLASSES
        out = {}
        for kind in REGION_CLASSES:
            name = f"MEM_{kind.upper()}_BASE"
            lo = self.regmap[f"{name}_LO"].field("ADDR")
            out[kind] = (self.fields(f"{name}_HI")["ADDR"] << 32) | \
                (self.fields(f"{name}_LO")["ADDR"] << lo.lsb)
        return out

    def status(self):
        """``STATUS``: ``{"BUSY": 0/1, "DONE": …, "ERROR": …, "ERROR_CODE": n, "error": name}``."""
        out = self.fields("STATUS")
        codes = {e.value: e.name for e in self.regmap["STATUS"].field("ERROR_CODE").enums}
        out["error"] = codes.get(out["ERROR_CODE"], f"UNKNOWN_{out['ERROR_CODE']}")
        return out
