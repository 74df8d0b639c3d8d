"""``TreeVerifier``: parameter checks, lint, and the cocotb bench (``sim/tree_verifier.py``)."""

import dataclasses

import pytest
from amaranth.hdl import Fragment

from specgen.golden.config import TreeConfig, preset
from specgen.hw.tree_verifier import TreeVerifier
from specgen.sim.lint import lint
from specgen.sim.runner import emit_verilog, run_bench, simulator_available

TESTS = ["random_trees", "full_rate", "reset_mid_stream", "errors"]

CONFIGS = [
    pytest.param(64, 16, id="n64-d16"),
    pytest.param(12, 3, id="n12-d3"),
]


def _dut(max_nodes, fifo_depth):
    return TreeVerifier(max_nodes=max_nodes, fifo_depth=fifo_depth, max_passes=4)


@pytest.mark.sim
@pytest.mark.parametrize("max_nodes,fifo_depth", CONFIGS)
def test_tree_verifier_verilator(max_nodes, fifo_depth):
    name = f"tree_verifier_n{max_nodes}_d{fifo_depth}"
    run_bench(emit_verilog(_dut(max_nodes, fifo_depth), name=name), name=name,
              module="specgen.sim.tree_verifier", testcase=TESTS,
              params={"max_nodes": max_nodes, "fifo_depth": fifo_depth, "max_passes": 4, "trees": 60})


@pytest.mark.sim
def test_tree_verifier_icarus():
    ok, reason = simulator_available("icarus")
    if not ok:
        pytest.skip(reason)
    name = "tree_verifier_n12_d3"
    run_bench(emit_verilog(_dut(12, 3), name=name), name=name, module="specgen.sim.tree_verifier",
              simulator="icarus", testcase=TESTS,
              params={"max_nodes": 12, "fifo_depth": 3, "max_passes": 4, "trees": 30})


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.parametrize("max_nodes,fifo_depth", CONFIGS + [pytest.param(64, 5, id="n64-d5"),
                                                            pytest.param(16, 1, id="n16-d1")])
def test_tree_verifier_long(max_nodes, fifo_depth):
    name = f"tree_verifier_n{max_nodes}_d{fifo_depth}"
    run_bench(emit_verilog(_dut(max_nodes, fifo_depth), name=name), name=name,
              module="specgen.sim.tree_verifier", testcase=["random_trees", "reset_mid_stream", "errors"],
              params={"max_nodes": max_nodes, "fifo_depth": fifo_depth, "max_passes": 4, "trees": 2000})


@pytest.mark.parametrize("max_nodes,fifo_depth", CONFIGS)
def test_tree_verifier_lint(max_nodes, fifo_depth, tmp_path):
    name = f"tree_verifier_n{max_nodes}_d{fifo_depth}"
    path = tmp_path / f"{name}.v"
    path.write_text(emit_verilog(_dut(max_nodes, fifo_depth), name=name))
    ok, output = lint(path, top=name)
    assert ok, output


@pytest.mark.filterwarnings("ignore:.*created but never used")
@pytest.mark.parametrize("kwargs,exc,message", [
    ({"max_nodes": 1, "fifo_depth": 4}, ValueError, "TreeVerifier.max_nodes must be an integer >= 2, not 1"),
    ({"max_nodes": 8, "fifo_depth": 0}, ValueError, "TreeVerifier.fifo_depth must be an integer >= 1, not 0"),
    ({"max_nodes": 8, "fifo_depth": 4.0}, TypeError,
     "TreeVerifier.fifo_depth must be an integer >= 1, not 4.0"),
    ({"max_nodes": True, "fifo_depth": 4}, TypeError, "TreeVerifier.max_nodes must be an integer >= 2, not True"),
    ({"max_nodes": 8, "fifo_depth": 4, "max_passes": 0}, ValueError,
     "TreeVerifier.max_passes must be an integer >= 1, not 0"),
])
def test_tree_verifier_rejects_bad_parameters(kwargs, exc, message):
    with pytest.raises(exc) as info:
        TreeVerifier(**kwargs)
    assert str(info.value) == message


def test_tree_verifier_parameters_are_keyword_only():
    with pytest.raises(TypeError):
        TreeVerifier(64, 16)


@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_tree_verifier_from_config():
    config = dataclasses.replace(preset("sim"), tree=TreeConfig(fifo_depth=5, max_nodes=40))
    tv = TreeVerifier.from_config(config)
    assert (tv.max_nodes, tv.fifo_depth, tv.max_passes, tv.latency) == (40, 5, 64, 2)
    assert tv.module_name == "tree_verifier_n40_d5_p64"
    assert tv.peak_level.shape().width == 3
    with pytest.raises(TypeError, match="TreeVerifier.from_config needs a golden.config.Config, "
                                        "not 16"):
        TreeVerifier.from_config(16)
    Fragment.get(tv, None)  # elaborates: the component is well formed
