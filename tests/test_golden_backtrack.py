"""``golden.backtrack`` and ``golden.backtrack_cost``: exact restore, costs by counting, errors, CLI.

Every policy must give back, bit for bit, the state of a plain sequential run
over the accepted path. The cost model's closed forms must equal what the
instrumented policies actually store, load and multiply. Expected sizes of the
Mamba2 checkpoints are derived here by hand from the Mamba2 dimensions (d_model, n_layer; expand 2, headdim 64, d_state 128).
"""

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from specgen.gen.studies.backtrack_cost import FILENAME, backtrack_markdown, write_backtrack_table
from specgen.gen.cli.commands import main
from specgen.golden.backtrack import (POLICIES, SYSTEM_POLICIES, WHERE, BacktrackMemory, CostMeter, LMRecurrence,
                              Mamba2Mixer, MixerConfig, Recompute, SpeculativeBacktracking,
                              StoreIntermediates, StoreStates, Stepped, backtrack, check_path,
                              mixer_init_params, restore, sequential_run, speculative_backtrack, tree_pass)
from specgen.golden.backtrack_cost import (SEED_TOKENS_PER_STEP, backtrack_cost, state_nbytes, step_macs,
                                   system_cost, update_macs)
from specgen.golden.lm import MambaLM, lm_preset
from specgen.golden.mamba2 import SSMConfig
from specgen.golden.tree import TreeShape, accepted_path, seed_shapes, tree_depths

# (numerics, state_format): the SSM unit with both state formats, and the float64 oracle.
NUMERICS = [("hw", "fp32"), ("hw", "fp16"), ("ref", "fp32")]


def small_mix(state_format="fp32", *, nheads=2, headdim=4, d_state=8, d_model=6, d_conv=4):
    ssm = SSMConfig(nheads=nheads, headdim=headdim, d_state=d_state, lanes=4, state_format=state_format)
    return MixerConfig(ssm=ssm, d_model=d_model, d_conv=d_conv)


def mixer(rng, numerics="hw", state_format="fp32", **dims):
    mix = small_mix(state_format, **dims)
    return Mamba2Mixer(mix=mix, params=mixer_init_params(mix, rng), numerics=numerics)


def random_tree(rng, nodes):
    """A random BFS parent array: parents nondecreasing, each before its child."""
    parents = [-1]
    for i in range(1, nodes):
        parents.append(int(rng.integers(max(parents[-1], 0), i)))
    return parents


def outcomes(rng, parents):
    """Nothing accepted, the whole (deepest) path accepted, and two random outcomes."""
    n = len(parents)
    paths = [accepted_path(parents, [0] * n), accepted_path(parents, [1] * n)]
    paths += [accepted_path(parents, rng.integers(0, 2, n)) for _ in range(2)]
    assert paths[0].nodes == (0,)
    assert len(paths[1].nodes) == int(tree_depths(parents).max()) + 1
    return paths


def tokens_for(rng, rec, n):
    return [rng.standard_normal(rec.mix.d_model) for _ in range(n)]


def same_bits(a, b):
    """Equal dtypes, shapes and bytes (so −0 ≠ +0 and NaN payloads count)."""
    return all(x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x.view(np.uint8), y.view(np.uint8))
               for x, y in zip(a, b, strict=True))


# -- exact restore ------------------------------------------------------------------

@pytest.mark.parametrize("numerics,state_format", NUMERICS)
@pytest.mark.parametrize("policy", list(POLICIES))
def test_every_policy_restores_the_sequential_state_bit_for_bit(numerics, state_format, policy, seed):
    rng = np.random.default_rng(seed)
    rec = mixer(rng, numerics, state_format)
    for nodes in (1, 2, 7, 13):
        parents = random_tree(rng, nodes)
        toks = tokens_for(rng, rec, nodes)
        checkpoint = rec.random_state(rng)
        for path in outcomes(rng, parents):
            want = sequential_run(rec, checkpoint, [toks[i] for i in path.nodes])
            got, outputs = backtrack(rec, POLICIES[policy], checkpoint=checkpoint, tokens=toks,
                                     parents=parents, path=path)
            assert same_bits(got, want), (parents, path.nodes)
            # The pass gives the accepted node's output too, as a sequential run would.
            last = sequential_run(rec, checkpoint, [toks[i] for i in path.nodes[:-1]])
            want_out = rec.step(last, toks[path.nodes[-1]]).output
            assert np.array_equal(outputs[path.nodes[-1]].view(np.uint8), want_out.view(np.uint8))


