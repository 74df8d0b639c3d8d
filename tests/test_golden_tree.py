"""``golden.tree``: flattening, validation, the FIFO schedule, greedy acceptance, tree memory.

The schedule and the accepted path are checked against independent brute-force
formulations written here (step-by-step liveness with a plain list as FIFO, and
an enumeration of every root-to-node path).
"""

import itertools
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specgen.golden.tree import (MAMBA2_2P7B_STATE_ELEMS, PATH_ENTRY_FIELDS, ROOT, TREE_ENTRY_FIELDS,
                         TreeShape, accepted_path, dead_times, fifo_schedule, flatten,
                         greedy_acceptance, live_profile, overflow_node, schedule_beats,
                         seed_shapes, tree_depths, tree_entries, tree_memory, validate_parents,
                         behind, fits_behind)


def children(parents):
    return {j: [i for i in range(1, len(parents)) if parents[i] == j] for j in range(len(parents))}


def brute_schedule(parents):
    """Step by step: allocate in node order, pop the head while it is dead."""
    kids = children(parents)
    n = len(parents)

    def dead_after(j, step):
        return j <= step and all(c <= step for c in kids[j])

    fifo, live, ideal, released = [], [], [], []
    for i in range(n):
        fifo.append(i)
        live.append(len(fifo))
        ideal.append(sum(1 for j in range(i + 1) if not dead_after(j, i - 1)))
        out = []
        while fifo and dead_after(fifo[0], i):
            out.append(fifo.pop(0))
        released.append(out)
    assert not fifo
    return live, ideal, released


def brute_path(parents, match):
    best = None
    for end in range(len(parents)):
        path = [end]
        while path[-1] != 0:
            path.append(parents[path[-1]])
        path.reverse()
        if all(match[x] for x in path[1:]):
            if best is None or len(path) > len(best):
                best = path
    return best


@st.composite
def trees(draw, max_nodes=64, max_branch=3, max_depth=6):
    limit = draw(st.integers(1, max_depth))
    parents, depth = [ROOT], [0]
    i = 0
    while i < len(parents):
        if depth[i] < limit:
            for _ in range(draw(st.integers(1 if i == 0 else 0, max_branch))):
                if len(parents) < max_nodes:
                    parents.append(i)
                    depth.append(depth[i] + 1)
        i += 1
    return parents


# --- flattening and validation ------------------------------------------------------------

def test_flatten_small():
    assert flatten([2, 2]).tolist() == [-1, 0, 0, 1, 1, 2, 2]
    assert flatten([3, 1]).tolist() == [-1, 0, 0, 0, 1, 2, 3]
    assert flatten([]).tolist() == [-1]
    assert TreeShape((3, 2, 2, 1)).num_nodes == 34
    assert TreeShape((3, 2, 2, 1)).level_sizes == (1, 3, 6, 12, 12)
    assert str(TreeShape([2, 1])) == "[2, 1]"


@pytest.mark.parametrize("branching", [(1,), (3,), (2, 2), (3, 2, 2, 1), (1, 3, 1, 2, 1, 3), (2,) * 5])
def test_flatten_properties(branching):
    shape = TreeShape(branching)
    p = shape.parents
    validate_parents(p)
    d = tree_depths(p)
    assert len(p) == shape.num_nodes == 1 + shape.draft_tokens
    assert d[0] == 0 and np.all(np.diff(d) >= 0)
    assert np.bincount(d).tolist() == list(shape.level_sizes)
    kids = children(p.tolist())
    for j in range(len(p)):
        want = branching[d[j]] if d[j] < len(branching) else 0
        assert len(kids[j]) == want
        if want:
            assert kids[j] == list(range(kids[j][0], kids[j][0] + want))


@pytest.mark.parametrize("parents,exc,message", [
    ([0, 0], ValueError, "tree.parents[0] must be ROOT (-1), not 0"),
    ([-1, 1], ValueError, "tree.parents[1] must be an integer in [0, 0], not 1"),
    ([-1, 0, 0, 2, 1], ValueError,
     "tree.parents[4] must be >= parents[3] = 2 (breadth-first order), not 1"),
    ([-1, 0, -3], ValueError, "tree.parents[2] must be an integer in [0, 1], not -3"),
    ([], TypeError, "tree.parents must be a non-empty 1-D sequence of integers, not []"),
    ([-1, 0.5], TypeError, "tree.parents must be a non-empty 1-D sequence of integers, not [-1, 0.5]"),
])
def test_validate_parents_errors(parents, exc, message):
    with pytest.raises(exc) as info:
        validate_parents(parents)
    assert str(info.value) == message


