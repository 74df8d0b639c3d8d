"""specgen perf --tree best (gen.perf.tree_search): the expected tokens of a tree under a
per-depth profile against a Monte Carlo of the acceptance it models, and the search."""

import json

import numpy as np
import pytest

from specgen.gen.cli.commands import main
from specgen.gen.perf.tree_search import (AcceptanceProfile, candidate_shapes, expected_tokens_profile,
                                  top1_from_measured)


def monte_carlo_tokens(branching, rates, *, steps, seed):
    """Simulate steps: at depth d the target's token has a geometric rank among the
    draft's candidates (top-1 probability rates[d]); the step goes on while that rank is
    within the node's children. Returns the mean committed tokens and its standard error."""
    rng = np.random.default_rng(seed)
    tokens = np.ones(steps)
    alive = np.ones(steps, dtype=bool)
    for d, b in enumerate(branching):
        a = rates[min(d, len(rates) - 1)]
        rank = rng.geometric(a, size=steps) if a > 0 else np.full(steps, np.iinfo(np.int64).max)
        alive &= rank <= b
        tokens += alive
    return tokens.mean(), tokens.std() / np.sqrt(steps)


@pytest.mark.parametrize("branching,rates", [
    ((2, 2, 1, 1), (0.8, 0.7, 0.6)),
    ((1,) * 8, (0.97,)),
    ((3, 2, 1), (0.5, 0.9)),
    ((4,), (0.3,)),
])
def test_expected_tokens_match_a_monte_carlo(branching, rates):
    mean, se = monte_carlo_tokens(branching, rates, steps=200_000, seed=7)
    model = expected_tokens_profile(branching, AcceptanceProfile(rates))
    assert abs(model - mean) < 5 * se + 1e-9, (model, mean, se)


def test_the_monte_carlo_can_tell_a_wrong_formula():
    # Counting a sibling's acceptance once per child (b·α) instead of 1 − (1 − α)^b is off
    # by many standard errors.
    mean, se = monte_carlo_tokens((2, 2), (0.6,), steps=200_000, seed=3)
    wrong = 1 + min(1, 2 * 0.6) + min(1, 2 * 0.6) ** 2
    assert abs(wrong - mean) > 20 * se


def test_a_chain_with_one_rate_is_the_closed_form():
    a, n = 0.9, 6
    assert expected_tokens_profile((1,) * n, AcceptanceProfile((a,))) == pytest.approx(
        (1 - a ** (n + 1)) / (1 - a))


def test_measured_rates_invert_to_top1():
    prof = top1_from_measured((2, 2, 1, 1), [0.96, 0.91, None, 0.5])
    assert prof.rates[0] == pytest.approx(0.8) and prof.rates[1] == pytest.approx(0.7)
    assert prof.rates[2] == prof.rates[1] and prof.rates[3] == pytest.approx(0.5)


def test_candidates_stay_within_the_verifier():
    shapes = candidate_shapes(max_nodes=12, fifo_depth=16)
    for s in shapes:
        nodes, width = 1, 1
        for b in s:
            width *= b
            nodes += width
        assert nodes <= 12 and list(s) == sorted(s, reverse=True)
    assert (2, 2, 1) in shapes and (3, 3) not in shapes and (1,) * 11 in shapes
    # A ring too small for a wide level rules the level out.
    assert (4,) not in candidate_shapes(max_nodes=12, fifo_depth=2)


def test_profile_rates_are_checked():
    with pytest.raises(ValueError, match=r"rates\[1\]"):
        AcceptanceProfile((0.5, 1.5))


SMALL = ["perf", "--board", "vhk158", "--set", "tree.max_nodes=9", "--target", "2.7B",
         "--tree", "best"]


def test_tree_best_reports_the_fastest_and_the_shapes_beside_it(capsys):
    assert main(SMALL + ["--draft", "370M", "--profile", "0.9,0.8", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    speeds = [c["tokens_per_s"] for c in d["top"]]
    assert d["best"] == d["top"][0] and speeds == sorted(speeds, reverse=True)
    beside = {tuple(c["tree"]) for c in d["beside"]}
    assert (1, 1, 1, 1) in beside and (1,) * 8 in beside
    assert all(c["nodes"] <= 9 for c in d["top"] + d["beside"])
    assert all(d["best"]["tokens_per_s"] >= c["tokens_per_s"] for c in d["beside"])
    assert main(SMALL + ["--draft", "speq"]) == 0
    out = capsys.readouterr().out
    assert "SPEQ's acceptance" in out and out.count("\nbest ") == 1


@pytest.mark.parametrize("extra,message", [
    (["--draft", "370M"], "--tree best needs an acceptance profile"),
    (["--draft", "370M", "--profile", "0.9,x"], "--profile must be"),
    (["--draft", "370M", "--profile", "0.9", "--alpha", "0.8"], "not --profile and --alpha"),
    (["--draft", "none", "--alpha", "0.8"], "--tree best needs a draft"),
])
def test_tree_best_errors_are_one_line(capsys, extra, message):
    assert main(SMALL + extra) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_tree_best_reads_a_measured_profile(tmp_path, capsys):
    # A specgen acceptance --json report of tree (2, 1): depth 1 accepted 0.75 of its trials
    # with two children, so the draft's top-1 rate there is 0.5.
    rep = tmp_path / "acc.json"
    rep.write_text(json.dumps({"tree": [2, 1], "per_depth_acceptance": [0.75, 0.6],
                               "tokens_per_step": 2.2, "draft_length": 2.0}))
    assert main(SMALL + ["--draft", "370M", "--acceptance", str(rep), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["profile"] == pytest.approx([0.5, 0.6]) and d["profile_source"] == "measured"
    chain4 = next(c for c in d["beside"] if c["tree"] == [1, 1, 1, 1])
    assert chain4["tokens_per_step"] == pytest.approx(1 + 0.5 + 0.5 * 0.6 + 0.5 * 0.36
                                                      + 0.5 * 0.216)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(SMALL + ["--draft", "370M", "--acceptance", str(bad)]) == 2
    assert "per_depth_acceptance" in capsys.readouterr().err