@pytest.mark.parametrize("name", list(SYSTEM_POLICIES))
def test_draft_and_target_both_restore_under_every_combination(name, seed):
    rng = np.random.default_rng(seed)
    draft = mixer(rng, "hw", nheads=1, headdim=4, d_state=4, d_model=4)
    target = mixer(rng, "hw", nheads=3, headdim=2, d_state=8, d_model=8, d_conv=3)
    parents = random_tree(rng, 11)
    dt, tt = tokens_for(rng, draft, 11), tokens_for(rng, target, 11)
    dc, tc = draft.random_state(rng), target.random_state(rng)
    for path in outcomes(rng, parents):
        d, t = speculative_backtrack(SYSTEM_POLICIES[name], draft=draft, target=target,
                                     draft_checkpoint=dc, target_checkpoint=tc, draft_tokens=dt,
                                     target_tokens=tt, parents=parents, path=path)
        assert same_bits(d, sequential_run(draft, dc, [dt[i] for i in path.nodes]))
        assert same_bits(t, sequential_run(target, tc, [tt[i] for i in path.nodes]))


def test_d_conv_1_has_no_conv_window_and_still_restores(seed):
    rng = np.random.default_rng(seed)
    rec = mixer(rng, "hw", d_conv=1)
    assert rec.zero_state()[0].shape == (0, rec.mix.conv_dim)
    parents = random_tree(rng, 6)
    toks = tokens_for(rng, rec, 6)
    cp = rec.random_state(rng)
    path = accepted_path(parents, [1] * 6)
    want = sequential_run(rec, cp, [toks[i] for i in path.nodes])
    for policy in POLICIES.values():
        got, _ = backtrack(rec, policy, checkpoint=cp, tokens=toks, parents=parents, path=path)
        assert same_bits(got, want)


def test_the_comparison_can_fail(seed):
    """A restore to the wrong node, or from a 1-ulp-perturbed intermediate, is caught."""
    rng = np.random.default_rng(seed)
    rec = mixer(rng, "hw")
    parents = [-1, 0, 1, 2]
    toks = tokens_for(rng, rec, 4)
    cp = rec.random_state(rng)
    want = sequential_run(rec, cp, toks)
    short, _ = backtrack(rec, POLICIES["replay"], checkpoint=cp, tokens=toks, parents=parents,
                         path=(0, 1, 2))
    assert not same_bits(short, want)
    light = rec.step(cp, toks[0]).light
    bumped = light[:4] + (np.nextafter(light[4], np.float32(2)),)     # dA one ulp up
    assert not same_bits(rec.replay(cp, bumped), rec.replay(cp, light))


def test_replay_and_update_equal_the_step_with_special_values(seed):
    """NaN and infinities in the inputs: the state halves still agree bit for bit."""
    rng = np.random.default_rng(seed)
    for numerics, state_format in NUMERICS:
        rec = mixer(rng, numerics, state_format)
        state = rec.random_state(rng)
        for bad in (np.nan, np.inf, -np.inf, 1e30):
            tok = rng.standard_normal(rec.mix.d_model)
            tok[int(rng.integers(rec.mix.d_model))] = bad
            stepped = rec.step(state, tok)
            assert same_bits(rec.replay(state, stepped.light), stepped.state)
            assert same_bits(rec.update(state, tok), stepped.state)


def test_hw_and_ref_numerics_compute_the_same_layer(seed):
    """The binary32 layer (SSM unit, tables) follows the float64 one (golden.lm's) to table accuracy."""
    rng = np.random.default_rng(seed)
    mix = small_mix()
    params = mixer_init_params(mix, rng)
    hw = Mamba2Mixer(mix=mix, params=params, numerics="hw")
    ref = Mamba2Mixer(mix=mix, params=params, numerics="ref")
    s_hw = hw.random_state(rng)
    s_ref = tuple(a.astype(np.float64) for a in s_hw)
    for _ in range(6):
        tok = rng.standard_normal(mix.d_model)
        a, b = hw.step(s_hw, tok), ref.step(s_ref, tok)
        for x, y in zip((a.output,) + a.state, (b.output,) + b.state):
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-4 * np.abs(y).max())
        s_hw, s_ref = a.state, b.state


