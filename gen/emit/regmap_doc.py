"""``docs/regmap.md`` and the C header, generated from :mod:`hw.regmap`.

The register layout is the same for every preset; capability values, reset
dimensions and the size of the tree table follow the preset's config. The
document shows the ``vhk158`` map and a table of what differs per preset.

Regenerate with ``specgen docs regmap`` (``tests/test_regmap.py`` fails while
``docs/regmap.md`` is stale).
"""


from specgen.golden.config import PRESETS, Config, preset

__all__ = ["render_regmap_doc", "render_core_regmap_doc", "c_header", "DOC_PRESET",
           "CORE_DOC"]

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



#: The decoder core ``docs/regmap-core.md`` shows: the one the README's ``specgen generate
#: --engine rtl`` command builds (the ``sim`` preset, the seeded ``micro`` LM, a tree of 3
#: nodes).
CORE_DOC = {"preset": "sim", "model": "micro", "nodes": 3}


def render_core_regmap_doc():
    """The text of ``docs/regmap-core.md``: the decoder top's registers
    (:func:`hw.decoder_top.decoder_regmap`) for :data:`CORE_DOC`'s core."""
    import warnings

    from specgen.golden.lm import lm_preset
    from specgen.gen.runtime.runtime import RtlEngine
    from specgen.hw.decoder_top import decoder_regmap
    from specgen.hw.hierarchy import silence
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # the core is described, never elaborated
        _, core = RtlEngine(config=preset(CORE_DOC["preset"])).core(
            lm_preset(CORE_DOC["model"]), CORE_DOC["nodes"])
        silence(core)
        regmap = decoder_regmap(core)
    body = regmap.to_markdown(title="Register map of the decoder core (AXI4-Lite)")
    intro, _, rest = body.partition("| offset |")
    return "\n".join([
        intro.rstrip(),
        "",
        "Generated from `hw/decoder_top.py` (`decoder_regmap`) by `specgen docs regmap-core`; "
        "do not edit. The same description builds the RTL (`CoreControl`, in "
        "`DecoderTop` beside the `DecoderCore`), and its `to_c_header()` gives the C "
        "header; `gen/runtime/driver.py` (`CoreDriver`) is the host's side.",
        "",
        "The layout is the same for every core. The `CAPS*` values, the `TBL` field widths "
        f"and `PROG_RECORDS`' width follow the core: these are those of the core `specgen "
        f"generate --engine rtl` builds for the `{CORE_DOC['model']}` LM on the "
        f"`{CORE_DOC['preset']}` preset with a tree of {CORE_DOC['nodes']} nodes "
        "(the README's command).",
        "",
        "A program, as the host runs it: write the SSM engine's node table (`TBL`, one "
        "write an entry, `WRITE` set), `PROG_ADDR_LO/HI` and `PROG_RECORDS`, clear "
        "`EVENT.END` and the counters (`PERF_CTRL.CLEAR`), write `CTRL.START`; wait for "
        "`irq` (or poll `EVENT.END`); read `STATUS` (an error is named by `ERROR_CODE`) "
        "and `PERF_PROGRAM`, the program's cycles. `CTRL.ABORT` stops a program; once "
        "`STATUS.IDLE`, the host reruns it (the rollback).",
        "",
        "| offset |" + rest,
    ])
