"""The shipped trained models (gen/models) and ``specgen acceptance``; no torch here."""

import hashlib
import json
import math
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

import specgen.gen.models
from specgen.gen.studies.acceptance import heldout_prompts, per_depth_acceptance
from specgen.gen.cli.commands import main
from specgen.gen.models import DATA_DIR, MANIFEST_NAME, load_model
from specgen.golden.lm import LMConfig, MambaLM, speq_pair
from specgen.golden.speculative import SpecResult, speculative_generate

# Read here, not through specgen.gen.models: the test checks the package's reading of it.
MANIFEST = json.loads((DATA_DIR / MANIFEST_NAME).read_text())
RECORDS = MANIFEST["models"]


def _header(data):
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n])


def _greedy(lm, prompt, n):
    """Target-only greedy decoding, step by step (independent of golden.speculative)."""
    state = lm.initial_state()
    for tok in prompt[:-1]:
        _, state = lm.step(state, tok)
    tok, out = prompt[-1], []
    for _ in range(n):
        logits, state = lm.step(state, tok)
        tok = int(np.argmax(logits))
        out.append(tok)
    return out


@pytest.fixture(scope="module")
def models():
    return {name: load_model(name) for name in RECORDS}


def test_shipped_files_are_fp16_match_the_manifest_and_are_small():
    assert {"target", "draft"} <= set(RECORDS)
    total = 0
    for rec in RECORDS.values():
        data = (DATA_DIR / rec["file"]).read_bytes()
        total += len(data)
        assert hashlib.sha256(data).hexdigest() == rec["sha256"]
        dtypes = {v["dtype"] for k, v in _header(data).items() if k != "__metadata__"}
        assert dtypes == {"F16"}
    assert total <= 20 * 2 ** 20


def test_golden_loads_the_shipped_weights(models):
    for name, rec in RECORDS.items():
        lm = MambaLM.load(DATA_DIR / rec["file"], config=LMConfig(**rec["config"]))
        assert all(np.array_equal(lm.tensors[k], models[name].tensors[k]) for k in lm.tensors)
        # FP16 values: float64 copies that round-trip through binary16 exactly.
        w = lm.tensors["backbone.layers.0.mixer.in_proj.weight"]
        assert np.array_equal(w.astype(np.float16).astype(np.float64), w)
    t, d = models["target"].config, models["draft"].config
    assert t.n_layer > d.n_layer and t.d_model > d.d_model and t.vocab == d.vocab == 256


def test_golden_loader_errors_name_the_tensor():
    rec = RECORDS["target"]
    n = rec["config"]["n_layer"]
    fewer = LMConfig(**{**rec["config"], "n_layer": n - 1})
    with pytest.raises(ValueError, match=rf"unexpected tensor 'backbone\.layers\.{n - 1}\."):
        MambaLM.load(DATA_DIR / rec["file"], config=fewer)
    wider = LMConfig(**{**rec["config"], "d_state": rec["config"]["d_state"] * 2})
    with pytest.raises(ValueError, match=r"tensor 'backbone\.layers\.0\.mixer\.in_proj\.weight' must "
                                         r"have shape"):
        MambaLM.load(DATA_DIR / rec["file"], config=wider)


def test_sha256_mismatch_is_reported(tmp_path, monkeypatch):
    for rec in RECORDS.values():
        shutil.copy(DATA_DIR / rec["file"], tmp_path / rec["file"])
    shutil.copy(DATA_DIR / MANIFEST_NAME, tmp_path / MANIFEST_NAME)
    monkeypatch.setattr(specgen.gen.models, "DATA_DIR", tmp_path)
    load_model("target")                        # intact copy: loads
    path = tmp_path / RECORDS["target"]["file"]
    data = bytearray(path.read_bytes())
    data[-1] ^= 1                               # the last weight's low mantissa bit
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256 .* differs from the manifest"):
        load_model("target")
    load_model("draft")
    with pytest.raises(ValueError, match="gen.models.model must be one of"):
        load_model("nope")


