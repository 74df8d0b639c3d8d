"""The accelerator's AXI4-Lite control/status register map, described once.

One description (:class:`RegisterMap` of :class:`Register` of :class:`Field`)
feeds every consumer: the Markdown table (:meth:`RegisterMap.to_markdown`,
``docs/regmap.md``), the C header for host software
(:meth:`RegisterMap.to_c_header`) and the RTL register file
(:class:`hw.axi_lite.AXI4LiteRegisterFile`). Nothing is typed twice.

The description validates eagerly: duplicate names, overlapping offsets, a
field outside its register, overlapping fields or a reset value that does not
fit raise ``ValueError`` naming the register and field.

:func:`accelerator_regmap` is the map of the SpecMamba/SPEQ accelerator for a
:class:`golden.config.Config`: identification and capabilities, control
(start, abort, mode: draft or target), status (busy, done, error and its code),
model dimensions, the draft-tree descriptor (node count, depth and a table of
parent indices), performance counters and the base addresses of the four
region classes of the off-chip memory map (:mod:`golden.memory_map`).
"""

import re
from dataclasses import dataclass

from specgen.golden.memory_map import ALIGN, REGION_CLASSES
from specgen.golden.validate import check_choice, check_int
from specgen.hw.bits import index_width, value_width

__all__ = ["ACCESS", "Enum", "Field", "Register", "RegisterMap", "accelerator_regmap",
           "counter_registers", "address_registers",
           "ERROR_CODES", "REGMAP_VERSION", "MEM_BASE_OFFSETS", "LIN_ADDR_OFFSETS",
           "LIN_ADDR_SHIFT", "LIN_X_STRIDE_OFFSET"]

#: Field access kinds.
ACCESS = {
    "RO": "read-only; the hardware drives the value",
    "CONST": "read-only constant: the reset value, fixed by the configuration",
    "RW": "read/write; the hardware sees the stored value",
    "WO": "write-only pulse: writing 1 pulses the bit for one cycle; reads as 0",
    "W1C": "sticky status: the hardware sets it; writing 1 clears it",
}

#: Register map version (major, minor): bumped when offsets or fields change.
REGMAP_VERSION = (3, 1)

#: Offset of each region class's 64-bit base-address pair (LO, then HI), in the free words after
#: the performance counters, so every earlier offset is unchanged.
MEM_BASE_OFFSETS = {kind: 0x100 + 8 * i for i, kind in enumerate(REGION_CLASSES)}

#: Offset of each linear job's 64-bit byte-address pair (LO, then HI), after the class bases.
LIN_ADDR_OFFSETS = {"W_NIBBLE": 0x140, "W_RESIDUE": 0x148, "X": 0x150, "Y": 0x158}
#: What each linear job address points at (hw.linear_engine).
LIN_ADDR_TEXT = {"W_NIBBLE": "the job's BSFP nibble-plane region (golden.weight_planes.pack_jobs)",
                 "W_RESIDUE": "the job's three residue-plane slice regions, back to back",
                 "X": "the job's binary16 activations, token 0's first (one vector a token, "
                      "LIN_X_STRIDE apart)",
                 "Y": "the job's result records (binary32, one record per output group and "
                      "token)"}
#: Offset of the linear job's activation stride, after its addresses.
LIN_X_STRIDE_OFFSET = 0x160
#: Low address bits the linear job's address registers do not store: 64-byte alignment
#: covers every port's beat (at most 512 bits).
LIN_ADDR_SHIFT = 6

#: What each region class holds (golden.memory_map), for the base registers' descriptions.
MEM_CLASS_TEXT = {"weights": "BSFP weight planes and layer parameters",
                  "state": "committed SSM states and conv windows",
                  "checkpoint": "per-node records of the backtracking policy",
                  "io": "token ids in and out, logits"}

_NAME = re.compile(r"[A-Z][A-Z0-9_]*\Z")


def _check_name(owner, what, name):
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"{owner}.{what} must be an upper-case C identifier "
                         f"([A-Z][A-Z0-9_]*), not {name!r}")
    return name


@dataclass(frozen=True, kw_only=True)
class Enum:
    """A named value of a field (an error code, a mode).

    Parameters
    ----------
    name : str
        Upper-case identifier; the C header defines ``<REG>_<FIELD>_<NAME>``.
    value : int
        The field value.
    description : str
        What it means.
    """

    name: str
    value: int
    description: str

    def __post_init__(self):
        _check_name("Enum", "name", self.name)
        check_int(f"Enum {self.name}", "value", self.value, min=0)