class Ewma:
    """A scalar recurrence unrelated to Mamba: the policies only need step/replay/update."""

    def step(self, state, token, *, meter=None):
        m = meter if meter is not None else CostMeter()
        (acc,) = state
        light = (m.mul(np.float32(0.5), token),)
        new = (m.mul(np.float32(0.75), acc) + light[0],)
        return Stepped(state=new, output=new[0], light=light, input=token)

    def replay(self, state, light, *, meter=None):
        m = meter if meter is not None else CostMeter()
        return (m.mul(np.float32(0.75), state[0]) + light[0],)

    def update(self, state, token, *, meter=None):
        return self.step(state, token, meter=meter).state


def test_policies_are_generic_over_the_recurrence(seed):
    rng = np.random.default_rng(seed)
    rec = Ewma()
    parents = random_tree(rng, 9)
    toks = [rng.standard_normal(3).astype(np.float32) for _ in range(9)]
    cp = (rng.standard_normal(3).astype(np.float32),)
    for path in outcomes(rng, parents):
        want = sequential_run(rec, cp, [toks[i] for i in path.nodes])
        for policy in POLICIES.values():
            got, _ = backtrack(rec, policy, checkpoint=cp, tokens=toks, parents=parents, path=path)
            assert same_bits(got, want)


# -- cost model == counting ---------------------------------------------------------

def counted(rec, policy, parents, toks, cp, path):
    meter = CostMeter()
    backtrack(rec, policy, checkpoint=cp, tokens=toks, parents=parents, path=path, meter=meter)
    return meter


@pytest.mark.parametrize("numerics,state_format", NUMERICS)
@pytest.mark.parametrize("policy", [*POLICIES.values(), StoreIntermediates(where="off_chip"),
                                    Recompute(scope="state", where="on_chip")], ids=str)
def test_cost_model_equals_the_counted_run(numerics, state_format, policy, seed):
    rng = np.random.default_rng(seed)
    rec = mixer(rng, numerics, state_format)
    for nodes in (1, 5, 12):
        parents = random_tree(rng, nodes)
        toks = tokens_for(rng, rec, nodes)
        cp = rec.random_state(rng)
        for path in outcomes(rng, parents):
            meter = counted(rec, policy, parents, toks, cp, path)
            cost = backtrack_cost(policy, rec.mix, tree=parents, tokens=len(path.nodes), numerics=numerics)
            for where in WHERE:
                assert cost.stored[where] == meter.bytes(op="store", where=where), (where, meter.records())
                assert cost.loaded[where] == meter.bytes(op="load", where=where), (where, meter.records())
            assert cost.macs == meter.macs["restore"]
            assert cost.pass_macs == meter.macs["pass"]
            assert cost.tokens == len(path.nodes) and cost.nodes == nodes


@pytest.mark.parametrize("policy", [*POLICIES.values(), StoreIntermediates(where="off_chip")], ids=str)
def test_a_whole_lm_restores_and_costs_n_layer_layers(policy, seed):
    """LMRecurrence: every layer of a MambaLM restored at once, bit for bit as a sequential run
    (MambaLM.prefill), and counted as backtrack_cost of one float64 layer (LMConfig.mixer)."""
    rng = np.random.default_rng(seed)
    lm = MambaLM.from_seed(lm_preset("tiny", n_layer=3, d_conv=3), seed=int(rng.integers(1000)))
    rec = LMRecurrence(lm)
    _, state = lm.prefill(rng.integers(0, lm.vocab, 4))
    parents = random_tree(rng, 7)
    toks = [int(t) for t in rng.integers(0, lm.vocab, 7)]
    for path in outcomes(rng, parents):
        meter = CostMeter()
        got, outputs = backtrack(rec, policy, checkpoint=rec.pack(state), tokens=toks, parents=parents,
                                 path=path, meter=meter)
        logits, want = lm.prefill([toks[i] for i in path.nodes], state=state)
        assert same_bits(got, rec.pack(want)) and rec.unpack(got).equal(want)
        assert np.array_equal(outputs[path.nodes[-1]], logits[-1])
        cost = backtrack_cost(policy, lm.config.mixer, tree=parents, tokens=len(path.nodes), numerics="ref")
        for where in WHERE:
            assert cost.stored[where] == meter.bytes(op="store", where=where), (where, meter.records())
            assert cost.loaded[where] == meter.bytes(op="load", where=where), (where, meter.records())
        assert cost.macs == meter.macs["restore"] and cost.pass_macs == meter.macs["pass"]


