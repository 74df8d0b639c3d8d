"""Every block of a design, built from its config: what ``specgen verilog`` emits and
``specgen estimate`` synthesizes (one list, so the two never disagree)."""

import re

from gen.cli.errors import CLIError

__all__ = ["blocks", "block_kind", "select_blocks"]


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
