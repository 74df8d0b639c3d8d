"""Draft token trees and SpecMamba's FIFO tree-verification schedule
(arXiv 2509.19873).

A draft tree is flattened breadth-first (BFS): node 0 is the root, the last
accepted token, processed from the committed state that lives outside the
ring; every other node ``i`` has ``parents[i] < i``, parents are
nondecreasing, and ``depth[i] = depth[parents[i]] + 1``.

Processing node ``i`` reads its parent's state (node 0 reads the committed
state) and writes node ``i``'s state into a ring slot. A node's state dies
when its last child has been processed; a leaf's state dies right after the
leaf itself (its logits are kept, its state is not: restoring the accepted
state is the StateController's job, through its backtracking policy). The
live slots form a FIFO: a slot is allocated for every node in node order, and
slots leave from the head only, once the head node is dead. Node ``i`` writes
slot ``i mod fifo_depth``; the ring is empty at the start of every layer pass,
so that is exactly the ring's write pointer (the live nodes are a contiguous
run of fewer than ``fifo_depth`` indices, so the slot is always free).

The schedule is the same for every tile of ``tile_size`` state elements and
for every layer pass; :func:`tree_memory` turns its peak occupancy into bytes.

This module is the specification of :class:`hw.tree_verifier.TreeVerifier`;
:func:`schedule_beats` gives the exact beat stream the RTL emits.
"""

from dataclasses import dataclass

import numpy as np

from .validate import check_int

__all__ = [
    "ROOT", "TreeShape", "flatten", "validate_parents", "tree_depths", "behind", "fits_behind",
    "dead_times",
    "live_profile", "FifoSchedule", "fifo_schedule", "node_table", "overflow_node",
    "schedule_beats",
    "AcceptedPath", "accepted_path", "TREE_ENTRY_FIELDS", "PATH_ENTRY_FIELDS", "tree_entries",
    "greedy_acceptance", "TreeMemory", "tree_memory",
    "MAMBA2_2P7B_STATE_ELEMS", "seed_shapes",
]

#: ``parent_slot`` of node 0: it reads the committed state, not a ring slot.
ROOT = -1

#: SSM state per layer of Mamba2-2.7B: 80 heads × headdim 64 × d_state 128 (``state-spaces/mamba`` defaults).
MAMBA2_2P7B_STATE_ELEMS = 80 * 64 * 128


@dataclass(frozen=True)
class TreeShape:
    """A draft tree given by its per-depth branching list.

    ``TreeShape((3, 2, 2, 1))``: the root has 3 children, each of those 2,
    each of those 2, each of those 1; 1 + 3 + 6 + 12 + 12 = 34 nodes.

    Parameters
    ----------
    branching : sequence of int
        Children per node at each depth (each ≥ 1); empty for a root alone.
    """

    branching: tuple

    def __post_init__(self):
        try:
            items = tuple(self.branching)
        except TypeError:
            raise TypeError(f"TreeShape.branching must be a sequence of integers >= 1, "
                            f"not {self.branching!r}") from None
        for k, b in enumerate(items):
            check_int("TreeShape", f"branching[{k}]", b, min=1)
        object.__setattr__(self, "branching", tuple(int(b) for b in items))

    @property
    def depth(self):
        """Depth of the deepest node (the root has depth 0)."""
        return len(self.branching)

    @property
    def level_sizes(self):
        """Nodes at each depth 0 … ``depth``."""
        return tuple(int(x) for x in np.cumprod((1,) + self.branching))

    @property
    def num_nodes(self):
        """Nodes including the root."""
        return sum(self.level_sizes)

    @property
    def draft_tokens(self):
        """Draft tokens (nodes other than the root): the prediction length."""
        return self.num_nodes - 1

    @property
    def parents(self):
        """BFS parent array; ``parents[0] == ROOT``."""
        return flatten(self.branching)

    def __str__(self):
        return "[" + ", ".join(str(b) for b in self.branching) + "]"


def flatten(branching):
    """BFS parent array of the full tree with per-depth ``branching``.

    Returns
    -------
    numpy.ndarray of int64
        ``parents[0] == ROOT``; the ``b`` children of a node are consecutive.
    """
    shape = branching if isinstance(branching, TreeShape) else TreeShape(tuple(branching))
    parents = [np.array([ROOT], dtype=np.int64)]
    first = 0
    for size, b in zip(shape.level_sizes, shape.branching):
        parents.append(np.repeat(np.arange(first, first + size, dtype=np.int64), b))
        first += size
    return np.concatenate(parents)


