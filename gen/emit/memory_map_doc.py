"""``docs/memory-map.md`` and the memory-map ``#define``s of ``specgen_regs.h``, from :mod:`golden.memory_map`.

The layout is that of the Mamba2 checkpoint whose layer the preset's SSM unit
is built for (:func:`golden.memory_map.unit_checkpoint`: Mamba2-2.7B for the
board presets). The ``sim`` unit is no checkpoint's layer, so its header and its
column of the page show the :data:`DOC_PRESET` model. The page shows the map of
every preset, the regions in full for :data:`DOC_PRESET`, and the checkpoint
bytes of every backtracking policy.

Regenerate with ``specgen docs memory-map`` (``tests/test_memory_map.py`` fails
while ``docs/memory-map.md`` is stale).
"""

from specgen.golden.config import PRESETS, preset
from specgen.golden.lm import LMConfig
from specgen.golden.memory_map import (
    ALIGN,
    DEFAULT_POLICY,
    MAP_POLICIES,
    REGION_CLASSES,
    MemoryMap,
    unit_checkpoint,
)
from specgen.golden.weight_planes import engine_weight_ports, input_sub_beats, pack_factor

__all__ = ["DOC_PRESET", "layout_checkpoint", "preset_map", "c_defines", "render_memory_map_doc"]

#: The preset whose regions the page lists in full.
DOC_PRESET = "vhk158"


def layout_checkpoint(config):
    """The Mamba2 checkpoint laid out for ``config``: its SSM unit's
    (:func:`golden.memory_map.unit_checkpoint`), else :data:`DOC_PRESET`'s."""
    return unit_checkpoint(config) or unit_checkpoint(preset(DOC_PRESET))


def preset_map(config, *, policy=DEFAULT_POLICY, check_capacity=True):
    """The :class:`MemoryMap` of :func:`layout_checkpoint` on ``config``."""
    return MemoryMap.build(config=config, model=LMConfig.from_model(layout_checkpoint(config)),
                           policy=policy, check_capacity=check_capacity)


def _macro(region_name):
    return region_name.replace(".", "_").upper()


def c_defines(mm, *, prefix="SPECGEN"):
    """``#define`` lines of the layout of ``mm``: class offsets and sizes, each region's
    offset from its class base, entry size, counts and strides (bytes, 64-bit constants)."""
    p = f"{prefix}_MEM"
    m = mm.model
    lines = [f"/* Memory map (golden/memory_map.py): Mamba2 n_layer {m.n_layer}, d_model "
             f"{m.d_model}, vocab {m.vocab}; {mm.config.tree.max_nodes} tree nodes; policy "
             f"{mm.policy}. Address = MEM_<CLASS>_BASE + <REGION>_OFFSET + layer * "
             f"<REGION>_LAYER_STRIDE + node * <REGION>_NODE_STRIDE. */",
             f"#define {p}_ALIGN {ALIGN}u",
             f"#define {p}_TOTAL_BYTES 0x{mm.total_bytes:x}ull",
             f"#define {p}_ON_CHIP_BYTES 0x{mm.on_chip_bytes:x}ull"]
    for kind in REGION_CLASSES:
        q = f"{p}_{kind.upper()}"
        lines += [f"#define {q}_DEFAULT_BASE 0x{mm.class_offset(kind):x}ull",
                  f"#define {q}_BYTES 0x{mm.class_size(kind):x}ull"]
    for r in mm:
        q = f"{p}_{_macro(r.name)}"
        lines += [f"/* {r.name}: {r.description} */",
                  f"#define {q}_OFFSET 0x{r.offset:x}ull",
                  f"#define {q}_SIZE 0x{r.size:x}ull"]
        for index, count, stride in r.dims:
            lines += [f"#define {q}_{index.upper()}S {count}u",
                      f"#define {q}_{index.upper()}_STRIDE 0x{stride:x}ull"]
    return "\n".join(lines) + "\n"


def _size(n):
    if n >= 2**30:
        return f"{n / 2**30:.2f} GiB"
    if n >= 2**20:
        return f"{n / 2**20:.1f} MiB"
    if n >= 2**10:
        return f"{n / 2**10:.1f} KiB"
    return f"{n} B"


def _fits(mm_total, cap):
    return "no capacity (modeled memory)" if not cap else \
        ("fits" if mm_total <= cap else "**does not fit**") + f" ({mm_total / cap:.1%})"


