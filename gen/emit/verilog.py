"""Emit the Verilog of a preset's blocks, with a manifest.

Every block a preset instantiates is listed once in :func:`blocks`, built from
the preset's config objects, so the emitted design and the benches share one
source of truth. ``top="decoder"`` emits instead the decoder core behind its
registers (:func:`decoder_design`), the top level the runtime's RTL engine runs.
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

__all__ = ["blocks", "write_verilog", "TOPS", "decoder_design"]

#: What ``specgen verilog --top`` emits: the accelerator (the linear and SSM engines under
#: the host's step-by-step control, ``hw.accelerator``) or the decoder core behind its
#: registers (every stage of a decode step from programs in memory, ``hw.decoder_top``).
TOPS = ("accelerator", "decoder")
#: The decoder top's program records at most and byte-address width: 65,536 records (the
#: figure of the decoder core's board-scale estimates, docs/decoder.md) and 40 bits (1 TiB,
#: more than either board's memory, golden.config.BoardConfig.memory_bytes).
DECODER_MAX_RECORDS, DECODER_ADDR_WIDTH = 65536, 40


#: The command kind recorded in the manifest (:func:`gen.cli.output.atomic_dir`).
COMMAND = "verilog"


def _extra_files(header, regmap):
    """Files beside the Verilog and the Vivado flow, for the folder's README: the register
    header ``header`` and the files of ``regmap`` (:func:`write_regmap_files`)."""
    from specgen.gen.emit.regmap_rdl import regmap_files
    return {header: f"C header of the control registers (`{regmap.name}`)",
            **regmap_files(regmap)}


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


def decoder_design(config, model):
    """``(design, top)``: the :class:`hw.decoder_top.DecoderTop` of ``config`` for the LM
    ``model`` (a :func:`golden.lm.lm_preset` name such as ``2.7B``), its SSM unit built
    for the model's geometry (:func:`gen.runtime.runtime.rtl_design`).

    Raises
    ------
    CLIError
        An unknown model, or one the design cannot run (naming the dimension and limit).
    """
    from specgen.golden.lm import lm_preset
    from specgen.gen.runtime.runtime import rtl_design
    from specgen.hw.decoder import DecoderCore
    from specgen.hw.decoder_top import DecoderTop
    try:
        lm = lm_preset(model)
    except ValueError as exc:
        raise CLIError(f"--model: {exc}") from None
    try:
        design = rtl_design(config, lm)
        core = DecoderCore(config=design, model=lm, max_records=DECODER_MAX_RECORDS,
                           addr_width=DECODER_ADDR_WIDTH)
    except ValueError as exc:
        raise CLIError(f"--model {model} does not fit the design {config.name!r}: {exc}") \
            from None
    return design, DecoderTop(core=core)


def write_verilog(*, out, config=None, board=None, progress=None, only=None, top="accelerator",
                  model="2.7B"):
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
    top : {"accelerator", "decoder"}
        The top level (:data:`TOPS`). ``decoder``: one file, the decoder top of
        :func:`decoder_design` for ``model``, with its register header
        ``specgen_core_regs.h`` and its register map's files.
    model : str
        With ``top="decoder"``: the LM the core is built for.
    """
    if (config is None) == (board is None):
        raise TypeError("write_verilog needs config or board, not both or neither")
    if config is None:
        try:
            config = preset(board)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
    if top not in TOPS:
        raise CLIError(f"unknown --top {top!r}; allowed: {', '.join(TOPS)}")
    if top == "decoder":
        if only:
            raise CLIError("--only is for --top accelerator: the decoder top is one file")
        from specgen.hw.decoder_top import decoder_regmap
        config, dtop = decoder_design(config, model)
        modules = {dtop.module_name: dtop}
        regmap = decoder_regmap(dtop.core)
        header = ("specgen_core_regs.h", regmap.to_c_header())
    else:
        try:
            modules = blocks(config)
        except (TypeError, ValueError) as exc:
            # The blocks validate their parameters: a design file can ask for one they refuse.
            raise CLIError(f"the design {config.name!r} cannot be built: {exc}") from None
        modules = select_blocks(modules, only, config=config)
        regmap = accelerator_regmap(config)
        header = ("specgen_regs.h", c_header(config))
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
        # Host software's view of the control registers (docs/regmap.md or
        # docs/regmap-core.md as C).
        (tmp / header[0]).write_text(header[1])
        # The same map as SystemRDL, checked against hw.regmap, and PeakRDL's C header,
        # Markdown and IP-XACT made from it (gen/emit/regmap_rdl.py).
        write_regmap_files(tmp, regmap)
        # The Vivado flow and the FuseSoC core build the top level from its own file,
        # which holds every module it instantiates (the other files are blocks on their own).
        top_name = top_block(modules) if top == "accelerator" else next(iter(modules))
        xdc = None
        synth_sources = None
        if config.board.part is not None:
            sources = [f"{top_name}.v"]
            if library.primitives(top=top_name):
                # Vivado reads the device primitives (DSPFP32), the simulators the
                # behavioural models: the same modules, two files.
                (tmp / "primitives").mkdir()
                (tmp / "primitives" / f"{top_name}.v").write_text(
                    library.verilog(top=top_name, variant="vivado"))
                sources = [f"primitives/{top_name}.v"]
                # xsim of the primitive against golden vectors, for a user with Vivado.
                write_dsp_check(tmp / "primitives" / "dsp_check", source=f"{top_name}.v")
            synth_sources = sources
            write_vivado_flow(tmp, config=config, top=top_name, sources=sources,
                              extra_files=dict(_extra_files(header[0], regmap), **{
                                  f"{top_name}.core": "FuseSoC core (CAPI2): targets `default`, "
                                                 "`lint` (Verilator) and `synth` (Vivado)"}),
                              registers=regmap)
            xdc = XDC
        # FuseSoC: simulation and lint read the behavioural file, synthesis what Vivado reads.
        (tmp / f"{top_name}.core").write_text(core_text(config, top=top_name, sources=[f"{top_name}.v"],
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
            **({"top": top, "model": model} if top == "decoder" else {}),
        )
        files = [tmp / name for name in manifest["files"]] + [tmp / MANIFEST]
        notes = fit_notes(config) if top == "accelerator" else [
            f"decoder core for Mamba2-{model}: {DECODER_MAX_RECORDS:,} program records, "
            f"{DECODER_ADDR_WIDTH}-bit addresses; 'specgen estimate' does not cover it yet"]
        size_lines = summary_lines("verilog", files, root=out, notes=notes)
    if progress is not None:
        progress.summary(size_lines)
    return modules