def validate_parents(parents, *, max_nodes=None, owner="tree"):
    """Check a BFS-flattened tree and return its parent array as int64.

    Raises
    ------
    TypeError, ValueError
        With the field (``tree.parents[i]``) and the allowed values.
    """
    arr = np.asarray(parents)
    if arr.ndim != 1 or arr.size == 0 or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise TypeError(f"{owner}.parents must be a non-empty 1-D sequence of integers, not {parents!r}")
    arr = arr.astype(np.int64)
    n = arr.size
    if max_nodes is not None and n > max_nodes:
        raise ValueError(f"{owner}.parents has {n} nodes; allowed: at most max_nodes = {max_nodes}")
    if arr[0] != ROOT:
        raise ValueError(f"{owner}.parents[0] must be ROOT ({ROOT}), not {arr[0]}")
    if n > 1:
        idx = np.arange(1, n)
        bad = np.flatnonzero((arr[1:] < 0) | (arr[1:] >= idx))
        if bad.size:
            i = int(bad[0]) + 1
            raise ValueError(f"{owner}.parents[{i}] must be an integer in [0, {i - 1}], not {arr[i]}")
        dec = np.flatnonzero(np.diff(arr[1:]) < 0)
        if dec.size:
            i = int(dec[0]) + 2
            raise ValueError(f"{owner}.parents[{i}] must be >= parents[{i - 1}] = {arr[i - 1]} "
                             f"(breadth-first order), not {arr[i]}")
    return arr


def tree_depths(parents):
    """Depth of every node (root 0); ``parents`` must be valid."""
    p = validate_parents(parents)
    depth = np.zeros(p.size, dtype=np.int64)
    # parents[i] < i, so one forward sweep sees every parent before its children.
    for i in range(1, p.size):
        depth[i] = depth[p[i]] + 1
    return depth


def behind(parents):
    """``parents`` (BFS order) behind one node more: a new node 0 whose child is the old
    root, every other index one up. A draft that carries a node no pass ran into the
    next step's tree puts it there (``gen/runtime/rtl_host.py``)."""
    p = validate_parents(parents)
    return [ROOT] + [0 if q == ROOT else int(q) + 1 for q in p]


def fits_behind(parents, *, fifo_depth):
    """Whether one pass over :func:`behind` ``(parents)`` fits a tile ring of
    ``fifo_depth`` slots (:func:`fifo_schedule` would not raise): a draft's prefix flow
    carries a node in front of the root only then."""
    fifo_depth = check_int("TreeConfig", "fifo_depth", fifo_depth, min=1)
    return int(live_profile(validate_parents(behind(parents)))[1].max()) <= fifo_depth


def dead_times(parents):
    """Index of the node after whose processing each node's state is dead.

    The last child's index for an inner node, the node's own index for a leaf.
    """
    p = validate_parents(parents)
    dt = np.arange(p.size, dtype=np.int64)
    # Children of a node are consecutive and in order, so the maximum is the last one.
    np.maximum.at(dt, p[1:], np.arange(1, p.size, dtype=np.int64))
    return dt


def live_profile(parents, *, leaf_slots=True):
    """Ring occupancy of the FIFO schedule, without a capacity limit.

    With ``leaf_slots=False``, the refinement the RTL does not implement:
    leaves take no slot (no child ever reads their state), so only inner
    nodes enter the FIFO; ``head`` is then not returned (``None``).

    Returns
    -------
    head : numpy.ndarray
        ``head[i]``: the oldest live node while node ``i`` is processed.
    live : numpy.ndarray
        ``live[i] = i - head[i] + 1``: slots held while node ``i`` is processed
        (its own new slot included; releases after node ``i`` not yet done).
    ideal : numpy.ndarray
        Live states at the same time with an ideal free list (dead slots
        anywhere are reused at once).
    """
    dt = dead_times(parents)
    n = dt.size
    if not leaf_slots:
        steps = np.arange(n, dtype=np.int64)
        inner = np.flatnonzero(dt > steps)
        reach = np.maximum.accumulate(dt[inner])
        head_after = np.searchsorted(reach, steps, side="right")  # inner nodes gone after step s
        gone = np.concatenate(([0], head_after[:-1]))
        live = np.searchsorted(inner, steps, side="right") - gone
        ideal = np.searchsorted(inner, steps, side="right") \
            - np.searchsorted(np.sort(dt[inner]), steps, side="left")
        return None, live, ideal
    # A node leaves the FIFO after step s when it and every older node are dead by s:
    # the head after step s is the first node whose prefix-max dead time exceeds s.
    reach = np.maximum.accumulate(dt)
    steps = np.arange(n, dtype=np.int64)
    head_after = np.searchsorted(reach, steps, side="right")
    head = np.concatenate(([0], head_after[:-1]))
    live = steps - head + 1
    ideal = steps + 1 - np.searchsorted(np.sort(dt), steps, side="left")
    return head, live, ideal