def test_validate_parents_max_nodes():
    with pytest.raises(ValueError, match=r"tree.parents has 3 nodes; allowed: at most max_nodes = 2"):
        validate_parents([-1, 0, 0], max_nodes=2)


@pytest.mark.parametrize("branching,exc,message", [
    ((2, 0), ValueError, "TreeShape.branching[1] must be an integer >= 1, not 0"),
    ((2.0,), TypeError, "TreeShape.branching[0] must be an integer >= 1, not 2.0"),
    (3, TypeError, "TreeShape.branching must be a sequence of integers >= 1, not 3"),
])
def test_tree_shape_errors(branching, exc, message):
    with pytest.raises(exc) as info:
        TreeShape(branching)
    assert str(info.value) == message


# --- the FIFO schedule --------------------------------------------------------------------

def _check_against_brute(parents, fifo_depth=64):
    live, ideal, released = brute_schedule(parents)
    s = fifo_schedule(parents, fifo_depth=max(fifo_depth, max(live)))
    assert s.live.tolist() == live
    assert s.ideal.tolist() == ideal
    assert [r.tolist() for r in s.released_nodes] == released
    assert [r.tolist() for r in s.released] == [[x % s.fifo_depth for x in r] for r in released]
    assert s.peak_live == max(live) and s.ideal_peak == max(ideal)
    assert s.write_slot.tolist() == [i % s.fifo_depth for i in range(len(parents))]
    assert s.parent_slot.tolist() == [ROOT] + [p % s.fifo_depth for p in parents[1:]]
    assert s.last.tolist() == [i == len(parents) - 1 for i in range(len(parents))]
    # Slot safety: a written slot is never one still held by a live node.
    held = {}
    for i in range(len(parents)):
        assert s.write_slot[i] not in held.values(), f"node {i} overwrites a live slot"
        held[i] = s.write_slot[i]
        for j in s.released_nodes[i]:
            del held[int(j)]
        if i >= 1:
            assert parents[i] in held or parents[i] in s.released_nodes[i].tolist()
    return s


def test_chain_needs_two_slots():
    assert fifo_schedule([-1], fifo_depth=1).peak_live == 1
    s = _check_against_brute([-1, 0, 1, 2, 3, 4])
    assert s.peak_live == 2 and s.ideal_peak == 2
    assert [r.tolist() for r in s.released_nodes] == [[], [0], [1], [2], [3], [4, 5]]


def test_star_holds_every_leaf():
    s = _check_against_brute([-1] + [0] * 7)
    # Every leaf dies at once but waits behind the root, which lives until the last leaf.
    assert s.peak_live == 8 and s.ideal_peak == 2 and s.fifo_cost == 6


def test_binary_tree_hand_checked():
    s = _check_against_brute(flatten([2, 2]).tolist())
    assert s.live.tolist() == [1, 2, 3, 3, 4, 4, 5]
    assert [r.tolist() for r in s.released_nodes] == [[], [], [0], [], [1], [], [2, 3, 4, 5, 6]]


def test_schedule_overflow_error():
    with pytest.raises(ValueError) as info:
        fifo_schedule(flatten([2, 2, 2, 2]), fifo_depth=16)
    assert str(info.value) == ("tree needs 17 live state slots (node 30 finds all 16 in use); "
                               "allowed: TreeConfig.fifo_depth >= 17, not 16")
    assert overflow_node(flatten([2, 2, 2, 2]), fifo_depth=16) == 30
    assert overflow_node(flatten([2, 2, 2, 2]), fifo_depth=17) is None
    with pytest.raises(ValueError, match=r"TreeConfig.fifo_depth must be an integer >= 1, not 0"):
        fifo_schedule([-1], fifo_depth=0)


@settings(max_examples=120, deadline=None)
@given(trees())
def test_schedule_matches_brute_force(parents):
    _check_against_brute(parents)


