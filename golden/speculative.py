"""Speculative decoding with token trees: drafting, FIFO tree verification, lossless acceptance.

The behavioural specification of a SpecMamba/SPEQ decoding step (arXiv 2510.18525, 2509.19873),
for any pair of models that share a vocabulary:

1. **Draft a token tree** (:func:`draft_tree`). The root is the last committed
   token. A per-depth branching list ``[b_1, b_2, …]`` (:class:`golden.tree.TreeShape`)
   gives every node at depth ``d−1`` up to ``b_d`` children, chosen from the
   draft's distribution ``q`` after the node: its top-``b`` tokens
   (``candidates="topk"``) or ``b`` tokens sampled without replacement
   (``candidates="sample"``). SPEQ's early stopping: a node whose draft
   probability ``q(token)`` is below ``gamma`` (default 0.6, or a callable) is
   kept but not expanded. The tree is numbered breadth-first
   (:func:`golden.tree.validate_parents`).
2. **Verify it with the target** in one pass (:func:`evaluate_tree`), in
   SpecMamba's FIFO schedule: per layer, nodes in BFS order, each node's conv
   window and SSM state computed from its parent's, the SSM state in tiles of
   ``tile_size``, and a parent's slot released after its last child
   (:func:`golden.tree.fifo_schedule`). Every node's logits equal a plain
   sequential run along its root-to-node path, bit for bit.
3. **Accept**. Greedy (:func:`greedy_accept`): the longest path whose
   tokens equal the target's argmax, plus the target's argmax after it (bonus).
   Sampling (:func:`sample_accept`): from the root, try the node's children in
   order with recursive rejection sampling (:func:`candidate_acceptance`); the
   first accepted child becomes the node, and a node whose children are all
   rejected, or a leaf, ends the step with a token drawn from the (residual)
   target distribution. Both are lossless: greedy decoding gives exactly the
   target's greedy sequence; sampling gives exactly the target's distribution.

:func:`speculative_generate` runs the loop and reports tokens committed per step.
After each step both models' committed states move to the end of the accepted
path by a backtracking policy of :mod:`golden.backtrack` (store every
node's state, replay light intermediates, recompute, or a hybrid), a parameter;
every policy gives the same state bits.

Models follow a small protocol: ``vocab``, ``initial_state()`` and
``step(state, token) -> (logits, new_state)`` with ``step`` leaving its input
state untouched (:class:`golden.lm.MambaLM` does; so may a test's toy model).
The FIFO verifier needs a :class:`golden.lm.MambaLM` (it composes its stages);
``verify="paths"`` works with any model.
"""

from dataclasses import dataclass

import numpy as np

from .backtrack import (POLICIES, SYSTEM_POLICIES, LMRecurrence, Recompute, SpeculativeBacktracking,
                        StoreIntermediates, StoreStates, restore, tree_pass)
from .lm import LMState, MambaLM, ssm_tile
from .mixer import Stepped
from .tree import ROOT, FifoSchedule, TreeShape, accepted_path, fifo_schedule, tree_depths, validate_parents
from .validate import check_choice, check_float, check_int

__all__ = [
    "MODES", "CANDIDATES", "VERIFY", "DEFAULT_GAMMA", "softmax", "sample_index", "topk",
    "TokenTree", "DraftTree", "draft_tree", "TreeEval", "evaluate_tree", "path_logits",
    "greedy_accept", "Acceptance", "candidate_acceptance", "verify_candidates", "sample_accept",
    "SpecResult", "speculative_generate", "expected_tokens_chain",
]

#: Acceptance rules.
MODES = ("greedy", "sample")
#: How a node's children are drafted from ``q``.
CANDIDATES = ("topk", "sample")
#: How the target computes the tree's logits.
VERIFY = ("fifo", "paths")
#: SPEQ's default early-stopping threshold (the SPEQ notes, ``docs/sources.md``).
DEFAULT_GAMMA = 0.6


def softmax(logits):
    """Probabilities from logits, float64, max-shifted so ``exp`` cannot overflow."""
    z = np.asarray(logits, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def sample_index(p, u):
    """Inverse-CDF draw: the first ``i`` with ``cumsum(p)[i] > u·Σp``, for ``u`` in [0, 1).

    ``p`` need not be normalized; a zero-probability index is never returned.
    """
    c = np.cumsum(p)
    return min(int(np.searchsorted(c, u * c[-1], side="right")), len(c) - 1)


def _check_rng(rng, owner, why):
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"{owner}.rng must be a numpy.random.Generator {why}, not {rng!r}")
    return rng


def _check_model(model, owner, field):
    for attr in ("vocab", "initial_state", "step"):
        if not hasattr(model, attr):
            raise TypeError(f"{owner}.{field} must have vocab, initial_state() and step() "
                            f"(a golden.lm.MambaLM or alike), not {model!r}")
    return model


def _check_gamma(gamma, owner):
    if callable(gamma):
        return gamma
    return check_float(owner, "gamma", gamma, min=0.0, max=1.0)


def _check_branching(tree, owner):
    if isinstance(tree, TreeShape):
        return tree
    if isinstance(tree, (str, bytes)) or not hasattr(tree, "__iter__"):
        raise TypeError(f"{owner}.tree must be a TreeShape or a per-depth branching list, "
                        f"not {tree!r}")
    return TreeShape(tuple(tree))


# ----------------------------------------------------------------------------------------
# Drafting