@dataclass(frozen=True)
class FifoSchedule:
    """One layer pass of the FIFO tree schedule (same for every tile and pass).

    Attributes
    ----------
    parents : numpy.ndarray
        The tree.
    parent_slot : numpy.ndarray
        Slot node ``i`` reads; ``ROOT`` for node 0 (the committed state).
    write_slot : numpy.ndarray
        Slot node ``i`` writes: ``i mod fifo_depth``.
    released : tuple of numpy.ndarray
        ``released[i]``: slots released after node ``i``, oldest first. After
        the last node every remaining slot is released.
    released_nodes : tuple of numpy.ndarray
        The nodes whose slots those are.
    last : numpy.ndarray of bool
        True for the node that ends the pass (the last one).
    live, ideal : numpy.ndarray
        Slots in use while node ``i`` is processed, FIFO and ideal free list.
    peak_live, ideal_peak : int
        Their maxima.
    fifo_depth : int
    """

    parents: np.ndarray
    parent_slot: np.ndarray
    write_slot: np.ndarray
    released: tuple
    released_nodes: tuple
    last: np.ndarray
    live: np.ndarray
    ideal: np.ndarray
    peak_live: int
    ideal_peak: int
    fifo_depth: int

    @property
    def num_nodes(self):
        return int(self.parents.size)

    @property
    def fifo_cost(self):
        """Extra slots the FIFO discipline holds over an ideal free list, at peak."""
        return self.peak_live - self.ideal_peak

    def records(self):
        """Per-node records as dicts (for printing and simple comparisons)."""
        return [dict(node=i, parent_slot=int(self.parent_slot[i]), write_slot=int(self.write_slot[i]),
                     released=[int(s) for s in self.released[i]], last=bool(self.last[i]),
                     live=int(self.live[i]))
                for i in range(self.num_nodes)]

    def stats(self):
        """Summary figures: nodes, peak live (FIFO, ideal), their difference."""
        return dict(nodes=self.num_nodes, peak_live=self.peak_live, ideal_peak=self.ideal_peak,
                    fifo_cost=self.fifo_cost, fifo_depth=self.fifo_depth)


def node_table(parents, *, fifo_depth):
    """The SSM unit's node table of one pass over ``parents``: per node ``(root,
    parent_slot, write_slot)`` of its :func:`fifo_schedule` (``root`` 1: the node steps
    from the committed state; ``parent_slot`` 0 then), as the tree SSM unit's
    ``tbl_entry`` takes them."""
    s = fifo_schedule(parents, fifo_depth=fifo_depth)
    return [(int(p == ROOT), 0 if p == ROOT else int(ps), int(ws))
            for p, ps, ws in zip(s.parents, s.parent_slot, s.write_slot)]


def overflow_node(parents, *, fifo_depth):
    """First node whose allocation finds all ``fifo_depth`` slots live, or ``None``."""
    fifo_depth = check_int("TreeConfig", "fifo_depth", fifo_depth, min=1)
    _, live, _ = live_profile(parents)
    over = np.flatnonzero(live > fifo_depth)
    return int(over[0]) if over.size else None