@settings(max_examples=100, deadline=None)
@given(trees(), st.integers(1, 20))
def test_schedule_fits_exactly_when_peak_fits(parents, depth):
    peak = max(brute_schedule(parents)[0])
    if peak <= depth:
        assert fifo_schedule(parents, fifo_depth=depth).peak_live == peak
        assert overflow_node(parents, fifo_depth=depth) is None
    else:
        with pytest.raises(ValueError, match="live state slots"):
            fifo_schedule(parents, fifo_depth=depth)
        assert max(brute_schedule(parents)[0][:overflow_node(parents, fifo_depth=depth)]) == depth


def brute_inner_live(parents):
    """Leaves take no slot: only nodes with children enter the FIFO."""
    kids = children(parents)
    fifo, live = [], []
    for i in range(len(parents)):
        if kids[i]:
            fifo.append(i)
        live.append(len(fifo))
        while fifo and all(c <= i for c in kids[fifo[0]]):
            fifo.pop(0)
    return live


@settings(max_examples=100, deadline=None)
@given(trees())
def test_leafless_refinement_matches_brute_force(parents):
    _, live, _ = live_profile(parents, leaf_slots=False)
    assert live.tolist() == brute_inner_live(parents)
    assert live.max() <= max(brute_schedule(parents)[0])


def test_dead_times():
    assert dead_times([-1, 0, 0, 1, 2, 2]).tolist() == [2, 3, 5, 3, 4, 5]


@settings(max_examples=100, deadline=None)
@given(trees(), st.integers(1, 3))
def test_schedule_beats(parents, passes):
    s = fifo_schedule(parents, fifo_depth=64)
    beats = schedule_beats(s, passes=passes)
    one = len(beats) // passes
    assert beats == beats[:one] * passes
    nodes = [b for b in beats[:one] if b[0]]
    assert [b[1] for b in nodes] == list(range(len(parents)))
    assert [b[7] for b in beats[:one]] == [0] * (one - 1) + [1]
    # Every release but the final flush appears once, in order.
    rel = [b[6] for b in beats[:one] if b[5]]
    assert rel == [int(x) for r in s.released[:-1] for x in r]


# --- acceptance ---------------------------------------------------------------------------

def test_accepted_path_small():
    p = flatten([2, 2]).tolist()
    assert accepted_path(p, [1, 0, 1, 1, 1, 0, 1]).nodes == (0, 2, 6)
    assert accepted_path(p, [0, 0, 0, 1, 1, 1, 1]).nodes == (0,)
    path = accepted_path(p, [1] * 7)
    assert path.nodes == (0, 1, 3) and path.accepted == 2 and path.tokens == 3


def test_accepted_path_errors():
    with pytest.raises(ValueError, match=r"match must hold one 0/1 value per node \(3\)"):
        accepted_path([-1, 0, 0], [1, 1])
    with pytest.raises(ValueError, match=r"match must hold one 0/1 value per node"):
        accepted_path([-1, 0, 0], [1, 2, 0])


@settings(max_examples=120, deadline=None)
@given(trees(), st.randoms(use_true_random=False), st.sampled_from([0.3, 0.7, 0.95]))
def test_accepted_path_matches_enumeration(parents, rnd, density):
    match = [int(rnd.random() < density) for _ in parents]
    assert list(accepted_path(parents, match).nodes) == brute_path(parents, match)


def _field(word, fields, name):
    (lo, bits), = [(lo, bits) for n, lo, bits in fields if n == name]
    return (int(word) >> lo) & ((1 << bits) - 1)


@settings(max_examples=120, deadline=None)
@given(trees(max_nodes=20), st.randoms(use_true_random=False))
def test_greedy_acceptance_words_against_enumeration(parents, rnd):
    """The hardware's path words: the enumeration's path (every root-to-node chain whose
    draft tokens are the argmax at their parents; the longest, the first of a length),
    its tokens the argmax along it, then zeros; and the tree table's fields."""
    vocab = 7
    best = [rnd.randrange(vocab) for _ in parents]
    tokens = [0] + [best[parents[i]] if rnd.random() < 0.7 else rnd.randrange(vocab)
                    for i in range(1, len(parents))]
    match = [1] + [int(tokens[i] == best[parents[i]]) for i in range(1, len(parents))]
    want = brute_path(parents, match)
    words = greedy_acceptance(parents, tokens, best)
    assert words.dtype == np.uint64 and len(words) == len(parents)
    got = [(_field(w, PATH_ENTRY_FIELDS, "on_path"), _field(w, PATH_ENTRY_FIELDS, "node"),
            _field(w, PATH_ENTRY_FIELDS, "token")) for w in words]
    assert got == [(1, v, best[v]) for v in want] + [(0, 0, 0)] * (len(parents) - len(want))
    table = tree_entries(parents, tokens)
    assert [_field(w, TREE_ENTRY_FIELDS, "token") for w in table] == tokens
    assert [_field(w, TREE_ENTRY_FIELDS, "parent") for w in table] == [0] + list(parents[1:])
    assert max(lo + bits for _, lo, bits in TREE_ENTRY_FIELDS + PATH_ENTRY_FIELDS) <= 64


