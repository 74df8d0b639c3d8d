"""``verilator --lint-only -Wall`` over emitted Verilog, with only the
documented waivers of :data:`sim.runner.VERILATOR_WAIVERS`."""

import subprocess
from pathlib import Path

from .runner import simulator_env, waiver_flags

__all__ = ["lint"]


def lint(path, *, top):
    """Lint one Verilog file.

    Returns
    -------
    (bool, str)
        Whether Verilator found nothing outside the waivers, and its output.
    """
    cmd = ["verilator", "--lint-only", "-Wall", *waiver_flags(), "--top-module", top, str(Path(path))]
    with simulator_env("verilator"):
        proc = subprocess.run(cmd, capture_output=True, text=True)
    return proc.returncode == 0, proc.stdout + proc.stderr