def fifo_schedule(parents, *, fifo_depth, check=True):
    """The FIFO schedule of one layer pass over a BFS-flattened tree.

    Parameters
    ----------
    parents : sequence of int
        BFS parent array (see :func:`validate_parents`).
    fifo_depth : int
        Ring slots (≥ 1).
    check : bool
        Raise if the tree does not fit. With ``False`` the records are still
        computed (slots ``i mod fifo_depth``), and are meaningful only up to
        :func:`overflow_node`, where the RTL stops with ``error``.

    Returns
    -------
    FifoSchedule

    Raises
    ------
    ValueError
        If the tree needs more than ``fifo_depth`` live slots; the message
        names the peak and the first node that does not fit.
    """
    fifo_depth = check_int("TreeConfig", "fifo_depth", fifo_depth, min=1)
    p = validate_parents(parents)
    n = p.size
    head, live, ideal = live_profile(p)
    peak = int(live.max())
    if check and peak > fifo_depth:
        first = int(np.flatnonzero(live > fifo_depth)[0])
        raise ValueError(f"tree needs {peak} live state slots (node {first} finds all {fifo_depth} "
                         f"in use); allowed: TreeConfig.fifo_depth >= {peak}, not {fifo_depth}")
    nodes = np.arange(n, dtype=np.int64)
    write_slot = nodes % fifo_depth
    parent_slot = np.where(p == ROOT, ROOT, p % fifo_depth)
    bounds = np.concatenate((head[1:], [n]))
    released_nodes = tuple(np.arange(head[i], bounds[i], dtype=np.int64) for i in range(n))
    released = tuple(r % fifo_depth for r in released_nodes)
    last = nodes == n - 1
    return FifoSchedule(parents=p, parent_slot=parent_slot, write_slot=write_slot, released=released,
                        released_nodes=released_nodes, last=last, live=live, ideal=ideal,
                        peak_live=peak, ideal_peak=int(ideal.max()), fifo_depth=fifo_depth)


def schedule_beats(schedule, *, passes=1, upto=None):
    """The beat stream of :class:`hw.tree_verifier.TreeVerifier`'s ``schedule`` port.

    One beat per node; a node beat carries the first slot released after the
    node, and each further release after it gets a release-only beat
    (``node_valid = 0``) before the next node. The last node's beat has
    ``last = 1`` and no release: ``last`` releases every slot still live (the
    ring is flushed), so the next pass starts empty.

    Parameters
    ----------
    schedule : FifoSchedule
    passes : int
        Layer passes; the beats repeat.
    upto : int, optional
        Stop before node ``upto`` of the first pass (the node that overflows a
        smaller ring; see :func:`overflow_node`).

    Returns
    -------
    list of tuple
        ``(node_valid, node, root, parent_slot, write_slot, release, release_slot, last)``;
        fields that do not apply are 0.
    """
    passes = check_int("schedule_beats", "passes", passes, min=1)
    s = schedule
    n = s.num_nodes
    one = []
    for i in range(n):
        if upto is not None and i >= upto:
            break
        rel = [] if i == n - 1 else [int(x) for x in s.released[i]]
        root = int(s.parent_slot[i] == ROOT)
        one.append((1, i, root, 0 if root else int(s.parent_slot[i]), int(s.write_slot[i]),
                    int(bool(rel)), rel[0] if rel else 0, int(i == n - 1)))
        one.extend((0, 0, 0, 0, 0, 1, r, 0) for r in rel[1:])
    if upto is not None:
        return one
    return one * passes


@dataclass(frozen=True)
class AcceptedPath:
    """Greedy acceptance result.

    Attributes
    ----------
    nodes : tuple of int
        Node indices from the root to the deepest accepted node.
    accepted : int
        Accepted draft tokens: ``len(nodes) - 1``.
    tokens : int
        Tokens committed by the step: ``accepted + 1`` (the bonus token is the
        target's argmax at the last node of the path), equal to ``len(nodes)``.
    """

    nodes: tuple

    @property
    def accepted(self):
        return len(self.nodes) - 1

    @property
    def tokens(self):
        return len(self.nodes)


