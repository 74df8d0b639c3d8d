"""``golden.speculative``: token trees, FIFO tree verification, lossless acceptance.

Oracles, all written here:

* tree verification: a plain sequential run of the model along each node's
  root-to-node path (``np.array_equal``, bit for bit);
* greedy acceptance: enumeration of every root-to-node path;
* rejection sampling: exact enumeration of the output distribution over every
  ordered candidate tuple, which must equal the target distribution;
* end to end: the target-only greedy sequence (exact), and chi-square tests of
  the sampled token distributions against the target's exact distribution, with
  a Wilson–Hilferty critical value at level ``ALPHA`` and fixed seeds; each
  test also shows that the same statistic rejects the draft's distribution;
* backtracking: under every policy, both models' restored states against a
  plain sequential run over the committed tokens (bit for bit);
* the chain formula ``(1 − α^(L+1))/(1 − α)`` against a toy context-free model.
"""

import dataclasses
import itertools
import math
from statistics import NormalDist

import numpy as np
import pytest

from specgen.golden.backtrack import (POLICIES, SYSTEM_POLICIES, LMRecurrence, Recompute, SpeculativeBacktracking,
                              StoreIntermediates)
from specgen.golden.lm import MambaLM, lm_preset, speq_pair
from specgen.golden.speculative import (TokenTree, candidate_acceptance, draft_tree, evaluate_tree,
                                expected_tokens_chain, greedy_accept, path_logits, sample_accept,
                                sample_index, softmax, speculative_generate, verify_candidates)
from specgen.golden.tree import ROOT, TreeShape, fifo_schedule, flatten

ALPHA = 1e-3


# -- helpers and toy models ----------------------------------------------------------------

def ancestors(parents, i):
    path = [i]
    while parents[path[-1]] != ROOT:
        path.append(int(parents[path[-1]]))
    return path[::-1]


def sequential_along_paths(lm, state, tokens, parents):
    """Every node by a plain sequential run from the committed state along its own path."""
    out, states = [], []
    for i in range(len(parents)):
        s = state
        for j in ancestors(parents, i):
            logits, s = lm.step(s, int(tokens[j]))
        out.append(logits)
        states.append(s)
    return np.array(out), states


def random_tree(rng, max_nodes=20, max_kids=3):
    parents, frontier = [ROOT], [0]
    while frontier and len(parents) < max_nodes:
        nxt = []
        for j in frontier:
            for _ in range(rng.integers(0, max_kids + 1)):
                if len(parents) < max_nodes:
                    parents.append(j)
                    nxt.append(len(parents) - 1)
        frontier = nxt
    return np.array(parents)


def target_greedy(lm, prompt, n):
    s = lm.initial_state()
    for t in prompt[:-1]:
        _, s = lm.step(s, t)
    tok, out = prompt[-1], []
    for _ in range(n):
        logits, s = lm.step(s, tok)
        tok = int(np.argmax(logits))
        out.append(tok)
    return tuple(out)


def same_bits(a, b):
    """Two LMStates (or tuples of arrays) equal to the bit: dtypes, shapes and bytes (−0 ≠ +0)."""
    a, b = (x.conv + x.ssm if hasattr(x, "conv") else x for x in (a, b))
    return all(x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x.view(np.uint8), y.view(np.uint8))
               for x, y in zip(a, b, strict=True))


def chi2_critical(k, alpha=ALPHA):
    """Wilson–Hilferty approximation of the chi-square (1 − alpha) quantile, k degrees of freedom."""
    z = NormalDist().inv_cdf(1 - alpha)
    return k * (1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k))) ** 3


def chi2(counts, probs):
    """Pearson statistic and degrees of freedom, pooling cells expected below 5."""
    counts, probs = np.asarray(counts, float), np.asarray(probs, float)
    expected = counts.sum() * probs / probs.sum()
    small = expected < 5
    obs, exp = list(counts[~small]), list(expected[~small])
    if small.any():
        obs.append(counts[small].sum())
        exp.append(expected[small].sum())
    obs, exp = np.array(obs), np.array(exp)
    return float(((obs - exp) ** 2 / exp).sum()), len(obs) - 1


def assert_distribution(counts, probs, *, unlike):
    stat, k = chi2(counts, probs)
    assert stat < chi2_critical(k), f"chi2 = {stat:.1f} > {chi2_critical(k):.1f} ({k} dof)"
    # Power: the same samples against the draft's distribution are rejected.
    stat_q, k_q = chi2(counts, unlike)
    assert stat_q > chi2_critical(k_q), f"the test cannot tell the draft apart (chi2 = {stat_q:.1f})"


