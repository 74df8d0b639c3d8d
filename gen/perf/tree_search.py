"""The draft tree chosen by the model: search tree shapes under a per-depth acceptance profile.

EAGLE-2 (arXiv 2406.16858) grows its draft tree where the expected gain is largest;
here the model does the same offline: every per-depth branching list the tree
verifier can hold (``tree.max_nodes`` nodes with the root, a FIFO schedule within
``tree.fifo_depth`` state slots) is priced by :func:`gen.perf.system.step_model` at
the tokens per step that the profile gives it (:func:`expected_tokens_profile`), and
the fastest wins (``specgen perf --tree best``).

Acceptance model. At depth ``d`` the target's token is the draft's rank-``r``
candidate with probability ``α_d (1 − α_d)^(r − 1)`` (``α_d``: the draft's top-1
acceptance at that depth), so an accepted node whose ``b_d`` children hold the draft's
top ``b_d`` candidates accepts one of them with probability ``1 − (1 − α_d)^b_d``.
A measured profile (``specgen acceptance --json``: per-depth acceptance of one tree)
is turned into top-1 rates by inverting that (:func:`top1_from_measured`).
"""

from dataclasses import dataclass

from specgen.golden.tree import TreeShape, fifo_schedule
from specgen.golden.validate import check_float, check_int

from specgen.gen.perf.claims import SEED_TREE
from specgen.gen.perf.system import StepConfig, step_model

__all__ = ["AcceptanceProfile", "expected_tokens_profile", "top1_from_measured",
           "candidate_shapes", "TreeCandidate", "search_trees", "SEED_SHAPE", "BESIDE_CHAINS",
           "beside_shapes"]

#: The SpecMamba notes' tree in our reading (:data:`gen.perf.claims.SEED_TREE`).
SEED_SHAPE = SEED_TREE

#: Chains reported beside the best shape (``specgen perf --tree best``).
BESIDE_CHAINS = (4, 8, 16)


@dataclass(frozen=True)
class AcceptanceProfile:
    """Top-1 acceptance per depth, ``rates[d − 1]`` for depth ``d``; deeper depths take the
    last rate.

    Parameters
    ----------
    rates : tuple of float
        Each in ``[0, 1]``; at least one.
    source : str
        Where the rates come from (a file, ``--profile``, ``--alpha``).
    """

    rates: tuple
    source: str = "given"

    def __post_init__(self):
        rates = tuple(float(r) for r in self.rates)
        if not rates:
            raise ValueError("AcceptanceProfile.rates must hold at least one rate, not none")
        for i, r in enumerate(rates):
            check_float("AcceptanceProfile", f"rates[{i}]", r, min=0.0, max=1.0)
        object.__setattr__(self, "rates", rates)

    def at(self, depth):
        """Top-1 acceptance at ``depth`` (1-based)."""
        return self.rates[min(depth, len(self.rates)) - 1]


def expected_tokens_profile(branching, profile):
    """Expected committed tokens per step (accepted drafts + the bonus token) of a tree.

    ``1 + Σ_d Π_{k ≤ d} (1 − (1 − α_k)^b_k)`` for per-depth branching ``b`` and the
    profile's top-1 rates ``α`` (module docstring).
    """
    total, reach = 1.0, 1.0
    for d, b in enumerate(branching, start=1):
        reach *= 1.0 - (1.0 - profile.at(d)) ** b
        total += reach
    return total


def top1_from_measured(branching, rates):
    """Top-1 rates from the per-depth acceptance measured on a tree of ``branching``.

    ``rates[d − 1]`` is the share of trials at depth ``d`` that accepted one of the
    ``b_d`` children; under the rank model that is ``1 − (1 − α_d)^b_d``. A depth with
    no trial (``None``) takes the previous depth's rate.
    """
    out = []
    for d, r in enumerate(rates):
        if r is None:
            if not out:
                raise ValueError("top1_from_measured: the first depth has no trial")
            out.append(out[-1])
            continue
        b = branching[d] if d < len(branching) else 1
        out.append(1.0 - (1.0 - float(r)) ** (1.0 / b))
    return AcceptanceProfile(tuple(out), source="measured")


