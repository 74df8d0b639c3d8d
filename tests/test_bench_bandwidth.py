"""The Board bandwidth section of docs/perf.md (gen.bench.bandwidth).

Expected figures are worked out here from the presets' fields (width × memory clock,
ports that carry the bandwidth, one layer's state bytes), not taken from the module.
"""

import math
import re
from pathlib import Path

import pytest

from specgen.golden.config import preset

from specgen.gen.bench.bandwidth import (COMMAND, HEADING, bandwidth_section, layer_rows,
                                         replace_section)
from specgen.gen.cli.commands import main

DOC = Path(__file__).resolve().parents[1] / "docs" / "perf.md"
#: One Mamba2-2.7B layer's state, binary32: 80 heads x 64 x 128.
LAYER_2P7B = 80 * 64 * 128 * 4


def _records(effs):
    return [{"name": f"memory: weight stream beat efficiency ({b}, {p} pass)", "value": v,
             "unit": "fraction", "command": "x", "note": "", "board": b, "pass": p}
            for (b, p), v in effs.items()]


def _port_line(board, verify, draft):
    b = preset(board).board
    gbs = b.memory_port_bits / 8 * b.memory_clock_mhz / 1e3
    ports = math.ceil(b.mem_bw_gbs / gbs - 1e-9)
    sustained = min(b.mem_bw_gbs, ports * gbs) * min(verify, draft)
    return (f"| {board} | {b.memory} | {ports} × {b.memory_port_bits} bit | "
            f"{b.memory_clock_mhz:g} MHz | {gbs:g} | {ports * gbs:,.1f} | {b.mem_bw_gbs:g} | "
            f"{verify:g} / {draft:g} | {sustained:,.1f} |")


def test_port_table_from_the_config_and_the_records():
    text = bandwidth_section(_records({("vhk158", "verify"): 0.95, ("vhk158", "draft"): 0.9}))
    assert text.startswith(HEADING + "\n") and COMMAND in text
    # vhk158: 256 bit x 450 MHz = 14.4 GB/s a port, 57 ports for 819 GB/s; 0.9 x 819.
    line = _port_line("vhk158", 0.95, 0.9)
    assert line == "| vhk158 | HBM | 57 × 256 bit | 450 MHz | 14.4 | 820.8 | 819 | 0.95 / 0.9 | 737.1 |"
    assert line in text.splitlines()
    # No vck190 records: said so, no sustained figure invented.
    assert "| vck190 | DDR | 1 × 512 bit | 300 MHz | 19.2 | 19.2 | 12 | not measured / not " \
           "measured | — |" in text


def test_layer_rows_by_hand():
    rows = {(r["board"], r["pass"].split(",")[0]): r for r in layer_rows()}
    # vhk158: 16 state ports each way, a 256-bit beat a 450 MHz memory cycle each (the
    # masters take and give 512-bit slices of the 256 lanes' word a 250 MHz fabric cycle,
    # two beats, faster than the port).
    hbm = 16 * 256 / 8 * 450e6
    tree = rows[("vhk158", "tree pass")]
    assert tree["read_bytes"] == LAYER_2P7B and tree["write_bytes"] == 0
    assert tree["ports"] == 16 and tree["read_gbs"] == tree["write_gbs"] == 14.4
    assert tree["t_state"] == pytest.approx(LAYER_2P7B / hbm, rel=1e-12)
    commit = rows[("vhk158", "commit")]
    assert commit["t_state"] == pytest.approx(LAYER_2P7B / hbm, rel=1e-12)
    # Separate read and write ports, nothing shared binds on HBM: striping over n ports
    # divides the time by n.
    for key in (("vhk158", "commit"), ("vhk158", "draft node")):
        r = rows[key]
        assert r["ports_needed"] == math.ceil(16 * r["t_state"] / r["t_ssm"] - 1e-9)
        assert r["bound"] == "compute"
    # vck190: reads and writes share the DDR's 12 GB/s, which no port count beats.
    v = rows[("vck190", "commit")]
    assert v["t_state"] == pytest.approx(2 * LAYER_2P7B / 12e9, rel=1e-12)
    assert v["t_state"] > v["t_ssm"] and v["ports_needed"] is None


def test_doc_has_the_section_consistent_with_the_config():
    text = DOC.read_text()
    assert HEADING + "\n" in text and COMMAND in text
    section = text[text.index(HEADING):]
    section = section[:section.index("\n## ", 1)]
    lines = section.splitlines()
    # The port table: every figure but the measured efficiencies from the config.
    for board in ("vhk158", "vck190"):
        line = next(x for x in lines if x.startswith(f"| {board} | {preset(board).board.memory} |"))
        verify, draft = (float(x) for x in re.search(r"\| ([\d.]+) / ([\d.]+) \|", line).groups())
        assert line == _port_line(board, verify, draft)
    # The state rows: one 2.7B layer at the board's state port, ports needed from the
    # printed times.
    rows = [x for x in lines if re.match(r"\| vhk158 \| (tree pass|commit|draft node, SPEQ)", x)]
    assert len(rows) == 3
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        state_us, ssm_us = (float(c.split()[0].replace(",", "")) for c in cells[5:7])
        # 256-bit beats at the 450 MHz memory clock: the masters take the 256 lanes'
        # 512-bit slices a 250 MHz cycle, two beats, faster than the port.
        assert cells[4] == "16 × 256 bit, 14.4 / 14.4"
        assert state_us == pytest.approx(LAYER_2P7B / (16 * 256 / 8 * 450e6) * 1e6, abs=0.05)
        assert cells[7] == ("state" if state_us > ssm_us else "compute")
        assert int(cells[8]) == math.ceil(16 * state_us / ssm_us - 1e-3)