class MemoLM:
    """A model's ``step`` memoized by token path (the state is the path): fast repeated sampling."""

    def __init__(self, lm):
        self.lm, self.vocab = lm, lm.vocab
        self.cache = {(): (None, lm.initial_state())}

    def initial_state(self):
        return ()

    def step(self, state, token):
        key = state + (int(token),)
        if key not in self.cache:
            self.cache[key] = self.lm.step(self.cache[state][1], int(token))
        return self.cache[key][0], key


class UnigramLM:
    """Context-free toy model: the same logits after every token."""

    def __init__(self, logits):
        self.logits = np.asarray(logits, float)
        self.vocab = self.logits.size

    def initial_state(self):
        return None

    def step(self, state, token):
        return self.logits.copy(), None


def peaked(seed, **kw):
    return MambaLM.from_seed(lm_preset("tiny", tie_embeddings=False, **kw), seed=seed, head_gain=6.0)


@pytest.fixture(scope="module")
def lm():
    return peaked(11)


# -- tree verification -------------------------------------------------------------------

TREES = {
    "3221": flatten((3, 2, 2, 1)),
    "222": flatten((2, 2, 2)),
    "chain": flatten((1, 1, 1, 1)),
    "star": flatten((6,)),
    "irregular": random_tree(np.random.default_rng(3)),
    "root": np.array([ROOT]),
}


