"""``specgen verilog --only BLOCK`` and ``specgen golden --block SET``."""

import json

import numpy as np
import pytest

from specgen.gen.cli.commands import main
from specgen.gen.emit.verilog import block_kind, blocks
from specgen.gen.emit.golden_vectors import BLOCK_SETS, SETS
from specgen.golden.config import preset

pytestmark = pytest.mark.filterwarnings("ignore:.*created but never used")

SIM_KINDS = ["ring_fifo", "tree_verifier", "exponent_decoder", "fp16_reconstructor",
             "linear_engine", "ssm_engine", "accelerator"]
#: Blocks built only on request (gen.emit.blocks.library_blocks): not in the top level.
LIBRARY_KINDS = ["ssm_unit", "linear_unit", "dsp_linear_unit", "conv1d", "gated_rms_norm",
                 "residual"]


def test_block_kinds_are_the_class_names():
    modules = blocks(preset("sim"))
    assert [block_kind(c) for c in modules.values()] == SIM_KINDS
    for c in modules.values():
        c._MustUse__silence = True


# The accelerator alone is the whole design's top level: the full emission tests cover it.
@pytest.mark.parametrize("kind", [k for k in SIM_KINDS if k != "accelerator"])
def test_verilog_only_one_block(tmp_path, capsys, kind):
    out = tmp_path / kind
    assert main(["verilog", "--board", "sim", "--only", kind, "--out", str(out), "-q"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["only"] == [kind] and len(manifest["modules"]) == 1
    (module,) = manifest["modules"]
    assert f"module {module}(" in (out / f"{module}.v").read_text()
    assert sorted(p.name for p in out.glob("*.v")) == [f"{module}.v"]
    assert (out / f"{module}.core").is_file()


def test_verilog_only_unknown_block_lists_them(tmp_path, capsys):
    assert main(["verilog", "--board", "sim", "--only", "pe", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("specgen verilog: error: --only 'pe' is no block of the design; "
                           "allowed: " + ", ".join(SIM_KINDS + LIBRARY_KINDS))
    assert list(tmp_path.iterdir()) == []


def test_verilog_only_library_blocks(tmp_path, capsys):
    """A block the top level does not instantiate yet is emitted on request, alone or with
    others, and is not part of the default design."""
    out = tmp_path / "lib"
    assert main(["verilog", "--board", "sim", "--only", "residual", "--only", "conv1d",
                 "--out", str(out), "-q"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(manifest["only"]) == ["conv1d", "residual"] and len(manifest["modules"]) == 2
    for module in manifest["modules"]:
        assert f"module {module}(" in (out / f"{module}.v").read_text()
    modules = blocks(preset("sim"))
    assert not set(LIBRARY_KINDS) & {block_kind(c) for c in modules.values()}
    for c in modules.values():
        c._MustUse__silence = True


def test_golden_block_writes_the_same_set_as_the_full_run(tmp_path, capsys):
    assert main(["golden", "--out", str(tmp_path / "all"), "-q"]) == 0
    assert main(["golden", "--block", "ring_fifo", "--out", str(tmp_path / "one"), "-q"]) == 0
    manifest = json.loads((tmp_path / "one" / "manifest.json").read_text())
    assert list(manifest["sets"]) == ["ring_fifo"]
    a, b = np.load(tmp_path / "all" / "ring_fifo.npz"), np.load(tmp_path / "one" / "ring_fifo.npz")
    assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)


def test_golden_unknown_block_lists_the_blocks_and_sets(tmp_path, capsys):
    assert main(["golden", "--block", "pe", "--out", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("specgen golden: error: --block 'pe' has no golden set; allowed: ")
    for name in [*SIM_KINDS, *LIBRARY_KINDS, *SETS]:
        assert name in err


@pytest.mark.parametrize("kind", SIM_KINDS + LIBRARY_KINDS)
def test_golden_block_for_every_block(tmp_path, capsys, kind):
    assert set(BLOCK_SETS) == set(SIM_KINDS + LIBRARY_KINDS)
    assert main(["golden", "--block", kind, "--out", str(tmp_path / kind), "-q"]) == 0
    sets = json.loads((tmp_path / kind / "manifest.json").read_text())["sets"]
    assert sorted(sets) == sorted(BLOCK_SETS[kind])


def test_tree_verifier_set_follows_the_ring_discipline(tmp_path):
    # Node i writes slot i mod fifo_depth and reads its parent's slot (SpecMamba's FIFO
    # tree verification); the root reads the committed state.
    tree = preset("sim").tree
    assert main(["golden", "--block", "tree_verifier", "--out", str(tmp_path / "t"), "-q"]) == 0
    v = np.load(tmp_path / "t" / "tree_verifier.npz")
    none = 0xFFFFFFFF
    assert len(v["num_nodes"]) == 32 and max(v["num_nodes"]) <= tree.max_nodes
    for i, n in enumerate(v["num_nodes"]):
        parents = v["parents"][i, :n].astype(np.int64)
        assert parents[0] == none and np.all(parents[1:] < np.arange(1, n))
        assert np.array_equal(v["write_slot"][i, :n], np.arange(n) % tree.fifo_depth)
        assert v["parent_slot"][i, 0] == none
        assert np.array_equal(v["parent_slot"][i, 1:n], parents[1:] % tree.fifo_depth)
        assert list(v["last"][i, :n]) == [0] * (n - 1) + [1]
        assert np.all(v["parents"][i, n:] == none)
        assert v["live"][i, :n].max() <= tree.fifo_depth


def test_ssm_unit_set_is_close_to_the_float64_reference(tmp_path):
    from specgen.golden.mamba2 import SSMParams, ssm_step_ref
    cfg = preset("sim").ssm
    assert main(["golden", "--block", "ssm_unit", "--out", str(tmp_path / "s"), "-q"]) == 0
    v = np.load(tmp_path / "s" / "ssm_unit.npz")
    f = {k: v[k].view(np.float32) for k in v}
    params = SSMParams(A=f["A"], dt_bias=f["dt_bias"], D=f["D"])
    state = np.zeros(cfg.state_shape)
    for t in range(len(f["x"])):
        ref = ssm_step_ref(cfg, params, state, f["x"][t], f["B"][t], f["C"][t], f["dt"][t])
        state = ref.state
        # The binary32 datapath with table nonlinearities tracks float64 to about 1e-3
        # relative (docs/ssm-numerics.md); a wrong operand order or table would not.
        assert np.allclose(f["y"][t], ref.y, rtol=1e-2, atol=1e-3)
    assert np.allclose(f["state"], state, rtol=1e-2, atol=1e-3)
