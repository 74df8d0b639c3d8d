"""Closed-form cost of the backtracking policies of :mod:`golden.backtrack`.

Per speculative step and per model, summed over the model's ``n_layer``
layers: bytes stored and loaded by the policy, on chip and off chip, the
multiplies (MACs) of its restore, and the bytes its buffers hold at the end
of the pass. Symbols (one layer; ``n`` tree nodes, root included; ``L`` nodes
on the accepted path = tokens committed by the step, ``1 ≤ L ≤ depth + 1``;
``s``, ``v`` bytes per SSM-state element and per other value)::

    E = nheads·headdim·d_state                     SSM state elements
    S = E·s + (d_conv − 1)·conv_dim·v              state bytes (SSM + conv window)
    ℓ = (conv_dim + d_inner + d_state + 2·nheads)·v  light intermediates (xBC, x, B, Δ, dA)
    I = d_model·v                                  layer input
    F = d_model·(d_in_proj + d_inner + 3) + d_conv·conv_dim + nheads + 6·d_inner + 3·E
                                                   MACs of the full layer (Mamba2Mixer.step)
    U = d_model·(conv_dim + nheads + 3) + d_conv·conv_dim + nheads + d_inner + 2·E
                                                   MACs of its state dependencies (update)
    R = d_inner + 2·E                              MACs of a replay

================  ======================  ======================  =========  ===========
policy            stored                  loaded                  MACs       held
================  ======================  ======================  =========  ===========
store             n·S off                 —                       —          n·S off
replay            n·ℓ (where) + S off     L·ℓ (where) + S off     L·R        n·ℓ
recompute         S off                   S off                   L·F        —
recompute-state   n·I (where) + S off     L·I (where) + S off     L·U        n·I
================  ======================  ======================  =========  ===========

(``S off`` stored and loaded: the checkpoint read back and the restored state
written where the next pass reads the committed state.) The tree pass itself
costs ``n·F`` MACs for every policy (reported as ``pass_macs``, for scale).
Costs are linear in ``L``, so the cost at the mean accepted length is the
mean cost: ``tokens`` may be fractional (the SpecMamba notes' 4.91).

:mod:`golden.backtrack` runs the same policies with every byte and multiply
counted; ``tests/test_golden_backtrack.py`` checks the two agree exactly.
"""

from dataclasses import dataclass

import numpy as np

from .backtrack import (NUMERICS, WHERE, MixerConfig, SpeculativeBacktracking, StoreIntermediates,
                        StoreStates, check_policy)
from .tree import TreeShape, tree_depths, validate_parents
from .validate import check_choice, check_float

__all__ = [
    "SEED_TOKENS_PER_STEP", "SEED_CLAIMS", "BRAM_BYTES", "URAM_BYTES", "SEED_VHK158_ONCHIP_BYTES",
    "element_bytes", "state_nbytes", "intermediates_nbytes", "input_nbytes", "layer_macs",
    "step_macs", "update_macs", "replay_macs", "BacktrackCost", "backtrack_cost", "SystemCost",
    "system_cost", "tree_size",
]

#: SpecMamba notes (``docs/sources.md``): a 370M draft for a 2.7B target commits
#: 4.91 tokens per step.
SEED_TOKENS_PER_STEP = 4.91

#: The SpecMamba notes' hybrid-backtracking claims, as fractions saved.
SEED_CLAIMS = {
    "traffic_vs_store": 0.63,       # hybrid vs storing every state
    "compute_vs_recompute": 0.41,   # hybrid vs recomputing everything
    "selective_recompute": 0.78,    # the target's selective recompute vs a plain one
}

#: Versal block RAM (36 Kb) and UltraRAM (288 Kb) blocks, in bytes (AM007).
BRAM_BYTES = 36 * 1024 // 8
URAM_BYTES = 288 * 1024 // 8

#: On-chip RAM of SpecMamba's whole VHK158 design (1,534 BRAM + 428 URAM, the
#: SpecMamba notes' resource table): an upper bound for anything it keeps on chip.
SEED_VHK158_ONCHIP_BYTES = 1534 * BRAM_BYTES + 428 * URAM_BYTES