def candidate_shapes(*, max_nodes, fifo_depth, max_branch=4, max_depth=16):
    """Every non-increasing per-depth branching list the tree verifier holds.

    Non-increasing: a wider level below a narrower one spends nodes where acceptance
    has already fallen (EAGLE-2's trees widen near the root). A shape must have at most
    ``max_nodes`` nodes with the root and a FIFO schedule within ``fifo_depth`` slots.
    """
    check_int("candidate_shapes", "max_nodes", max_nodes, min=2)
    check_int("candidate_shapes", "fifo_depth", fifo_depth, min=1)
    check_int("candidate_shapes", "max_branch", max_branch, min=1)
    check_int("candidate_shapes", "max_depth", max_depth, min=1)
    out = []

    def fits(shape):
        t = TreeShape(shape)
        if t.num_nodes > max_nodes:
            return False
        try:
            fifo_schedule(t.parents, fifo_depth=fifo_depth)
        except ValueError:
            return False
        return True

    def grow(prefix, top):
        for b in range(top, 0, -1):
            shape = prefix + (b,)
            if fits(shape):
                out.append(shape)
                if len(shape) < max_depth:
                    grow(shape, b)

    grow((), max_branch)
    return out


def beside_shapes(*, max_nodes, fifo_depth):
    """The notes' (2,2,1,1) and the chains of :data:`BESIDE_CHAINS` that the verifier holds."""
    out = []
    for shape in (SEED_SHAPE,) + tuple((1,) * n for n in BESIDE_CHAINS):
        t = TreeShape(shape)
        try:
            fifo_schedule(t.parents, fifo_depth=fifo_depth)
        except ValueError:
            continue
        if t.num_nodes <= max_nodes:
            out.append(shape)
    return out


@dataclass(frozen=True)
class TreeCandidate:
    """One priced tree shape."""

    branching: tuple
    nodes: int
    tokens_per_step: float
    tokens_per_s: float

    def to_dict(self):
        return {"tree": list(self.branching), "nodes": self.nodes,
                "tokens_per_step": self.tokens_per_step, "tokens_per_s": self.tokens_per_s}


def search_trees(accel, *, target, draft, profile, shapes=None, continue_prob=1.0,
                 restore_policy="recompute", draft_flow="best"):
    """Price every shape of ``shapes`` (default :func:`candidate_shapes` of the design's tree
    verifier) and return them fastest first.

    Parameters
    ----------
    accel : gen.perf.system.Accelerator
    target, draft : str
        As :class:`gen.perf.system.StepConfig`.
    profile : AcceptanceProfile
    shapes : iterable of tuple of int, optional
    continue_prob : float
        Early stopping (:class:`gen.perf.system.StepConfig`).
    restore_policy, draft_flow : str
        As :class:`gen.perf.system.StepConfig` (``best``: each shape with its faster
        draft flow).

    Returns
    -------
    list of TreeCandidate
    """
    if not isinstance(profile, AcceptanceProfile):
        raise TypeError(f"search_trees.profile must be an AcceptanceProfile, not {profile!r}")
    tree = accel.config.tree
    if shapes is None:
        shapes = candidate_shapes(max_nodes=tree.max_nodes, fifo_depth=tree.fifo_depth)
    out = []
    for shape in shapes:
        shape = tuple(shape)
        tokens = expected_tokens_profile(shape, profile)
        res = step_model(accel, StepConfig(target=target, draft=draft, tree=shape,
                                           tokens_per_step=tokens, continue_prob=continue_prob,
                                           restore_policy=restore_policy,
                                           draft_flow=draft_flow))
        out.append(TreeCandidate(shape, TreeShape(shape).num_nodes, tokens, res.tokens_per_s))
    out.sort(key=lambda c: -c.tokens_per_s)
    return out