def test_greedy_acceptance_errors():
    with pytest.raises(ValueError, match=r"tokens and best must hold one id per node \(3\)"):
        greedy_acceptance([-1, 0, 0], [1, 2], [0, 0, 0])
    with pytest.raises(ValueError, match=r"tokens must hold one non-negative id per node"):
        tree_entries([-1, 0], [1, -2])
    with pytest.raises(ValueError, match=r"token must fit 32 bits"):
        tree_entries([-1, 0], [1, 1 << 32])


def test_accepted_path_exhaustive_small_tree():
    p = flatten([2, 1, 2]).tolist()
    for bits in itertools.product((0, 1), repeat=len(p) - 1):
        match = [1, *bits]
        assert list(accepted_path(p, match).nodes) == brute_path(p, match)


# --- tree memory --------------------------------------------------------------------------

def test_tree_memory_figures():
    m = tree_memory([3, 1, 1, 1], fifo_depth=16, tile_size=64)
    assert m.nodes == 13 and m.peak_live == 4 and m.ideal_peak == 4 and m.fits
    assert m.fifo_bytes == 4 * 64 * 4
    assert m.ring_bytes == 16 * 64 * 4
    assert m.all_nodes_bytes == 13 * MAMBA2_2P7B_STATE_ELEMS * 4
    assert m.tiles == MAMBA2_2P7B_STATE_ELEMS // 64 == 10240
    assert m.fraction == pytest.approx(4 / 13)
    assert not tree_memory([2, 2, 2, 2]).fits
    with pytest.raises(ValueError, match=r"TreeConfig.tile_size must be an integer >= 1, not 0"):
        tree_memory([2], tile_size=0)


def test_seed_shapes():
    shapes = seed_shapes()
    assert shapes and all(4 <= s.depth <= 5 and 12 <= s.draft_tokens <= 16
                          and max(s.branching) in (2, 3) for s in shapes)
    assert TreeShape((2, 2, 1, 1)) in shapes and TreeShape((3, 1, 1, 1, 1)) in shapes
    assert [s.branching for s in seed_shapes(monotone=True)] == [(3, 1, 1, 1), (2, 2, 1, 1),
                                                                 (3, 1, 1, 1, 1)]


def test_random_against_brute_seeded(seed):
    rng = random.Random(seed)
    for _ in range(200):
        parents = [ROOT]
        for i in range(1, rng.randint(1, 64)):
            parents.append(rng.randint(parents[-1] if i > 1 else 0, i - 1))
        _check_against_brute(parents)


def test_behind_puts_one_node_in_front_of_the_root():
    tree = TreeShape((2, 2, 1)).parents
    out = behind(tree)
    assert out[0] == ROOT and out[1] == 0 and len(out) == len(tree) + 1
    # Every node one level deeper and still after its parent (BFS order).
    assert list(tree_depths(out)[1:]) == [d + 1 for d in tree_depths(tree)]
    assert list(validate_parents(out)) == out
    with pytest.raises(ValueError):
        behind([0, 0])


@pytest.mark.parametrize("branching", [(2, 2, 1, 1), (4, 4), (1,) * 8, (3, 3, 2)])
@pytest.mark.parametrize("fifo_depth", [2, 4, 16])
def test_fits_behind_is_whether_the_ring_schedules_the_tree_behind_a_node(branching, fifo_depth):
    tree = TreeShape(branching).parents
    try:
        fifo_schedule(behind(tree), fifo_depth=fifo_depth)
        fits = True
    except ValueError:
        fits = False
    assert fits_behind(tree, fifo_depth=fifo_depth) is fits