def accepted_path(parents, match):
    """Greedy (lossless) acceptance over a verified tree.

    Node ``i ≥ 1`` is accepted iff ``match[i]`` (its draft token equals the
    target's argmax at its parent) and its parent is accepted; the root is
    always accepted and ``match[0]`` is ignored. The path ends at the deepest
    accepted node, ties broken by the lowest BFS index.

    Parameters
    ----------
    parents : sequence of int
    match : sequence of bool or 0/1, one per node

    Returns
    -------
    AcceptedPath
    """
    p = validate_parents(parents)
    m = np.asarray(match)
    if m.shape != p.shape or not (np.issubdtype(m.dtype, np.integer) or m.dtype == bool) \
            or not np.isin(m, (0, 1)).all():
        raise ValueError(f"match must hold one 0/1 value per node ({p.size}), not {match!r}")
    m = m.astype(bool)
    acc = np.zeros(p.size, dtype=bool)
    depth = np.zeros(p.size, dtype=np.int64)
    acc[0] = True
    for i in range(1, p.size):
        acc[i] = m[i] and acc[p[i]]
        depth[i] = depth[p[i]] + 1
    best = int(np.flatnonzero(acc & (depth == depth[acc].max()))[0])
    path = [best]
    while path[-1] != 0:
        path.append(int(p[path[-1]]))
    return AcceptedPath(tuple(reversed(path)))


#: A node of the tree table the hardware's greedy acceptance reads, one 64-bit
#: little-endian word a node in BFS order: ``(name, low bit, bits)``. ``token`` is the
#: node's draft token, ``parent`` its parent's index (0 for node 0, the root, which has
#: none). The tree's size is the descriptor's, not the table's.
TREE_ENTRY_FIELDS = (("token", 0, 32), ("parent", 32, 16))
#: A word of the accepted path the hardware writes, one a node of the tree: words
#: ``0 … L − 1`` are the path root first (``on_path`` set, ``node`` its index, ``token``
#: the target's argmax at it: the token the step commits there), the rest are zero.
PATH_ENTRY_FIELDS = (("token", 0, 32), ("node", 32, 16), ("on_path", 48, 1))


def _pack_words(fields, columns):
    out = np.zeros(len(next(iter(columns.values()))), np.uint64)
    for name, lo, bits in fields:
        v = np.asarray(columns[name], np.uint64)
        if (v >> np.uint64(bits)).any():
            raise ValueError(f"{name} must fit {bits} bits, not {int(v.max())}")
        out |= v << np.uint64(lo)
    return out


def tree_entries(parents, tokens):
    """The tree table of ``parents`` (BFS) holding draft ``tokens``: one ``uint64`` a node
    (:data:`TREE_ENTRY_FIELDS`); the root's parent field is 0."""
    p = validate_parents(parents)
    t = np.asarray(tokens, np.int64)
    if t.shape != p.shape or (t < 0).any():
        raise ValueError(f"tokens must hold one non-negative id per node ({p.size}), "
                         f"not {tokens!r}")
    return _pack_words(TREE_ENTRY_FIELDS, {"token": t, "parent": np.maximum(p, 0)})


def greedy_acceptance(parents, tokens, best):
    """Greedy acceptance as the hardware writes it: the path words
    (:data:`PATH_ENTRY_FIELDS`, one ``uint64`` a node) of the tree ``parents`` whose nodes
    hold draft ``tokens``, given ``best``, the target's argmax at every node. Node ``i ≥ 1``
    matches iff ``tokens[i] == best[parents[i]]``; the path is :func:`accepted_path`'s."""
    p = validate_parents(parents)
    t, b = np.asarray(tokens, np.int64), np.asarray(best, np.int64)
    if t.shape != p.shape or b.shape != p.shape:
        raise ValueError(f"tokens and best must hold one id per node ({p.size})")
    match = np.zeros(p.size, bool)
    match[1:] = t[1:] == b[p[1:]]
    path = accepted_path(p, match).nodes
    node, token, on = (np.zeros(p.size, np.int64) for _ in range(3))
    node[:len(path)], token[:len(path)], on[:len(path)] = path, b[list(path)], 1
    return _pack_words(PATH_ENTRY_FIELDS, {"token": token, "node": node, "on_path": on})


