"""``verilator --lint-only -Wall`` over emitted Verilog, with only the
documented waivers of :data:`sim.runner.VERILATOR_WAIVERS`."""

import re
import subprocess
import tempfile
from pathlib import Path

from .runner import emit_verilog, simulator_env, waiver_flags

__all__ = ["lint", "lint_component", "lint_modules", "split_modules"]

_MODULE = re.compile(r"^(?:\(\*[^\n]*\*\)\n)*module\s+(\\\S+|\w+)\s*\(.*?^endmodule\n?",
                     re.M | re.S)
_PORT_DECL = re.compile(r"^\s*(input|output)\b[^;]*;", re.M)


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


def lint_component(component, *, folder, name=None, hierarchical=False):
    """Emit ``component`` as ``folder/<name>.v`` (:func:`sim.runner.emit_verilog`; ``name``
    defaults to its ``module_name``) and lint it: as one top (:func:`lint`), or every
    module of the file against stubs of the others (``hierarchical``, :func:`lint_modules`).

    Returns
    -------
    (bool, str)
        As :func:`lint`.
    """
    name = component.module_name if name is None else name
    path = Path(folder) / f"{name}.v"
    path.write_text(emit_verilog(component, name=name))
    return lint_modules(path) if hierarchical else lint(path, top=name)


def split_modules(text):
    """``{name: text}`` of every module in a Verilog text, in file order."""
    return {m.group(1): m.group(0) for m in _MODULE.finditer(text)}


def _stub(name, text):
    """A body-less copy of a module: its header and port declarations only."""
    header = text[text.index("module"):text.index(";") + 1]
    ports = "\n".join(m.group(0) for m in _PORT_DECL.finditer(text))
    return f"{header}\n{ports}\nendmodule\n"


def lint_modules(path):
    """Lint every shared module of a hierarchical file once, against stubs of the others.

    Verilator's lint works per instance, so a 64×64 PE array linted from its top
    takes minutes and gigabytes. Here each shared module (a plain identifier;
    Amaranth's per-parent submodules carry escaped ``\\parent.child`` names and
    go with their parent) is the top of one run in which every other shared
    module is a stub with the same ports: the module's own logic is linted in
    full, and every instantiation is still checked against the real port list
    and widths. The stubs' undriven outputs are exempt (``lint_off`` around them).

    Returns
    -------
    (bool, str)
        Whether every module passed, and the output of the failing runs.
    """
    modules = split_modules(Path(path).read_text())
    shared = [name for name in modules if not name.startswith("\\")]
    private = [text for name, text in modules.items() if name.startswith("\\")]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in shared:
            stubs = [_stub(other, modules[other]) for other in shared if other != name]
            body = "\n".join([modules[name], *private,
                              "/* verilator lint_off UNDRIVEN */", *stubs,
                              "/* verilator lint_on UNDRIVEN */", ""])
            unit = Path(tmp) / f"{name}.v"
            unit.write_text(body)
            ok, output = lint(unit, top=name)
            if not ok:
                failures.append(f"--- {name} ---\n{output}")
    return not failures, "\n".join(failures)
