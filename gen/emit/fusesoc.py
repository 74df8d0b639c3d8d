"""A FuseSoC core file (CAPI2) for an emitted design.

``<top>.core`` lets a FuseSoC user depend on the design as
``specgen:specgen:<top>:<version>`` and build it with the tools FuseSoC drives
(Edalize): the ``lint`` target runs Verilator's lint with the same waivers as
the project's own lint (:data:`sim.runner.VERILATOR_WAIVERS`), and a design
with a Vivado part gets a ``synth`` target with its part and constraints. A
design with device primitives (``DSPFP32``) has two texts of its top level:
``default`` and ``lint`` read the behavioural one (``<top>.v``, fileset
``rtl``), ``synth`` the one that instantiates the primitives
(``primitives/<top>.v``, fileset ``rtl_synth``), as the Vivado flow does.

The file is plain YAML written here, byte for byte deterministic; every string
is JSON-quoted, which YAML reads as it is.
"""

import json

from specgen.gen.cli.output import specgen_version

__all__ = ["core_name", "core_text", "CORE_VENDOR", "CORE_LIBRARY"]

CORE_VENDOR = "specgen"
CORE_LIBRARY = "specgen"


def core_name(top):
    """The VLNV ``vendor:library:name:version`` of the core of ``top``."""
    return f"{CORE_VENDOR}:{CORE_LIBRARY}:{top}:{specgen_version()}"


def _q(text):
    return json.dumps(str(text))


def core_text(config, *, top, sources, synth_sources=None, xdc=None):
    """The ``.core`` file of a design.

    Parameters
    ----------
    config : golden.config.Config
        The design (its board gives the part and the clock).
    top : str
        Top module.
    sources : sequence of str
        Verilog files for simulation and lint, relative to the core file, in read order.
    synth_sources : sequence of str, optional
        Verilog files for synthesis (the device-primitive variant); default ``sources``.
    xdc : str, optional
        Constraints file, relative to the core file (designs with a part).
    """
    from specgen.sim.runner import VERILATOR_WAIVERS

    board = config.board
    synth_sources = list(sources if synth_sources is None else synth_sources)
    separate = synth_sources != list(sources)
    lines = [
        "CAPI=2:",
        f"# Written by specgen {specgen_version()} for the design {config.name!s} "
        f"({board.name}, {board.clock_mhz:g} MHz).",
        f"name: {_q(core_name(top))}",
        f"description: {_q(f'specgen SpecMamba/SPEQ accelerator {top}')}",
        "",
        "filesets:",
        "  rtl:",
        "    file_type: verilogSource",
        "    files:",
        *[f"      - {_q(s)}" for s in sources],
    ]
    if separate:
        lines += ["  rtl_synth:", "    file_type: verilogSource", "    files:",
                  *[f"      - {_q(s)}" for s in synth_sources]]
    if xdc is not None:
        lines += ["  constraints:", "    file_type: xdc", "    files:", f"      - {_q(xdc)}"]
    lines += [
        "",
        "targets:",
        "  default:",
        "    filesets: [rtl]",
        f"    toplevel: {_q(top)}",
        "  lint:",
        "    default_tool: verilator",
        "    filesets: [rtl]",
        f"    toplevel: {_q(top)}",
        "    tools:",
        "      verilator:",
        "        mode: lint-only",
        "        verilator_options:",
        "          - \"-Wall\"",
        *[f"          - {_q('-Wno-' + w)}" for w in VERILATOR_WAIVERS],
    ]
    if board.part is not None:
        lines += [
            "  synth:",
            "    default_tool: vivado",
            f"    filesets: [{'rtl_synth' if separate else 'rtl'}"
            + (", constraints]" if xdc is not None else "]"),
            f"    toplevel: {_q(top)}",
            "    tools:",
            "      vivado:",
            f"        part: {_q(board.part)}",
        ]
    return "\n".join(lines) + "\n"