@dataclass(frozen=True)
class TreeMemory:
    """On-chip state memory of the FIFO scheme against storing every node.

    Attributes
    ----------
    shape : TreeShape
    nodes : int
        Nodes including the root (each one a processed token).
    peak_live, ideal_peak : int
        Peak live slots, FIFO and ideal free list.
    inner_peak : int
        Peak live slots of the FIFO when leaves take no slot (a refinement
        the RTL does not implement; see :func:`live_profile`).
    fifo_depth, tile_size, state_elems, bytes_per_elem : int
    tiles : int
        Tiles per layer state, ``ceil(state_elems / tile_size)``.
    fifo_bytes : int
        ``peak_live × tile_size × bytes_per_elem``: the live slots of one tile.
    ring_bytes : int
        ``fifo_depth × tile_size × bytes_per_elem``: the ring as built.
    all_nodes_bytes : int
        ``nodes × state_elems × bytes_per_elem``: every node's full layer state.
    all_nodes_tile_bytes : int
        ``nodes × tile_size × bytes_per_elem``: every node, one tile.
    """

    shape: TreeShape
    nodes: int
    peak_live: int
    ideal_peak: int
    inner_peak: int
    fifo_depth: int
    tile_size: int
    state_elems: int
    bytes_per_elem: int

    @property
    def tiles(self):
        return -(-self.state_elems // self.tile_size)

    @property
    def fifo_bytes(self):
        return self.peak_live * self.tile_size * self.bytes_per_elem

    @property
    def ring_bytes(self):
        return self.fifo_depth * self.tile_size * self.bytes_per_elem

    @property
    def all_nodes_bytes(self):
        return self.nodes * self.state_elems * self.bytes_per_elem

    @property
    def all_nodes_tile_bytes(self):
        return self.nodes * self.tile_size * self.bytes_per_elem

    @property
    def fraction(self):
        """Live-slot share of storing all nodes, tile for tile: ``peak_live / nodes``."""
        return self.peak_live / self.nodes

    @property
    def fits(self):
        return self.peak_live <= self.fifo_depth


def tree_memory(shape, *, fifo_depth=16, tile_size=64, state_elems=MAMBA2_2P7B_STATE_ELEMS,
                bytes_per_elem=4):
    """State memory of the FIFO tree schedule for a tree shape.

    Parameters
    ----------
    shape : TreeShape or sequence of int
        Per-depth branching list.
    fifo_depth, tile_size : int
        The ring (``TreeConfig``; seed: 16 and 64).
    state_elems : int
        SSM state elements per layer (Mamba2-2.7B: 80 × 64 × 128).
    bytes_per_elem : int
        4 for an FP32 state.

    Returns
    -------
    TreeMemory
        Computed without the capacity check: ``fits`` says whether the tree
        needs at most ``fifo_depth`` slots.
    """
    shape = shape if isinstance(shape, TreeShape) else TreeShape(tuple(shape))
    fifo_depth = check_int("TreeConfig", "fifo_depth", fifo_depth, min=1)
    tile_size = check_int("TreeConfig", "tile_size", tile_size, min=1)
    state_elems = check_int("tree_memory", "state_elems", state_elems, min=1)
    bytes_per_elem = check_int("tree_memory", "bytes_per_elem", bytes_per_elem, min=1)
    _, live, ideal = live_profile(shape.parents)
    _, inner, _ = live_profile(shape.parents, leaf_slots=False)
    return TreeMemory(shape=shape, nodes=shape.num_nodes, peak_live=int(live.max()),
                      ideal_peak=int(ideal.max()), inner_peak=int(inner.max()), fifo_depth=fifo_depth, tile_size=tile_size,
                      state_elems=state_elems, bytes_per_elem=bytes_per_elem)


def seed_shapes(*, branching=(2, 3), depths=(4, 5), prediction=(12, 16), monotone=False):
    """The SpecMamba notes' tree shapes (branching 2–3, depth 4–5, prediction length 12–16).

    Our reading: per-depth branching lists of length in ``depths``, entries in
    1 … max(``branching``), whose widest entry is in ``branching``, and whose
    draft-token count (nodes other than the root) lies in ``prediction``; with
    ``monotone`` only lists nonincreasing with depth. Sorted by nodes, then list.
    """
    import itertools
    top = max(branching)
    out = []
    for d in depths:
        for combo in itertools.product(range(top, 0, -1), repeat=d):
            if (monotone and list(combo) != sorted(combo, reverse=True)) or max(combo) not in branching:
                continue
            shape = TreeShape(combo)
            if prediction[0] <= shape.draft_tokens <= prediction[1]:
                out.append(shape)
    return sorted(out, key=lambda s: (s.num_nodes, s.branching))
