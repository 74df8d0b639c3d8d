"""Emit the Verilog of a preset's blocks, with a manifest.

Every block a preset instantiates is listed once in :func:`blocks`, built from
the preset's config objects, so the emitted design and the benches share one
source of truth.
"""

import importlib.metadata
import re

from golden.config import preset
from hw.hierarchy import ModuleLibrary, convert
from hw.regmap import accelerator_regmap

from .dsp_check import write_dsp_check
from .errors import CLIError
from .regmap_doc import c_header
from .regmap_rdl import write_regmap_files
from .fusesoc import core_text
from .vivado import XDC, write_vivado_flow
from .output import MANIFEST, atomic_dir, write_manifest
from .progress import summary_lines

__all__ = ["blocks", "write_verilog"]


#: The command kind recorded in the manifest (:func:`gen.output.atomic_dir`).
COMMAND = "verilog"

#: Files beside the Verilog and the Vivado flow, for the folder's README.
EXTRA_FILES = {
    "specgen_regs.h": "C header of the control registers (`hw/regmap.py`)",
    "regmap/specgen.rdl": "the register map in SystemRDL 2.0, checked by systemrdl-compiler",
    "regmap/specgen_regmap.h": "C header from PeakRDL-cheader, with each field's access",
    "regmap/specgen_regmap.md": "register documentation from PeakRDL-markdown",
    "regmap/specgen_regmap.xml": "IP-XACT (IEEE 1685-2014) register description from "
                                 "PeakRDL-ipxact",
}


def blocks(config):
    """``{module_name: component}`` for every block of ``config``, the top level last."""
    from hw.accelerator import Accelerator
    from hw.exponent_decoder import ExponentDecoder
    from hw.fp16_reconstructor import FP16Reconstructor
    from hw.linear_unit import linear_unit_for
    from hw.ring_fifo import RingFIFO
    from hw.ssm_unit import SSMUnit
    from hw.tree_verifier import TreeVerifier

    tree = config.tree
    decoder = ExponentDecoder(config=config.bsfp, stages=1)
    reconstructor = FP16Reconstructor(config=config.bsfp, stages=1)
    out = {
        # The tree verifier's ring of live state-slot indices (SpecMamba §FIFO tree verification).
        f"ring_fifo_w{tree.slot_bits}_d{tree.fifo_depth}":
            RingFIFO(width=tree.slot_bits, depth=tree.fifo_depth),
        # SpecMamba's breadth-first tree schedule over a ring of live state slots.
        f"tree_verifier_n{tree.max_nodes}_d{tree.fifo_depth}": TreeVerifier.from_config(tree),
        # SPEQ draft pass: nibble {s, c} -> draft sign and exponent (NOR remap detection).
        decoder.module_name: decoder,
        # SPEQ full pass: nibble + residue planes -> scaled FP16 weight (W undoes the remap).
        reconstructor.module_name: reconstructor,
    }
    pipe = config.pipeline
    # SpecMamba linear unit: DSPFP32 MAC slots (board presets) or exact dual-mode PEs.
    linear = linear_unit_for(config)
    out[linear.module_name] = linear
    # SpecMamba SSM unit: one Mamba2 layer's state swept by `lanes` EMUs per cycle.
    ssm = SSMUnit(cfg=config.ssm, mul_stages=pipe.fp_mul_stages, add_stages=pipe.fp_add_stages)
    out[ssm.module_name] = ssm
    # The top level: AXI4-Lite registers, AXI4-Stream data, the tree-verification scheduler.
    out.update((t.module_name, t) for t in [Accelerator(config=config)])
    return out


def block_kind(component):
    """The user-facing name of a block: its class in snake case (``RingFIFO`` -> ``ring_fifo``)."""
    name = type(component).__name__
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def select_blocks(modules, only):
    """The entries of ``modules`` whose :func:`block_kind` is in ``only`` (all if ``None``).

    Raises
    ------
    CLIError
        A name in ``only`` is no block of the design; the message lists them.
    """
    if not only:
        return modules
    kinds = {name: block_kind(c) for name, c in modules.items()}
    allowed = list(dict.fromkeys(kinds.values()))
    unknown = [b for b in only if b not in allowed]
    if unknown:
        raise CLIError(f"--only {unknown[0]!r} is no block of the design; allowed: "
                       f"{', '.join(allowed)}")
    for name, c in modules.items():
        if kinds[name] not in only:
            c._MustUse__silence = True    # built for the list, not emitted
    return {name: c for name, c in modules.items() if kinds[name] in only}


