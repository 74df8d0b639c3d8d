"""Design files on the command line: --config FILE, --set KEY=VALUE, ``specgen config``."""

import dataclasses
import json

import pytest

from specgen.gen.cli.commands import build_parser, iter_commands, main
from specgen.golden.config import preset
from specgen.golden.config_io import config_from_dict

MY_TOML = """\
# A VCK190 variant: 300 MHz and half the PE rows.
name = "vck190_300"
[board]
clock_mhz = 300
[linear]
rows = 32
"""


def show(capsys, *argv):
    assert main(["config", "show", *argv]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def error(capsys, *argv):
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


def expected_variant():
    vck = preset("vck190")
    return vck.replace(name="vck190_300", board=dataclasses.replace(vck.board, clock_mhz=300.0),
                       linear=dataclasses.replace(vck.linear, rows=32))


def test_toml_changes_only_its_keys(tmp_path, capsys):
    (tmp_path / "my.toml").write_text(MY_TOML)
    got = show(capsys, "--board", "vck190", "--config", str(tmp_path / "my.toml"))
    assert config_from_dict(got) == expected_variant()


def test_json_and_yaml_give_the_same_design(tmp_path, capsys):
    data = {"name": "vck190_300", "board": {"clock_mhz": 300}, "linear": {"rows": 32}}
    (tmp_path / "my.json").write_text(json.dumps(data))
    assert config_from_dict(show(capsys, "--board", "vck190", "--config",
                                 str(tmp_path / "my.json"))) == expected_variant()
    yaml = pytest.importorskip("yaml")
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(data))
    assert config_from_dict(show(capsys, "--board", "vck190", "--config",
                                 str(tmp_path / "my.yaml"))) == expected_variant()


def test_set_overrides_after_the_file(tmp_path, capsys):
    (tmp_path / "my.toml").write_text(MY_TOML)
    got = show(capsys, "--board", "vck190", "--config", str(tmp_path / "my.toml"),
               "--set", "linear.rows=16", "--set", "board.clock_mhz=250")
    assert got["linear"]["rows"] == 16 and got["board"]["clock_mhz"] == 250.0
    assert got["name"] == "vck190_300"


@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_manifest_config_reads_back(tmp_path, capsys, monkeypatch):
    import specgen.gen.emit.verilog
    from specgen.hw.ring_fifo import RingFIFO
    monkeypatch.setattr(specgen.gen.emit.verilog, "blocks", lambda config: {"fifo": RingFIFO(width=4, depth=3)})
    out = tmp_path / "out"
    assert main(["verilog", "--board", "sim", "--set", "linear.rows=3", "--set",
                 "bsfp.remap=[[9, 0]]", "--out", str(out)]) == 0
    capsys.readouterr()
    manifest = json.loads((out / "manifest.json").read_text())
    sim = preset("sim")
    want = sim.replace(linear=dataclasses.replace(sim.linear, rows=3),
                       bsfp=dataclasses.replace(sim.bsfp, remap=((9, 0),)))
    assert config_from_dict(manifest["config"]) == want
    # The manifest itself is a design file, and so is what `config show` prints.
    assert config_from_dict(show(capsys, "--config", str(out / "manifest.json"))) == want
    (tmp_path / "shown.json").write_text(json.dumps(show(capsys, "--config",
                                                         str(out / "manifest.json"))))
    assert config_from_dict(show(capsys, "--config", str(tmp_path / "shown.json"))) == want