def element_bytes(mix, numerics="hw"):
    """``(s, v)``: bytes per SSM-state element and per other value.

    ``"hw"``: the SSM unit's state format (binary32, or binary16 with
    ``state_format="fp16"``) and binary32 values; ``"ref"``: float64 both.
    """
    check_choice("element_bytes", "numerics", numerics, NUMERICS)
    if numerics == "ref":
        return 8, 8
    return mix.ssm.state_dtype.itemsize, 4


def state_nbytes(mix, numerics="hw"):
    """``S``: one layer's decode state (SSM state and conv window), bytes."""
    s, v = element_bytes(mix, numerics)
    return mix.ssm.state_elems * s + mix.conv_rows * mix.conv_dim * v


def intermediates_nbytes(mix, numerics="hw"):
    """``ℓ``: one node's light intermediates (xBC, x, B, Δ, dA) in one layer, bytes."""
    _, v = element_bytes(mix, numerics)
    return (mix.conv_dim + mix.d_inner + mix.d_state + 2 * mix.nheads) * v


def input_nbytes(mix, numerics="hw"):
    """``I``: one node's layer input, bytes."""
    _, v = element_bytes(mix, numerics)
    return mix.d_model * v


def layer_macs(mix):
    """MACs of one token through :meth:`golden.backtrack.Mamba2Mixer.step`, by term."""
    D, H, E = mix.d_model, mix.nheads, mix.ssm.state_elems
    return {
        "block norm": 3 * D,
        "in_proj": D * mix.d_in_proj,
        "conv1d": mix.d_conv * mix.conv_dim,
        "dt·A": H,
        "Δ·x, D·x, gate": 3 * mix.d_inner,
        "dA·h, u·B, h·C": 3 * E,
        "gated norm": 3 * mix.d_inner,
        "out_proj": mix.d_inner * D,
    }


def step_macs(mix):
    """``F``: MACs of the full layer, one token."""
    return sum(layer_macs(mix).values())


def update_macs(mix):
    """``U``: MACs of the layer's state dependencies, one token (:meth:`Mamba2Mixer.update`)."""
    D = mix.d_model
    return (3 * D + D * (mix.conv_dim + mix.nheads) + mix.d_conv * mix.conv_dim + mix.nheads
            + mix.d_inner + 2 * mix.ssm.state_elems)


def replay_macs(mix):
    """``R``: MACs of one replayed state update (``Δ·x``, ``dA·h``, ``u·B``)."""
    return mix.d_inner + 2 * mix.ssm.state_elems


def tree_size(tree):
    """``(nodes, max_tokens)`` of a :class:`TreeShape` or a BFS parent array.

    ``max_tokens = depth + 1``: the most nodes an accepted path can hold.
    """
    if isinstance(tree, TreeShape):
        return tree.num_nodes, tree.depth + 1
    p = validate_parents(tree)
    return int(p.size), int(tree_depths(p).max()) + 1


def _tokens(tokens, max_tokens):
    if isinstance(tokens, np.integer):
        tokens = int(tokens)
    value = check_float("backtrack_cost", "tokens", tokens, min=1, max=max_tokens)
    return tokens if isinstance(tokens, int) else value


@dataclass(frozen=True)
class BacktrackCost:
    """One model's backtracking cost for one speculative step, all layers.

    Attributes
    ----------
    policy : str
    nodes : int
    tokens : int or float
        Nodes on the accepted path (committed tokens).
    layers : int
    stored, loaded : dict
        Bytes by location, ``{"on_chip": …, "off_chip": …}``.
    macs : int or float
        Multiplies of the restore.
    held : dict
        Bytes the policy's buffers hold at the end of the pass, by location
        (the checkpoint, kept anyway, not included).
    pass_macs : int
        Multiplies of the tree pass itself (``n·F`` per layer), the same for every policy.
    """

    policy: str
    nodes: int
    tokens: object
    layers: int
    stored: dict
    loaded: dict
    macs: object
    held: dict
    pass_macs: int

    @property
    def off_chip(self):
        """Off-chip bytes, stored plus loaded."""
        return self.stored["off_chip"] + self.loaded["off_chip"]

    @property
    def on_chip(self):
        """On-chip bytes, stored plus loaded."""
        return self.stored["on_chip"] + self.loaded["on_chip"]

    @property
    def traffic(self):
        """All bytes moved, on and off chip."""
        return self.off_chip + self.on_chip