@pytest.mark.parametrize("name", TREES)
def test_fifo_tree_equals_sequential_runs_bit_for_bit(lm, name):
    parents = TREES[name]
    rng = np.random.default_rng(len(parents))
    tokens = rng.integers(0, lm.vocab, parents.size)
    _, state = lm.prefill([3, 1, 4, 1, 5, 9])
    want, want_states = sequential_along_paths(lm, state, tokens, parents)
    E = lm.config.state_elems
    for tile in (1, 7, 64, E, E + 5):
        ev = evaluate_tree(lm, state, tokens, parents, tile_size=tile, return_states=True)
        assert np.array_equal(ev.logits, want), tile
        assert all(a.equal(b) for a, b in zip(ev.states, want_states)), tile
        assert ev.tiles == -(-E // tile)


def test_fifo_tree_gives_a_policy_what_the_recurrence_gives(lm):
    """evaluate_tree(return_steps=True): every node's state, logits, light intermediates and layer
    inputs equal golden.backtrack.LMRecurrence.step from the parent's state, bit for bit."""
    parents = TREES["irregular"]
    tokens = np.random.default_rng(8).integers(0, lm.vocab, parents.size)
    _, state = lm.prefill([3, 1, 4])
    rec = LMRecurrence(lm)
    ev = evaluate_tree(lm, state, tokens, parents, tile_size=7, return_steps=True)
    _, states = path_logits(lm, state, tokens, parents)
    assert ev.states is None and len(ev.steps) == parents.size
    for i in range(parents.size):
        want = rec.step(rec.pack(state if parents[i] == ROOT else states[parents[i]]), int(tokens[i]))
        got = rec.join(ev.logits[i], ev.steps[i])
        assert np.array_equal(got.output, want.output), i
        assert same_bits(got.state, want.state) and same_bits(got.light, want.light), i
        assert same_bits(got.input, want.input), i


def test_fifo_memory_figures(lm):
    parents = TREES["3221"]
    tokens = np.zeros(parents.size, dtype=int)
    sched = fifo_schedule(parents, fifo_depth=64)
    ev = evaluate_tree(lm, lm.initial_state(), tokens, parents, tile_size=16)
    c = lm.config
    assert ev.peak_live == sched.peak_live < parents.size
    assert ev.ssm_bytes == ev.peak_live * 16 * 4
    assert ev.conv_bytes == ev.peak_live * (c.d_conv - 1) * c.conv_dim * 4
    assert ev.onchip_bytes == ev.ssm_bytes + ev.conv_bytes
    assert ev.all_nodes_bytes == parents.size * (c.state_elems + c.conv_elems) * 4
    with pytest.raises(ValueError, match=rf"tree needs {sched.peak_live} live state slots"):
        evaluate_tree(lm, lm.initial_state(), tokens, parents, fifo_depth=sched.peak_live - 1)


def test_ring_catches_a_parent_released_too_early(lm):
    """A schedule that frees the root after its first child breaks its second child."""
    parents = TREES["222"]
    sched = fifo_schedule(parents, fifo_depth=16)
    released = list(sched.released)
    released[1] = np.concatenate(([0], released[1]))
    released[2] = np.array([s for s in released[2] if s != 0], dtype=np.int64)
    broken = dataclasses.replace(sched, released=tuple(released))
    with pytest.raises(RuntimeError, match=r"node 2 reads its parent 0 from ring slot 0, which holds None"):
        evaluate_tree(lm, lm.initial_state(), np.zeros(parents.size, dtype=int), parents, schedule=broken)


def test_naive_sequence_through_one_state_is_wrong(lm):
    """Feeding the BFS-flattened tree through one state as if it were a sequence mixes branches."""
    _, state = lm.prefill([2, 7, 1])
    for name in ("3221", "irregular"):
        parents = TREES[name]
        tokens = np.random.default_rng(0).integers(0, lm.vocab, parents.size)
        exact = evaluate_tree(lm, state, tokens, parents).logits
        naive, _ = lm.prefill(tokens, state=state)
        # Only nodes whose path is a prefix of the BFS order (the root, its first
        # child, that child's first child …) come out right.
        on_prefix = [ancestors(parents, i) == list(range(i + 1)) for i in range(parents.size)]
        for i in range(parents.size):
            assert np.array_equal(naive[i], exact[i]) == on_prefix[i], (name, i)
        wrong = np.mean(naive.argmax(1)[~np.array(on_prefix)] != exact.argmax(1)[~np.array(on_prefix)])
        assert wrong > 0.2, wrong
    chain = TREES["chain"]
    tokens = np.arange(chain.size)
    assert np.array_equal(lm.prefill(tokens, state=state)[0], evaluate_tree(lm, state, tokens, chain).logits)


def test_path_logits_is_the_sequential_reference(lm):
    parents = TREES["irregular"]
    tokens = np.random.default_rng(5).integers(0, lm.vocab, parents.size)
    got, states = path_logits(lm, lm.initial_state(), tokens, parents)
    want, want_states = sequential_along_paths(lm, lm.initial_state(), tokens, parents)
    assert np.array_equal(got, want) and all(a.equal(b) for a, b in zip(states, want_states))


def test_evaluate_tree_errors(lm):
    s = lm.initial_state()
    with pytest.raises(ValueError, match=r"evaluate_tree.tokens\[2\] must be an integer in \[0, 15\], not 16"):
        evaluate_tree(lm, s, [1, 2, 16], [ROOT, 0, 0])
    with pytest.raises(ValueError, match=r"evaluate_tree.tokens must hold one integer per node \(3\)"):
        evaluate_tree(lm, s, [1, 2], [ROOT, 0, 0])
    with pytest.raises(ValueError, match=r"evaluate_tree.parents\[2\] must be an integer in \[0, 1\], not 5"):
        evaluate_tree(lm, s, [1, 2, 3], [ROOT, 0, 5])
    with pytest.raises(ValueError, match="evaluate_tree.tile_size must be an integer >= 1, not 0"):
        evaluate_tree(lm, s, [1], [ROOT], tile_size=0)
    with pytest.raises(TypeError, match="evaluate_tree.target must be a golden.lm.MambaLM"):
        evaluate_tree(UnigramLM(np.zeros(16)), s, [1], [ROOT])


# -- drafting ----------------------------------------------------------------------------

def test_topk_draft_tree_and_early_stopping(lm):
    draft = peaked(12)
    _, state = draft.prefill([5, 6])
    for gamma in (0.0, 0.3, 0.6, 1.0):
        dt = draft_tree(draft, state, 7, branching=(3, 2, 2, 1), gamma=gamma)
        t = dt.tree
        assert t.tokens[0] == 7 and t.num_nodes <= TreeShape((3, 2, 2, 1)).num_nodes
        # Independently: each node's q is the draft's softmax along its path; children
        # are the top-b tokens in order; a node is expanded iff it is the root or
        # (above the last level and) its own draft probability is >= gamma.
        logits, _ = sequential_along_paths(draft, state, t.tokens, t.parents)
        depths = t.depths
        for j in range(t.num_nodes):
            want_expanded = depths[j] < 4 and (j == 0 or t.token_prob[j] >= gamma)
            assert t.expanded[j] == want_expanded, (gamma, j)
            if j:
                assert t.token_prob[j] == pytest.approx(softmax(logits[t.parents[j]])[t.tokens[j]], rel=1e-12)
            if want_expanded:
                q = softmax(logits[j])
                np.testing.assert_allclose(t.q[j], q, rtol=1e-12)
                order = sorted(range(lm.vocab), key=lambda v: (-q[v], v))
                assert [int(t.tokens[k]) for k in t.children(j)] == order[:(3, 2, 2, 1)[depths[j]]]
                assert dt.states[j].equal(draft.prefill([t.tokens[a] for a in ancestors(t.parents, j)],
                                                        state=state)[1])
            else:
                assert dt.states[j] is None and not t.children(j)
        if gamma == 0.0:
            assert t.num_nodes == 34
        if gamma == 1.0:
            assert t.num_nodes == 4


def test_dynamic_gamma_hook(lm):
    calls = []

    def gamma(*, tokens, depth, prob):
        calls.append((tokens, depth, prob))
        return 0.0 if tokens[-1] % 2 == 0 else 1.0     # expand only after even tokens

    _, state = lm.prefill([1, 2])
    t = draft_tree(lm, state, 3, branching=(2, 2, 2), gamma=gamma, context=(1, 2)).tree
    for j in range(1, t.num_nodes):
        if t.depths[j] < 3:
            assert t.expanded[j] == (t.tokens[j] % 2 == 0)
    for tokens, depth, prob in calls:
        j = next(j for j in range(1, t.num_nodes)
                 if tuple(t.tokens[a] for a in ancestors(t.parents, j)) == tokens[2:])
        assert tokens[:3] == (1, 2, 3) and depth == t.depths[j] and prob == t.token_prob[j]
    assert len(calls) == sum(1 for j in range(1, t.num_nodes) if t.depths[j] < 3)
    with pytest.raises(ValueError, match=r"draft_tree.gamma\(...\) result must be a finite number in \[0.0, 1.0\], not 2.0"):
        draft_tree(lm, state, 3, branching=(2, 2), gamma=lambda **kw: 2.0)


def test_sampled_draft_tree_without_replacement(lm):
    rng = np.random.default_rng(0)
    t = draft_tree(lm, lm.initial_state(), 0, branching=(4, 3), candidates="sample", gamma=0.0, rng=rng).tree
    assert t.num_nodes == 1 + 4 + 12 and t.candidates == "sample"
    for j in range(t.num_nodes):
        kids = [int(t.tokens[k]) for k in t.children(j)]
        assert len(set(kids)) == len(kids)


def test_draft_tree_errors(lm):
    s = lm.initial_state()
    with pytest.raises(ValueError, match="draft_tree.candidates must be one of 'topk', 'sample', not 'beam'"):
        draft_tree(lm, s, 0, branching=(2,), candidates="beam")
    with pytest.raises(TypeError, match="draft_tree.rng must be a numpy.random.Generator with candidates='sample'"):
        draft_tree(lm, s, 0, branching=(2,), candidates="sample")
    with pytest.raises(ValueError, match=r"draft_tree.gamma must be a finite number in \[0.0, 1.0\], not 1.5"):
        draft_tree(lm, s, 0, branching=(2,), gamma=1.5)
    with pytest.raises(ValueError, match=r"TreeShape.branching\[1\] must be an integer >= 1, not 0"):
        draft_tree(lm, s, 0, branching=(2, 0))
    with pytest.raises(ValueError, match=r"draft_tree.root must be an integer in \[0, 15\], not 99"):
        draft_tree(lm, s, 99, branching=(2,))


# -- greedy acceptance -------------------------------------------------------------------

def brute_greedy(parents, tokens, logits):
    best = logits.argmax(1)
    good = []
    for i in range(len(parents)):
        path = ancestors(parents, i)
        if all(tokens[path[k + 1]] == best[path[k]] for k in range(len(path) - 1)):
            good.append(path)
    path = max(good, key=lambda p: (len(p), -p[-1]))
    return tuple(path), int(best[path[-1]])


def test_greedy_accept_matches_enumeration():
    rng = np.random.default_rng(1)
    for _ in range(300):
        parents = random_tree(rng, max_nodes=15)
        V = int(rng.integers(2, 5))
        logits = rng.standard_normal((parents.size, V))
        tokens = rng.integers(0, V, parents.size)
        assert greedy_accept(parents, tokens, logits) == brute_greedy(parents, tokens, logits)


# -- rejection sampling: exact enumeration --------------------------------------------------

def without_replacement(q, k):
    """Every ordered k-tuple of distinct tokens with its probability under sequential draws from q."""
    for tup in itertools.permutations(range(len(q)), k):
        prob, rest = 1.0, q.copy()
        for x in tup:
            if rest.sum() <= 0 or rest[x] == 0:
                prob = 0.0
                break
            prob *= rest[x] / rest.sum()
            rest[x] = 0.0
        if prob > 0:
            yield tup, prob


def output_distribution(acceptance, candidates):
    """The exact output distribution of one node, given its candidates and the acceptance rule."""
    V = acceptance.residuals[0].size
    out, reach = np.zeros(V), 1.0
    for i, x in enumerate(candidates):
        out[x] += reach * acceptance.accept[i]
        reach *= 1 - acceptance.accept[i]
    return out + reach * acceptance.residuals[-1]


def random_pair(rng, V, sharp):
    p = softmax(rng.standard_normal(V) * sharp)
    q = softmax(rng.standard_normal(V) * sharp)
    return p, q


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_rejection_sampling_is_lossless_by_enumeration(k):
    rng = np.random.default_rng(k)
    V = 5
    for trial in range(20):
        p, q = random_pair(rng, V, sharp=[0.5, 2.0, 5.0][trial % 3])
        if trial % 7 == 0:
            q[rng.integers(V)] = 0.0            # a token the draft never proposes
            q /= q.sum()
        if trial % 5 == 0:
            q = p.copy()                       # identical models: everything accepted
        total = np.zeros(V)
        for tup, prob in without_replacement(q, min(k, int(np.count_nonzero(q)))):
            total += prob * output_distribution(candidate_acceptance(p, tup, q=q), tup)
        np.testing.assert_allclose(total, p, atol=1e-13)
        # Deterministic (top-k) candidates: lossless for any fixed list.
        for tup in [tuple(np.argsort(-q)[:k]), tuple(rng.permutation(V)[:k])]:
            np.testing.assert_allclose(output_distribution(candidate_acceptance(p, tup), tup), p, atol=1e-13)


def test_enumeration_catches_a_wrong_rule():
    """The oracle can fail: resampling from p itself after a rejection is biased,
    and so is forgetting to renormalize q for the second candidate."""
    rng = np.random.default_rng(0)
    p, q = random_pair(rng, 4, sharp=3.0)

    def biased(p, tup, q, renorm_q=True, residual=True):
        a = candidate_acceptance(p, tup, q=q)
        if not residual:
            a = dataclasses.replace(a, residuals=(p,) * len(a.residuals))
        if not renorm_q:
            # Accept the second candidate with min(1, p1/q) instead of p1/q1.
            accept = (a.accept[0], min(1.0, a.residuals[1][tup[1]] / q[tup[1]]))
            a = dataclasses.replace(a, accept=accept)
        return output_distribution(a, tup)

    for kwargs in (dict(residual=False), dict(renorm_q=False)):
        total = sum(prob * biased(p, tup, q, **kwargs) for tup, prob in without_replacement(q, 2))
        # The correct rule is exact to ~1e-16; these are off by far more.
        assert np.abs(total - p).sum() > 1e-6, kwargs


def test_verify_candidates_draws_the_rule():
    rng = np.random.default_rng(7)
    p = np.array([0.5, 0.3, 0.15, 0.05])
    q = np.array([0.1, 0.2, 0.3, 0.4])
    n = 5_000
    counts = np.zeros(4)
    for _ in range(n):
        tup = []
        rest = q.copy()
        for _ in range(2):
            x = sample_index(rest, rng.random())
            tup.append(x)
            rest[x] = 0
        counts[verify_candidates(p, tup, q=q, rng=rng)[1]] += 1
    assert_distribution(counts, p, unlike=q)


def test_candidate_acceptance_errors():
    p = np.array([0.5, 0.5, 0.0])
    with pytest.raises(ValueError, match="candidate_acceptance.candidates must be distinct tokens, not \\[1, 1\\]"):
        candidate_acceptance(p, [1, 1])
    with pytest.raises(ValueError, match=r"candidate_acceptance.candidates\[0\] must be an integer in \[0, 2\], not 3"):
        candidate_acceptance(p, [3])
    with pytest.raises(ValueError, match="candidate_acceptance: candidate 2 has draft probability 0 left"):
        candidate_acceptance(p, [2], q=np.array([0.5, 0.5, 0.0]))
    with pytest.raises(ValueError, match="candidate_acceptance.q must be a 1-D array of 3 finite non-negative"):
        candidate_acceptance(p, [0], q=np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="candidate_acceptance.p must be a 1-D array of finite non-negative"):
        candidate_acceptance([np.nan, 1.0], [0])


# -- end to end -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cases():
    """(target, draft) pairs: SPEQ self-speculation, a layer-truncated self-draft, a smaller model."""
    target = peaked(21)
    pair = speq_pair(target)
    deep = peaked(22, n_layer=3)
    small = MambaLM.from_seed(lm_preset("tiny", tie_embeddings=False, d_model=8, n_layer=1, d_state=4),
                              seed=3, head_gain=6.0)
    return {"speq": (pair.target, pair.draft), "truncated": (deep, deep.truncated(1)),
            "smaller": (target, small)}


@pytest.mark.parametrize("case", ["speq", "truncated", "smaller"])
@pytest.mark.parametrize("tree,gamma", [((1, 1, 1, 1), 0.0), ((2, 2, 1), 0.6), ((3, 2, 2, 1), 0.0),
                                        ((2, 2, 2, 1), lambda **kw: 0.3 if kw["depth"] > 1 else 0.0)])
def test_greedy_speculation_equals_target_greedy(cases, case, tree, gamma):
    target, draft = cases[case]
    for seed, prompt in enumerate(([1, 2, 3], [7], [0, 15, 4, 4])):
        r = speculative_generate(target, draft, prompt, 10, tree=tree, gamma=gamma,
                                 tile_size=(16, 50, 256)[seed])
        assert r.tokens == target_greedy(target, prompt, 10)
        assert sum(r.tokens_per_step) >= 10 and len(r.tokens_per_step) == r.steps
        assert all(t == a + 1 for t, a in zip(r.tokens_per_step, r.accepted_per_step))
        assert all(1 <= t <= len(tree) + 1 for t in r.tokens_per_step)
        assert r.mean_tokens_per_step == pytest.approx(np.mean(r.tokens_per_step))
        assert all(peak <= nodes for peak, nodes in zip(r.peak_live_per_step, r.nodes_per_step))


def test_greedy_with_sampled_candidates_and_path_verifier(cases):
    target, draft = cases["speq"]
    r = speculative_generate(target, draft, [3, 3], 12, tree=(3, 2), candidates="sample",
                             rng=np.random.default_rng(0), verify="paths")
    assert r.tokens == target_greedy(target, [3, 3], 12) and r.peak_live_per_step == ()


def test_perfect_draft_accepts_everything(cases):
    target, _ = cases["speq"]
    r = speculative_generate(target, target, [5], 20, tree=(2, 1, 1, 1), gamma=0.0)
    assert r.tokens == target_greedy(target, [5], 20)
    assert set(r.tokens_per_step) == {5}


#: Every backtracking choice: the draft/target pairs, each single policy for both models, and one
#: built here (the draft re-runs its state's dependencies, the target replays from off chip).
BACKTRACK = [*SYSTEM_POLICIES, *POLICIES,
             SpeculativeBacktracking(draft=Recompute(scope="state"), target=StoreIntermediates(where="off_chip"))]


@pytest.mark.parametrize("case,tree,gamma,verify", [
    ("speq", (2, 2, 1), 0.0, "fifo"), ("speq", (2, 2, 1), 0.0, "paths"),
    ("truncated", (2, 2, 1), 0.6, "fifo"), ("smaller", (), 0.0, "fifo")])
def test_every_backtracking_policy_restores_the_same_states(cases, case, tree, gamma, verify):
    """Greedy decoding gives the target's greedy sequence under every policy, and every policy
    restores both models' committed states to the bits of a sequential run over the committed tokens."""
    target, draft = cases[case]
    prompt, n = [1, 2, 3], 10
    want = target_greedy(target, prompt, n + len(tree) + 1)
    first = None
    for policy in BACKTRACK:
        r = speculative_generate(target, draft, prompt, n, tree=tree, gamma=gamma, verify=verify,
                                 tile_size=7, backtrack=policy)
        assert r.tokens == want[:n], policy
        committed = prompt + list(want[:sum(r.tokens_per_step) - 1])
        assert same_bits(r.target_state, target.prefill(committed)[1]), policy
        assert same_bits(r.draft_state, draft.prefill(committed)[1]), policy
        first = r if first is None else first
        assert r.tokens_per_step == first.tokens_per_step, policy
        assert same_bits(r.target_state, first.target_state) and same_bits(r.draft_state, first.draft_state)
    if case == "speq":
        # A whole path accepted: it ends on a leaf the draft never expanded, so the draft's
        # state is restored to the leaf's parent and stepped once.
        assert max(first.tokens_per_step) == len(tree) + 1


def test_backtrack_errors(cases):
    target, draft = cases["speq"]
    with pytest.raises(ValueError, match=r"^speculative_generate.backtrack must be one of 'pure-store', "
                                         r"'pure-recompute', .*'recompute-state', not 'undo'$"):
        speculative_generate(target, draft, [1], 3, backtrack="undo")
    with pytest.raises(TypeError, match=r"^speculative_generate.backtrack must be a policy name, a policy "
                                        r"or a SpeculativeBacktracking, not 3$"):
        speculative_generate(target, draft, [1], 3, backtrack=3)
    with pytest.raises(TypeError, match=r"^speculative_generate: backtracking policy 'replay' needs a "
                                        r"golden.lm.MambaLM draft, not MemoLM; a model with only step\(\) can store$"):
        speculative_generate(target, MemoLM(draft), [1], 3, backtrack="hybrid")
    r = speculative_generate(target, MemoLM(draft), [1], 3, backtrack="hybrid-draft-stores")
    assert r.tokens == target_greedy(target, [1], 3) and isinstance(r.draft_state, tuple)


def first_token_counts(target, draft, prompt, n, *, tree, candidates, seed, verify="paths"):
    rng = np.random.default_rng(seed)
    counts = np.zeros(target.vocab)
    for _ in range(n):
        r = speculative_generate(target, draft, prompt, 1, tree=tree, mode="sample",
                                 candidates=candidates, gamma=0.0, rng=rng, verify=verify)
        counts[r.tokens[0]] += 1
    return counts


@pytest.mark.parametrize("draft_kind,candidates", [("speq", "sample"), ("smaller", "topk")])
def test_sampling_first_token_distribution(cases, draft_kind, candidates):
    target, draft = cases[draft_kind]
    prompt = [4, 9, 1]
    p = softmax(target.prefill(prompt)[0][-1])
    q = softmax(draft.prefill(prompt)[0][-1])
    counts = first_token_counts(MemoLM(target), MemoLM(draft), prompt, 2000, tree=(3, 2),
                                candidates=candidates, seed=2024)
    assert_distribution(counts, p, unlike=q)


def test_sampling_needs_rng_and_matching_models(cases):
    target, draft = cases["speq"]
    with pytest.raises(TypeError, match="speculative_generate.rng must be a numpy.random.Generator when sampling"):
        speculative_generate(target, draft, [1], 3, mode="sample")
    with pytest.raises(ValueError, match="speculative_generate: draft.vocab must equal target.vocab = 16, not 5"):
        speculative_generate(target, UnigramLM(np.zeros(5)), [1], 3)
    with pytest.raises(ValueError, match="speculative_generate.mode must be one of 'greedy', 'sample', not 'beam'"):
        speculative_generate(target, draft, [1], 3, mode="beam")
    with pytest.raises(ValueError, match="speculative_generate.prompt must be a non-empty sequence of tokens"):
        speculative_generate(target, draft, [], 3)
    with pytest.raises(ValueError, match=r"speculative_generate.prompt\[1\] must be an integer in \[0, 15\], not 16"):
        speculative_generate(target, draft, [1, 16], 3)
    with pytest.raises(ValueError, match="speculative_generate.n_tokens must be an integer >= 0, not -1"):
        speculative_generate(target, draft, [1], -1)
    with pytest.raises(ValueError, match="speculative_generate.verify must be one of 'fifo', 'paths', not 'x'"):
        speculative_generate(target, draft, [1], 3, verify="x")
    with pytest.raises(TypeError, match="verify='fifo' needs a golden.lm.MambaLM target, not UnigramLM"):
        speculative_generate(UnigramLM(np.zeros(16)), draft, [1], 3)
    with pytest.raises(TypeError, match="speculative_generate.tree must be a TreeShape or a per-depth branching list"):
        speculative_generate(target, draft, [1], 3, tree=3)
    assert speculative_generate(target, draft, [1], 0).tokens == ()


def chain_moments(alpha, L):
    """Exact mean and variance of tokens per step for a chain of L drafts."""
    probs = [alpha ** k * (1 - alpha) for k in range(L)] + [alpha ** L]
    values = np.arange(1, L + 2)
    mean = float(np.dot(probs, values))
    return mean, float(np.dot(probs, (values - mean) ** 2))


@pytest.mark.parametrize("L", [1, 4])
def test_chain_tokens_per_step_formula(L):
    rng = np.random.default_rng(L)
    pl, ql = rng.standard_normal(6) * 1.5, rng.standard_normal(6) * 1.5
    p, q = softmax(pl), softmax(ql)
    alpha = float(np.minimum(p, q).sum())
    mean, var = chain_moments(alpha, L)
    assert expected_tokens_chain(alpha, L) == pytest.approx(mean, rel=1e-12)
    r = speculative_generate(UnigramLM(pl), UnigramLM(ql), [0], 3_000, tree=(1,) * L, mode="sample",
                             gamma=0.0, rng=np.random.default_rng(99), verify="paths")
    steps = np.array(r.tokens_per_step[:-1])          # the last step may be cut short
    assert abs(steps.mean() - mean) < 5 * math.sqrt(var / steps.size)
    counts = np.bincount(r.tokens, minlength=6)
    assert_distribution(counts, p, unlike=q)


def test_expected_tokens_chain_edges():
    assert expected_tokens_chain(1.0, 4) == 5.0 and expected_tokens_chain(0.0, 4) == 1.0
    with pytest.raises(ValueError, match=r"expected_tokens_chain.alpha must be a finite number in \[0.0, 1.0\], not 1.2"):
        expected_tokens_chain(1.2, 3)


def test_sample_accept_errors(lm):
    t = TokenTree(tokens=np.array([0, 1]), parents=np.array([ROOT, 0]), q=np.full((2, 16), np.nan),
                  token_prob=np.array([np.nan, 0.5]), candidates="topk")
    with pytest.raises(ValueError, match=r"sample_accept.logits must have one row per node \(2\), not 3"):
        sample_accept(t, np.zeros((3, 16)), np.random.default_rng(0))
    with pytest.raises(TypeError, match="sample_accept.rng must be a numpy.random.Generator"):
        sample_accept(t, np.zeros((2, 16)), 0)
    with pytest.raises(ValueError, match="TokenTree.candidates must be one of 'topk', 'sample', not 'x'"):
        dataclasses.replace(t, candidates="x")


# -- slow: the long statistical runs -------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("draft_kind,candidates", [("speq", "sample"), ("speq", "topk"),
                                                   ("smaller", "sample"), ("truncated", "sample")])
