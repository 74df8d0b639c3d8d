"""Waveforms for users: FST, or VCD with a one-line note; run folders named by test and seed."""

import os
import stat

import pytest

import specgen.sim.runner as runner
from specgen.sim.runner import fst_available, run_folder_name


def fake_compiler(tmp_path, *, missing):
    """A ``c++`` that preprocesses stdin and fails on an #include of a header in ``missing``."""
    path = tmp_path / "fake-c++"
    checks = "\n".join(f'grep -q "<{h}>" "$tmp" && exit 1' for h in missing)
    path.write_text(f'#!/bin/sh\ntmp=$(mktemp)\ncat > "$tmp"\n{checks}\nexit 0\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_fst_needs_lz4_and_zlib_headers(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", fake_compiler(tmp_path, missing=["lz4.h"]))
    assert fst_available() == (False, "lz4.h not found (Debian: apt-get install liblz4-dev)")
    monkeypatch.setenv("CXX", fake_compiler(tmp_path, missing=["lz4.h", "zlib.h"]))
    assert fst_available() == (False, "lz4.h, zlib.h not found (Debian: apt-get install "
                                      "liblz4-dev zlib1g-dev)")
    monkeypatch.setenv("CXX", fake_compiler(tmp_path, missing=[]))
    assert fst_available() == (True, "")
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    assert fst_available()[0] is False


def test_without_fst_headers_waves_fall_back_to_vcd_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(runner, "fst_available", lambda: (False, "lz4.h not found"))
    assert runner._wave_format("verilator", True) == "vcd"
    out = capsys.readouterr().out
    assert out == ("[specgen] FST waveforms cannot be built here: lz4.h not found; writing VCD "
                   "(dump.vcd) instead\n")
    monkeypatch.setattr(runner, "fst_available", lambda: (True, ""))
    assert runner._wave_format("verilator", True) == "fst"
    assert runner._wave_format("verilator", False) is None
    assert capsys.readouterr().out == ""


def test_run_folder_names():
    assert run_folder_name(module="specgen.sim.ring_fifo", testcase="boundaries", seed=42) == \
        "ring_fifo-boundaries-seed42"
    assert run_folder_name(module="specgen.sim.ring_fifo", seed=7) == "ring_fifo-all-seed7"
    assert run_folder_name(module="specgen.sim.ring_fifo", testcase=["a", "b"], seed=1) == \
        "ring_fifo-a+b-seed1"
    assert run_folder_name(module="specgen.sim.x", testcase=["a", "b", "c", "d"], seed=1) == \
        "x-a+3more-seed1"
    a = run_folder_name(module="specgen.sim.x", seed=1, params={"width": 8})
    b = run_folder_name(module="specgen.sim.x", seed=1, params={"width": 16})
    assert a.startswith("x-all-seed1-p") and a != b


def test_a_replay_gets_its_own_folder_and_latest_follows(tmp_path):
    runs = tmp_path / "runs"
    first = runner._new_run_folder(runs, "t-all-seed1")
    (first / "sim.log").write_text("first run")
    runner._point_latest(runs / "latest", first)
    second = runner._new_run_folder(runs, "t-all-seed1")
    assert second.name == "t-all-seed1-2" and (first / "sim.log").read_text() == "first run"
    runner._point_latest(runs / "latest", second)
    assert (runs / "latest").resolve() == second.resolve()
    assert not os.path.isabs(os.readlink(runs / "latest"))    # the folder can be moved


@pytest.mark.sim
@pytest.mark.slow
def test_waves_on_a_real_bench(tmp_path, monkeypatch, capsys):
    """A RingFIFO bench with waves: the dump is where the message says (about 30 s)."""
    from specgen.hw.ring_fifo import RingFIFO
    ok, reason = runner.simulator_available("verilator")
    if not ok:
        pytest.skip(reason)
    monkeypatch.setattr(runner, "SIM_BUILD", tmp_path)
    runner.run_bench(RingFIFO(width=8, depth=3), name="ring_fifo_w8_d3", module="specgen.sim.ring_fifo",
                     testcase=["boundaries"], params={"width": 8, "depth": 3, "cycles": 200},
                     waves=True, seed=5)
    latest = (tmp_path / "latest").resolve()
    assert latest.name.startswith("ring_fifo-boundaries-seed5-p")
    dump = "dump.fst" if fst_available()[0] else "dump.vcd"
    assert (latest / dump).stat().st_size > 0
    assert f"[specgen] waveform {latest / dump}" in capsys.readouterr().out.replace(
        str(tmp_path), str(tmp_path.resolve()))


def _adder():
    from amaranth import Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    class Adder(wiring.Component):
        a: In(8)
        q: Out(8)

        def elaborate(self, platform):
            m = Module()
            inner = Signal(8, name="inner")
            m.d.comb += inner.eq(self.a + 1)
            m.d.sync += self.q.eq(inner)
            return m
    return Adder()


@pytest.mark.sim
@pytest.mark.parametrize("public", runner.PUBLIC)
def test_a_build_shows_vpi_what_it_says(public):
    """``ports``: a bench sees the top's ports and nothing inside; ``all`` (what a program
    trace needs, ``RtlEngine(trace=True)``): the signals inside too."""
    runner.run_bench(_adder(), name=f"adder_vpi_{public}", module="specgen.sim.vpi_probe",
                     params={"inner": "inner", "expect_inner": public == "all"}, public=public)
    with pytest.raises(ValueError, match=r"build.public must be one of ports, all, not 'some'"):
        runner.build(_adder(), name="adder_vpi_bad", public="some")


def test_only_the_top_levels_ports_are_public_to_vpi():
    text = runner.emit_verilog(_adder(), name="adder_top")
    config = runner.public_ports_config(text, "adder_top")
    assert config.splitlines() == ["`verilator_config"] + [
        f'public_flat_rw -module "adder_top" -var "{p}"' for p in ("a", "clk", "q", "rst")]
    # cocotb's runner passes --public-flat-rw; the build takes it back.
    assert runner.VERILATOR_PUBLIC_FLAGS == ("--no-public-flat-rw",)
    # The ports are hw.hierarchy.verilog_ports's: a missing module, or a listed port with
    # no plain declaration (an escaped name), is refused.
    with pytest.raises(ValueError, match="module 'other' is not defined"):
        runner.public_ports_config(text, "other")
    with pytest.raises(ValueError, match=r"no direction declared for port\(s\) \\a.b"):
        runner.public_ports_config("module t(\\a.b , c);\n  input \\a.b ;\n  input c;\n"
                                   "endmodule\n", "t")