@pytest.mark.parametrize("name,text,message", [
    ("my.toml", "[linear]\nrowz = 3\n",
     "my.toml: unknown key linear.rowz; allowed: rows, cols, quant_lanes, max_k"),
    ("my.toml", "[linear]\nrows = 0\n", "my.toml: linear.rows must be an integer >= 1, not 0"),
    ("my.toml", "[linear]\nrows = \"32\"\n",
     "my.toml: linear.rows must be an integer >= 1, not '32'"),
    ("my.toml", "[board]\nmemory = \"SRAM\"\n",
     "my.toml: board.memory must be one of 'DDR', 'HBM', 'none', not 'SRAM'"),
    ("my.toml", "[linear\nrows = 3\n", "my.toml: not valid TOML: "),
    ("my.json", "{\"linear\": ", "my.json: not valid JSON: "),
    ("my.json", "[1, 2]", "my.json: the top level must be a table of config keys, not list"),
    ("my.ini", "", "my.ini': unknown file type '.ini'; allowed: .toml, .json, .yaml, .yml"),
])
def test_file_errors_name_the_file_key_and_allowed(tmp_path, capsys, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    err = error(capsys, "config", "show", "--board", "sim", "--config", str(path))
    assert message.replace("my.", f"{tmp_path}/my.") in err, err


def test_partial_file_without_board_says_how_to_start(tmp_path, capsys):
    (tmp_path / "my.toml").write_text(MY_TOML.replace("[board]", "[board]\nname = \"myboard\""))
    err = error(capsys, "config", "show", "--config", str(tmp_path / "my.toml"))
    assert "missing key board." in err and "give --board to start from a preset" in err


def test_a_file_naming_a_preset_board_starts_from_it(tmp_path, capsys):
    # `specgen verilog --config my.toml` with no --board: the file's board.name is the start.
    (tmp_path / "my.toml").write_text(MY_TOML.replace("[board]", "[board]\nname = \"vck190\""))
    assert config_from_dict(show(capsys, "--config", str(tmp_path / "my.toml"))) == \
        expected_variant()


@pytest.mark.parametrize("argv,message", [
    (["--board", "sim", "--set", "linear.rows"], "--set linear.rows: an override must be "
                                                 "KEY=VALUE"),
    (["--board", "sim", "--set", "linear.rowz=3"], "--set linear.rowz=3: unknown key linear.rowz; "
                                                   "allowed: rows,"),
    (["--board", "sim", "--set", "board.clock_mhz=2000"],
     "--set board.clock_mhz=2000: board.clock_mhz must be a finite number in [1.0, 1000.0]"),
    (["--config", "nofile.toml"], "--config 'nofile.toml': no such file"),
    (["--board", "sim", "--set", "name=my-design"], "name must be letters, digits and _ "
                                                    "starting with a letter"),
    (["--board", "zcu102"], "unknown board 'zcu102'; allowed: sim, vck190, vhk158"),
    ([], "give --board BOARD (sim, vck190, vhk158) or --config FILE"),
])
def test_flag_errors(capsys, argv, message):
    assert message in error(capsys, "config", "show", *argv)


def test_golden_config_with_a_preset_name_points_to_board(tmp_path, capsys):
    err = error(capsys, "golden", "--out", str(tmp_path / "g"), "--config", "vck190")
    assert "--config 'vck190' is a board preset, not a file: give --board vck190" in err


def test_schema_is_json_and_lists_the_blocks(capsys):
    assert main(["config", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert set(schema["properties"]) == set(preset("sim").to_dict())


def test_every_command_with_board_takes_config_and_set():
    with_board = {}
    for name, sub in iter_commands(build_parser()):
        flags = {s for a in sub._actions for s in a.option_strings}
        if "--board" in flags:
            with_board[" ".join(name)] = {"--config", "--set"} <= flags
    assert {"verilog", "golden", "perf", "estimate", "config show"} <= set(with_board)
    assert all(with_board.values()), with_board


def test_a_design_the_blocks_refuse_is_one_line(tmp_path, capsys):
    # A column of 200 MAC slots asks for a weight beat wider than AXI4-Stream's 4096 bits.
    err = error(capsys, "verilog", "--board", "vck190", "--set", "linear.rows=200", "--out",
                str(tmp_path / "big"))
    assert "the design 'vck190' cannot be built: " in err
    assert list(tmp_path.iterdir()) == []


CUSTOM_TOML = """\
# A board that is no preset: its own name, clock, power assumptions and a smaller ring.
name = "mylab"
[board]
name = "mylab_board"
clock_mhz = 300
static_w = 11.0
mem_pj_per_byte = 100.0
[tree]
fifo_depth = 8
"""


@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_a_non_preset_design_runs_through_verilog_perf_and_estimate(tmp_path, capsys):
    """One config path: a design that no preset names goes through every command, each
    reading its board and tree from the design (before, perf looked the board up by name)."""
    design = tmp_path / "mylab.toml"
    design.write_text(CUSTOM_TOML)
    base = ["--board", "vck190", "--config", str(design)]
    config = config_from_dict(show(capsys, *base))
    ring = f"ring_fifo_w{config.tree.slot_bits}_d8"

    assert main(["verilog", *base, "--only", "ring_fifo", "--out", str(tmp_path / "v"),
                 "--quiet"]) == 0
    manifest = json.loads((tmp_path / "v" / "manifest.json").read_text())
    assert manifest["modules"] == [ring] and manifest["board"] == "mylab_board"
    assert config_from_dict(manifest["config"]) == config

    assert main(["perf", *base, "--target", "130M", "--draft", "none", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    acc = d["accelerator"]
    assert (d["board"], acc["board"]["clock_mhz"], acc["fifo_depth"]) == ("mylab_board", 300.0, 8)
    assert acc["power"]["static_w"] == 11.0 and acc["power"]["pj_per_byte"] == 100.0
    # A tree that fits the preset's 16-slot ring but not this design's 8 is refused.
    err = error(capsys, "perf", *base, "--target", "2.7B", "--draft", "370M",
                "--tree", "3,3", "--alpha", "0.5")
    assert "does not fit the mylab_board tree verifier's ring of 8 state slots" in err

    assert main(["estimate", *base, "--block", "ring_fifo", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [b["block"] for b in report["blocks"]] == [ring]
    assert report["board"] == "mylab_board" and report["clock_mhz"] == 300.0
