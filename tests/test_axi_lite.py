"""AXI4-Lite register file: cocotb benches driven by cocotbext-axi, and parameter checks."""

import pytest

from specgen.golden.config import preset
from specgen.hw.axi_lite import AXI4LiteRegisterFile
from specgen.hw.regmap import accelerator_regmap
from specgen.sim.runner import run_bench, simulator_available

TESTS = ["reset_values", "random_access", "full_speed", "unmapped_is_slverr",
         "concurrent_read_and_write"]


@pytest.mark.sim
def test_axi_lite_regfile_verilator():
    dut = AXI4LiteRegisterFile(regmap=accelerator_regmap(preset("sim")))
    run_bench(dut, name="axi_lite_regfile_sim", module="specgen.sim.axi_lite", testcase=TESTS,
              params={"preset": "sim", "ops": 600})


@pytest.mark.sim
def test_axi_lite_regfile_icarus():
    ok, reason = simulator_available("icarus")
    if not ok:
        pytest.skip(reason)
    dut = AXI4LiteRegisterFile(regmap=accelerator_regmap(preset("sim")))
    run_bench(dut, name="axi_lite_regfile_sim", module="specgen.sim.axi_lite", simulator="icarus",
              testcase=["reset_values", "random_access"], params={"preset": "sim", "ops": 300})


@pytest.mark.sim
@pytest.mark.slow
def test_axi_lite_regfile_long():
    dut = AXI4LiteRegisterFile(regmap=accelerator_regmap(preset("sim")))
    run_bench(dut, name="axi_lite_regfile_sim", module="specgen.sim.axi_lite",
              testcase=["random_access"], params={"preset": "sim", "ops": 20_000})
