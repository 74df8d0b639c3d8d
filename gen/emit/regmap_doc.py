"""``docs/regmap.md`` and the C header, generated from :mod:`hw.regmap`.

The register layout is the same for every preset; capability values, reset
dimensions and the size of the tree table follow the preset's config. The
document shows the ``vhk158`` map and a table of what differs per preset.

Regenerate with ``specgen docs regmap`` (``tests/test_regmap.py`` fails while
``docs/regmap.md`` is stale).
"""


from specgen.golden.config import PRESETS, Config, preset

__all__ = ["render_regmap_doc", "c_header", "DOC_PRESET"]

#: The preset whose map the document shows in full.
DOC_PRESET = "vhk158"

HEADER_NAME = "specgen_regs.h"


def c_header(config):
    """The C header (``specgen_regs.h``) of the accelerator built from ``config``: the
    registers, then the memory map's layout (:func:`gen.emit.memory_map_doc.c_defines`)."""
    from specgen.gen.emit.memory_map_doc import c_defines, preset_map
    from specgen.hw.regmap import accelerator_regmap
    if not isinstance(config, Config):
        raise TypeError(f"c_header: config must be a golden.config.Config, not {config!r}")
    regmap = accelerator_regmap(config)
    text = regmap.to_c_header()
    guard = f"#endif /* {regmap.name}_REGS_H */"
    head, _, tail = text.rpartition(guard)
    return head + c_defines(preset_map(config), prefix=regmap.name) + "\n" + guard + tail


def _differences():
    """``[(what, {preset: value})]`` for every reset value or table size that differs."""
    from specgen.hw.regmap import accelerator_regmap
    maps = {name: accelerator_regmap(cfg) for name, cfg in PRESETS.items()}
    ref = maps[DOC_PRESET]
    rows = []
    for reg in ref.by_offset():
        if any(m[reg.name].count != reg.count for m in maps.values()):
            rows.append((f"`{reg.name}` entries", {n: m[reg.name].count for n, m in maps.items()}))
        for f in reg.fields:
            values = {n: m[reg.name].field(f.name) for n, m in maps.items()}
            if len({v.reset for v in values.values()}) > 1:
                rows.append((f"`{reg.name}.{f.name}` reset", {n: v.reset for n, v in values.items()}))
            if len({v.width for v in values.values()}) > 1:
                rows.append((f"`{reg.name}.{f.name}` width", {n: v.width for n, v in values.items()}))
    return rows


def render_regmap_doc():
    """The text of ``docs/regmap.md``."""
    from specgen.hw.regmap import accelerator_regmap
    regmap = accelerator_regmap(preset(DOC_PRESET))
    names = list(PRESETS)
    diff = ["| value | " + " | ".join(f"`{n}`" for n in names) + " |",
            "|---|" + "---|" * len(names)]
    for what, values in _differences():
        diff.append(f"| {what} | " + " | ".join(str(values[n]) for n in names) + " |")
    body = regmap.to_markdown(title="Register map (AXI4-Lite control and status)")
    intro, _, rest = body.partition("| offset |")
    return "\n".join([
        intro.rstrip(),
        "",
        "Generated from `hw/regmap.py` (`accelerator_regmap`) by `specgen docs regmap`; do "
        "not edit. The same description builds the RTL register file (`hw/axi_lite.py`, "
        f"`AXI4LiteRegisterFile`) and the C header `{HEADER_NAME}` (`gen.emit.regmap_doc.c_header`).",
        "",
        "Bus behaviour: 32-bit data, registers decoded from the word address; one outstanding "
        "write and one outstanding read; `wstrb` selects the bytes a write changes; an address "
        "no register occupies answers `SLVERR`; writes to read-only fields are ignored with "
        "`OKAY`. Sticky `W1C` bits keep a hardware event that coincides with a clear. 64-bit "
        "counters are read as LO/HI pairs of a snapshot (`PERF_CTRL.SNAPSHOT`), so the two "
        "halves always match.",
        "",
        f"The tables below are those of the `{DOC_PRESET}` preset. The layout is the same for "
        "every preset; these values follow the preset's config:",
        "",
        *diff,
        "",
        "| offset |" + rest,
    ]).rstrip() + "\n"