@dataclass(frozen=True, eq=False)
class TokenTree:
    """A drafted token tree, flattened breadth-first.

    Attributes
    ----------
    tokens : numpy.ndarray of int64, shape (n,)
        ``tokens[0]`` is the root (the last committed token).
    parents : numpy.ndarray of int64, shape (n,)
        BFS parent array, ``parents[0] = ROOT``.
    q : numpy.ndarray, shape (n, vocab)
        Row ``i``: the draft's distribution after node ``i``, from which its
        children were drafted; NaN for a node that was not expanded.
    token_prob : numpy.ndarray, shape (n,)
        ``q[parents[i], tokens[i]]``, the draft's probability of node ``i``'s
        token (NaN for the root); early stopping compares it with ``gamma``.
    candidates : str
        ``"topk"`` or ``"sample"`` (see :func:`draft_tree`); sampling acceptance
        depends on it.
    """

    tokens: np.ndarray
    parents: np.ndarray
    q: np.ndarray
    token_prob: np.ndarray
    candidates: str

    def __post_init__(self):
        p = validate_parents(self.parents, owner="TokenTree")
        t = np.asarray(self.tokens)
        if t.shape != p.shape or not np.issubdtype(t.dtype, np.integer):
            raise ValueError(f"TokenTree.tokens must hold one integer per node ({p.size}), "
                             f"not {self.tokens!r}")
        check_choice("TokenTree", "candidates", self.candidates, CANDIDATES)
        q, prob = np.asarray(self.q, dtype=np.float64), np.asarray(self.token_prob, dtype=np.float64)
        if q.ndim != 2 or q.shape[0] != p.size or prob.shape != p.shape:
            raise ValueError(f"TokenTree.q must have shape ({p.size}, vocab) and token_prob "
                             f"({p.size},), not {q.shape} and {prob.shape}")
        object.__setattr__(self, "q", q)
        object.__setattr__(self, "token_prob", prob)
        object.__setattr__(self, "parents", p)
        object.__setattr__(self, "tokens", t.astype(np.int64))

    @property
    def num_nodes(self):
        return int(self.parents.size)

    @property
    def depths(self):
        return tree_depths(self.parents)

    @property
    def expanded(self):
        """True for the nodes the draft expanded (their ``q`` row is set)."""
        return ~np.isnan(self.q[:, 0])

    def children(self, node):
        """Children of ``node`` in order (consecutive node indices)."""
        return tuple(int(i) for i in np.flatnonzero(self.parents == node))


@dataclass(frozen=True, eq=False)
class DraftTree:
    """:func:`draft_tree`'s result.

    Attributes
    ----------
    tree : TokenTree
    states : tuple
        Per node, the draft's state after the node's token, or ``None`` for a
        node the draft did not expand (a leaf of the drafting).
    """

    tree: TokenTree
    states: tuple


def topk(q, b):
    """The ``b`` most probable tokens of ``q``, most probable first, ties to the lower id
    (:func:`draft_tree`'s ``"topk"`` candidates)."""
    # Stable sort of −q: ties go to the lower token id.
    return [int(x) for x in np.argsort(-q, kind="stable")[:b]]


def _sample_without_replacement(q, b, rng):
    remaining = q.copy()
    out = []
    for _ in range(b):
        if remaining.sum() <= 0:
            break           # fewer tokens with q > 0 than b: a narrower node
        x = sample_index(remaining, rng.random())
        out.append(x)
        remaining[x] = 0.0
    return out


def draft_tree(draft, state, root, *, branching, candidates="topk", gamma=DEFAULT_GAMMA,
               rng=None, context=()):
    """Draft a token tree from ``state`` (the draft's state before ``root``).

    Nodes are expanded level by level in BFS order: a node is stepped through
    the draft (from its parent's state), ``q = softmax(logits)``, and up to
    ``branching[depth]`` children are drafted from ``q``. The root is always
    expanded; a deeper node only if ``q(token) >= gamma`` (SPEQ's early
    stopping; the node itself is kept, so the target still verifies it).

    Parameters
    ----------
    draft : model
        ``vocab``, ``step(state, token)``.
    state : object
        The draft's committed state (before the root token).
    root : int
        The last committed token.
    branching : TreeShape or sequence of int
        Per-depth branching; its length is the maximum draft depth (SPEQ's L).
    candidates : {"topk", "sample"}
        ``"topk"``: the ``b`` most probable tokens, most probable first, ties to
        the lower id. ``"sample"``: ``b`` draws without replacement from ``q``
        (fewer if ``q`` has fewer nonzero entries); sampling acceptance must
        then use ``q``.
    gamma : float in [0, 1] or callable
        Early-stopping threshold; ``0`` disables it. A callable is called as
        ``gamma(tokens=..., depth=..., prob=...)`` with the tokens up to and
        including the node (``context + (root,) + path``), the node's depth and
        ``q(token)``, and returns the threshold (SPEQ's dynamic γ: e.g. lower
        it after a LaTeX token).
    rng : numpy.random.Generator
        Needed for ``candidates="sample"``.
    context : sequence of int
        Tokens before the root, passed to a callable ``gamma``.

    Returns
    -------
    DraftTree
    """
    owner = "draft_tree"
    _check_model(draft, owner, "draft")
    shape = _check_branching(branching, owner)
    check_choice(owner, "candidates", candidates, CANDIDATES)
    gamma = _check_gamma(gamma, owner)
    if candidates == "sample":
        _check_rng(rng, owner, "with candidates='sample'")
    root = check_int(owner, "root", root, min=0, max=draft.vocab - 1)
    # Token paths are only built for a callable gamma (a long context costs a copy per node).
    track = callable(gamma)
    tokens, parents, probs, depth = [root], [ROOT], [np.nan], [0]
    paths = [tuple(int(t) for t in context) + (root,)] if track else None
    q_rows, states = {}, {}
    level = [0]
    for d, b in enumerate(shape.branching):
        nxt = []
        for j in level:
            if j:
                thr = gamma if not callable(gamma) else check_float(
                    "draft_tree", "gamma(...) result",
                    gamma(tokens=paths[j], depth=depth[j], prob=float(probs[j])), min=0.0, max=1.0)
                if probs[j] < thr:
                    continue
            before = state if j == 0 else states[parents[j]]
            logits, states[j] = draft.step(before, tokens[j])
            q = softmax(logits)
            q_rows[j] = q
            kids = topk(q, b) if candidates == "topk" else _sample_without_replacement(q, b, rng)
            for x in kids:
                tokens.append(x)
                parents.append(j)
                probs.append(q[x])
                depth.append(d + 1)
                if track:
                    paths.append(paths[j] + (x,))
                nxt.append(len(tokens) - 1)
        level = nxt
    n = len(tokens)
    q = np.full((n, draft.vocab), np.nan)
    for j, row in q_rows.items():
        q[j] = row
    tree = TokenTree(tokens=np.array(tokens, dtype=np.int64), parents=np.array(parents, dtype=np.int64),
                     q=q, token_prob=np.array(probs, dtype=np.float64), candidates=candidates)
    return DraftTree(tree=tree, states=tuple(states.get(i) for i in range(n)))


