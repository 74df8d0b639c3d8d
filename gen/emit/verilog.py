"""Emit the Verilog of a preset's blocks, with a manifest.

Every block a preset instantiates is listed once in :func:`blocks`, built from
the preset's config objects, so the emitted design and the benches share one
source of truth.
"""

import importlib.metadata

from specgen.golden.config import preset
from specgen.hw.hierarchy import ModuleLibrary, convert
from specgen.hw.regmap import accelerator_regmap

from specgen.gen.emit.blocks import block_kind, blocks, select_blocks, top_block  # noqa: F401 (re-exported)
from specgen.gen.emit.dsp_check import write_dsp_check
from specgen.gen.cli.errors import CLIError
from specgen.gen.emit.regmap_doc import c_header
from specgen.gen.emit.regmap_rdl import write_regmap_files
from specgen.gen.emit.fusesoc import core_text
from specgen.gen.emit.vivado import XDC, write_vivado_flow
from specgen.gen.cli.output import MANIFEST, atomic_dir, write_manifest
from specgen.gen.cli.progress import summary_lines

__all__ = ["blocks", "write_verilog"]


#: The command kind recorded in the manifest (:func:`gen.cli.output.atomic_dir`).
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


def fit_notes(config):
    """The summary's verdict for a design: DSP58 against the board, and the timing budget.

    The DSP58 count is analytical (:func:`gen.estimate.dsp_model.analytical_dsp58`); logic
    depth needs a synthesis, so the timing line names the budget and the command
    that measures it.
    """
    from specgen.gen.estimate.depth import level_budget
    from specgen.gen.estimate.dsp_model import analytical_dsp58
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
        Output folder (:func:`gen.cli.output.atomic_dir`).
    config : golden.config.Config, optional
        The design (:func:`gen.cli.design.resolve_config`).
    board : str, optional
        A preset name instead of ``config``.
    progress : gen.cli.progress.Progress, optional
        Progress while converting, and the closing summary.
    only : sequence of str, optional
        Emit only these blocks (:func:`block_kind` names: ``ring_fifo``,
        ``linear_unit``, ...); the Vivado flow and the FuseSoC core then build
        the highest of them in the hierarchy (:func:`top_block`).
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
    modules = select_blocks(modules, only, config=config)
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
        # Markdown and IP-XACT made from it (gen/emit/regmap_rdl.py).
        regmap = accelerator_regmap(config)
        write_regmap_files(tmp, regmap)
        # The Vivado flow and the FuseSoC core build the top level from its own file,
        # which holds every module it instantiates (the other files are blocks on their own).
        top = top_block(modules)
        xdc = None
        synth_sources = None
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
            synth_sources = sources
            write_vivado_flow(tmp, config=config, top=top, sources=sources,
                              extra_files=dict(EXTRA_FILES, **{
                                  f"{top}.core": "FuseSoC core (CAPI2): targets `default`, "
                                                 "`lint` (Verilator) and `synth` (Vivado)"}),
                              registers=regmap)
            xdc = XDC
        # FuseSoC: simulation and lint read the behavioural file, synthesis what Vivado reads.
        (tmp / f"{top}.core").write_text(core_text(config, top=top, sources=[f"{top}.v"],
                                                   synth_sources=synth_sources, xdc=xdc))
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