def test_system_cost_equals_the_counted_run_of_both_models(seed):
    rng = np.random.default_rng(seed)
    draft = mixer(rng, "hw", nheads=1, headdim=4, d_state=4, d_model=4)
    target = mixer(rng, "hw", nheads=3, headdim=2, d_state=8, d_model=8)
    parents = random_tree(rng, 10)
    dt, tt = tokens_for(rng, draft, 10), tokens_for(rng, target, 10)
    dc, tc = draft.random_state(rng), target.random_state(rng)
    for name, system in SYSTEM_POLICIES.items():
        for path in outcomes(rng, parents):
            dm, tm = CostMeter(), CostMeter()
            speculative_backtrack(system, draft=draft, target=target, draft_checkpoint=dc,
                                  target_checkpoint=tc, draft_tokens=dt, target_tokens=tt,
                                  parents=parents, path=path, draft_meter=dm, target_meter=tm)
            cost = system_cost(system, draft=draft.mix, target=target.mix, tree=parents,
                               tokens=len(path.nodes))
            assert cost.off_chip == dm.bytes(where="off_chip") + tm.bytes(where="off_chip"), name
            assert cost.on_chip == dm.bytes(where="on_chip") + tm.bytes(where="on_chip"), name
            assert cost.macs == dm.macs["restore"] + tm.macs["restore"], name


def test_layer_macs_by_hand():
    """The small layer, counted operation by operation from the Mamba2 step (``Mamba2.step``)."""
    # d_model 6, nheads 2, headdim 4 (d_inner 8), d_state 8 (E 64), d_conv 4,
    # conv_dim 8 + 16 = 24, d_in_proj 2·8 + 2·8 + 2 = 34.
    norm, in_proj, conv, dtA = 3 * 6, 6 * 34, 4 * 24, 2
    rows = 8 * 3                      # Δ·x, D·x, y·silu(z)
    elems = 64 * 3                    # dA·h, u·B, h'·C
    gated_norm, out_proj = 3 * 8, 8 * 6
    mix = small_mix()
    assert step_macs(mix) == norm + in_proj + conv + dtA + rows + elems + gated_norm + out_proj
    # update: no z rows (6·(24 + 2)), no h'·C, D·x or gate, no gated norm, no out_proj.
    assert update_macs(mix) == norm + 6 * 26 + conv + dtA + 8 + 64 * 2
    meter = CostMeter()
    rec = mixer(np.random.default_rng(0))
    rec.step(rec.zero_state(), np.ones(6), meter=meter)
    assert meter.macs["pass"] == step_macs(mix)


def test_mamba2_sizes_from_spec_dimensions():
    """2.7B: 80 × 64 × 128 FP32 state elements and a 3 × 5376 conv window per layer, 64 layers."""
    t = MixerConfig.from_model("2.7B")
    assert (t.d_model, t.n_layer, t.nheads, t.d_inner, t.conv_dim) == (2560, 64, 80, 5120, 5376)
    assert state_nbytes(t) == 80 * 64 * 128 * 4 + 3 * (5120 + 256) * 4
    d = MixerConfig.from_model("370M")
    S_t = 80 * 64 * 128 * 4 + 3 * (5120 + 256) * 4
    S_d = 32 * 64 * 128 * 4 + 3 * (2048 + 256) * 4
    tree = TreeShape((1, 1, 2, 2, 2))           # a seed shape of 17 nodes
    L = SEED_TOKENS_PER_STEP
    store = system_cost(SYSTEM_POLICIES["pure-store"], draft=d, target=t, tree=tree, tokens=L)
    assert store.traffic == 17 * (48 * S_d + 64 * S_t)
    hybrid = system_cost(SYSTEM_POLICIES["hybrid"], draft=d, target=t, tree=tree, tokens=L)
    light_d = (2048 + 256 + 2048 + 128 + 2 * 32) * 4
    assert hybrid.on_chip == pytest.approx(48 * (17 + L) * light_d)
    assert hybrid.off_chip == 2 * (48 * S_d + 64 * S_t)
    # One 2.7B token: in_proj 2560 × 10576 and out_proj 5120 × 2560 dominate the re-run.
    F_t = (3 * 2560 + 2560 * 10576 + 4 * 5376 + 80 + 3 * 5120 + 3 * 80 * 64 * 128 + 3 * 5120
           + 5120 * 2560)
    assert hybrid.target.macs == pytest.approx(L * 64 * F_t)
    assert 2.6e9 < 64 * F_t < 2.8e9             # about one MAC per parameter of a 2.7B model


