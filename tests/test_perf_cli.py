"""``specgen perf`` refuses steps the hardware or the statistics cannot produce, naming flags."""

import pytest

from specgen.gen.cli.commands import main
from specgen.golden.config import preset

BASE = ["perf", "--board", "vhk158", "--target", "2.7B", "--draft", "370M"]


def perf_error(capsys, *extra):
    assert main(BASE + list(extra)) == 2
    err = capsys.readouterr().err
    assert err.startswith("specgen perf: error: ") and len(err.strip().splitlines()) == 1
    # Flags, not the model's internal fields.
    for internal in ("StepConfig", "Accelerator", "continue_prob", "tokens_per_step"):
        assert internal not in err, err
    return err


def test_early_stop_zero_is_refused(capsys):
    # 0 never drafts past the first level: 4.91 tokens could not be committed.
    assert "--early-stop must be in (0, 1], not 0" in perf_error(capsys, "--early-stop", "0")


def test_accept_above_what_early_stop_drafts_is_refused(capsys):
    # --tree 2,2,1,1 with continue probability 1/2: levels 1, 2, 3, 4 with probability
    # 1/2, 1/4, 1/8, 1/8, so 15/8 levels and at most 1 + 15/8 = 2.875 tokens per step.
    err = perf_error(capsys, "--early-stop", "0.5")
    assert "--accept must be in [1, 2.875]" in err and "--early-stop 0.5" in err
    assert main(BASE + ["--early-stop", "0.5", "--accept", "2.875"]) == 0


def test_tree_larger_than_the_verifier_is_refused(capsys):
    capacity = preset("vhk158").tree.max_nodes
    chain = capacity    # a chain of N draft nodes has N + 1 nodes with the root
    err = perf_error(capsys, "--tree", f"chain{chain}", "--accept", "2")
    assert f"--tree chain{chain} has {chain + 1} nodes" in err and f"at most {capacity}" in err
    assert main(BASE + ["--tree", f"chain{chain - 1}", "--accept", "2"]) == 0


def test_tree_wider_than_the_ring_is_refused(capsys):
    depth = preset("vhk158").tree.fifo_depth
    err = perf_error(capsys, "--tree", str(2 * depth), "--accept", "2")
    assert f"ring of {depth} state slots" in err and "--tree" in err


@pytest.mark.parametrize("draft", ["2.7B", "1.3B"])
def test_draft_not_smaller_than_target_is_refused(capsys, draft):
    err = perf_error(capsys, "--target", "1.3B", "--draft", draft)
    assert f"--draft {draft} is not smaller than --target 1.3B" in err
    assert "allowed: 130M, 370M, 780M, speq, none" in err


@pytest.mark.parametrize("flag,value,message", [
    ("--alpha", "1.5", "--alpha must be in [0, 1], not 1.5"),
    ("--overlap", "2", "--overlap must be in [0, 1], not 2"),
    ("--vector-lanes", "0", "--vector-lanes must be an integer >= 1, not 0"),
    ("--weight-beats", "0", "--weight-beats must be an integer >= 1, not 0"),
    ("--nibble-beats", "0", "--nibble-beats must be an integer >= 1, not 0"),
    ("--ssm-rows", "3", "--ssm-rows must be one of 1, 2, 4, 8, not 3"),
    ("--early-stop", "1.5", "--early-stop must be in (0, 1], not 1.5"),
    ("--accept", "9", "--accept must be in [1, 5] for --tree 2,2,1,1, not 9"),
    ("--accept", "0.5", "--accept must be in [1, 5]"),
    ("--draft-flow", "level", "--draft-flow must be one of 'node', 'prefix', 'best', not 'level'"),
])
def test_out_of_range_values_name_the_flag(capsys, flag, value, message):
    assert message in perf_error(capsys, flag, value)