@dataclass(frozen=True, kw_only=True)
class Field:
    """A bit field of a register.

    Parameters
    ----------
    name : str
        Upper-case identifier, unique within its register.
    lsb : int
        Lowest bit.
    width : int
        Bits (≥ 1).
    access : str
        A key of :data:`ACCESS`.
    reset : int
        Value after reset (for ``CONST``, the value read forever).
    description : str
        What the field means, in the papers' terms.
    enums : tuple of Enum
        Named values, if any.
    """

    name: str
    lsb: int
    width: int
    access: str
    reset: int = 0
    description: str = ""
    enums: tuple = ()

    def __post_init__(self):
        _check_name("Field", "name", self.name)
        owner = f"Field {self.name}"
        check_int(owner, "lsb", self.lsb, min=0)
        check_int(owner, "width", self.width, min=1)
        check_choice(owner, "access", self.access, tuple(ACCESS))
        check_int(owner, "reset", self.reset, min=0)
        if self.reset >> self.width:
            raise ValueError(f"Field {self.name}: reset {self.reset:#x} does not fit in "
                             f"{self.width} bits")
        if self.access == "WO" and self.reset:
            raise ValueError(f"Field {self.name}: a WO field reads as 0, so its reset must be 0, "
                             f"not {self.reset:#x}")
        if not isinstance(self.enums, tuple) or not all(isinstance(e, Enum) for e in self.enums):
            raise TypeError(f"Field {self.name}.enums must be a tuple of Enum, not {self.enums!r}")
        seen = set()
        for e in self.enums:
            if e.name in seen:
                raise ValueError(f"Field {self.name}: duplicate enum name {e.name!r}")
            seen.add(e.name)
            if e.value >> self.width:
                raise ValueError(f"Field {self.name}: enum {e.name} = {e.value} does not fit in "
                                 f"{self.width} bits")

    @property
    def msb(self):
        return self.lsb + self.width - 1

    @property
    def mask(self):
        """Mask of the field in its register (shifted into place)."""
        return ((1 << self.width) - 1) << self.lsb

    @property
    def bits(self):
        """``"[msb:lsb]"`` or ``"[bit]"``."""
        return f"[{self.msb}:{self.lsb}]" if self.width > 1 else f"[{self.lsb}]"


@dataclass(frozen=True, kw_only=True)
class Register:
    """A register, or a table of ``count`` registers at consecutive words.

    Parameters
    ----------
    name : str
        Upper-case identifier, unique in the map.
    offset : int
        Byte offset from the map's base; a multiple of 4.
    fields : tuple of Field
        Non-overlapping fields inside ``width`` bits.
    description : str
        What the register is for.
    count : int
        ``1`` for a plain register; ``> 1`` for a table whose entry ``i`` is
        at ``offset + 4·i`` (all fields ``RW``).
    width : int
        Register width (32, the AXI4-Lite data width).
    """

    name: str
    offset: int
    fields: tuple
    description: str = ""
    count: int = 1
    width: int = 32

    def __post_init__(self):
        _check_name("Register", "name", self.name)
        owner = f"Register {self.name}"
        check_int(owner, "offset", self.offset, min=0)
        if self.offset % 4:
            raise ValueError(f"Register {self.name}: offset {self.offset:#x} is not a multiple "
                             "of 4")
        check_int(owner, "count", self.count, min=1)
        check_int(owner, "width", self.width, min=1, max=32)
        if not isinstance(self.fields, tuple) or not self.fields or \
                not all(isinstance(f, Field) for f in self.fields):
            raise TypeError(f"Register {self.name}.fields must be a non-empty tuple of Field, "
                            f"not {self.fields!r}")
        names = set()
        used = 0
        for f in self.fields:
            if f.name in names:
                raise ValueError(f"Register {self.name}: duplicate field name {f.name!r}")
            names.add(f.name)
            if f.msb >= self.width:
                raise ValueError(f"Register {self.name}: field {f.name} {f.bits} is outside the "
                                 f"register's {self.width} bits")
            if used & f.mask:
                other = next(g.name for g in self.fields if g.mask & f.mask and g is not f)
                raise ValueError(f"Register {self.name}: field {f.name} {f.bits} overlaps "
                                 f"field {other}")
            used |= f.mask
            if self.count > 1 and f.access != "RW":
                raise ValueError(f"Register {self.name}: a table (count {self.count}) holds "
                                 f"RW fields only; field {f.name} is {f.access}")

    @property
    def end(self):
        """First byte offset after the register (or table)."""
        return self.offset + 4 * self.count

    @property
    def reset(self):
        """Reset value of the whole register."""
        value = 0
        for f in self.fields:
            value |= f.reset << f.lsb
        return value

    @property
    def access(self):
        """Register-level access: the field accesses, ``/``-joined in a fixed order."""
        kinds = {f.access for f in self.fields}
        return "/".join(k for k in ACCESS if k in kinds)

    def field(self, name):
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"Register {self.name} has no field {name!r}")