def test_golden_reaches_the_recorded_heldout_perplexity(models):
    from specgen.gen.models.corpus import load_corpus
    held = load_corpus(expect={"heldout": MANIFEST["corpus"]["sha256"]["heldout"]})["heldout"]
    for name, rec in RECORDS.items():
        s = rec["heldout_slice"]
        toks = list(held[s["start"]:s["start"] + s["length"]])
        logits, _ = models[name].prefill(toks)
        logp = logits[:-1] - np.logaddexp.reduce(logits[:-1], axis=1, keepdims=True)
        nll = -float(np.mean(logp[np.arange(len(toks) - 1), toks[1:]]))
        # torch float32 recorded it; golden float64 on the same FP16 weights.
        assert nll == pytest.approx(s["nats_per_byte"], rel=1e-4, abs=1e-5)
        # A trained model: far below the uniform byte's ln 256 nats.
        assert nll < 0.5 * math.log(256)
    # The check can fail: untrained weights of the same shape are far off.
    rand = MambaLM.from_seed(models["draft"].config, seed=0)
    logits, _ = rand.prefill(toks[:64])
    logp = logits[:-1] - np.logaddexp.reduce(logits[:-1], axis=1, keepdims=True)
    assert -float(np.mean(logp[np.arange(63), toks[1:64]])) > 0.9 * math.log(256)


def test_speculative_greedy_is_lossless_with_the_draft_model(models):
    target, draft = models["target"], models["draft"]
    prompt = heldout_prompts(n=1, length=32)[0]
    want = _greedy(target, prompt, 24)
    for tree, gamma in (((2, 2, 1, 1), 0.6), ((1,) * 5, 0.0)):
        res = speculative_generate(target, draft, prompt, 24, tree=tree, gamma=gamma,
                                   tile_size=target.config.state_elems)
        assert list(res.tokens) == want
        assert res.mean_tokens_per_step > 1.3     # the trained draft does get accepted
    assert bytes(want) != bytes(_greedy(draft, prompt, 24))   # and it is not the target


def test_speculative_greedy_is_lossless_with_speq(models):
    pair = speq_pair(models["target"])
    prompt = heldout_prompts(n=2, length=32)[1]
    res = speculative_generate(pair.target, pair.draft, prompt, 24, tree=(1,) * 8,
                               tile_size=pair.target.config.state_elems)
    assert list(res.tokens) == _greedy(pair.target, prompt, 24)


def test_draft_depth_and_leaf_record(models):
    lm = models["draft"]
    prompt = heldout_prompts(n=1, length=16)[0]
    # Draft = target, no early stopping: every chain is drafted to L and accepted to its leaf.
    res = speculative_generate(lm, lm, prompt, 12, tree=(1, 1, 1), gamma=0.0)
    assert res.draft_depth_per_step == (3,) * res.steps
    assert res.path_at_leaf_per_step == (True,) * res.steps
    assert per_depth_acceptance(res) == ([1.0, 1.0, 1.0], [res.steps] * 3)
    # Early stopping at gamma = 1 keeps only the root's children: depth 1.
    res = speculative_generate(lm, lm, prompt, 6, tree=(2, 2), gamma=1.0)
    assert set(res.draft_depth_per_step) == {1}


def test_per_depth_acceptance_by_hand():
    res = SpecResult(tokens=(), tokens_per_step=(3, 1, 4, 2), accepted_per_step=(2, 0, 3, 1),
                     nodes_per_step=(4, 4, 4, 2), peak_live_per_step=(), max_onchip_bytes=0,
                     draft_depth_per_step=(3, 3, 3, 1),
                     path_at_leaf_per_step=(False, False, True, True))
    # Depth 1: four trials, step 2 rejects. Depth 2: steps 1 and 3 (step 4 ended at a
    # leaf). Depth 3: step 1 rejects, step 3 accepts.
    assert per_depth_acceptance(res) == ([0.75, 1.0, 0.5], [4, 2, 2])


KEYS = {"model", "draft", "tree", "gamma", "tokens_per_step", "accepted_per_step",
        "per_depth_acceptance", "per_depth_trials", "draft_length", "nodes_per_step", "agreement",
        "steps", "generated", "wall_s"}


@pytest.mark.parametrize("extra", [[], ["--draft", "draft", "--tree", "2,1"]])
def test_acceptance_cli_json(capsys, extra):
    argv = ["acceptance", "--prompts", "2", "--prompt-len", "24", "--tokens", "10", "--json"]
    assert main(argv + extra) == 0
    rep = json.loads(capsys.readouterr().out)
    assert KEYS <= set(rep)
    assert rep["draft"] == ("draft" if extra else "speq")
    assert [len(g) for g in rep["generated"]] == [10, 10]
    assert 1.0 <= rep["tokens_per_step"] <= len(rep["tree"]) + 1
    assert rep["tokens_per_step"] == pytest.approx(1.0 + rep["accepted_per_step"])
    assert 1 <= rep["draft_length"] <= len(rep["tree"])
    assert len(rep["per_depth_acceptance"]) <= len(rep["tree"])
    assert all(r is None or 0.0 <= r <= 1.0 for r in rep["per_depth_acceptance"])
    assert rep["per_depth_trials"][0] == rep["steps"]     # every step tries depth 1
    assert 0.0 <= rep["agreement"] <= 1.0


