"""Every block of a design, built from its config: what ``specgen verilog`` emits and
``specgen estimate`` synthesizes (one list, so the two never disagree)."""

import re

from specgen.gen.cli.errors import CLIError

__all__ = ["blocks", "block_kind", "select_blocks", "top_block"]


def _builders():
    """The functions that build each block of a design from its config, in hierarchy order
    (the top level last), with why each block is there."""
    from specgen.hw.accelerator import Accelerator
    from specgen.hw.exponent_decoder import ExponentDecoder
    from specgen.hw.fp16_reconstructor import FP16Reconstructor
    from specgen.hw.linear_unit import linear_unit_for
    from specgen.hw.ring_fifo import RingFIFO
    from specgen.hw.ssm_unit import SSMUnit
    from specgen.hw.tree_verifier import TreeVerifier

    def ssm_unit(config):
        pipe = config.pipeline
        return SSMUnit(cfg=config.ssm, mul_stages=pipe.fp_mul_stages, add_stages=pipe.fp_add_stages)

    return (
        # The tree verifier's ring of live state-slot indices (SpecMamba §FIFO tree verification).
        RingFIFO.from_config,
        # SpecMamba's breadth-first tree schedule over a ring of live state slots.
        TreeVerifier.from_config,
        # SPEQ draft pass: nibble {s, c} -> draft sign and exponent (NOR remap detection).
        ExponentDecoder.from_config,
        # SPEQ full pass: nibble + residue planes -> scaled FP16 weight (W undoes the remap).
        FP16Reconstructor.from_config,
        # SpecMamba linear unit: DSPFP32 MAC slots (board presets) or exact dual-mode PEs.
        linear_unit_for,
        # SpecMamba SSM unit: one Mamba2 layer's state swept by `lanes` EMUs per cycle.
        ssm_unit,
        # The top level: AXI4-Lite registers, AXI4-Stream data, the tree-verification scheduler.
        Accelerator.from_config,
    )


def blocks(config):
    """``{module_name: component}`` for every block of ``config``, each built from the config
    and named by its own ``module_name``."""
    return {c.module_name: c for c in (build(config) for build in _builders())}


def top_block(modules):
    """The name of the block of ``modules`` that the Vivado flow and the FuseSoC core build:
    the highest in the hierarchy (the accelerator, unless ``--only`` left it out)."""
    from specgen.hw.accelerator import Accelerator
    from specgen.hw.dsp_linear_unit import DSPLinearUnit
    from specgen.hw.exponent_decoder import ExponentDecoder
    from specgen.hw.fp16_reconstructor import FP16Reconstructor
    from specgen.hw.linear_unit import LinearUnit
    from specgen.hw.ring_fifo import RingFIFO
    from specgen.hw.ssm_unit import SSMUnit
    from specgen.hw.tree_verifier import TreeVerifier
    rank = (RingFIFO, TreeVerifier, ExponentDecoder, FP16Reconstructor, LinearUnit, DSPLinearUnit,
            SSMUnit, Accelerator)
    return max(modules, key=lambda name: rank.index(type(modules[name])))


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
