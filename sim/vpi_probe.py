"""cocotb check of what a build makes visible to VPI (:data:`sim.runner.PUBLIC`): the
top level's ports always, a signal inside it (``params()["inner"]``) only when the build
made every signal public."""

import cocotb

from specgen.sim.bench import params

__all__ = []


@cocotb.test()
async def visibility(dut):
    p = params()
    for port in ("a", "q"):
        assert hasattr(dut, port), f"port {port} is not visible"
    seen = hasattr(dut, p["inner"])
    assert seen == p["expect_inner"], (
        f"{p['inner']} visible: {seen}, expected {p['expect_inner']}")
