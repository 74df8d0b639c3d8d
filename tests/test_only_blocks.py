"""``specgen verilog --only BLOCK`` and ``specgen golden --block SET``."""

import json

import numpy as np
import pytest

from gen.cli import main
from gen.emit import block_kind, blocks
from gen.golden_vectors import SETS
from golden.config import preset

pytestmark = pytest.mark.filterwarnings("ignore:.*created but never used")

SIM_KINDS = ["ring_fifo", "tree_verifier", "exponent_decoder", "fp16_reconstructor",
             "linear_unit", "ssm_unit", "accelerator"]


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
                           "allowed: " + ", ".join(SIM_KINDS))
    assert list(tmp_path.iterdir()) == []


def test_golden_block_writes_the_same_set_as_the_full_run(tmp_path, capsys):
    assert main(["golden", "--out", str(tmp_path / "all"), "-q"]) == 0
    assert main(["golden", "--block", "ring_fifo", "--out", str(tmp_path / "one"), "-q"]) == 0
    manifest = json.loads((tmp_path / "one" / "manifest.json").read_text())
    assert list(manifest["sets"]) == ["ring_fifo"]
    a, b = np.load(tmp_path / "all" / "ring_fifo.npz"), np.load(tmp_path / "one" / "ring_fifo.npz")
    assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)


def test_golden_unknown_block_lists_the_sets(tmp_path, capsys):
    assert main(["golden", "--block", "linear_unit", "--out", str(tmp_path / "g")]) == 2
    assert capsys.readouterr().err.strip() == (
        "specgen golden: error: --block 'linear_unit' has no golden set; allowed: "
        + ", ".join(SETS))
