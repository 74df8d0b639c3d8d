"""The host runtime and ``specgen generate``: tokens equal to a plain greedy loop; one-line errors.

The oracle is the target stepped token by token with ``MambaLM.step`` and ``argmax``: no tree,
no draft, no backtracking, so it shares nothing with the speculative path but the model.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from specgen.golden.config import preset
from specgen.golden.lm import MambaLM, lm_preset, save_tensors, speq_pair

from specgen.gen.cli.commands import main
from specgen.gen.runtime.model import ModelError, infer_config, load_model
from specgen.gen.runtime.runtime import Runtime, RtlEngine, make_engine

CONFIG = preset("sim")


def greedy(lm, prompt, n):
    """``n`` tokens of plain greedy decoding."""
    state = lm.initial_state()
    for tok in prompt[:-1]:
        _, state = lm.step(state, tok)
    out, tok = [], prompt[-1]
    for _ in range(n):
        logits, state = lm.step(state, tok)
        tok = int(np.argmax(logits))
        out.append(tok)
    return out


def seeded(name="tiny", seed=0):
    return MambaLM.from_seed(lm_preset(name), seed=seed)


def test_speq_self_speculation_is_the_bsfp_targets_greedy_sequence():
    rt = Runtime(config=CONFIG)
    lm = rt.load_model("tiny", seed=0)
    res = rt.generate([1, 2, 3], 16, tree=(2, 2, 1, 1))
    target = speq_pair(lm, bsfp=CONFIG.bsfp).target
    assert list(res.tokens) == greedy(target, [1, 2, 3], 16)
    assert sum(res.tokens_per_step) >= 16 and res.cycles_per_token is None
    assert res.nodes_per_step and max(res.nodes_per_step) > 1      # a tree was drafted


def test_a_draft_model_with_a_branching_tree_gives_the_targets_greedy_sequence():
    rt = Runtime(config=CONFIG)
    lm = rt.load_model("tiny", seed=0)
    draft = rt.load_draft("tiny", seed=1)
    res = rt.generate([4, 5], 16, tree=(3, 2, 1), gamma=0.0)
    want = greedy(lm, [4, 5], 16)
    assert list(res.tokens) == want
    # The check can fail: the draft alone decodes differently, so agreement is not free.
    assert greedy(draft, [4, 5], 16) != want
    assert max(res.nodes_per_step) == 1 + 3 + 6 + 6


def test_engines_by_name_and_the_rtl_engines_checks():
    assert isinstance(make_engine("rtl", config=CONFIG), RtlEngine)
    with pytest.raises(ValueError, match="Runtime.engine must be one of 'rtl', 'hw', 'golden'"):
        make_engine("fpga", config=CONFIG)
    with pytest.raises(ValueError, match="RtlEngine.faults: unknown key 'cut_all'; allowed: "
                                         "cut_tree, cut_commit, abort_tree, abort_commit"):
        RtlEngine(config=CONFIG, faults={"cut_all": 1})
    with pytest.raises(ValueError, match=r"RtlEngine.stall must be in \[0, 1\)"):
        RtlEngine(config=CONFIG, stall=1.0)
    with pytest.raises(ValueError, match="RtlEngine.latency"):
        RtlEngine(config=CONFIG, latency=0)


def test_the_rtl_engines_core_is_sized_for_the_model():
    from specgen.golden.lm import lm_preset
    design, core = RtlEngine(config=CONFIG).core(lm_preset("micro"), 5)
    m = lm_preset("micro")
    assert (design.ssm.nheads, design.ssm.headdim, design.ssm.d_state) == (
        m.nheads, m.headdim, m.d_state)
    assert design.linear == CONFIG.linear and core.max_nodes == 5
    # The records of the widest 5-node step fit, and the memory is the plan's and two programs.
    assert core.max_records < 128 and 1 << core.addr_width < 1 << 20


def test_runtime_checks_the_tree_against_the_design():
    rt = Runtime(config=CONFIG)
    rt.load_model("tiny")
    with pytest.raises(ValueError, match="holds at most TreeConfig.max_nodes = 64"):
        rt.generate([1], 4, tree=(4, 4, 4))
    with pytest.raises(ValueError, match="vocab 64 differs from the target's 16"):
        rt.load_draft("small")


def test_generate_json_on_the_shipped_model(capsys):
    assert main(["generate", "--board", "sim", "--tokens", "12", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    lm, _ = load_model("target")
    prompt = list(b"def __init__(self")
    assert doc["prompt_tokens"] == prompt
    assert doc["tokens"] == greedy(speq_pair(lm, bsfp=CONFIG.bsfp).target, prompt, 12)
    assert doc["text"] == bytes(doc["tokens"]).decode("utf-8", errors="replace")
    assert doc["cycles_per_token"] is None and doc["engine"] == "golden"
    assert sum(doc["tokens_per_step"]) >= 12


def test_generate_on_the_hw_engine_with_a_draft_model(capsys):
    # The accelerator's numerics (golden.decoder.HardwareLM): the shipped draft model as
    # the draft, and the same tokens as the golden engine's (the float64 model's greedy).
    argv = ["generate", "--board", "sim", "--tokens", "12", "--draft", "draft", "--tree", "2,1,1",
            "--json"]
    assert main(argv + ["--engine", "hw"]) == 0
    hw = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    golden = json.loads(capsys.readouterr().out)
    assert hw["engine"] == "hw" and hw["cycles_per_token"] is None
    assert hw["tokens"] == golden["tokens"] and hw["tokens_per_step"] == golden["tokens_per_step"]
    assert main(["generate", "--board", "sim", "--tokens", "4", "--engine", "hw"]) == 0
    assert capsys.readouterr().out.startswith("specgen generate: hw engine, model target")


def test_generate_text_output_with_a_draft_file(tmp_path, capsys):
    draft = seeded(seed=1)
    save_tensors(tmp_path / "draft.safetensors", draft.tensors, dtype="float32")
    assert main(["generate", "--board", "sim", "--model", "tiny", "--draft",
                 str(tmp_path / "draft.safetensors"), "--prompt-ids", "3,1", "--tokens", "8",
                 "--tree", "2,1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("specgen generate: golden engine, model tiny (seed 0) (2 layers")
    want = greedy(seeded(), [3, 1], 8)
    assert f"tokens: {' '.join(map(str, want))}" in lines
    assert any(line.startswith("tokens per step: ") for line in lines)


def test_weight_file_config_is_inferred_from_the_shapes():
    from specgen.gen.models import manifest, model_path
    from specgen.golden.lm import LMConfig, load_tensors
    for name, record in manifest()["models"].items():
        assert infer_config(load_tensors(model_path(name))) == LMConfig(**record["config"])
    untied = lm_preset("small", tie_embeddings=False, expand=3, headdim=4, d_conv=3)
    assert infer_config(MambaLM.from_seed(untied, seed=0).tensors) == untied


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gen", *args], capture_output=True, text=True,
                          cwd=cwd, env=dict(os.environ, PYTHONPATH=os.getcwd()))


@pytest.mark.parametrize("argv,fragments", [
    # The default model is wider than the sim design's linear jobs: refused before a build.
    ([], ["specgen generate: error: --model: the target model does not fit the RTL engine's "
          "decoder core: DecoderCore: the model's d_model (128, the inputs of "
          "backbone.layers.*.mixer.in_proj.weight) exceeds linear.max_k (16)"]),
    (["--model", "micro", "--tree", "4,3"],
     ["specgen generate: error: --tree 4,3: RtlEngine: a tree of 17 nodes with the root; the "
      "decoder core runs at most linear.max_tokens = 16"]),
])
def test_rtl_engine_refuses_what_the_core_cannot_run_in_one_line(tmp_path, argv, fragments):
    proc = run_cli("generate", "--board", "sim", "--engine", "rtl", *argv, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1
    for f in fragments:
        assert f in proc.stderr, proc.stderr


def bad_files(tmp_path):
    (tmp_path / "short.safetensors").write_bytes(b"\x10\x00")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    t = dict(seeded().tensors)
    t["backbone.layers.1.mixer.in_proj.weight"] = np.where(
        np.arange(88 * 16).reshape(88, 16) == 17, np.nan, t["backbone.layers.1.mixer.in_proj.weight"])
    save_tensors(tmp_path / "nan.npz", t)
    t = dict(seeded().tensors)
    del t["backbone.layers.1.mixer.D"]
    save_tensors(tmp_path / "missing.npz", t)
    # d_state 3: the sim design's SSM unit (4 lanes) cannot run it.
    save_tensors(tmp_path / "odd.npz", MambaLM.from_seed(lm_preset("tiny", d_state=3), seed=0).tensors)


@pytest.mark.parametrize("argv,fragments", [
    (["--engine", "asic"], ["unknown --engine 'asic'; allowed: rtl, hw, golden"]),
    (["--model", "nosuch"], ["--model: model 'nosuch': not a shipped or seeded model (target, "
                             "draft, micro, tiny, small) and not a .npz or .safetensors file"]),
    (["--model", "gone.npz"], ["--model: model 'gone.npz': no such file"]),
    (["--model", "short.safetensors"], ["malformed weight file", "shorter than its 8-byte header"]),
    (["--model", "junk.npz"], ["--model: model 'junk.npz': malformed weight file"]),
    (["--model", "nan.npz"], ["tensor 'backbone.layers.1.mixer.in_proj.weight' has 1 value(s)",
                              "first nan at index (1, 1)", "allowed: finite values with |w| <= "
                              "65504 (FP16)"]),
    (["--model", "missing.npz"], ["missing tensor 'backbone.layers.1.mixer.D' (shape (8,))"]),
    (["--model", "tiny", "--draft", "small"], ["--draft: draft small (seed 0): vocab 64 differs"]),
    (["--model", "tiny", "--prompt", "hi"], ["--prompt: a text prompt needs a byte-level model"]),
    (["--model", "tiny", "--prompt-ids", "1,16"], ["--prompt-ids must be comma-separated "
                                                   "integers in [0, 15]"]),
    (["--prompt", "a", "--prompt-ids", "1"], ["give --prompt TEXT or --prompt-ids IDS, not both"]),
    (["--model", "tiny", "--tree", "2,2,1", "--set", "tree.max_nodes=8"],
     ["--tree 2,2,1:", "has 11 nodes with the root", "TreeConfig.max_nodes = 8"]),
    (["--tree", "2,x"], ["--tree must be a comma-separated branching list"]),
    (["--tokens", "0"], ["argument --tokens: must be an integer >= 1, not 0"]),
    (["--gamma", "1.5"], ["--gamma must be in [0, 1], not 1.5"]),
    (["--engine", "hw", "--model", "odd.npz"], ["--model: the target model: HardwareLM: the "
                                                "model's SSM (nheads 8, headdim 4, d_state 3) "
                                                "does not fit the design's SSM unit",
                                                "(the design: --set ssm.lanes)"]),
    (["--engine", "hw", "--model", "tiny", "--draft", "odd.npz"], ["--draft: the draft model: "
                                                                   "HardwareLM"]),
])
def test_bad_input_is_one_line_exit_2(argv, fragments, tmp_path, capsys, monkeypatch):
    bad_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    try:
        status = main(["generate", "--board", "sim", *argv])
    except SystemExit as exc:       # argparse's own errors (a flag's type) exit from the parser
        status = exc.code
    assert status == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("specgen generate: error: ")
    for fragment in fragments:
        assert fragment in err, err


def test_load_model_errors_are_model_errors(tmp_path):
    bad_files(tmp_path)
    with pytest.raises(ModelError, match="shorter than its 8-byte header"):
        load_model(tmp_path / "short.safetensors")


def test_the_docs_page_shows_what_the_command_prints(capsys):
    """docs/runtime.md's first example is this command's output, verbatim."""
    from pathlib import Path
    page = (Path(__file__).parent.parent / "docs" / "runtime.md").read_text()
    command = "$ specgen generate --board sim --tokens 32\n"
    shown = page.split(command, 1)[1].split("\n\n", 1)[0]
    assert main(["generate", "--board", "sim", "--tokens", "32"]) == 0
    assert capsys.readouterr().out.rstrip("\n") == shown


def test_rtl_engine_refuses_a_draft_of_other_widths_in_one_line(tmp_path):
    """The core's draft passes run on the target's widths (fewer layers are fine); a draft
    model of another width is refused before a build, naming --draft."""
    MambaLM.from_seed(lm_preset("micro", d_state=16), seed=2).save(tmp_path / "wide.npz")
    proc = run_cli("generate", "--board", "sim", "--engine", "rtl", "--model", "micro",
                   "--draft", str(tmp_path / "wide.npz"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1
    assert "specgen generate: error: --draft: the draft model (" in proc.stderr
    assert "does not have the target's widths" in proc.stderr
    assert "RtlEngine(draft_on='host') drafts on the host" in proc.stderr
    with pytest.raises(ValueError, match="RtlEngine.draft_on must be one of 'core', 'host'"):
        RtlEngine(config=CONFIG, draft_on="fpga")


def test_draft_on_is_for_the_rtl_engine(capsys):
    assert main(["generate", "--board", "sim", "--model", "micro", "--draft-on", "host"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "specgen generate: error: --draft-on host is for --engine rtl, not golden"


def test_backend_is_for_the_rtl_engine(capsys):
    assert main(["generate", "--board", "sim", "--model", "micro", "--backend", "mmio"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "specgen generate: error: --backend mmio is for --engine rtl, not golden"
    with pytest.raises(ValueError, match="RtlEngine.backend must be one of 'axi-lite', 'mmio'"):
        RtlEngine(config=CONFIG, backend="pcie")


def test_draft_flow_is_for_the_draft_on_the_core(capsys):
    assert main(["generate", "--board", "sim", "--model", "micro", "--draft-flow",
                 "prefix"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "specgen generate: error: --draft-flow prefix is for --engine rtl, not golden"
    assert main(["generate", "--board", "sim", "--model", "micro", "--engine", "rtl",
                 "--draft-on", "host", "--draft-flow", "prefix"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("specgen generate: error: --draft-flow prefix is for the draft on the "
                   "core, not --draft-on host")
    with pytest.raises(ValueError, match="RtlEngine.draft_flow must be one of 'node', 'prefix'"):
        RtlEngine(config=CONFIG, draft_flow="level")
