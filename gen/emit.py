"""Emit the Verilog of a preset's blocks, with a manifest.

Every block a preset instantiates is listed once in :func:`blocks`, built from
the preset's config objects, so the emitted design and the benches share one
source of truth.
"""

import importlib.metadata

from amaranth.back import verilog

from golden.config import preset

from .errors import CLIError
from .output import atomic_dir, write_manifest

__all__ = ["blocks", "write_verilog"]


def blocks(config):
    """``{module_name: component}`` for every block of ``config``."""
    from hw.ring_fifo import RingFIFO

    tree = config.tree
    return {
        # The tree verifier's ring of live state-slot indices (SpecMamba §FIFO tree verification).
        f"ring_fifo_w{tree.slot_bits}_d{tree.fifo_depth}":
            RingFIFO(width=tree.slot_bits, depth=tree.fifo_depth),
    }


def write_verilog(*, board, out):
    """Write ``<module>.v`` for every block of preset ``board`` and ``manifest.json``."""
    try:
        config = preset(board)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    modules = blocks(config)
    with atomic_dir(out) as tmp:
        for name, component in modules.items():
            # No source attributes: the output must not depend on the checkout path.
            text = verilog.convert(component, name=name, emit_src=False)
            (tmp / f"{name}.v").write_text(text)
        write_manifest(
            tmp,
            generator="specgen",
            version=importlib.metadata.version("specgen"),
            amaranth=importlib.metadata.version("amaranth"),
            board=board,
            config=config.to_dict(),
            modules=sorted(modules),
        )
    return modules
