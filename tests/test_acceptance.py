# amaranth: UnusedElaboratable=no
"""``hw.acceptance.GreedyAcceptance`` on Amaranth's simulator: the path words against
``golden.tree.greedy_acceptance`` for trees back to back, and the block's documented
timing (the first path word ``D + latency`` cycles after the last node). Its memory-fed
bench under random stalls and resets is ``tests/test_stream_engine.py``."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from specgen.golden.tree import greedy_acceptance, tree_entries
from specgen.hw.acceptance import GreedyAcceptance


def _run(dut, trees, *, ready_rate=1.0, seed=0):
    """Offer every tree's beats one a cycle; take the output with ``ready`` high at
    ``ready_rate``. ``(words per tree, cycles from each tree's last beat to its first
    output beat)``."""
    rng = random.Random(seed)
    words, gaps = [], []

    async def bench(ctx):
        for parents, tokens, best in trees:
            table = tree_entries(parents, tokens)
            for v, (entry, b) in enumerate(zip(table, best)):
                ctx.set(dut.i.valid, 1)
                ctx.set(dut.i.payload.as_value(), int(entry) | int(b) << 64)
                ctx.set(dut.last, int(v == len(parents) - 1))
                while True:
                    taken = ctx.get(dut.i.ready)
                    await ctx.tick()
                    if taken:
                        break
            ctx.set(dut.i.valid, 0)
            ctx.set(dut.last, 0)
            got, wait = [], 0
            while len(got) < len(parents):
                ready = rng.random() < ready_rate
                ctx.set(dut.o.ready, int(ready))
                valid = ctx.get(dut.o.valid)
                if not got and not valid:
                    wait += 1
                if valid and ready:
                    got.append(ctx.get(dut.o.payload.as_value()))
                await ctx.tick()
            ctx.set(dut.o.ready, 0)
            words.append(got)
            gaps.append(wait)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return words, gaps


def _tree(rng, nodes, vocab):
    parents = [-1]
    for i in range(1, nodes):
        parents.append(rng.randrange(max(parents[-1], 0), i))
    best = [rng.randrange(vocab) for _ in range(nodes)]
    tokens = [0] + [best[parents[i]] if rng.random() < 0.7 else rng.randrange(vocab)
                    for i in range(1, nodes)]
    return parents, tokens, best


@pytest.mark.parametrize("ready_rate", [1.0, 0.4])
def test_paths_of_trees_back_to_back(ready_rate):
    rng = random.Random(7)
    dut = GreedyAcceptance(max_nodes=9, vocab=13)
    trees = [_tree(rng, rng.randint(1, 9), 13) for _ in range(25)]
    words, _ = _run(dut, trees, ready_rate=ready_rate, seed=3)
    for (parents, tokens, best), got in zip(trees, words):
        assert got == [int(w) for w in greedy_acceptance(parents, tokens, best)]


def test_first_path_word_after_the_walk():
    """A chain of 6 whose draft tokens all match: depth 5, the first word valid
    ``5 + latency`` cycles after the last node is taken."""
    dut = GreedyAcceptance(max_nodes=8, vocab=10)
    parents, best = [-1, 0, 1, 2, 3, 4], [1, 2, 3, 4, 5, 6]
    tokens = [0] + [best[p] for p in parents[1:]]
    words, gaps = _run(dut, [(parents, tokens, best)])
    assert [int(w) >> 48 & 1 for w in words[0]] == [1] * 6
    # The bench counts the cycles after the one that took the last beat.
    assert gaps[0] + 1 == 5 + dut.latency


def test_parameters_are_checked():
    with pytest.raises(ValueError, match=r"GreedyAcceptance.max_nodes"):
        GreedyAcceptance(max_nodes=0, vocab=10)
    with pytest.raises(ValueError, match=r"GreedyAcceptance.vocab"):
        GreedyAcceptance(max_nodes=4, vocab=1)
    assert GreedyAcceptance(max_nodes=16, vocab=50288).module_name == \
        "GreedyAcceptance_n16_v50288"
    assert np.uint64(tree_entries([-1], [5])[0]) == 5
