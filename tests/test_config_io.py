"""``golden.config_io``: plain data <-> Config, overrides and the JSON Schema."""

import dataclasses
import json

import pytest

from specgen.golden.config import PRESETS, Config, LinearConfig, preset
from specgen.golden.config_io import (ConfigError, apply_overrides, config_from_dict, config_schema,
                              field_docs, from_dict, parse_override)


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_reads_back_from_its_json(name):
    # The manifest's config block is json.dumps(config.to_dict()): it must give the config back.
    data = json.loads(json.dumps(PRESETS[name].to_dict()))
    assert config_from_dict(data) == PRESETS[name]


def test_partial_data_over_a_base():
    cfg = config_from_dict({"board": {"clock_mhz": 300}, "linear": {"rows": 32}},
                           base=preset("vck190"))
    assert cfg.board.clock_mhz == 300.0 and isinstance(cfg.board.clock_mhz, float)
    assert cfg.linear.rows == 32
    vck = preset("vck190")
    assert cfg == vck.replace(board=dataclasses.replace(vck.board, clock_mhz=300.0),
                              linear=dataclasses.replace(vck.linear, rows=32))


def test_overrides_are_read_by_field_type():
    cfg = apply_overrides(preset("sim"), [
        ("linear.rows", "3"), ("board.clock_mhz", "150.5"), ("linear.contract", "exact"),
        ("linear.fmt_out", "fp16"),
        ("bsfp.group_size", "128"), ("bsfp.remap", "[[9, 0]]"), ("ssm.exp_lut.step_log2", "4")])
    assert cfg.linear.rows == 3 and cfg.board.clock_mhz == 150.5 and cfg.linear.fmt_out == "fp16"
    assert cfg.bsfp.group_size == 128 and cfg.bsfp.remap == ((9, 0),)
    assert cfg.ssm.exp_lut.step_log2 == 4
    assert apply_overrides(cfg, [("bsfp.group_size", "none")]).bsfp.group_size is None
    # Later overrides win.
    assert apply_overrides(cfg, [("linear.rows", "5"), ("linear.rows", "6")]).linear.rows == 6


LINEAR_KEYS = ", ".join(f.name for f in dataclasses.fields(LinearConfig))
CONFIG_KEYS = ", ".join(f.name for f in dataclasses.fields(Config))


@pytest.mark.parametrize("override,message", [
    # The allowed keys are the fields of the classes, whatever fields they gain.
    (("linear.rowz", "3"), f"unknown key linear.rowz; allowed: {LINEAR_KEYS}"),
    (("nope", "3"), f"unknown key nope; allowed: {CONFIG_KEYS}"),
    (("linear.rows", "0"), "linear.rows must be an integer >= 1, not 0"),
    (("linear.rows", "many"), "linear.rows must be an integer >= 1, not 'many'"),
    (("linear.fmt_out", "bf16"), "linear.fmt_out must be one of 'fp32', 'fp16', not 'bf16'"),
    (("ssm.exp_lut.lo", "0.001"), "ssm.exp_lut.lo must be a multiple of the step"),
    (("linear.rows.x", "1"), "linear.rows is a value, not a table"),
    (("linear", "3"), f"linear must be a table of {LINEAR_KEYS}, not 3"),
    (("pipeline.fp_add_stages", "7"), "pipeline.fp_add_stages must be an integer in [0, 6], "
                                      "not 7"),
])
def test_override_errors_name_the_key_path_and_the_allowed_values(override, message):
    with pytest.raises(ConfigError) as info:
        apply_overrides(preset("sim"), [override])
    assert message in str(info.value)
    assert override[0].startswith(info.value.path.split(".")[0])


def test_missing_and_unknown_keys_without_base():
    with pytest.raises(ConfigError, match=r"missing key board \(required in the config: name, "
                                          r"board\)"):
        config_from_dict({"name": "x"})
    data = json.loads(json.dumps(preset("sim").to_dict()))
    del data["board"]["part"]
    with pytest.raises(ConfigError, match="missing key board.part"):
        config_from_dict(data)
    with pytest.raises(ConfigError, match="the config must be a table"):
        config_from_dict([1, 2])


@pytest.mark.parametrize("text", ["linear.rows", "=3", "linear..rows=3", ""])
def test_parse_override_needs_key_equals_value(text):
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_override(text)


def test_parse_override_keeps_equals_in_the_value():
    assert parse_override("name=a=b") == ("name", "a=b")


def test_new_fields_just_work():
    # The reader walks the dataclass fields: a class it has never seen is read the same way.
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Inner:
        """Inner.

        Parameters
        ----------
        width : int
            Bits.
        """
        width: int = 8

        def __post_init__(self):
            if self.width < 1:
                raise ValueError(f"Inner.width must be >= 1, not {self.width}")

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Outer:
        inner: Inner = dataclasses.field(default_factory=Inner)
        capacity: int | None = None
        pairs: tuple = ()
    got = from_dict(Outer, {"inner": {"width": 4}, "capacity": None, "pairs": [[1, 2]]})
    assert got == Outer(inner=Inner(width=4), capacity=None, pairs=((1, 2),))
    with pytest.raises(ConfigError, match=r"^inner.width must be >= 1, not 0$"):
        from_dict(Outer, {"inner": {"width": 0}})
    assert field_docs(Inner) == {"width": "Bits."}


def test_schema_describes_every_field():
    schema = config_schema()
    assert schema["$schema"].endswith("2020-12/schema") and schema["required"] == ["name", "board"]

    def check(cls, node):
        assert node["additionalProperties"] is False
        assert list(node["properties"]) == [f.name for f in dataclasses.fields(cls) if f.init]
        for f in dataclasses.fields(cls):
            sub = node["properties"][f.name]
            value = getattr(PRESETS["vck190"], f.name, None) if cls is Config else None
            if dataclasses.is_dataclass(value):
                check(type(value), sub)
    check(Config, schema)
    lin = schema["properties"]["linear"]["properties"]
    assert lin["rows"] == {"type": "integer", "description": "``exact``: output rows per weight "
                                                          "tile (PE rows). ``dspfp32``: MAC slots "
                                                          "per column.", "default": 4}
    assert schema["properties"]["board"]["properties"]["part"]["anyOf"][1] == {"type": "null"}
    assert LinearConfig().rows == lin["rows"]["default"]


def test_schema_accepts_presets_and_rejects_unknown_keys():
    jsonschema = pytest.importorskip("jsonschema")
    schema = config_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for cfg in PRESETS.values():
        jsonschema.validate(json.loads(json.dumps(cfg.to_dict())), schema)
    bad = json.loads(json.dumps(preset("sim").to_dict()))
    bad["linear"]["rowz"] = 3
    with pytest.raises(jsonschema.ValidationError, match="rowz"):
        jsonschema.validate(bad, schema)
    bad = json.loads(json.dumps(preset("sim").to_dict()))
    bad["linear"]["rows"] = "32"
    with pytest.raises(jsonschema.ValidationError, match="'32' is not of type 'integer'"):
        jsonschema.validate(bad, schema)