@dataclass(frozen=True, kw_only=True)
class RegisterMap:
    """A register file: registers at non-overlapping offsets.

    Parameters
    ----------
    name : str
        Upper-case prefix of every C macro (``SPECGEN``).
    registers : tuple of Register
        In address order or not; :attr:`registers` keeps the given order and
        the generators sort by offset.
    description : str
        One paragraph for the document.
    """

    name: str
    registers: tuple
    description: str = ""

    def __post_init__(self):
        _check_name("RegisterMap", "name", self.name)
        if not isinstance(self.registers, tuple) or not self.registers or \
                not all(isinstance(r, Register) for r in self.registers):
            raise TypeError("RegisterMap.registers must be a non-empty tuple of Register, "
                            f"not {self.registers!r}")
        names = set()
        for r in self.registers:
            if r.name in names:
                raise ValueError(f"RegisterMap {self.name}: duplicate register name {r.name!r}")
            names.add(r.name)
        ordered = sorted(self.registers, key=lambda r: r.offset)
        for a, b in zip(ordered, ordered[1:]):
            if b.offset < a.end:
                raise ValueError(f"RegisterMap {self.name}: register {b.name} at {b.offset:#05x} "
                                 f"overlaps register {a.name} ({a.offset:#05x}..{a.end - 1:#05x})")

    @property
    def span(self):
        """Bytes the map occupies: a power of two covering every register."""
        end = max(r.end for r in self.registers)
        return 1 << max(2, (end - 1).bit_length())

    @property
    def addr_width(self):
        """Byte-address bits that decode the map."""
        return self.span.bit_length() - 1

    def __getitem__(self, name):
        for r in self.registers:
            if r.name == name:
                return r
        raise KeyError(f"RegisterMap {self.name} has no register {name!r}")

    def by_offset(self):
        return sorted(self.registers, key=lambda r: r.offset)

    # --- generators -------------------------------------------------------------------

    def to_markdown(self, *, title=None):
        """The map as a Markdown document: a register table, then the fields of each."""
        lines = [f"# {title or self.name + ' register map'}", ""]
        if self.description:
            lines += [self.description, ""]
        lines += ["Access kinds: " + "; ".join(f"`{k}` {v}" for k, v in ACCESS.items()) + ".", ""]
        lines += ["| offset | register | access | reset | description |",
                  "|---|---|---|---|---|"]
        for r in self.by_offset():
            where = f"`{r.offset:#05x}`" if r.count == 1 else \
                f"`{r.offset:#05x}`..`{r.end - 4:#05x}`"
            name = r.name if r.count == 1 else f"{r.name}[0..{r.count - 1}]"
            lines.append(f"| {where} | `{name}` | {r.access} | `{r.reset:#010x}` | "
                         f"{_md(r.description)} |")
        lines += [""]
        for r in self.by_offset():
            head = r.name if r.count == 1 else f"{r.name}[i] (i < {r.count}, at {r.offset:#05x} + 4·i)"
            lines += [f"## {head} (`{r.offset:#05x}`)", ""]
            if r.description:
                lines += [r.description, ""]
            lines += ["| bits | field | access | reset | description |", "|---|---|---|---|---|"]
            for f in sorted(r.fields, key=lambda f: -f.lsb):
                text = _md(f.description)
                if f.enums:
                    text += "<br>" + "<br>".join(f"{e.value} = `{e.name}`: {_md(e.description)}"
                                                  for e in f.enums)
                lines.append(f"| {f.bits} | `{f.name}` | {f.access} | `{f.reset:#x}` | {text} |")
            lines += [""]
        return "\n".join(lines)

    def to_c_header(self, *, guard=None):
        """The map as a C header of ``#define``s.

        For every register ``<MAP>_<REG>_OFFSET`` (a table also gets
        ``<MAP>_<REG>_COUNT`` and ``<MAP>_<REG>(i)``) and ``<MAP>_<REG>_RESET``;
        for every field ``_SHIFT``, ``_WIDTH``, ``_MASK`` (in place) and
        ``_RESET`` (unshifted); for every named value ``<MAP>_<REG>_<FIELD>_<NAME>``.
        """
        guard = guard or f"{self.name}_REGS_H"
        p = self.name
        lines = [f"/* {self.name} register map: generated by specgen from hw/regmap.py; do not edit. */",
                 f"#ifndef {guard}", f"#define {guard}", "",
                 f"#define {p}_REGMAP_SPAN 0x{self.span:x}u", ""]
        for r in self.by_offset():
            q = f"{p}_{r.name}"
            lines.append(f"/* {r.name}: {_c_comment(r.description)} */")
            lines.append(f"#define {q}_OFFSET 0x{r.offset:03x}u")
            if r.count > 1:
                lines.append(f"#define {q}_COUNT {r.count}u")
                lines.append(f"#define {q}(i) ({q}_OFFSET + 4u * (unsigned)(i))")
            lines.append(f"#define {q}_RESET 0x{r.reset:08x}u")
            for f in sorted(r.fields, key=lambda f: f.lsb):
                fq = f"{q}_{f.name}"
                lines += [f"#define {fq}_SHIFT {f.lsb}u",
                          f"#define {fq}_WIDTH {f.width}u",
                          f"#define {fq}_MASK 0x{f.mask:08x}u",
                          f"#define {fq}_RESET 0x{f.reset:x}u"]
                for e in f.enums:
                    lines.append(f"#define {fq}_{e.name} {e.value}u")
            lines.append("")
        lines += [f"#endif /* {guard} */", ""]
        return "\n".join(lines)