def backtrack_cost(policy, mix, *, tree, tokens, numerics="hw"):
    """Per-step cost of ``policy`` on one model, from the formulas of the module docstring.

    Parameters
    ----------
    policy : StoreStates, StoreIntermediates or Recompute
    mix : MixerConfig
        The model's layer; figures are multiplied by ``mix.n_layer``.
    tree : TreeShape or sequence of int
        The draft tree (a per-depth branching list or a BFS parent array).
    tokens : int or float
        Nodes on the accepted path, ``1 ≤ tokens ≤ depth + 1`` (a mean may be fractional).
    numerics : {"hw", "ref"}
        Element sizes (:func:`element_bytes`).

    Returns
    -------
    BacktrackCost
    """
    policy = check_policy("backtrack_cost", "policy", policy)
    if not isinstance(mix, MixerConfig):
        raise TypeError(f"backtrack_cost.mix must be a MixerConfig, not {mix!r}")
    n, max_tokens = tree_size(tree)
    L = _tokens(tokens, max_tokens)
    S = state_nbytes(mix, numerics)
    stored = dict.fromkeys(WHERE, 0)
    loaded = dict.fromkeys(WHERE, 0)
    held = dict.fromkeys(WHERE, 0)
    macs = 0
    if isinstance(policy, StoreStates):
        stored["off_chip"] += n * S
        held["off_chip"] += n * S
    else:
        # Every other policy reads the checkpoint back and writes the restored state.
        stored["off_chip"] += S
        loaded["off_chip"] += S
        if isinstance(policy, StoreIntermediates):
            kept, macs = intermediates_nbytes(mix, numerics), L * replay_macs(mix)
        elif policy.scope == "state":
            kept, macs = input_nbytes(mix, numerics), L * update_macs(mix)
        else:
            kept, macs = 0, L * step_macs(mix)
        stored[policy.where] += n * kept
        loaded[policy.where] += L * kept
        held[policy.where] += n * kept
    k = mix.n_layer
    scale = lambda d: {w: k * b for w, b in d.items()}  # noqa: E731
    return BacktrackCost(policy=policy.name, nodes=n, tokens=L, layers=k, stored=scale(stored),
                         loaded=scale(loaded), macs=k * macs, held=scale(held),
                         pass_macs=k * n * step_macs(mix))


@dataclass(frozen=True)
class SystemCost:
    """Draft plus target cost of one speculative step.

    Attributes
    ----------
    draft, target : BacktrackCost
    """

    draft: BacktrackCost
    target: BacktrackCost

    @property
    def off_chip(self):
        return self.draft.off_chip + self.target.off_chip

    @property
    def on_chip(self):
        return self.draft.on_chip + self.target.on_chip

    @property
    def traffic(self):
        return self.draft.traffic + self.target.traffic

    @property
    def macs(self):
        return self.draft.macs + self.target.macs

    @property
    def pass_macs(self):
        return self.draft.pass_macs + self.target.pass_macs


def system_cost(system, *, draft, target, tree, tokens, numerics="hw"):
    """:func:`backtrack_cost` of both models of a :class:`SpeculativeBacktracking`.

    Parameters
    ----------
    system : SpeculativeBacktracking
    draft, target : MixerConfig
    tree, tokens, numerics
        As in :func:`backtrack_cost`; both models run the same tree.
    """
    if not isinstance(system, SpeculativeBacktracking):
        raise TypeError(f"system_cost.system must be a SpeculativeBacktracking, not {system!r}")
    kw = dict(tree=tree, tokens=tokens, numerics=numerics)
    return SystemCost(draft=backtrack_cost(system.draft, draft, **kw),
                      target=backtrack_cost(system.target, target, **kw))