# ----------------------------------------------------------------------------------------
# Tree verification


class _Ring:
    """The state ring of one tile stream: a slot holds one node's payload until released.

    It checks the schedule instead of trusting it: writing a slot still held, or
    reading a parent whose slot was released (or overwritten), raises.
    """

    def __init__(self, depth):
        self.payload = [None] * depth
        self.owner = [None] * depth
        self.live = 0
        self.peak = 0

    def write(self, slot, node, payload):
        if self.owner[slot] is not None:
            raise RuntimeError(f"node {node} writes ring slot {slot}, still held by node "
                               f"{self.owner[slot]}")
        self.payload[slot], self.owner[slot] = payload, node
        self.live += 1
        self.peak = max(self.peak, self.live)

    def read(self, slot, node, parent):
        if self.owner[slot] != parent:
            raise RuntimeError(f"node {node} reads its parent {parent} from ring slot {slot}, "
                               f"which holds {self.owner[slot]} (the parent's state was released)")
        return self.payload[slot]

    def release(self, slot):
        if self.owner[slot] is None:
            raise RuntimeError(f"ring slot {slot} released twice")
        self.payload[slot] = self.owner[slot] = None
        self.live -= 1


@dataclass(frozen=True, eq=False)
class TreeEval:
    """:func:`evaluate_tree`'s result: logits and the memory the schedule used.

    Attributes
    ----------
    logits : numpy.ndarray, shape (n, vocab)
        Target logits after every node.
    states : tuple of LMState or None
        Every node's state (``return_states``): what a *store* backtracking
        policy writes off chip; not part of the on-chip figures.
    steps : tuple or None
        ``steps[i][l]``: node ``i``'s :class:`golden.mixer.Stepped` in layer
        ``l`` (``return_steps``): its new layer state, output, light
        intermediates and input, what any backtracking policy keeps
        (:meth:`golden.backtrack.LMRecurrence.join` makes the model's, for
        :func:`golden.backtrack.tree_pass`).
    schedule : golden.tree.FifoSchedule
    tile_size, tiles : int
        Tile size and tiles per layer state (``ceil(state_elems / tile_size)``).
    peak_live : int
        Most ring slots live at once, observed over every tile stream and the
        conv pass of every layer (equals ``schedule.peak_live``).
    bytes_per_elem : int
    ssm_bytes : int
        ``peak_live × min(tile_size, state_elems) × bytes_per_elem``: one tile
        stream's live SSM slots.
    conv_bytes : int
        ``peak_live × (d_conv − 1)·conv_dim × bytes_per_elem``: live conv windows
        of one layer (a window is small, so it is not tiled).
    all_nodes_bytes : int
        ``n × (state_elems + conv_elems) × bytes_per_elem``: every node's full
        layer state, the alternative to the FIFO.
    """

    logits: np.ndarray
    states: tuple
    schedule: FifoSchedule
    tile_size: int
    tiles: int
    peak_live: int
    bytes_per_elem: int
    ssm_bytes: int
    conv_bytes: int
    all_nodes_bytes: int
    steps: tuple = None

    @property
    def onchip_bytes(self):
        """``ssm_bytes + conv_bytes``."""
        return self.ssm_bytes + self.conv_bytes


def _check_tree_tokens(model, tokens, parents, owner):
    p = validate_parents(parents, owner=owner)
    t = np.asarray(tokens)
    if t.shape != p.shape or not np.issubdtype(t.dtype, np.integer):
        raise ValueError(f"{owner}.tokens must hold one integer per node ({p.size}), not {tokens!r}")
    bad = np.flatnonzero((t < 0) | (t >= model.vocab))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{owner}.tokens[{i}] must be an integer in [0, {model.vocab - 1}], "
                         f"not {t[i]}")
    return t.astype(np.int64), p


