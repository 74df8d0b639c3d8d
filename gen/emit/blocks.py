"""Every block of a design, built from its config: what ``specgen verilog`` emits and
``specgen estimate`` synthesizes (one list, so the two never disagree)."""

import re

from specgen.gen.cli.errors import CLIError

__all__ = ["block_kind", "blocks", "library_blocks", "select_blocks", "top_block"]


def _builders():
    """The functions that build each block of a design from its config, in hierarchy order
    (the top level last), with why each block is there."""
    from specgen.hw.accelerator import Accelerator, layer_pass_config
    from specgen.hw.exponent_decoder import ExponentDecoder
    from specgen.hw.fp16_reconstructor import FP16Reconstructor
    from specgen.hw.linear_engine import LinearEngine
    from specgen.hw.ring_fifo import RingFIFO
    from specgen.hw.ssm_engine import SSMEngine
    from specgen.hw.tree_verifier import TreeVerifier

    return (
        # The tree verifier's ring of live state-slot indices (SpecMamba §FIFO tree verification).
        RingFIFO.from_config,
        # SpecMamba's breadth-first tree schedule over a ring of live state slots.
        TreeVerifier.from_config,
        # SPEQ draft pass: nibble {s, c} -> draft sign and exponent (NOR remap detection).
        ExponentDecoder.from_config,
        # SPEQ full pass: nibble + residue planes -> scaled FP16 weight (W undoes the remap).
        FP16Reconstructor.from_config,
        # SpecMamba's linear unit (DSPFP32 MAC slots) fed from memory: SPEQ's BSFP weight
        # planes through four AXI4 masters (the nibble plane alone in a draft job), the
        # activations through a fifth, the results out through a write master.
        lambda config: LinearEngine(config=config),
        # SpecMamba's tile-streamed tree verification with the state in memory: the SSM unit
        # (one Mamba2 layer's state swept by `lanes` EMUs per cycle) behind four AXI4 masters,
        # as the top level builds it (a layer a pass).
        lambda config: SSMEngine(config=layer_pass_config(config)),
        # The top level: AXI4-Lite registers, the linear and SSM engines' AXI4 memory
        # ports, the tree-verification scheduler.
        Accelerator.from_config,
    )


def _library():
    """Blocks built on request only (``--only``, ``--block``): finished and verified, but
    not instantiated by the top level yet, so the default design does not emit them."""
    from specgen.hw.conv1d import Conv1d
    from specgen.hw.dsp_linear_unit import DSPLinearUnit
    from specgen.hw.gated_norm import GatedRMSNorm
    from specgen.hw.linear_unit import LinearUnit
    from specgen.hw.residual import Residual
    from specgen.hw.ssm_unit import SSMUnit

    def ssm_unit(config):
        # One row a cycle at most: several are the tree unit's (hw.tree_ssm), which took
        # this unit's place; a preset of more lanes gets this unit at one row's.
        pipe = config.pipeline
        return SSMUnit(cfg=config.ssm.one_row, mul_stages=pipe.fp_mul_stages,
                       add_stages=pipe.fp_add_stages)

    return (
        # The stream-fed SSM unit (one token at a time, the state on chip), which the
        # tile-streamed TreeSSMUnit of the SSM engine replaced in the top level.
        ssm_unit,
        # SPEQ's exact dual-mode PE array (numerics contract v1: exact FP16 products,
        # rounded once), which the DSPFP32 array of the linear engine replaced in the
        # top level (contract v2, Versal-native accumulation).
        LinearUnit.from_config,
        # The DSPFP32 array alone (the linear engine's, here with the weight ports the
        # board's memory feeds), for its resources and timing without the masters.
        lambda config: DSPLinearUnit.from_config(config),
        # The Mamba2 layer's causal conv1d and SiLU, one channel per cycle.
        Conv1d.from_config,
        # The gated RMSNorm of the SSM output (d_inner wide).
        GatedRMSNorm.from_config,
        # The residual add of a layer's output.
        Residual.from_config,
    )


def library_blocks(config):
    """``{kind: builder}`` of the blocks of :func:`_library` (:func:`block_kind` names)."""
    out = {}
    for build in _library():
        c = build(config)
        # Built for its name only: neither it nor the parts it made may warn as unused.
        for part in (c, *vars(c).values()):
            if hasattr(part, "_MustUse__silence"):
                part._MustUse__silence = True
        out[block_kind(c)] = build
    return out


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
    from specgen.hw.linear_engine import LinearEngine
    from specgen.hw.ring_fifo import RingFIFO
    from specgen.hw.ssm_engine import SSMEngine
    from specgen.hw.tree_verifier import TreeVerifier
    rank = (RingFIFO, TreeVerifier, ExponentDecoder, FP16Reconstructor, DSPLinearUnit,
            LinearEngine, SSMEngine, Accelerator)
    if not all(type(c) in rank for c in modules.values()):
        # Library blocks only: the last one asked for is the top (they do not nest).
        return list(modules)[-1]
    return max(modules, key=lambda name: rank.index(type(modules[name])))


def block_kind(component):
    """The user-facing name of a block: its class in snake case (``RingFIFO`` -> ``ring_fifo``)."""
    name = type(component).__name__
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def select_blocks(modules, only, *, config=None):
    """The entries of ``modules`` whose :func:`block_kind` is in ``only`` (all if ``None``),
    and, with ``config``, the library blocks ``only`` names (:func:`library_blocks`).

    Raises
    ------
    CLIError
        A name in ``only`` is no block of the design; the message lists them.
    """
    if not only:
        return modules
    kinds = {name: block_kind(c) for name, c in modules.items()}
    library = library_blocks(config) if config is not None else {}
    allowed = list(dict.fromkeys([*kinds.values(), *library]))
    unknown = [b for b in only if b not in allowed]
    if unknown:
        raise CLIError(f"--only {unknown[0]!r} is no block of the design; allowed: "
                       f"{', '.join(allowed)}")
    for name, c in modules.items():
        if kinds[name] not in only:
            c._MustUse__silence = True    # built for the list, not emitted
    chosen = {name: c for name, c in modules.items() if kinds[name] in only}
    for kind in only:
        if kind in library and kind not in kinds.values():
            c = library[kind](config)
            chosen[c.module_name] = c
    return chosen