def test_sampling_two_token_distribution_slow(cases, draft_kind, candidates):
    target, draft = cases[draft_kind]
    prompt = [4, 9, 1]
    V = target.vocab
    _, s = target.prefill(prompt)
    logits0 = target.prefill(prompt)[0][-1]
    p1 = softmax(logits0)
    joint = np.array([p1[a] * softmax(target.step(s, a)[0]) for a in range(V)]).reshape(-1)
    _, sd = draft.prefill(prompt)
    q1 = softmax(draft.prefill(prompt)[0][-1])
    qjoint = np.array([q1[a] * softmax(draft.step(sd, a)[0]) for a in range(V)]).reshape(-1)
    rng = np.random.default_rng(77)
    mt, md = MemoLM(target), MemoLM(draft)
    counts = np.zeros(V * V)
    for _ in range(25_000):
        r = speculative_generate(mt, md, prompt, 2, tree=(2, 2, 1), mode="sample", candidates=candidates,
                                 gamma=0.0, rng=rng, verify="paths")
        counts[r.tokens[0] * V + r.tokens[1]] += 1
    assert_distribution(counts, joint, unlike=qjoint)


@pytest.mark.slow
def test_sampling_through_the_fifo_verifier_slow(cases):
    target, draft = cases["speq"]
    prompt = [2, 2]
    p = softmax(target.prefill(prompt)[0][-1])
    q = softmax(draft.prefill(prompt)[0][-1])
    counts = first_token_counts(target, draft, prompt, 2500, tree=(2, 2), candidates="sample", seed=5,
                                verify="fifo")
    assert_distribution(counts, p, unlike=q)