def test_seed_shapes_bound_the_accepted_length():
    for shape in seed_shapes():
        cost = backtrack_cost(POLICIES["recompute"], small_mix(), tree=shape, tokens=shape.depth + 1)
        assert cost.nodes == shape.num_nodes
    with pytest.raises(ValueError, match=r"tokens must be a finite number in \[1, 5\], not 6"):
        backtrack_cost(POLICIES["replay"], small_mix(), tree=TreeShape((3, 1, 1, 1)), tokens=6)


# -- errors ----------------------------------------------------------------------

@pytest.mark.parametrize("build,exc,message", [
    (lambda: MixerConfig(ssm=small_mix().ssm, d_model=0), ValueError,
     "MixerConfig.d_model must be an integer >= 1, not 0"),
    (lambda: MixerConfig(ssm="2.7B", d_model=8), TypeError, "MixerConfig.ssm must be an SSMConfig, not '2.7B'"),
    (lambda: MixerConfig(ssm=small_mix().ssm, d_model=8, d_conv=0), ValueError,
     "MixerConfig.d_conv must be an integer >= 1, not 0"),
    (lambda: StoreIntermediates(where="dram"), ValueError,
     "StoreIntermediates.where must be one of 'on_chip', 'off_chip', not 'dram'"),
    (lambda: Recompute(scope="tree"), ValueError, "Recompute.scope must be one of 'layer', 'state', not 'tree'"),
    (lambda: SpeculativeBacktracking(draft="replay", target=Recompute()), TypeError,
     "SpeculativeBacktracking.draft must be a StoreStates, StoreIntermediates or Recompute, not 'replay'"),
    (lambda: backtrack_cost("store", small_mix(), tree=[-1, 0], tokens=1), TypeError,
     "backtrack_cost.policy must be a StoreStates, StoreIntermediates or Recompute, not 'store'"),
    (lambda: backtrack_cost(StoreStates(), small_mix(), tree=[-1, 0], tokens=0.5), ValueError,
     "backtrack_cost.tokens must be a finite number in [1, 2], not 0.5"),
    (lambda: backtrack_cost(StoreStates(), small_mix(), tree=[-1, 0], tokens="2"), TypeError,
     "backtrack_cost.tokens must be a finite number in [1, 2], not '2'"),
    (lambda: backtrack_cost(StoreStates(), small_mix(), tree=[-1, 1], tokens=1), ValueError,
     "tree.parents[1] must be an integer in [0, 0], not 1"),
    (lambda: check_path([-1, 0, 0, 1], (0, 2, 3)), ValueError,
     "path[2] must be a child of path[1] = 2, not node 3 (child of 1)"),
    (lambda: check_path([-1, 0, 0, 1], (1, 3)), ValueError, "path must start at the root (node 0), not (1, 3)"),
    (lambda: check_path([-1, 0], (0, 5)), ValueError, "path[1] must be a node index in [0, 1], not 5"),
])
def test_bad_inputs_raise_with_the_field_and_allowed_values(build, exc, message):
    with pytest.raises(exc) as info:
        build()
    assert str(info.value) == message


