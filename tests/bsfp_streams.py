"""Test steps shared by the BSFP stream blocks (:class:`hw.remap_logic.BSFPStream`):
``ExponentDecoder`` and ``FP16Reconstructor`` take the same parameters, are linted
the same way and run the same exhaustive cocotb benches (``sim/streams.py``)."""

import pytest

from specgen.sim.lint import lint
from specgen.sim.runner import emit_verilog, run_bench, simulator_available


def bench_params(config, stages, **extra):
    """The bench's parameters: the BSFP config's fields and ``stages``."""
    return {"draft": config.draft, "remap": [list(p) for p in config.remap],
            "pair_representative": config.pair_representative, "stages": stages, **extra}


def run_verilator(block, module, config, stages):
    # A combinational block (stages = 0) has no clock and no reset to test.
    tests = None if stages else ["exhaustive", "full_rate"]
    dut = block(config=config, stages=stages)
    run_bench(dut, name=dut.module_name, module=module, testcase=tests,
              params=bench_params(config, stages))


def run_icarus(block, module, config):
    ok, reason = simulator_available("icarus")
    if not ok:
        pytest.skip(reason)
    dut = block(config=config, stages=1)
    run_bench(dut, name=dut.module_name, module=module, simulator="icarus",
              params=bench_params(config, 1, limit=4000))


def lint_block(block, config, stages, tmp_path):
    dut = block(config=config, stages=stages)
    name = dut.module_name
    path = tmp_path / f"{name}.v"
    path.write_text(emit_verilog(dut, name=name))
    ok, output = lint(path, top=name)
    assert ok, output