def _md(text):
    return text.replace("|", "\\|").replace("\n", " ")


def _c_comment(text):
    return text.replace("*/", "* /").replace("\n", " ")


#: Error codes of ``STATUS.ERROR_CODE`` (the first error since the last clear).
ERROR_CODES = (
    Enum(name="NONE", value=0, description="no error"),
    Enum(name="TREE_OVERFLOW", value=1,
         description="the tree needs more live state slots than the FIFO holds (fifo_depth)"),
    Enum(name="TREE_SIZE", value=2,
         description="NODE_COUNT is 0 or above the TREE_PARENT table (max_nodes)"),
    Enum(name="TREE_ORDER", value=3,
         description="a parent index is not below its node, or parents decrease (not BFS order)"),
    Enum(name="DIMENSIONS", value=4,
         description="a DIM_* register is 0 or above what the hardware was built for (CAPS_*)"),
    Enum(name="START_BUSY", value=5, description="START written while BUSY"),
    Enum(name="STREAM", value=6,
         description="an AXI4-Stream input ended early or late (TLAST at the wrong beat)"),
    Enum(name="LINEAR_CMD", value=7,
         description="LIN_CTRL.GO with a LIN_CMD/LIN_STEPS field 0 or above CAPS_LINEAR "
                     "(max_k beats), or while the previous command still waits"),
    Enum(name="MEMORY", value=8,
         description="a memory port answered an AXI response other than OKAY (SLVERR, DECERR)"),
    Enum(name="DRAFT_ACCEPT", value=9,
         description="CTRL.DRAFT_COMMIT with DRAFT_ACCEPT.COUNT 0 or above the draft tokens run "
                     "since the last draft commit or ROLLBACK (STATUS.DRAFT_TOKENS), or a draft "
                     "START with max_nodes draft tokens already run"),
)


def counter_registers(name, offset, what, *, snapshot=True):
    """A 64-bit counter's snapshot as two read-only registers, ``<name>_LO`` at ``offset``
    and ``<name>_HI`` after it (a :class:`hw.perf_counter.PerfCounter`'s value);
    ``snapshot``: the value is the one ``PERF_CTRL.SNAPSHOT`` took."""
    taken = " (snapshot taken by PERF_CTRL.SNAPSHOT)" if snapshot else ""
    return (
        Register(name=f"{name}_LO", offset=offset, description=f"{what}, bits 31..0{taken}",
                 fields=(Field(name="VALUE", lsb=0, width=32, access="RO",
                               description=f"{what}, low word"),)),
        Register(name=f"{name}_HI", offset=offset + 4, description=f"{what}, bits 63..32",
                 fields=(Field(name="VALUE", lsb=0, width=32, access="RO",
                               description=f"{what}, high word"),)),
    )