def test_acceptance_cli_text_and_errors(capsys):
    assert main(["acceptance", "--prompts", "1", "--prompt-len", "16", "--tokens", "4",
                 "--tree", "chain2"]) == 0
    assert "tokens/step" in capsys.readouterr().out
    for args, message in (
            (["--draft", "nope"], "unknown --draft 'nope'; allowed: speq, target, draft"),
            (["--model", "x"], "unknown --model 'x'; allowed: target, draft"),
            (["--gamma", "1.5"], "--gamma must be in [0, 1], not 1.5"),
            (["--bsfp", "E4M0"], "unknown --bsfp 'E4M0'; allowed: E3M0, E3M0-noremap, E3M0+W, "
                                 "E2M1, E1M2"),
            (["--tokens", "0"], "--tokens must be an integer >= 1, not 0")):
        proc = subprocess.run([sys.executable, "-m", "gen", "acceptance", *args],
                              capture_output=True, text=True)
        assert proc.returncode == 2
        assert proc.stderr.strip() == f"specgen acceptance: error: {message}"


def test_runtime_does_not_import_torch():
    code = ("import sys, gen.cli.commands, gen.studies.acceptance, specgen.gen.models, specgen.gen.models.card, specgen.gen.models.corpus; "
            "gen.cli.commands.build_parser(); sys.exit('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_hw_numerics_model_follows_the_float64_model(models):
    from specgen.gen.models.study import HwLM
    lm = models["draft"]
    toks = heldout_prompts(n=1, length=24)[0]
    ref, _ = lm.prefill(toks)
    for fmt in ("fp32", "fp16"):
        hw, _ = HwLM(lm, state_format=fmt).prefill(toks)
        assert not np.array_equal(hw, ref)          # binary32 and the SSM unit's tables
        assert np.abs(hw - ref).max() < 1e-2 * np.abs(ref).max()


def test_model_card_is_up_to_date(tmp_path):
    from specgen.gen.models.card import write_card
    write_card(out=tmp_path)
    assert (tmp_path / "models.md").read_text() == (DATA_DIR.parents[2] / "docs" / "models.md").read_text()


def test_acceptance_page_is_up_to_date_and_describes_the_shipped_models(tmp_path):
    from specgen.gen.models.study import write_page
    docs = DATA_DIR.parents[2] / "docs"
    res = json.loads((docs / "acceptance.json").read_text())
    assert res["models"] == {n: RECORDS[n]["sha256"] for n in ("target", "draft")}
    write_page(res, out=tmp_path)
    assert (tmp_path / "acceptance.md").read_text() == (docs / "acceptance.md").read_text()


def test_perf_takes_a_measured_acceptance_profile(tmp_path, capsys):
    assert main(["acceptance", "--prompts", "2", "--prompt-len", "24", "--tokens", "10",
                 "--tree", "chain4", "--json"]) == 0
    path = tmp_path / "acceptance.json"
    path.write_text(capsys.readouterr().out)
    rep = json.loads(path.read_text())
    assert main(["perf", "--board", "vhk158", "--target", "2.7B", "--draft", "speq",
                 "--acceptance", str(path), "--json"]) == 0
    perf = json.loads(capsys.readouterr().out)
    assert perf["tree"] == rep["tree"] == [1] * 4
    assert perf["tokens_per_step"] == rep["tokens_per_step"]
    # The early-stopping probability read from the profile makes the performance model
    # draft and verify, on a chain, what the golden decoder did.
    assert perf["draft_passes"] == pytest.approx(rep["draft_length"], rel=1e-9)
    assert perf["verify_nodes"] == pytest.approx(rep["nodes_per_step"], rel=1e-9)
    for extra, message in ((["--accept", "3"], "give --acceptance FILE or --accept/--alpha/"
                                               "--early-stop, not both"),
                           (["--tree", "chain8"], "--tree chain8 is not the measured tree 1,1,1,1 "
                                                  "of --acceptance")):
        proc = subprocess.run([sys.executable, "-m", "gen", "perf", "--board", "vhk158", "--target",
                               "2.7B", "--draft", "speq", "--acceptance", str(path), *extra],
                              capture_output=True, text=True)
        assert proc.returncode == 2
        assert proc.stderr.strip() == f"specgen perf: error: {message}"