def _policy_rows(names):
    rows = []
    for policy in MAP_POLICIES:
        # Unchecked, so the table can show the layouts that do not fit.
        maps = {n: preset_map(preset(n), policy=policy, check_capacity=False) for n in names}
        ref = maps[DOC_PRESET]
        cells = [f"{_size(mm.total_bytes)}, {_fits(mm.total_bytes, mm.config.board.memory_bytes)}"
                 for mm in maps.values()]
        rows.append(f"| `{policy}` | {_size(ref.class_size('checkpoint'))} | "
                    f"{_size(ref.on_chip_bytes)} | " + " | ".join(cells) + " |")
    return rows


def _padding_note(maps):
    """What the tiles' unused MAC slots cost, per preset: stored and read zero weights."""
    parts = []
    for name, mm in maps.items():
        lin, m = mm.config.linear, mm.model
        slots = lin.rows * lin.cols
        planes = sum(r.entries * r.size for r in mm if r.name.endswith(("nibble", "residue")))
        fp16 = 2 * (m.n_layer * (m.d_in_proj * m.d_model + m.d_model * m.d_inner)
                    + m.vocab * m.d_model * (1 if m.tie_embeddings else 2))
        if planes < 1.05 * fp16:
            continue
        fill = m.d_model / (-(-m.d_model // slots) * slots)
        q = pack_factor(min(m.d_model, slots), rows=lin.rows, cols=lin.cols)
        per = lin.cols // engine_weight_ports(mm.config)
        subs = input_sub_beats(per, q, lin.weight_beats)
        why = (f"stored {q} columns a sub-beat, each input's {per} columns of a weight port "
               f"in {subs} sub-beats (whole transfers of {lin.weight_beats}) for "
               f"{per / q:g}" if q > 1 else "stored whole")
        parts.append(f"on `{name}` ({lin.rows} × {lin.cols} = {slots:,} slots) the planes hold "
                     f"{_size(planes)} for {_size(fp16)} of FP16 weights "
                     f"({planes / fp16:.2f}×), chiefly `out_proj`: its {m.d_model:,} "
                     f"output rows fill {fill:.0%} of a tile, {why}")
    if not parts:
        return "On every preset the padding left is under 5 % of the weights."
    return ("The padding left is stored and read: " + "; ".join(parts) + ".")


def render_memory_map_doc():
    """The text of ``docs/memory-map.md``."""
    names = list(PRESETS)
    maps = {n: preset_map(preset(n)) for n in names}
    ref = maps[DOC_PRESET]
    size, model = layout_checkpoint(ref.config), ref.model
    own = ", ".join(f"`{n}`" for n in names if unit_checkpoint(preset(n)) == size)
    other = ", ".join(f"`{n}`" for n in names if unit_checkpoint(preset(n)) != size)
    out = [
        "# Memory map (weights, states, checkpoints, I/O in HBM or DDR)",
        "",
        "Generated from `golden/memory_map.py` (`MemoryMap`) by `specgen docs memory-map`; do "
        "not edit. The same map writes the layout `#define`s of `specgen_regs.h` "
        "(`gen.emit.memory_map_doc.c_defines`).",
        "",
        f"Model: Mamba2-{size} (`LMConfig.from_model(\"{size}\")`: n_layer "
        f"{model.n_layer}, d_model {model.d_model}, d_inner {model.d_inner}, {model.nheads} "
        f"heads × {model.headdim} × d_state {model.d_state}, vocab {model.vocab:,}, tied "
        f"embedding), the model whose layer the SSM unit of {own} is built for "
        f"(`golden.memory_map.unit_checkpoint`); the unit of {other} is no checkpoint's "
        f"layer, and its row shows the same model. Backtracking policy `{DEFAULT_POLICY}` "
        "unless a table says otherwise.",
        "",
        "## How the hardware finds an entry",
        "",
        "The host writes four 64-bit base registers, `MEM_WEIGHTS_BASE`, `MEM_STATE_BASE`, "
        "`MEM_CHECKPOINT_BASE` and `MEM_IO_BASE` (LO/HI pairs, `docs/regmap.md`), and never a "
        "data word through the accelerator. There is no descriptor table in memory: the "
        "dimensions are the `DIM_*` registers, and every other address is a constant of the "
        "map, fixed when the hardware is built, that the hardware adds:",
        "",
        "```",
        "address = MEM_<CLASS>_BASE + offset + layer · layer stride + node · node stride",
        "```",
        "",
        f"Each class, region, layer entry and node entry starts on a {ALIGN}-byte page, so the "
        "strides are multiples of a page and no entry's burst crosses a 4 KiB boundary (AMBA "
        "AXI4). The base registers hold address bits 63..12 only. The default bases below "
        "put the four classes back to back in one buffer.",
        "",
        "Weights: one BSFP v1 copy serves both passes (SPEQ self-speculation). A draft pass "
        "reads only the nibble planes (4 bits a weight), a target pass both planes (16 bits "
        "a weight). Both planes are laid out as the linear engine's jobs "
        "(`golden.weight_planes.pack_matrix`): output tiles of the array's rows × cols MAC "
        "slots, input chunks of `linear.max_k`, each job a nibble slice region and three "
        "residue slice regions (bits 3..0, 7..4, 11..8), each padded to the weight stream's "
        "word. A tile's unused slots are zero weights, but a tile that fills at most half "
        "(a quarter, an eighth) of the slots uses only that share of every column and packs "
        "its beats two (four, eight) to a sub-beat, input by input "
        "(`golden.weight_planes.pack_factor`, `pack_beats`), which the weight stream hands "
        "the linear unit as they are. " + _padding_note(maps) + " With "
        "`linear.draft_plane` (" + ", ".join(f"`{n}`" for n, mm in maps.items()
                                             if mm.config.linear.draft_plane) + ") each "
        "matrix has a fourth region, `.draft`: the nibble plane again, striped over each "
        "weight stream's four read masters (`golden.weight_planes.draft_image`), which "
        "SPEQ's draft passes read four times as fast. States and logits exist "
        "once per pass (`target`, "
        "`draft`).",
        "",
        "Replay records hold, per node and layer, the raw conv row xBC (so a node's conv "
        "window can be rebuilt from its ancestors) and the x, B and dt that the state "
        "controller replays; Δ and dA follow from dt, so they are not stored. "
        "`golden.backtrack.StoreIntermediates` keeps Δ and dA instead of dt: the same state, "
        "one word per head more.",
        "",
        "## Per preset",
        "",
        "| preset | " + " | ".join(f"`{k}`" for k in REGION_CLASSES) +
        " | total | board memory (`BoardConfig.memory_bytes`) | on chip (records, not mapped) |",
        "|---|" + "---:|" * len(REGION_CLASSES) + "---:|---|---:|",
    ]
    for n, mm in maps.items():
        cap = mm.config.board.memory_bytes
        out.append(f"| `{n}` | " + " | ".join(_size(mm.class_size(k)) for k in REGION_CLASSES)
                   + f" | {_size(mm.total_bytes)} | "
                   + (f"{_size(cap)}: {_fits(mm.total_bytes, cap)}" if cap else
                      _fits(mm.total_bytes, cap))
                   + f" | {_size(mm.on_chip_bytes)} |")
    out += [
        "",
        "Capacities: VHK158 32 GB HBM2e, VCK190 8 GB DDR4 component memory (AMD's product "
        "pages for the two boards; read as GiB, an assumption; the VCK190's LPDDR4 is not "
        "counted). `sim` has a modeled memory and no capacity.",
        "",
        f"The hybrid policy keeps the draft's replay records on chip: "
        f"{_size(ref.on_chip_bytes)} for {model.n_layer} layers × "
        f"{ref.config.tree.max_nodes} nodes at this model's size. That is on-chip storage "
        "the map does not hold; a policy that keeps the records off chip moves it into the "
        "checkpoint class.",
        "",
        "## Checkpoint bytes per backtracking policy",
        "",
    ]
    out += ["| policy | checkpoint class | kept on chip | " + " | ".join(f"total, `{n}`" for n in names)
            + " |", "|---|---:|---:|" + "---|" * len(names), *_policy_rows(names), ""]
    out += [
        f"## Regions (`{DOC_PRESET}`)",
        "",
        "Offsets are from the class base; strides and sizes in bytes.",
        "",
        "| region | offset | entry size | layers × stride | nodes × stride | span | holds |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for kind in REGION_CLASSES:
        for r in ref:
            if r.kind != kind:
                continue
            dims = {name: (count, stride) for name, count, stride in r.dims}
            cell = {k: (f"{dims[k][0]} × {dims[k][1]:#x}" if k in dims else "")
                    for k in ("layer", "node")}
            out.append(f"| `{r.name}` | `{r.offset:#x}` | {r.size:,} | {cell['layer']} | "
                       f"{cell['node']} | {_size(r.span)} | {r.description} |")
    out += ["", f"Checkpoint regions of every policy that has them (`{DOC_PRESET}`):", "",
            "| policy | region | entry size | layers × stride | nodes × stride | span |",
            "|---|---|---:|---:|---:|---:|"]
    for policy in MAP_POLICIES:
        mm = preset_map(preset(DOC_PRESET), policy=policy, check_capacity=False)
        for r in mm:
            if r.kind == "checkpoint":
                (_, nl, sl), (_, nn, sn) = r.dims
                out.append(f"| `{policy}` | `{r.name}` | {r.size:,} | {nl} × {sl:#x} | "
                           f"{nn} × {sn:#x} | {_size(r.span)} |")
    return "\n".join(out).rstrip() + "\n"

