"""One error path for every command: one line and exit 2, Ctrl-C 130, a closed pipe quiet."""

import os
import subprocess
import sys
import textwrap

import pytest

from specgen.gen.cli.commands import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, main


def run_cli(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "gen", *args], capture_output=True, text=True,
                          **kwargs)


def assert_one_line(proc, *fragments, status=2):
    assert proc.returncode == status, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr


@pytest.mark.parametrize("argv,fragments", [
    (["verilog"], ["specgen verilog: error:", "required: --out"]),
    (["verilog", "--out", "x"], ["give --board BOARD (sim, vck190, vhk158) or --config FILE"]),
    (["verilog", "--board", "sim", "--out", "x", "--bogus"], ["--bogus"]),
    (["nosuchcommand"], ["specgen: error:", "nosuchcommand"]),
    (["golden", "--out", "x", "--seed", "-1"], ["argument --seed: must be an integer >= 0"]),
    (["ssm-budget", "--steps", "0"], ["argument --steps: must be an integer >= 10, not 0"]),
    (["ssm-budget", "--steps", "many"], ["argument --steps: must be an integer >= 10, not 'many'"]),
    (["ssm-budget", "--seed", "x"], ["argument --seed: must be an integer >= 0, not 'x'"]),
    (["ssm-budget", "--out", "", "--steps", "10"], ["--out is empty"]),
    (["perf", "--board", "vhk158", "--target", "2.7B", "--draft", "370M", "--overlap", "x"],
     ["argument --overlap"]),
])
def test_bad_arguments_are_one_line_exit_2(argv, fragments, tmp_path):
    proc = run_cli(*argv, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert_one_line(proc, *fragments)
    assert list(tmp_path.iterdir()) == []


def test_ssm_budget_out_is_a_file(tmp_path):
    (tmp_path / "page.md").write_text("mine")
    proc = run_cli("ssm-budget", "--steps", "10", "--out", str(tmp_path / "page.md"))
    assert_one_line(proc, "--out", "is not a folder")
    assert (tmp_path / "page.md").read_text() == "mine"


def test_ssm_budget_writes_its_page_atomically(tmp_path):
    # Small enough to run in the fast suite: the page is written, nothing else is left.
    assert main(["ssm-budget", "--steps", "10", "--out", str(tmp_path)]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["ssm-numerics.md"]


@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_keyboard_interrupt_is_one_line_130_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    import specgen.gen.emit.verilog

    real, calls = specgen.gen.emit.verilog.convert, []

    def interrupted(*args, **kwargs):
        calls.append(kwargs["name"])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)
    monkeypatch.setattr(specgen.gen.emit.verilog, "convert", interrupted)
    assert main(["verilog", "--board", "sim", "--out", str(tmp_path / "out")]) == EXIT_INTERRUPTED
    captured = capsys.readouterr()
    assert captured.err == "specgen verilog: interrupted\n" and captured.out == ""
    assert list(tmp_path.iterdir()) == []


def test_sigint_in_a_real_process(tmp_path):
    # A real SIGINT, delivered while the first module is being written.
    script = textwrap.dedent(f"""
        import os, signal, sys
        import specgen.gen.emit.verilog
        from specgen.gen.cli.commands import main
        real = specgen.gen.emit.verilog.convert
        def convert(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGINT)
            return real(*args, **kwargs)
        specgen.gen.emit.verilog.convert = convert
        sys.exit(main(["verilog", "--board", "sim", "--out", {str(tmp_path / "out")!r}]))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert_one_line(proc, "specgen verilog: interrupted", status=EXIT_INTERRUPTED)
    assert list(tmp_path.iterdir()) == []


def test_closed_pipe_exits_quietly():
    read, write = os.pipe()
    os.close(read)    # the reader is gone before the first byte: like `| head` that exited
    try:
        proc = subprocess.run([sys.executable, "-m", "gen", "perf", "--board", "vhk158",
                               "--target", "2.7B", "--draft", "370M"],
                              stdout=write, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write)
    assert proc.stderr == ""
    assert proc.returncode == EXIT_BROKEN_PIPE