def evaluate_tree(target, state, tokens, parents, *, tile_size=64, fifo_depth=None,
                  bytes_per_elem=4, return_states=False, return_steps=False, schedule=None):
    """Verify a token tree with the target in SpecMamba's FIFO schedule.

    Per layer: the linear stages for every node (``layer_in``); the conv pass
    over nodes in BFS order, each node's window computed from its parent's
    (the committed state's for the root) and held in a ring slot; then for
    each tile of ``tile_size`` state elements a pass over the nodes in BFS
    order, each node's tile computed from its parent's tile (:func:`golden.lm.ssm_tile`)
    and held in a ring slot; slots are released as the schedule says (a
    parent after its last child); then ``layer_out`` for every node. The ring
    is checked, not trusted (:class:`_Ring`): reading a released parent raises.

    Parameters
    ----------
    target : golden.lm.MambaLM
    state : golden.lm.LMState
        The committed state (before the root token).
    tokens, parents : sequence of int
        The tree, BFS-flattened (:func:`golden.tree.validate_parents`).
    tile_size : int
        State elements per tile (seed: 64); any value ≥ 1.
    fifo_depth : int, optional
        Ring slots; default: exactly the schedule's peak.
    bytes_per_elem : int
        For the byte figures (4: an FP32 state as in hardware; the model itself
        computes in float64).
    return_states : bool
        Also return every node's state.
    return_steps : bool
        Also return what every layer did for every node (:attr:`TreeEval.steps`).
    schedule : golden.tree.FifoSchedule, optional
        Use this schedule instead of :func:`golden.tree.fifo_schedule` (for
        tests of the ring's checks, or a different release policy).

    Returns
    -------
    TreeEval

    Raises
    ------
    ValueError
        Bad tokens or tree, or a ring too small for the tree.
    RuntimeError
        If the schedule lets a node read a released parent or overwrite a live slot.
    """
    owner = "evaluate_tree"
    if not isinstance(target, MambaLM):
        raise TypeError(f"{owner}.target must be a golden.lm.MambaLM, not {target!r}")
    target.check_state(state, owner=owner)
    tokens, p = _check_tree_tokens(target, tokens, parents, owner)
    tile_size = check_int(owner, "tile_size", tile_size, min=1)
    bytes_per_elem = check_int(owner, "bytes_per_elem", bytes_per_elem, min=1)
    if schedule is None:
        if fifo_depth is None:
            fifo_depth = int(fifo_schedule(p, fifo_depth=p.size).peak_live)
        schedule = fifo_schedule(p, fifo_depth=fifo_depth)
    elif not isinstance(schedule, FifoSchedule) or not np.array_equal(schedule.parents, p):
        raise ValueError(f"{owner}.schedule must be a FifoSchedule of this tree's parents")
    cfg = target.config
    n, E, R = p.size, cfg.state_elems, cfg.nheads * cfg.headdim
    depth = schedule.fifo_depth
    hidden = [target.embed(int(t)) for t in tokens]
    keep = return_states or return_steps
    conv_store = [[None] * cfg.n_layer for _ in range(n)] if keep else None
    ssm_store = np.empty((n, cfg.n_layer, E)) if keep else None
    steps = [[None] * cfg.n_layer for _ in range(n)] if return_steps else None
    shape = (cfg.nheads, cfg.headdim, cfg.d_state)
    peak = 0
    parent_slot = [int(x) for x in schedule.parent_slot]
    write_slot = [int(x) for x in schedule.write_slot]
    released = [[int(x) for x in r] for r in schedule.released]

    def parent_payload(ring, i, committed):
        return committed if p[i] == ROOT else ring.read(parent_slot[i], i, int(p[i]))

    def retire(ring, i, payload):
        ring.write(write_slot[i], i, payload)
        for slot in released[i]:
            ring.release(slot)

    for layer in range(cfg.n_layer):
        pre = [target.layer_in(layer, h) for h in hidden]      # (z, xBC before conv, dt)
        # Conv pass: a node's window is its parent's advanced by its own row.
        ring = _Ring(depth)
        xbc = []
        for i in range(n):
            out, window = target.conv(layer, parent_payload(ring, i, state.conv[layer]), pre[i][1])
            retire(ring, i, window)
            xbc.append(out)
            if keep:
                conv_store[i][layer] = window
        if ring.live:
            raise RuntimeError(f"{ring.live} ring slots still live after the conv pass")
        peak = max(peak, ring.peak)
        inputs = [target.ssm_inputs(layer, xbc[i], pre[i][2]) for i in range(n)]
        # SSM passes, one per tile; every tile runs the same node order and schedule.
        acc = np.zeros((n, R))
        committed = state.ssm[layer].reshape(-1)
        for lo in range(0, E, tile_size):
            hi = min(E, lo + tile_size)
            ring = _Ring(depth)
            for i in range(n):
                new = ssm_tile(cfg, inputs[i], parent_payload(ring, i, committed[lo:hi]),
                               lo=lo, hi=hi, acc=acc[i])
                retire(ring, i, new)
                if keep:
                    ssm_store[i, layer, lo:hi] = new
            if ring.live:
                raise RuntimeError(f"{ring.live} ring slots still live after a tile pass")
            peak = max(peak, ring.peak)
        out = [target.layer_out(layer, hidden[i], inputs[i], acc[i], pre[i][0]) for i in range(n)]
        if return_steps:
            for i, si in enumerate(inputs):
                steps[i][layer] = Stepped(
                    state=(conv_store[i][layer], ssm_store[i, layer].reshape(shape)), output=out[i],
                    light=(pre[i][1], si.x, si.B, si.delta, si.dA), input=hidden[i])
        hidden = out
    logits = np.stack([target.head(h) for h in hidden])
    states = None
    if return_states:
        states = tuple(LMState(conv=tuple(conv_store[i]),
                               ssm=tuple(ssm_store[i, layer].reshape(shape) for layer in range(cfg.n_layer)))
                       for i in range(n))
    return TreeEval(logits=logits, states=states, schedule=schedule, tile_size=tile_size,
                    tiles=-(-E // tile_size), peak_live=peak, bytes_per_elem=bytes_per_elem,
                    ssm_bytes=peak * min(tile_size, E) * bytes_per_elem,
                    conv_bytes=peak * cfg.conv_elems * bytes_per_elem,
                    all_nodes_bytes=n * (E + cfg.conv_elems) * bytes_per_elem,
                    steps=None if steps is None else tuple(tuple(s) for s in steps))


def path_logits(model, state, tokens, parents):
    """Every node's logits and state by stepping it from its parent's state.

    The plain per-path reference of :func:`evaluate_tree` (and a verifier for
    models that only have ``step``).

    Returns
    -------
    logits : numpy.ndarray, shape (n, vocab)
    states : tuple
        The state after each node.
    """
    tokens, p = _check_tree_tokens(model, tokens, parents, "path_logits")
    logits = np.empty((p.size, model.vocab))
    states = []
    for i in range(p.size):
        logits[i], s = model.step(state if p[i] == ROOT else states[p[i]], int(tokens[i]))
        states.append(s)
    return logits, tuple(states)


# ----------------------------------------------------------------------------------------
# Acceptance


def greedy_accept(parents, tokens, logits):
    """Greedy acceptance: the longest path matching the target's argmax, and the bonus.

    Node ``i ≥ 1`` matches when ``tokens[i] == argmax(logits[parents[i]])``;
    :func:`golden.tree.accepted_path` picks the deepest accepted node (ties to
    the lowest BFS index; with distinct siblings, as drafted, there is at
    most one matching child per node, so no ties). The bonus is ``argmax(logits[last node])``.

    Returns
    -------
    nodes : tuple of int
        The accepted path, root first.
    bonus : int
    """
    p = validate_parents(parents, owner="greedy_accept")
    best = np.argmax(np.asarray(logits), axis=1)
    t = np.asarray(tokens)
    match = np.zeros(p.size, dtype=bool)
    match[1:] = t[1:] == best[p[1:]]
    path = accepted_path(p, match)
    return path.nodes, int(best[path.nodes[-1]])


@dataclass(frozen=True, eq=False)
class Acceptance:
    """The recursive rejection-sampling rule at one node, for given candidates.

    Attributes
    ----------
    accept : tuple of float
        ``accept[i]``: probability of accepting candidate ``i`` once candidates
        ``0 … i−1`` were rejected, ``min(1, p_i(x_i)/q_i(x_i))``.
    residuals : tuple of numpy.ndarray
        ``p_0 = p``, and ``p_{i+1} = norm(max(0, p_i − q_i))``: the target
        distribution left after rejecting candidate ``i``. If every candidate
        is rejected the token is drawn from ``residuals[-1]``.
    """

    accept: tuple
    residuals: tuple


def _check_dist(a, owner, field, vocab=None):
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 1 or (vocab is not None and a.size != vocab) or not np.isfinite(a).all() \
            or (a < 0).any() or a.sum() <= 0:
        want = f"{vocab} " if vocab is not None else ""
        raise ValueError(f"{owner}.{field} must be a 1-D array of {want}finite non-negative "
                         f"probabilities with a positive sum")
    return a / a.sum()


def candidate_acceptance(p, candidates, *, q=None):
    """Recursive rejection sampling (SpecInfer) at one node.

    Candidate ``x_i`` is accepted with probability ``min(1, p_i(x_i)/q_i(x_i))``;
    on rejection ``p_{i+1} = norm(max(0, p_i − q_i))`` and ``q_{i+1}`` is
    ``q_i`` with ``x_i`` zeroed and renormalized. This is lossless when ``x_i``
    was drawn from ``q_i``, i.e. the candidates are draws *without
    replacement* from ``q`` (``candidates="sample"``): at each stage the
    output is ``min(p_i, q_i)`` plus the rejection mass times ``p_{i+1}``,
    which sums to ``p_i`` whatever the later stages do, by induction.

    With ``q=None`` the candidates are deterministic (top-k): ``q_i`` is the
    point mass at ``x_i``, so ``x_i`` is accepted with probability
    ``p_i(x_i)`` and a rejection zeroes ``x_i`` in the target distribution.

    Parameters
    ----------
    p : array_like, shape (vocab,)
        Target distribution at the node (normalized here).
    candidates : sequence of int
        Distinct tokens, in the order they are tried.
    q : array_like, shape (vocab,), optional
        Draft distribution the candidates were drawn from.

    Returns
    -------
    Acceptance

    Raises
    ------
    ValueError
        Bad distributions, repeated or out-of-range candidates, or a candidate
        with zero draft probability left (it cannot have been drawn).
    """
    owner = "candidate_acceptance"
    p = _check_dist(p, owner, "p")
    V = p.size
    q = None if q is None else _check_dist(q, owner, "q", V)
    cands = [check_int(owner, f"candidates[{i}]", x, min=0, max=V - 1) for i, x in enumerate(candidates)]
    if len(set(cands)) != len(cands):
        raise ValueError(f"{owner}.candidates must be distinct tokens, not {cands!r}")
    accept, residuals = [], [p]
    for x in cands:
        if q is None:
            qi = np.zeros(V)
            qi[x] = 1.0
        else:
            if q[x] <= 0:
                raise ValueError(f"{owner}: candidate {x} has draft probability 0 left, so it "
                                 f"cannot have been drawn from q without replacement")
            qi = q
        accept.append(1.0 if p[x] >= qi[x] else float(p[x] / qi[x]))
        r = np.maximum(p - qi, 0.0)
        s = r.sum()
        # s = 0 only if p == q, where rejection has probability 0: keep p.
        p = r / s if s > 0 else p
        residuals.append(p)
        if q is not None:
            q = q.copy()
            q[x] = 0.0
            s = q.sum()
            q = q / s if s > 0 else q
    return Acceptance(accept=tuple(accept), residuals=tuple(residuals))


def verify_candidates(p, candidates, *, q=None, rng):
    """Draw the outcome of :func:`candidate_acceptance` at one node.

    Returns
    -------
    index : int or None
        The accepted candidate's position, or ``None`` if all were rejected.
    token : int
        The accepted candidate, or a draw from the last residual.
    """
    _check_rng(rng, "verify_candidates", "")
    a = candidate_acceptance(p, candidates, q=q)
    for i, x in enumerate(candidates):
        if rng.random() < a.accept[i]:
            return i, int(x)
    return None, sample_index(a.residuals[-1], rng.random())


def sample_accept(tree, logits, rng):
    """Lossless sampling acceptance over a drafted tree.

    From the root: ``p = softmax(logits[node])``; the node's children are
    tried in order (:func:`verify_candidates`, with the tree's ``q`` row for
    sampled candidates, point masses for top-k ones). An accepted child
    becomes the node; otherwise the step ends with the residual draw. At a
    leaf the step ends with a draw from ``p`` (the bonus token).

    Returns
    -------
    nodes : tuple of int
        Accepted path, root first.
    token : int
        The final token (residual or bonus draw).
    """
    _check_rng(rng, "sample_accept", "")
    if not isinstance(tree, TokenTree):
        raise TypeError(f"sample_accept.tree must be a TokenTree, not {tree!r}")
    logits = np.asarray(logits)
    if logits.shape[0] != tree.num_nodes:
        raise ValueError(f"sample_accept.logits must have one row per node ({tree.num_nodes}), "
                         f"not {logits.shape[0]}")
    node, nodes = 0, [0]
    while True:
        p = softmax(logits[node])
        kids = tree.children(node)
        if not kids:
            return tuple(nodes), sample_index(p, rng.random())
        q = tree.q[node] if tree.candidates == "sample" else None
        i, tok = verify_candidates(p, [int(tree.tokens[k]) for k in kids], q=q, rng=rng)
        if i is None:
            return tuple(nodes), tok
        node = kids[i]
        nodes.append(node)


# ----------------------------------------------------------------------------------------
# The decoding loop


@dataclass(frozen=True)
class SpecResult:
    """:func:`speculative_generate`'s result.

    Attributes
    ----------
    tokens : tuple of int
        The ``n_tokens`` generated tokens.
    tokens_per_step : tuple of int
        Tokens each target pass committed: accepted draft tokens + 1 (the bonus
        or residual token). The last step may commit more than were still
        needed; ``tokens`` is cut, this list is not.
    accepted_per_step : tuple of int
        Accepted draft tokens per step.
    nodes_per_step : tuple of int
        Tree nodes the target verified per step, root included.
    peak_live_per_step : tuple of int
        Ring peak per step (``verify="fifo"``; empty otherwise).
    max_onchip_bytes : int
        Largest :attr:`TreeEval.onchip_bytes` over the steps (0 for ``"paths"``).
    draft_depth_per_step : tuple of int
        Depth of the deepest drafted node per step: the draft length after
        early stopping (SPEQ's L when nothing stops early).
    path_at_leaf_per_step : tuple of bool
        Per step, whether the accepted path ended at a node with no drafted
        children (the draft offered nothing more), rather than at a rejection:
        with ``accepted_per_step`` this gives per-depth acceptance rates.
    target_state, draft_state : object
        The models' committed states after the last step, as the backtracking
        policy restored them: after the prompt and every committed token but
        the last (the next root), including tokens cut from ``tokens``.
    """

    tokens: tuple
    tokens_per_step: tuple
    accepted_per_step: tuple
    nodes_per_step: tuple
    peak_live_per_step: tuple
    max_onchip_bytes: int
    target_state: object = None
    draft_state: object = None
    draft_depth_per_step: tuple = ()
    path_at_leaf_per_step: tuple = ()

    @property
    def steps(self):
        return len(self.tokens_per_step)

    @property
    def mean_tokens_per_step(self):
        """Mean tokens committed per target pass (SpecMamba's "tokens/step")."""
        return float(np.mean(self.tokens_per_step)) if self.tokens_per_step else 0.0

    @property
    def mean_accepted(self):
        """Mean accepted draft tokens per step."""
        return float(np.mean(self.accepted_per_step)) if self.accepted_per_step else 0.0


class _Recorded:
    """An :class:`golden.backtrack.LMRecurrence` as a model whose state after a
    token is that token's :class:`golden.mixer.Stepped`: drafting with it keeps
    what a backtracking policy records (``DraftTree.states``)."""

    def __init__(self, rec):
        self.rec, self.vocab = rec, rec.lm.vocab

    def initial_state(self):
        return self.rec.pack(self.rec.lm.initial_state())

    def step(self, state, token):
        stepped = self.rec.step(state.state if isinstance(state, Stepped) else state, token)
        return stepped.output, stepped


def _check_backtrack(backtrack, owner):
    if isinstance(backtrack, SpeculativeBacktracking):
        return backtrack
    if isinstance(backtrack, (StoreStates, StoreIntermediates, Recompute)):
        return SpeculativeBacktracking(draft=backtrack, target=backtrack)
    if not isinstance(backtrack, str):
        raise TypeError(f"{owner}.backtrack must be a policy name, a policy or a "
                        f"SpeculativeBacktracking, not {backtrack!r}")
    check_choice(owner, "backtrack", backtrack, tuple(SYSTEM_POLICIES) + tuple(POLICIES))
    if backtrack in SYSTEM_POLICIES:
        return SYSTEM_POLICIES[backtrack]
    return SpeculativeBacktracking(draft=POLICIES[backtrack], target=POLICIES[backtrack])


def _recurrence(model, policy, owner, field):
    """The model as a recurrence for ``policy``, or ``None``: a store through its own states."""
    if isinstance(model, MambaLM):
        return LMRecurrence(model)
    if isinstance(policy, StoreStates):
        return None
    raise TypeError(f"{owner}: backtracking policy {policy.name!r} needs a golden.lm.MambaLM "
                    f"{field}, not {type(model).__name__}; a model with only step() can store")


def speculative_generate(target, draft, prompt, n_tokens, *, tree=(3, 2, 2, 1), mode="greedy",
                         candidates=None, gamma=DEFAULT_GAMMA, rng=None, verify="fifo",
                         tile_size=64, fifo_depth=None, backtrack="pure-store"):
    """Generate ``n_tokens`` after ``prompt`` by tree speculative decoding.

    Each step drafts a tree from the last committed token (:func:`draft_tree`),
    verifies it with the target (:func:`evaluate_tree` or :func:`path_logits`),
    accepts a path (:func:`greedy_accept` or :func:`sample_accept`), commits
    its tokens plus one, and moves both models' committed states to the end of
    the accepted path with the ``backtrack`` policies: each model's pass (the
    target's verification, the draft's drafting) records what its policy keeps
    (:func:`golden.backtrack.tree_pass`), then
    :func:`golden.backtrack.restore` rebuilds the state. The draft did not run
    a leaf of the drafting: when the path ends there, its state is restored to
    the leaf's parent and stepped once.

    Parameters
    ----------
    target, draft : model
        Same ``vocab``. ``draft`` may be a :func:`golden.lm.speq_pair` draft
        (self-speculation), a smaller or truncated model, or anything with the
        model protocol.
    prompt : sequence of int
        At least one token; the last is the first tree's root.
    n_tokens : int
        Tokens to generate (≥ 0).
    tree : TreeShape or sequence of int
        Per-depth branching (``[1] * L`` is a chain of L draft tokens).
    mode : {"greedy", "sample"}
        ``"greedy"`` returns exactly the target's greedy continuation;
        ``"sample"`` samples exactly from the target's distribution.
    candidates : {"topk", "sample"}, optional
        Default ``"topk"`` for greedy, ``"sample"`` for sampling.
    gamma : float or callable
        Early stopping (:func:`draft_tree`); ``0`` disables it.
    rng : numpy.random.Generator
        Required when anything is sampled.
    verify : {"fifo", "paths"}
        ``"fifo"`` (:func:`evaluate_tree`, needs a MambaLM target) or
        ``"paths"`` (:func:`path_logits`).
    tile_size, fifo_depth : int
        Passed to :func:`evaluate_tree`.
    backtrack : str, policy or golden.backtrack.SpeculativeBacktracking
        A name of :data:`golden.backtrack.SYSTEM_POLICIES` (``"pure-store"``,
        ``"hybrid"``, …: a policy per model), a name of
        :data:`golden.backtrack.POLICIES` or a policy (both models use it), or
        a :class:`golden.backtrack.SpeculativeBacktracking`. A model that is not
        a :class:`golden.lm.MambaLM` (:class:`golden.backtrack.LMRecurrence`)
        can only store its own states.

    Returns
    -------
    SpecResult
    """
    owner = "speculative_generate"
    _check_model(target, owner, "target")
    _check_model(draft, owner, "draft")
    if draft.vocab != target.vocab:
        raise ValueError(f"{owner}: draft.vocab must equal target.vocab = {target.vocab}, "
                         f"not {draft.vocab}")
    shape = _check_branching(tree, owner)
    check_choice(owner, "mode", mode, MODES)
    candidates = ("topk" if mode == "greedy" else "sample") if candidates is None else candidates
    check_choice(owner, "candidates", candidates, CANDIDATES)
    gamma = _check_gamma(gamma, owner)
    check_choice(owner, "verify", verify, VERIFY)
    if verify == "fifo" and not isinstance(target, MambaLM):
        raise TypeError(f"{owner}: verify='fifo' needs a golden.lm.MambaLM target, not "
                        f"{type(target).__name__}; use verify='paths'")
    n_tokens = check_int(owner, "n_tokens", n_tokens, min=0)
    if mode == "sample" or candidates == "sample":
        _check_rng(rng, owner, "when sampling")
    if isinstance(prompt, (str, bytes)) or not hasattr(prompt, "__len__") or len(prompt) == 0:
        raise ValueError(f"{owner}.prompt must be a non-empty sequence of tokens, not {prompt!r}")
    prompt = [check_int(owner, f"prompt[{i}]", t, min=0, max=target.vocab - 1)
              for i, t in enumerate(prompt)]
    system = _check_backtrack(backtrack, owner)
    t_rec = _recurrence(target, system.target, owner, "target")
    d_rec = _recurrence(draft, system.draft, owner, "draft")
    t_state, d_state = target.initial_state(), draft.initial_state()
    for tok in prompt[:-1]:
        _, t_state = target.step(t_state, tok)
        _, d_state = draft.step(d_state, tok)
    out = list(prompt)
    tokens_per, accepted_per, nodes_per, peaks, depth_per, leaf_per = [], [], [], [], [], []
    max_bytes = 0
    while len(out) - len(prompt) < n_tokens:
        d_cp = d_state if d_rec is None else d_rec.pack(d_state)
        dt = draft_tree(draft if d_rec is None else _Recorded(d_rec), d_cp, out[-1], branching=shape,
                        candidates=candidates, gamma=gamma, rng=rng,
                        context=out[:-1] if callable(gamma) else ())
        tt = dt.tree
        # The target's pass: node states to store, or a TreePass its policy recorded.
        t_nodes = t_pass = None
        if verify == "fifo":
            ev = evaluate_tree(target, t_state, tt.tokens, tt.parents, tile_size=tile_size,
                               fifo_depth=fifo_depth, return_states=t_rec is None,
                               return_steps=t_rec is not None)
            logits, t_nodes = ev.logits, ev.states
            peaks.append(ev.peak_live)
            max_bytes = max(max_bytes, ev.onchip_bytes)
            if t_rec is not None:
                t_pass = tree_pass(t_rec, system.target, checkpoint=t_rec.pack(t_state),
                                     tokens=tt.tokens, parents=tt.parents,
                                     steps=[t_rec.join(lg, s) for lg, s in zip(logits, ev.steps)])
        elif t_rec is None:
            logits, t_nodes = path_logits(target, t_state, tt.tokens, tt.parents)
        else:
            t_pass = tree_pass(t_rec, system.target, checkpoint=t_rec.pack(t_state),
                               tokens=tt.tokens, parents=tt.parents)
            logits = np.stack(t_pass.outputs)
        if mode == "greedy":
            nodes, last = greedy_accept(tt.parents, tt.tokens, logits)
        else:
            nodes, last = sample_accept(tt, logits, rng)
        end = nodes[-1]
        t_state = t_nodes[end] if t_pass is None else t_rec.unpack(restore(t_pass, path=nodes))
        # A node the draft did not expand has no draft state: restore its parent's
        # (the checkpoint for a root alone), then step it.
        ran = nodes if dt.states[end] is not None else nodes[:-1]
        if ran and d_rec is None:
            d_state = dt.states[ran[-1]]
        elif ran:
            d_pass = tree_pass(d_rec, system.draft, checkpoint=d_cp, tokens=tt.tokens,
                                 parents=tt.parents, steps=dt.states)
            d_state = d_rec.unpack(restore(d_pass, path=ran))
        if ran != nodes:
            _, d_state = draft.step(d_state, int(tt.tokens[end]))
        out.extend(int(tt.tokens[j]) for j in nodes[1:])
        out.append(int(last))
        tokens_per.append(len(nodes))
        accepted_per.append(len(nodes) - 1)
        nodes_per.append(tt.num_nodes)
        depth_per.append(int(tt.depths.max()))
        leaf_per.append(not bool(np.any(tt.parents == end)))
    return SpecResult(tokens=tuple(out[len(prompt):len(prompt) + n_tokens]),
                      tokens_per_step=tuple(tokens_per), accepted_per_step=tuple(accepted_per),
                      nodes_per_step=tuple(nodes_per), peak_live_per_step=tuple(peaks),
                      max_onchip_bytes=max_bytes, target_state=t_state, draft_state=d_state,
                      draft_depth_per_step=tuple(depth_per), path_at_leaf_per_step=tuple(leaf_per))


def expected_tokens_chain(alpha, length):
    """Expected tokens per step of a chain of ``length`` drafts with per-token
    acceptance ``alpha``: ``(1 − α^(L+1)) / (1 − α)``, ``L + 1`` at α = 1."""
    alpha = check_float("expected_tokens_chain", "alpha", alpha, min=0.0, max=1.0)
    length = check_int("expected_tokens_chain", "length", length, min=0)
    if alpha == 1.0:
        return float(length + 1)
    return (1.0 - alpha ** (length + 1)) / (1.0 - alpha)