def address_registers(name, offset, shift, lo_text, hi_text):
    """A 64-bit address as two registers: ``<name>_LO`` stores bits 31..``shift`` (the low
    bits are the alignment), ``<name>_HI`` bits 63..32."""
    return (
        Register(name=f"{name}_LO", offset=offset, description=lo_text,
                 fields=(Field(name="ADDR", lsb=shift, width=32 - shift, access="RW",
                               description=f"address bits 31..{shift}"),)),
        Register(name=f"{name}_HI", offset=offset + 4, description=hi_text,
                 fields=(Field(name="ADDR", lsb=0, width=32, access="RW",
                               description="address bits 63..32"),)),
    )


def accelerator_regmap(config):
    """The register map of the accelerator built from ``config``.

    Capability registers (``CAPS_*``) read the configuration the hardware was
    built with; the dimension registers reset to the configured SSM geometry;
    the tree table has ``config.tree.max_nodes`` entries.

    Parameters
    ----------
    config : golden.config.Config
        The preset (or a custom config).

    Returns
    -------
    RegisterMap
    """
    from specgen.golden.config import Config
    if not isinstance(config, Config):
        raise TypeError(f"accelerator_regmap: config must be a golden.config.Config, "
                        f"not {config!r}")
    tree, lin, ssm = config.tree, config.linear, config.ssm
    node_bits = index_width(tree.max_nodes)
    major, minor = REGMAP_VERSION
    counter = counter_registers

    def base_address(kind, what):
        # 64-bit, page-aligned: the LO word's bits 11..0 are not stored, so every address the
        # hardware computes (base + region offset + layer·stride) stays on a 4 KiB page.
        return address_registers(f"MEM_{kind.upper()}_BASE", MEM_BASE_OFFSETS[kind],
                            ALIGN.bit_length() - 1,
                            f"Base address of the {kind} class ({what}), bits 31..0; "
                            f"{ALIGN}-byte aligned.",
                            f"Base address of the {kind} class, bits 63..32.")

    def lin_address(name, what):
        return address_registers(f"LIN_{name}", LIN_ADDR_OFFSETS[name], LIN_ADDR_SHIFT,
                            f"Byte address of {what}, bits 31..0; {1 << LIN_ADDR_SHIFT}-byte "
                            "aligned. Read at LIN_CTRL.GO.",
                            f"Byte address of {what}, bits 63..32.")

    regs = (
        # --- identification and capabilities ---
        Register(name="ID", offset=0x000, description="Identifies the accelerator.",
                 fields=(Field(name="MAGIC", lsb=0, width=32, access="CONST", reset=0x53504543,
                               description="ASCII \"SPEC\""),)),
        Register(name="VERSION", offset=0x004, description="Register map version.",
                 fields=(Field(name="MINOR", lsb=0, width=16, access="CONST", reset=minor,
                               description="compatible additions"),
                         Field(name="MAJOR", lsb=16, width=16, access="CONST", reset=major,
                               description="incompatible changes of offsets or fields"))),
        Register(name="CAPS_LINEAR", offset=0x008,
                 description="Linear unit the hardware was built with (SpecMamba linear unit "
                             "of SPEQ dual-mode PEs).",
                 fields=(Field(name="ROWS", lsb=0, width=12, access="CONST", reset=lin.rows,
                               description="output rows per weight tile"),
                         Field(name="COLS", lsb=12, width=12, access="CONST", reset=lin.cols,
                               description="token lanes: tree nodes verified per weight read"),
                         Field(name="QUANT_LANES", lsb=24, width=4, access="CONST",
                               reset=lin.quant_lanes,
                               description="draft products per PE per cycle (SPEQ: 3)"))),
        Register(name="CAPS_SSM", offset=0x00C,
                 description="SSM unit the hardware was built with (one Mamba2 layer).",
                 fields=(Field(name="NHEADS", lsb=0, width=12, access="CONST", reset=ssm.nheads,
                               description="heads"),
                         Field(name="HEADDIM", lsb=12, width=10, access="CONST",
                               reset=ssm.headdim, description="rows per head, P"),
                         Field(name="D_STATE", lsb=22, width=10, access="CONST",
                               reset=ssm.d_state, description="state columns, N"))),
        Register(name="CAPS_TREE", offset=0x010,
                 description="Tree verification the hardware was built with.",
                 fields=(Field(name="MAX_NODES", lsb=0, width=16, access="CONST",
                               reset=tree.max_nodes,
                               description="entries of the TREE_PARENT table"),
                         Field(name="FIFO_DEPTH", lsb=16, width=8, access="CONST",
                               reset=tree.fifo_depth,
                               description="live state slots in the ring FIFO"),
                         Field(name="SSM_LANES", lsb=24, width=8, access="CONST",
                               reset=ssm.lanes.bit_length() - 1,
                               description="log2 of the SSM unit's EMU lanes"))),
        # --- control and status ---
        Register(name="CTRL", offset=0x020, description="Starts and aborts a step.",
                 fields=(Field(name="START", lsb=0, width=1, access="WO",
                               description="start one draft or verify step with the current "
                                           "MODE, dimensions and tree"),
                         Field(name="ABORT", lsb=1, width=1, access="WO",
                               description="stop the current step; BUSY falls within a few "
                                           "cycles, DONE is not set"),
                         Field(name="MATCH_GO", lsb=2, width=1, access="WO",
                               description="TREE_MATCH holds the target's match bits of every "
                                           "node: report the accepted path and commit it"),
                         Field(name="ROLLBACK", lsb=3, width=1, access="WO",
                               description="drop the draft tokens run since the last draft "
                                           "commit: the next draft token starts from the "
                                           "draft's committed bank (no copy)"),
                         Field(name="DRAFT_COMMIT", lsb=4, width=1, access="WO",
                               description="replay the first DRAFT_ACCEPT.COUNT draft tokens "
                                           "from the draft's committed bank into the other "
                                           "bank, every layer; flip STATE_BANK.DRAFT after "
                                           "DONE"),
                         Field(name="IRQ_EN", lsb=8, width=1, access="RW",
                               description="raise the interrupt output while STATUS.DONE or "
                                           "STATUS.ERROR is set"))),
        Register(name="MODE", offset=0x024, description="What the next START runs.",
                 fields=(Field(name="MODE", lsb=0, width=1, access="RW",
                               enums=(Enum(name="DRAFT", value=0,
                                           description="draft: BSFP nibble plane, quantized PEs"),
                                      Enum(name="TARGET", value=1,
                                           description="target: full FP16 weights, verify the "
                                                       "tree")),
                               description="draft or target pass"),
                         Field(name="DRAFT_LEN", lsb=8, width=8, access="RW", reset=16,
                               description="most draft tokens per step (SPEQ: L = 16)"))),
        Register(name="STATUS", offset=0x028, description="Progress and errors of the last step.",
                 fields=(Field(name="BUSY", lsb=0, width=1, access="RO",
                               description="a step is running"),
                         Field(name="DONE", lsb=1, width=1, access="W1C",
                               description="a step completed; write 1 to clear"),
                         Field(name="ERROR", lsb=2, width=1, access="W1C",
                               description="a step stopped on an error; write 1 to clear"),
                         Field(name="WAIT_MATCH", lsb=3, width=1, access="RO",
                               description="a target step's tree passes are done, every "
                                           "node's y is in memory: write TREE_MATCH, then "
                                           "CTRL.MATCH_GO"),
                         Field(name="ERROR_CODE", lsb=8, width=4, access="RO", enums=ERROR_CODES,
                               description="why the step stopped (valid while ERROR is set)"),
                         Field(name="DRAFT_TOKENS", lsb=16, width=node_bits + 1, access="RO",
                               description="draft tokens run since the last draft commit or "
                                           "ROLLBACK"))),
        Register(name="STATE_BANK", offset=0x02C, description="Which bank of slots target0/1 "
                 "and draft0/1 of the memory map's state.ssm holds each model's committed "
                 "state (the host flips a bit once the step that wrote the other bank is "
                 "DONE; a reset returns both to 0).",
                 fields=(Field(name="TARGET", lsb=0, width=1, access="RW",
                               description="the target's committed bank"),
                         Field(name="DRAFT", lsb=1, width=1, access="RW",
                               description="the draft's committed bank"))),
        # --- linear unit jobs (run concurrently with the SSM path) ---
        Register(name="LIN_CMD", offset=0x030, description="The next linear-unit job: an "
                 "output tile of N_ROWS rows × N_TOKENS tokens over LIN_STEPS inputs, its "
                 "weights, activations and results at the LIN_* addresses.",
                 fields=(Field(name="MODE", lsb=0, width=1, access="RW",
                               enums=(Enum(name="FULL", value=0,
                                           description="target: both BSFP planes, the "
                                                       "reconstructed FP16 weight"),
                                      Enum(name="QUANT", value=1,
                                           description="draft: the BSFP nibble plane alone")),
                               description="pass of the job"),
                         Field(name="N_ROWS", lsb=4, width=12, access="RW", reset=1,
                               description=f"valid output rows (1 … {lin.tile_rows})"),
                         Field(name="N_TOKENS", lsb=16, width=12, access="RW", reset=1,
                               description=f"tokens (1 … {lin.token_lanes})"),
                         Field(name="SCALE", lsb=28, width=4, access="RW",
                               description="BSFP scale exponent k of the job's weights"))),
        Register(name="LIN_STEPS", offset=0x034, description="Inputs of the next linear job.",
                 fields=(Field(name="STEPS", lsb=0, width=max(16, value_width(lin.max_k)),
                               access="RW", reset=1,
                               description=f"inputs K of every dot product (1 … max_k = "
                                           f"{lin.max_k})"),)),
        Register(name="LIN_CTRL", offset=0x038, description="Issues linear jobs.",
                 fields=(Field(name="GO", lsb=0, width=1, access="WO",
                               description="queue LIN_CMD, LIN_STEPS and the LIN_* addresses "
                                           "as one job (checked: ERROR_CODE LINEAR_CMD)"),)),
        Register(name="LIN_STATUS", offset=0x03C, description="Linear-unit progress.",
                 fields=(Field(name="PENDING", lsb=0, width=1, access="RO",
                               description="a queued job has not been taken by the engine yet"),
                         Field(name="BUSY", lsb=1, width=1, access="RO",
                               description="some job has results not yet written"),
                         Field(name="JOBS_DONE", lsb=16, width=16, access="RO",
                               description="jobs whose every result write memory has "
                                           "acknowledged (wraps)"))),
        # --- dimensions ---
        Register(name="DIM_MODEL", offset=0x040, description="Model dimensions of the pass.",
                 fields=(Field(name="D_MODEL", lsb=0, width=16, access="RW",
                               reset=ssm.nheads * ssm.headdim // 2,
                               description="model width (Mamba2: expand·d_model = nheads·P, "
                                           "expand 2)"),
                         Field(name="N_LAYER", lsb=16, width=8, access="RW", reset=1,
                               description="layers per pass"))),
        Register(name="DRAFT_ACCEPT", offset=0x04C, description="Draft tokens CTRL.DRAFT_COMMIT "
                 "commits (the accepted path's draft tokens, the bonus token excluded).",
                 fields=(Field(name="COUNT", lsb=0, width=node_bits + 1, access="RW", reset=1,
                               description="1 … STATUS.DRAFT_TOKENS"),)),
        Register(name="DIM_SSM", offset=0x044, description="SSM geometry of the pass "
                 "(at most CAPS_SSM).",
                 fields=(Field(name="NHEADS", lsb=0, width=12, access="RW", reset=ssm.nheads,
                               description="heads"),
                         Field(name="HEADDIM", lsb=12, width=10, access="RW", reset=ssm.headdim,
                               description="rows per head, P"),
                         Field(name="D_STATE", lsb=22, width=10, access="RW", reset=ssm.d_state,
                               description="state columns, N"))),
        Register(name="DIM_TOKENS", offset=0x048, description="Token counts.",
                 fields=(Field(name="TOKENS", lsb=0, width=16, access="RW", reset=1,
                               description="tokens to generate before DONE (each step "
                                           "accepts one or more)"),
                         Field(name="PROMPT", lsb=16, width=16, access="RW",
                               description="prompt tokens already absorbed in the state"))),
        # --- tree descriptor ---
        Register(name="TREE_DESC", offset=0x060, description="The draft tree to verify "
                 "(SpecMamba FIFO tree verification), flattened breadth first.",
                 fields=(Field(name="NODE_COUNT", lsb=0, width=16, access="RW", reset=1,
                               description="nodes, root included (at most CAPS_TREE.MAX_NODES)"),
                         Field(name="DEPTH", lsb=16, width=8, access="RW",
                               description="levels below the root (SpecMamba notes: 4-5)"))),
        Register(name="TREE_RESULT", offset=0x064, description="Outcome of the last verify step.",
                 fields=(Field(name="TOKENS", lsb=0, width=16, access="RO",
                               description="nodes on the accepted path: accepted draft tokens "
                                           "+ 1 bonus token"),
                         Field(name="LAST_NODE", lsb=16, width=16, access="RO",
                               description="deepest accepted node (BFS index)"))),
        Register(name="TREE_PATH", offset=0x068, description="Reads the accepted path node by "
                 "node (root first).",
                 fields=(Field(name="INDEX", lsb=0, width=16, access="RW",
                               description="position on the path (0: the root)"),
                         Field(name="NODE", lsb=16, width=16, access="RO",
                               description="BFS index of the node at INDEX (0 past the end)"))),
        # --- performance counters ---
        Register(name="PERF_CTRL", offset=0x080, description="Performance counter control.",
                 fields=(Field(name="SNAPSHOT", lsb=0, width=1, access="WO",
                               description="copy every counter into its LO/HI pair at once"),
                         Field(name="CLEAR", lsb=1, width=1, access="WO",
                               description="zero every counter"))),
        *counter("PERF_CYCLES", 0x088, "cycles since CLEAR"),
        *counter("PERF_DRAFT_CYCLES", 0x090, "cycles in draft passes"),
        *counter("PERF_VERIFY_CYCLES", 0x098, "cycles in target (verify) passes"),
        *counter("PERF_STALL_CYCLES", 0x0A0, "cycles the linear unit waited for weights or the "
                 "SSM unit"),
        *counter("PERF_TOKENS_ACCEPTED", 0x0A8, "tokens accepted (bonus tokens included)"),
        *counter("PERF_STEPS", 0x0B0, "draft-then-verify steps"),
        *counter("PERF_LINEAR_BUSY", 0x0B8, "cycles the linear unit issued an operation (one MAC in each slot)"),
        *counter("PERF_SSM_BUSY", 0x0C0, "cycles the SSM engine was running a layer pass"),
        *counter("PERF_OVERLAP", 0x0C8, "cycles with the linear unit issuing and the "
                 "SSM unit busy at once (the SpecMamba linear/SSM overlap)"),
        *counter("PERF_STATE_CYCLES", 0x0D0, "cycles the SSM engine spent in commit passes "
                 "(target and draft)"),
        *counter("PERF_NODES", 0x0D8, "tree nodes run through the SSM unit in target steps"),
        *counter("PERF_LAST_STEP", 0x0E0, "cycles of the last target step, START to DONE"),
        # --- memory map: where the region classes of golden.memory_map start ---
        *(reg for kind in REGION_CLASSES for reg in base_address(kind, MEM_CLASS_TEXT[kind])),
        # --- the linear job's memory (hw.linear_engine) ---
        *(reg for name in LIN_ADDR_OFFSETS for reg in lin_address(name, LIN_ADDR_TEXT[name])),
        Register(name="LIN_X_STRIDE", offset=LIN_X_STRIDE_OFFSET,
                 description="Bytes from one token's activations to the next's in the next "
                             "linear job (token t's input k at LIN_X + t·STRIDE + 2k, as the "
                             "norms write their vectors). Read at LIN_CTRL.GO.",
                 fields=(Field(name="STRIDE", lsb=LIN_ADDR_SHIFT, width=32 - LIN_ADDR_SHIFT,
                               access="RW", description=f"stride bits 31..{LIN_ADDR_SHIFT}; "
                                                        f"{1 << LIN_ADDR_SHIFT}-byte aligned"),)),
        # --- tree table ---
        Register(name="TREE_PARENT", offset=0x400, count=tree.max_nodes,
                 description="Parent of every tree node in BFS order; entry 0 (the root) is "
                             "ignored.",
                 fields=(Field(name="PARENT", lsb=0, width=node_bits, access="RW",
                               description="BFS index of the node's parent (below the node's "
                                           "own index)"),)),
        Register(name="TREE_MATCH", offset=0x400 + 4 * (1 << (tree.max_nodes - 1).bit_length()),
                 count=tree.max_nodes,
                 description="The target's verdict per node, in BFS order (entry 0 ignored); "
                             "written after the last node's y, then CTRL.MATCH_GO.",
                 fields=(Field(name="MATCH", lsb=0, width=1, access="RW",
                               description="1: the node's draft token equals the target's "
                                           "argmax at its parent"),)),
    )
    return RegisterMap(name="SPECGEN", registers=regs,
                       description=f"AXI4-Lite control and status registers of the specgen "
                                   f"accelerator (preset `{config.name}`): 32-bit registers, "
                                   "byte offsets from the base address IP Integrator assigns.")