def test_bad_run_inputs_raise_with_clear_messages():
    rng = np.random.default_rng(0)
    rec = mixer(rng)
    cp = rec.zero_state()
    toks = tokens_for(rng, rec, 3)
    with pytest.raises(ValueError, match=r"^tokens must hold one input per node \(3\), not 2$"):
        tree_pass(rec, StoreStates(), checkpoint=cp, tokens=toks[:2], parents=[-1, 0, 0])
    with pytest.raises(ValueError, match=r"^state.ssm_state must be a float32 array of shape \(2, 4, 8\), "
                                         r"not float16 \(2, 4, 8\)$"):
        rec.step((cp[0], cp[1].astype(np.float16)), toks[0])
    with pytest.raises(ValueError, match=r"^token must have shape \(6,\), not \(5,\)$"):
        rec.step(cp, np.zeros(5))
    class StepOnly:
        step = Ewma.step
    with pytest.raises(TypeError, match=r"^Recompute needs a recurrence with the method update\(\), not <"):
        tree_pass(StepOnly(), Recompute(scope="state"), checkpoint=cp, tokens=toks, parents=[-1, 0, 0])
    with pytest.raises(ValueError, match=r"^Mamba2Mixer.numerics must be one of 'hw', 'ref', not 'fp64'$"):
        dataclasses.replace(rec, numerics="fp64")
    with pytest.raises(ValueError, match=r"^MixerParams.W_in must have shape \(34, 6\), not \(34, 5\)$"):
        dataclasses.replace(rec, params=dataclasses.replace(rec.params, W_in=np.zeros((34, 5))))
    with pytest.raises(TypeError, match=r"^restore needs a TreePass"):
        restore("pass", path=(0,))
    with pytest.raises(ValueError, match=r"^BacktrackMemory.store.where must be one of 'on_chip', 'off_chip'"):
        BacktrackMemory(CostMeter()).store("k", np.zeros(1), where="hbm", item="state")


def test_restore_sees_only_what_the_policy_kept(seed):
    """After the pass the ring is empty: ``recompute`` keeps nothing but the checkpoint."""
    rng = np.random.default_rng(seed)
    rec = mixer(rng)
    tp = tree_pass(rec, POLICIES["recompute"], checkpoint=rec.zero_state(),
                   tokens=tokens_for(rng, rec, 5), parents=[-1, 0, 0, 1, 2])
    assert tp.memory.keys() == ("committed",)
    assert tp.meter.bytes() == 0
    tp = tree_pass(rec, POLICIES["store"], checkpoint=rec.zero_state(),
                   tokens=tokens_for(rng, rec, 5), parents=[-1, 0, 0, 1, 2])
    assert len(tp.memory.keys()) == 6


def test_a_pass_computed_elsewhere_is_recorded_and_restored(seed):
    """tree_pass(steps=...): the policies keep the given steps; a node that was not run cannot be restored."""
    rng = np.random.default_rng(seed)
    rec = mixer(rng)
    parents = [-1, 0, 0, 1]
    toks = tokens_for(rng, rec, 4)
    cp = rec.random_state(rng)
    root = rec.step(cp, toks[0])
    steps = [root, rec.step(root.state, toks[1]), rec.step(root.state, toks[2]), None]
    for policy in POLICIES.values():
        tp = tree_pass(rec, policy, checkpoint=cp, tokens=toks, parents=parents, steps=steps)
        assert tp.outputs[3] is None
        assert same_bits(restore(tp, path=(0, 1)), sequential_run(rec, cp, toks[:2]))
    with pytest.raises(ValueError, match=r"^restore: path node 3 was not run in the pass$"):
        restore(tp, path=(0, 1, 3))
    with pytest.raises(ValueError, match=r"^steps must hold one Stepped or None per node \(4\), not 3$"):
        tree_pass(rec, StoreStates(), checkpoint=cp, tokens=toks, parents=parents, steps=steps[:3])


# -- docs and CLI ------------------------------------------------------------------

def test_docs_page_is_generated_and_current(tmp_path):
    path = write_backtrack_table(out=tmp_path)
    assert path == tmp_path / FILENAME
    text = path.read_text(encoding="utf-8")
    assert text == backtrack_markdown()
    for needle in ("−63 %", "−41 %", "**Headline**", "| 2.7B | 17 |", "hybrid-draft-stores"):
        assert needle in text
    committed = Path(__file__).resolve().parent.parent / "docs" / FILENAME
    assert committed.read_text(encoding="utf-8") == text, \
        "docs/backtracking.md is stale: run `specgen backtrack-cost --out docs`"


def test_cli_writes_the_page_deterministically(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["backtrack-cost", "--out", str(a)]) == 0
    assert main(["backtrack-cost", "--out", str(b)]) == 0
    assert (a / FILENAME).read_bytes() == (b / FILENAME).read_bytes()
    assert sorted(p.name for p in a.iterdir()) == [FILENAME]          # no temporary left behind


def test_cli_out_that_is_a_file_is_one_line_exit_2(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    proc = subprocess.run([sys.executable, "-m", "gen", "backtrack-cost", "--out", str(blocker)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"specgen backtrack-cost: error: --out {str(blocker)!r} exists and is not a folder"
    assert blocker.read_text() == "not a folder"