def fit_notes(config):
    """The summary's verdict for a design: DSP58 against the board, and the timing budget.

    The DSP58 count is analytical (:func:`gen.estimate.analytical_dsp58`); logic
    depth needs a synthesis, so the timing line names the budget and the command
    that measures it.
    """
    from .estimate import analytical_dsp58, level_budget
    d = analytical_dsp58(config)
    mhz = config.board.clock_mhz
    if d["budget"]:
        share = d["Total"] / d["budget"]
        verdict = "fits" if share <= 1 else "does NOT fit"
        dsp = (f"DSP58: {d['Total']:,} of {d['budget']:,} ({100 * share:.0f}%, linear unit "
               f"{d['Linear unit']:,}, SSM unit {d['SSM unit']:,}): {verdict} "
               f"{config.board.name}")
    else:
        dsp = f"DSP58: {d['Total']:,} (board {config.board.name} has no DSP58 budget)"
    timing = (f"timing: {mhz:g} MHz allows {level_budget(mhz)} logic levels per stage; "
              f"'specgen estimate' measures them (yosys)")
    return [dsp, timing]


def write_verilog(*, out, config=None, board=None, progress=None, only=None):
    """Write ``<module>.v`` for every block of a design, the register header
    ``specgen_regs.h``, the Vivado flow (designs with a part) and ``manifest.json``.

    Parameters
    ----------
    out : path
        Output folder (:func:`gen.output.atomic_dir`).
    config : golden.config.Config, optional
        The design (:func:`gen.design.resolve_config`).
    board : str, optional
        A preset name instead of ``config``.
    progress : gen.progress.Progress, optional
        Progress while converting, and the closing summary.
    only : sequence of str, optional
        Emit only these blocks (:func:`block_kind` names: ``ring_fifo``,
        ``linear_unit``, ...); the Vivado flow and the FuseSoC core then build
        the last of them in :func:`blocks` order.
    """
    if (config is None) == (board is None):
        raise TypeError("write_verilog needs config or board, not both or neither")
    if config is None:
        try:
            config = preset(board)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
    try:
        modules = blocks(config)
    except (TypeError, ValueError) as exc:
        # The blocks validate their parameters: a design file can ask for one they refuse.
        raise CLIError(f"the design {config.name!r} cannot be built: {exc}") from None
    modules = select_blocks(modules, only)
    # One library for every file: a block converted for its own file (the linear
    # unit, the SSM unit) is reused, not converted again, inside the top level.
    library = ModuleLibrary()
    with atomic_dir(out, command=COMMAND) as tmp:
        names = modules.items() if progress is None else progress.bar(
            modules.items(), desc="converting", total=len(modules), unit="module")
        for name, component in names:
            # Each distinct configuration of a shared block (PE, FP unit, table) is
            # one module of the file, instantiated as often as needed.
            text, _ = convert(component, name=name, library=library)
            (tmp / f"{name}.v").write_text(text)
        # Host software's view of the control registers (docs/regmap.md as C).
        (tmp / "specgen_regs.h").write_text(c_header(config))
        # The same map as SystemRDL, checked against hw.regmap, and PeakRDL's C header,
        # Markdown and IP-XACT made from it (gen/regmap_rdl.py).
        regmap = accelerator_regmap(config)
        write_regmap_files(tmp, regmap)
        # The Vivado flow and the FuseSoC core build the top level from its own file,
        # which holds every module it instantiates (the other files are blocks on their own).
        top = list(modules)[-1]    # blocks() lists the design's top level last
        xdc = None
        if config.board.part is not None:
            sources = [f"{top}.v"]
            if library.primitives(top=top):
                # Vivado reads the device primitives (DSPFP32), the simulators the
                # behavioural models: the same modules, two files.
                (tmp / "primitives").mkdir()
                (tmp / "primitives" / f"{top}.v").write_text(
                    library.verilog(top=top, variant="vivado"))
                sources = [f"primitives/{top}.v"]
                # xsim of the primitive against golden vectors, for a user with Vivado.
                write_dsp_check(tmp / "primitives" / "dsp_check", source=f"{top}.v")
            write_vivado_flow(tmp, config=config, top=top, sources=sources,
                              extra_files=dict(EXTRA_FILES, **{
                                  f"{top}.core": "FuseSoC core (CAPI2): targets `default`, "
                                                 "`lint` (Verilator) and `synth` (Vivado)"}),
                              registers=regmap)
            xdc = XDC
        (tmp / f"{top}.core").write_text(core_text(config, top=top, sources=[f"{top}.v"],
                                                   xdc=xdc))
        manifest = write_manifest(
            tmp,
            command=COMMAND,
            amaranth=importlib.metadata.version("amaranth"),
            board=config.board.name,
            design=config.name,
            config=config.to_dict(),
            modules=sorted(modules),
            **({"only": sorted(set(only))} if only else {}),
        )
        files = [tmp / name for name in manifest["files"]] + [tmp / MANIFEST]
        size_lines = summary_lines("verilog", files, root=out, notes=fit_notes(config))
    if progress is not None:
        progress.summary(size_lines)
    return modules