def test_replace_section_replaces_or_inserts():
    new = HEADING + "\n\nnew\n"
    doc = "# R\n\n## Benchmarks\n\nb\n\n## Calibration of the block cycle models\n\nc\n"
    once = replace_section(doc, new)
    assert once == ("# R\n\n## Benchmarks\n\nb\n\n" + new + "\n"
                    "## Calibration of the block cycle models\n\nc\n")
    assert replace_section(once, HEADING + "\n\nnewer\n").count(HEADING) == 1
    assert "newer" in replace_section(once, HEADING + "\n\nnewer\n")
    assert "\nnew\n" not in replace_section(once, HEADING + "\n\nnewer\n")
    with pytest.raises(ValueError, match="Calibration"):
        replace_section("# nothing\n", new)


def test_section_needs_the_memory_benchmark(capsys):
    assert main(["bench", "--section", "bandwidth", "--only", "numerics"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--only memory" in err


def test_model_section_alone_is_stamped_and_keeps_the_rest(tmp_path):
    from specgen.gen.bench.suite import MODEL_HEADING, write_section
    out = tmp_path / "perf.md"
    head = "# R\n\n- Commit: `old`\n\n## Benchmarks\n\nmeasured\n\n"
    out.write_text(head + MODEL_HEADING + "\n\nstale model text\n")
    write_section("model", None, out=out)
    text = out.read_text()
    assert text.startswith(head) and "stale model text" not in text
    body = text[len(head):]
    assert body.startswith(MODEL_HEADING + "\n\n_This section alone was regenerated at commit `")
    assert "(`specgen bench --section model`)" in body and "| VHK158 |" in body
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        "perf-acceptance.png", "perf-roofline.png", "perf-tree.png"]


def test_step_section_is_inserted_once_before_the_model(tmp_path):
    from specgen.gen.bench.suite import MODEL_HEADING, write_section
    from specgen.gen.perf.program_calibration import STEP_HEADING
    out = tmp_path / "perf.md"
    head = "# R\n\n## Calibration of the block cycle models\n\nblocks\n\n"
    out.write_text(head + MODEL_HEADING + "\n\nmodel text\n")
    for _ in range(2):
        write_section("step", None, out=out)
        text = out.read_text()
        assert text.startswith(head) and text.count(STEP_HEADING) == 1
        assert text.index(STEP_HEADING) < text.index(MODEL_HEADING)
        assert text.endswith(MODEL_HEADING + "\n\nmodel text\n")
        assert "| check | micro | 4 |" in text and "(`specgen bench --section step`)" in text


def test_generate_section_is_inserted_once_before_the_step_calibration(tmp_path):
    """``specgen bench --section generate`` from the decoder core's records (hand-made
    here: the run itself is a benchmark, ``specgen bench --only generate``)."""
    from specgen.gen.bench.generate import COMMAND, HEADING
    from specgen.gen.bench.suite import MODEL_HEADING, write_section
    from specgen.gen.perf.program_calibration import STEP_HEADING
    out = tmp_path / "perf.md"
    head = "# R\n\n## Calibration of the block cycle models\n\nblocks\n\n"
    tail = STEP_HEADING + "\n\nsteps\n\n" + MODEL_HEADING + "\n\nmodel text\n"
    out.write_text(head + tail)
    records = [{"name": "decoder core: specgen generate cycles/token", "value": 7920.6,
                "unit": "cycles/token", "command": COMMAND, "note": "n1"},
               {"name": "decoder core: linear/SSM overlap (PERF_OVERLAP)", "value": 0,
                "unit": "cycles", "command": COMMAND, "note": "n2"},
               {"name": "golden.fp.mul fp16", "value": 0.1, "unit": "s", "command": "c",
                "note": "not this section's"}]
    for _ in range(2):
        write_section("generate", records, out=out)
        text = out.read_text()
        assert text.startswith(head) and text.endswith(tail) and text.count(HEADING) == 1
        assert "| specgen generate cycles/token | 7,920.6 | cycles/token | n1 |" in text
        assert "| linear/SSM overlap (PERF_OVERLAP) | 0 | cycles | n2 |" in text
        assert "fp16" not in text and "(`specgen bench --section generate`)" in text
    with pytest.raises(Exception, match="no decoder-core records"):
        write_section("generate", records[2:], out=out)


def test_stage_rows_add_up_to_the_models_verify_pass():
    """The stage table's kinds of one tree pass add up to the bytes the step model charges
    SpecMamba's verify pass on each board, and the step split's parts to its phases'."""
    from specgen.gen.bench.bandwidth import split_rows, stage_rows
    from specgen.gen.perf.system import accelerator, seed_step, step_model
    from specgen.golden.config import preset
    rows = stage_rows()
    for board in ("vck190", "vhk158"):
        acc = accelerator(preset(board))
        v = step_model(acc, seed_step()).phase("verify")
        got = sum(r["bytes"] for r in rows if r["board"] == board)
        assert got == pytest.approx(v.bytes)
        split = next(r for r in split_rows() if r["board"] == board
                     and r["step"].startswith("SpecMamba"))
        res = step_model(acc, seed_step())
        total = sum(p.bytes for p in res.phases) / acc.bandwidth
        assert split["weights_s"] + split["state_s"] + split["stage_s"] == pytest.approx(total)
