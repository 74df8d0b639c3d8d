import json
import subprocess
import sys

import numpy as np
import pytest

from specgen.gen.emit.golden_vectors import SETS, write_golden
from specgen.golden.config import preset
from specgen.hw.ring_fifo import RingFIFO
from specgen.sim.runner import run_bench
from specgen.sim.vectors import VectorError, load_set


@pytest.fixture(scope="module")
def vectors(tmp_path_factory):
    out = tmp_path_factory.mktemp("golden") / "v"
    write_golden(out=out, seed=7, config="sim", progress=False)
    return out


def test_same_command_twice_gives_identical_bytes(vectors, tmp_path):
    again = tmp_path / "again"
    write_golden(out=again, seed=7, config="sim", progress=False)
    names = sorted(p.name for p in vectors.iterdir())
    assert names == sorted(p.name for p in again.iterdir())
    for name in names:
        assert (vectors / name).read_bytes() == (again / name).read_bytes(), name


def test_seed_changes_vectors(vectors, tmp_path):
    other = tmp_path / "other"
    write_golden(out=other, seed=8, config="sim", progress=False)
    assert (vectors / "dot.npz").read_bytes() != (other / "dot.npz").read_bytes()


def test_manifest_and_hex_agree_with_npz(vectors):
    manifest = json.loads((vectors / "manifest.json").read_text())
    assert manifest["seed"] == 7 and manifest["config"]["name"] == "sim"
    assert set(manifest["sets"]) == set(SETS)
    for name, info in manifest["sets"].items():
        arrays = load_set(vectors, name)
        assert set(arrays) == set(info["arrays"])
        for key, array in arrays.items():
            assert list(array.shape) == info["arrays"][key]["shape"]
            lines = (vectors / f"{name}.{key}.hex").read_text().split()
            assert len(lines) == array.size
            np.testing.assert_array_equal(
                np.array([int(x, 16) for x in lines], dtype=np.uint64),
                array.reshape(-1).astype(np.uint64))


def test_tampered_file_is_refused(vectors, tmp_path):
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(vectors, copy)
    data = bytearray((copy / "dot.npz").read_bytes())
    data[-100] ^= 1
    (copy / "dot.npz").write_bytes(bytes(data))
    with pytest.raises(VectorError, match="does not match the manifest"):
        load_set(copy, "dot")
    with pytest.raises(VectorError, match="no set 'nope'; available: "):
        load_set(copy, "nope")
    with pytest.raises(VectorError, match="not a golden vector folder"):
        load_set(tmp_path, "dot")


def test_cli_unknown_config_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gen", "golden", "--out", str(tmp_path / "g"),
                           "--board", "zcu"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("specgen golden: error: unknown board 'zcu'; "
                                   "allowed: sim, vck190, vhk158")
    assert not (tmp_path / "g").exists()


def test_cli_negative_seed_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gen", "golden", "--out", str(tmp_path / "g"),
                           "--seed", "-1"], capture_output=True, text=True)
    assert proc.returncode == 2 and "argument --seed: must be an integer >= 0" in proc.stderr
    assert not (tmp_path / "g").exists()


@pytest.mark.sim
def test_ring_fifo_bench_replays_golden_vectors(vectors):
    tree = preset("sim").tree
    run_bench(RingFIFO(width=tree.slot_bits, depth=tree.fifo_depth),
              name=f"ring_fifo_w{tree.slot_bits}_d{tree.fifo_depth}", module="specgen.sim.ring_fifo",
              testcase="replay_vectors", params={"vectors": str(vectors)})
