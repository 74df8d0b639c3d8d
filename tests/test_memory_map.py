"""The off-chip memory map: sizes against the paper's dimensions, no overlaps, page alignment,
capacity errors, the base-address registers and the layout in the C header."""

import dataclasses
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from specgen.gen.emit.memory_map_doc import render_memory_map_doc
from specgen.gen.emit.regmap_doc import c_header
from specgen.golden.bsfp import pack_nibbles, split_planes
from specgen.golden.config import PRESETS, BoardConfig, preset
from specgen.golden.lm import LMConfig, lm_preset
from specgen.golden.memory_map import MAP_POLICIES, REGION_CLASSES, MemoryMap, unit_checkpoint
from specgen.hw.regmap import accelerator_regmap

ROOT = Path(__file__).resolve().parent.parent
PAGE = 4096


def entries(mm):
    """Every entry of every region as ``(start, end, name)`` at the default bases, brute force."""
    out = []
    for r in mm:
        ranges = [range(count) for _, count, _ in r.dims]
        for index in np.ndindex(*[len(x) for x in ranges]) if ranges else [()]:
            kw = {name: int(i) for (name, _, _), i in zip(r.dims, index)}
            start = mm.address(r.name, **kw)
            out.append((start, start + r.size, f"{r.name}{kw}"))
    return out


def check_layout(mm):
    """Problems of ``mm``: overlapping entries, entries off a page or outside their class."""
    problems = []
    spans = sorted(entries(mm))
    for (a0, a1, an), (b0, b1, bn) in zip(spans, spans[1:]):
        if b0 < a1:
            problems.append(f"{bn} at {b0:#x} overlaps {an} ({a0:#x}..{a1:#x})")
    bounds = {k: (mm.class_offset(k), mm.class_offset(k) + mm.class_size(k)) for k in REGION_CLASSES}
    for start, end, name in spans:
        lo, hi = bounds[name.split(".")[0]]
        if start % PAGE:
            problems.append(f"{name} at {start:#x} is not page-aligned")
        if not lo <= start < end <= hi:
            problems.append(f"{name} ({start:#x}..{end:#x}) is outside its class ({lo:#x}..{hi:#x})")
    if spans and max(e for _, e, _ in spans) > mm.total_bytes:
        problems.append("an entry ends past total_bytes")
    return problems


@pytest.mark.parametrize("policy", list(MAP_POLICIES))
@pytest.mark.parametrize("model", ["tiny", "small"])
def test_no_overlap_and_page_aligned(policy, model):
    cfg = preset("sim").replace(tree=dataclasses.replace(preset("sim").tree, max_nodes=5))
    mm = MemoryMap.build(config=cfg, model=lm_preset(model), policy=policy)
    assert check_layout(mm) == []
    # The classes sit back to back, each on a page.
    assert [mm.class_offset(k) for k in REGION_CLASSES] == \
        list(np.cumsum([0] + [mm.class_size(k) for k in REGION_CLASSES[:-1]]))


def test_overlap_check_can_fail():
    mm = MemoryMap.build(config=preset("sim"), model=lm_preset("tiny"))
    regions = list(mm.regions)
    regions[1] = dataclasses.replace(regions[1], offset=regions[0].offset)
    bad = dataclasses.replace(mm, regions=tuple(regions))
    assert any("overlaps" in p for p in check_layout(bad))
    regions = list(mm.regions)
    regions[-1] = dataclasses.replace(regions[-1], offset=regions[-1].offset + 8)
    assert any("not page-aligned" in p for p in check_layout(dataclasses.replace(mm, regions=tuple(regions))))


def test_sizes_of_mamba2_2p7b():
    """Independent arithmetic from the paper's dimensions (SpecMamba arXiv 2509.19873, Mamba2-2.7B:
    d_model 2560, 64 layers, 80 heads × 64 × 128, vocab 50,288), not from the map's formulas."""
    mm = MemoryMap.build(config=preset("vhk158"), model=LMConfig.from_model("2.7B"),
                         policy="hybrid-records-off-chip")
    # One state is 80 × 64 × 128 binary32 = 2,621,440 bytes (640 pages, about 2.6 MB); a layer
    # has six slots (two committed banks of each model, two draft scratch slots).
    state = mm["state.ssm"]
    assert state.size == 655_360 * 4 == 2_621_440
    assert state.dims == (("layer", 64, 6 * 2_621_440), ("slot", 6, 2_621_440))
    assert state.span == 64 * 6 * 2_621_440 == 1_006_632_960  # about 1.0 GB
    # The SSM engine's buffers: 64 nodes × a record of B, C (128 each), x (5120), dt (80)
    # binary32 = 64 × 21,824 = 1,396,736 bytes (341 pages), which also holds 64 nodes' y.
    io = mm["io.ssm"]
    assert io.dims == (("layer", 64, 4 * 1_396_736), ("buffer", 4, 1_396_736))
    assert mm["weights.ssm_params"].dims == (("layer", 64, 4096),)
    assert mm["weights.ssm_params"].offset == state.offset == io.offset == 0
    conv = mm["state.target.conv"]
    assert conv.size == 3 * (5120 + 2 * 128) * 4
    rows = 2 * 5120 + 2 * 128 + 80  # z, xBC, dt
    # The planes hold the linear engine's jobs: output tiles of the 64 × 84 array's 5,376
    # MAC slots (K ≤ max_k 8,192, one input chunk), half a byte a weight in the nibble
    # plane, a byte and a half in the residue plane. A tile's unused slots are zero
    # weights that are read all the same, but a tile that fills at most half its slots
    # uses only the lower half of every column and packs two beats a word, input by input:
    # a weight port's 14 columns of an input take 8 sub-beats (whole transfers of two),
    # not 14. in_proj's 10,576 rows are 2 tiles (the second 5,200 rows), out_proj's 2,560
    # a packed tile (8/14 of one), the embedding's 50,288 nine and a packed one (the last
    # 1,904 rows).
    tile = 64 * 84
    half = tile * 8 // 14
    assert mm["weights.in_proj.nibble"].size == 2 * tile * 2560 // 2
    assert mm["weights.in_proj.residue"].size == 2 * tile * 2560 * 3 // 2
    assert mm["weights.out_proj.nibble"].size == half * 5120 // 2
    assert mm["weights.embedding.nibble"].size == (9 * tile + half) * 2560 // 2
    padded = 64 * (2 * tile * 2560 + half * 5120) + (9 * tile + half) * 2560
    planes = sum(r.entries * r.size for r in mm if r.name.endswith(("nibble", "residue")))
    assert planes == 2 * padded
    # The draft plane (linear.draft_plane): the nibbles again, each input of a port padded
    # to whole draft transfers of 8 sub-beats: 16 for a full tile's 14, 8 packed 2.
    full = tile * 16 // 14
    assert mm["weights.in_proj.draft"].size == 2 * full * 2560 // 2
    assert mm["weights.out_proj.draft"].size == half * 5120 // 2
    assert mm["weights.embedding.draft"].size == (9 * full + half) * 2560 // 2
    # The FP16 model is 5.4 GB (16 bits a weight); the tiles' padding takes it to 5.8 GB
    # (5.6 GB when a packed input could share a transfer with the next, 7.3 GB before the
    # partial tiles were packed), the draft plane to 7.4 GB.
    linear = 64 * (rows * 2560 + 2560 * 5120) + 50_288 * 2560
    assert 5.3e9 < 2 * linear < 5.5e9
    assert 7.3e9 < mm.class_size("weights") < 7.5e9
    # Draft replay record: raw xBC row, x, B, dt in binary32, per node and layer.
    replay = mm["checkpoint.draft.replay"]
    assert replay.size == (5376 + 5120 + 128 + 80) * 4
    assert replay.dims == (("layer", 64, 64 * 45_056), ("node", 64, 45_056))
    assert mm["io.target.logits"].size == 64 * 50_288 * 4


def test_unit_checkpoint():
    # The board presets' SSM unit is one Mamba2-2.7B layer: 80 heads × 64 × 128.
    assert unit_checkpoint(preset("vhk158")) == unit_checkpoint(preset("vck190")) == "2.7B"
    assert unit_checkpoint(preset("sim")) is None  # 2 heads × 2 × 8
    from specgen.golden.mamba2 import SSMConfig
    cfg = preset("sim").replace(ssm=SSMConfig(nheads=32, headdim=64, d_state=128, lanes=64))
    assert unit_checkpoint(cfg) == "370M"
    with pytest.raises(TypeError, match="unit_checkpoint: config must be a golden.config.Config"):
        unit_checkpoint("sim")


def layout_model():
    return LMConfig.from_model("2.7B")


def test_planes_match_bsfp():
    words = np.arange(0, 1 << 16, 7, dtype=np.uint16)[:1024].reshape(8, 128)
    nib, res = split_planes(words)
    assert int(nib.max()) < 1 << 4 and int(res.max()) < 1 << 12
    mm = MemoryMap.build(config=preset("sim"), model=LMConfig(vocab=8, d_model=128, n_layer=1,
                                                              d_state=4, headdim=8))
    assert mm["weights.embedding.nibble"].size == pack_nibbles(nib).nbytes


def test_capacity_error_names_the_field():
    cfg = preset("vck190")
    with pytest.raises(ValueError) as info:
        MemoryMap.build(config=cfg, model=layout_model(), policy="pure-store")
    msg = str(info.value)
    assert "BoardConfig.memory_bytes = 8,589,934,592 of board 'vck190'" in msg
    assert "hybrid-records-off-chip" in msg
    MemoryMap.build(config=cfg, model=layout_model(), policy="pure-store", check_capacity=False)
    MemoryMap.build(config=preset("vhk158"), model=layout_model(), policy="pure-store")


@pytest.mark.parametrize("kwargs,exc,message", [
    ({"policy": "stash"}, ValueError, "MemoryMap.policy must be one of 'pure-store'"),
    ({"model": "2.7B"}, TypeError, "MemoryMap.model must be a golden.lm.LMConfig"),
    ({"config": "vhk158"}, TypeError, "MemoryMap.config must be a golden.config.Config"),
    ({"check_capacity": 1}, TypeError, "MemoryMap.check_capacity must be True or False"),
])
def test_bad_arguments(kwargs, exc, message):
    args = {"config": preset("sim"), "model": lm_preset("tiny"), **kwargs}
    with pytest.raises(exc) as info:
        MemoryMap.build(**args)
    assert str(info.value).startswith(message), str(info.value)
    with pytest.raises(TypeError):
        MemoryMap.build(preset("sim"), lm_preset("tiny"))


def test_entry_index_errors():
    mm = MemoryMap.build(config=preset("sim"), model=lm_preset("tiny"))
    with pytest.raises(ValueError, match=r"layer must be an integer in \[0, 1\], not 2"):
        mm.address("state.target.conv", layer=2)
    with pytest.raises(ValueError, match=r"give the indices \['layer'\]"):
        mm.address("state.target.conv")
    with pytest.raises(ValueError, match=r"slot must be an integer in \[0, 5\], not 6"):
        mm.address("state.ssm", layer=0, slot=6)
    with pytest.raises(KeyError, match="no region 'state.target.ssm'"):
        mm["state.target.ssm"]


def test_board_memory_bytes_validated():
    with pytest.raises(ValueError, match="BoardConfig.memory_bytes must be an integer >= 0, not -1"):
        BoardConfig(name="x", part=None, clock_mhz=100.0, memory="none", mem_bw_gbs=0.0, dsp58=0,
                    memory_bytes=-1)


def test_base_registers_appended():
    rm = accelerator_regmap(preset("vhk158"))
    # Offsets of the registers that existed before, unchanged (typed from docs/regmap.md v1.1).
    for name, offset in (("ID", 0x0), ("CTRL", 0x20), ("STATUS", 0x28), ("LIN_CMD", 0x30),
                         ("DIM_MODEL", 0x40), ("TREE_DESC", 0x60), ("PERF_CTRL", 0x80),
                         ("PERF_LAST_STEP_HI", 0xE4), ("TREE_PARENT", 0x400)):
        assert rm[name].offset == offset, name
    assert rm.span == 0x800
    for i, kind in enumerate(("WEIGHTS", "STATE", "CHECKPOINT", "IO")):
        lo, hi = rm[f"MEM_{kind}_BASE_LO"], rm[f"MEM_{kind}_BASE_HI"]
        assert (lo.offset, hi.offset) == (0x100 + 8 * i, 0x104 + 8 * i)
        assert lo.field("ADDR").lsb == 12 and lo.field("ADDR").access == "RW"
        assert hi.field("ADDR").width == 32
    # 2.0: the memory-fed SSM path changed what ROLLBACK does and error code 8 (MEMORY);
    # 3.0: the linear job's addresses (LIN_*), LIN_CMD.SCALE and LIN_STATUS.BUSY.
    assert (rm["VERSION"].field("MAJOR").reset, rm["VERSION"].field("MINOR").reset) == (3, 1)
    for i, name in enumerate(("W_NIBBLE", "W_RESIDUE", "X", "Y")):
        lo, hi = rm[f"LIN_{name}_LO"], rm[f"LIN_{name}_HI"]
        assert (lo.offset, hi.offset) == (0x140 + 8 * i, 0x144 + 8 * i)
        assert lo.field("ADDR").lsb == 6 and hi.field("ADDR").width == 32


CC = shutil.which("cc") or shutil.which("gcc")


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_header_layout_defines(tmp_path):
    (tmp_path / "specgen_regs.h").write_text(c_header(preset("vhk158")))
    checks = [
        "SPECGEN_MEM_STATE_SSM_LAYER_STRIDE == 6 * 2621440ull",
        "SPECGEN_MEM_STATE_SSM_LAYERS == 64u",
        "SPECGEN_MEM_STATE_SSM_SIZE == 655360ull * 4",
        "SPECGEN_MEM_WEIGHTS_IN_PROJ_NIBBLE_SIZE == 2 * 64 * 84ull * 2560 / 2",
        "SPECGEN_MEM_ALIGN == 4096u",
        "SPECGEN_MEM_WEIGHTS_DEFAULT_BASE == 0ull",
        "SPECGEN_MEM_STATE_DEFAULT_BASE == SPECGEN_MEM_WEIGHTS_BYTES",
        "SPECGEN_MEM_WEIGHTS_BASE_LO_OFFSET == 0x100u",
    ]
    src = tmp_path / "check.c"
    src.write_text("#include \"specgen_regs.h\"\n#include \"specgen_regs.h\"\n"
                   + "\n".join(f"_Static_assert({c}, \"{i}\");" for i, c in enumerate(checks))
                   + "\nint main(void) { return 0; }\n")
    run = subprocess.run([CC, "-std=c11", "-Wall", "-Werror", "-fsyntax-only", str(src)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    src.write_text("#include \"specgen_regs.h\"\n"
                   "_Static_assert(SPECGEN_MEM_STATE_SSM_LAYER_STRIDE == 2621441ull, \"x\");\n")
    run = subprocess.run([CC, "-std=c11", "-fsyntax-only", str(src)], capture_output=True,
                         text=True, cwd=tmp_path)
    assert run.returncode != 0


def test_docs_memory_map_is_current():
    text = (ROOT / "docs" / "memory-map.md").read_text()
    assert text == render_memory_map_doc(), "docs/memory-map.md is stale: run specgen docs memory-map"
    for name in PRESETS:
        assert f"| `{name}` |" in text


@pytest.mark.parametrize("lanes, ports, words", [(4, 1, 3), (4, 2, 3), (8, 4, 5), (128, 16, 2)])
def test_stripe_state_is_the_ports_slices(lanes, ports, words):
    """Stripe ``p`` holds slice ``p`` (``lanes/ports`` elements) of every unit word in word
    order, the stripes back to back; built here element by element."""
    from specgen.golden.memory_map import stripe_state, unstripe_state
    tile = np.arange(words * lanes, dtype=np.uint32) * 7 + 3
    w = lanes // ports
    want = [int(tile[i * lanes + p * w + j]) for p in range(ports) for i in range(words)
            for j in range(w)]
    got = stripe_state(tile, lanes=lanes, ports=ports)
    assert got.tolist() == want
    assert unstripe_state(got, lanes=lanes, ports=ports).tolist() == tile.tolist()
    if ports == 1:
        assert got.tolist() == tile.tolist()


def test_stripe_state_errors():
    from specgen.golden.memory_map import stripe_state, unstripe_state
    for f in (stripe_state, unstripe_state):
        with pytest.raises(ValueError, match="ports must divide lanes"):
            f(np.zeros(8), lanes=4, ports=3)
        with pytest.raises(ValueError, match="lanes the length"):
            f(np.zeros(6), lanes=4, ports=2)


def test_state_ports_of_the_presets_carry_the_unit():
    """Each preset's state ports, a beat a memory cycle each way (the masters pack and split
    the unit's slices), carry at least 90 % of the unit's ``lanes`` words a fabric cycle,
    and half as many would carry less than half; or the board has one port's bandwidth at
    most (VCK190's DDR), where one is enough."""
    from specgen.golden.memory_map import ssm_engine_layout
    for name in ("vck190", "vhk158"):
        c = preset(name)
        S, word = c.ssm.state_ports, 32 * c.ssm.lanes
        beat = min(c.board.memory_port_bits, word // S)
        if c.board.memory_ports <= 1:
            assert S == 1
        else:
            # Bits a fabric cycle: S ports of `beat` bits at memory_clock / clock beats each.
            rate = c.board.memory_clock_mhz / c.board.clock_mhz
            assert S * beat * rate >= 0.9 * word and (S // 2) * beat * rate < word / 2 * 1.0001
        lay = ssm_engine_layout(c)
        assert lay.stripe_bytes * S == lay.state_bytes and lay.stripe_bytes % (beat // 8) == 0
    with pytest.raises(ValueError, match=r"SSMConfig.state_ports must be a power of two that "
                                         r"divides lanes \(256\), not 3"):
        dataclasses.replace(preset("vhk158").ssm, state_ports=3)
    with pytest.raises(ValueError, match="SSMConfig.state_ports"):
        dataclasses.replace(preset("vhk158").ssm, state_ports=256)


def test_state_image_is_the_benches_tile_order_striped():
    """The memory image of a state equals the tile-port words the SSM unit's benches
    build (``sim.ssm_unit_bfm.pack_tiles``, a partial last tile per row), striped."""
    from specgen.golden.mamba2 import SSMConfig
    from specgen.golden.memory_map import from_tile_order, state_image, tile_order
    from specgen.sim.ssm_unit_bfm import state_to_memory
    rng = np.random.default_rng(5)
    for geom in ({"nheads": 2, "headdim": 3, "d_state": 8, "lanes": 4, "state_ports": 2},
                 {"nheads": 1, "headdim": 2, "d_state": 6, "lanes": 4, "state_ports": 4},
                 {"nheads": 2, "headdim": 2, "d_state": 8, "lanes": 8},
                 # Two rows of a head a word (lanes = 2·d_state), over 4 ports.
                 {"nheads": 2, "headdim": 4, "d_state": 8, "lanes": 16, "state_ports": 4}):
        cfg = SSMConfig(**geom)
        st = rng.integers(0, 2**32, size=cfg.state_shape, dtype=np.uint64).astype(np.uint32)
        assert state_image(cfg, st).tolist() == state_to_memory(cfg, st).tolist()
        assert np.array_equal(from_tile_order(cfg, tile_order(cfg, st)), st)
    with pytest.raises(ValueError, match="from_tile_order: 5 elements, the unit's tile order "
                                         "has 64"):
        from_tile_order(cfg, np.zeros(5))
    with pytest.raises(ValueError, match="a state of shape"):
        state_image(cfg, st[:1])
    with pytest.raises(ValueError, match="4 elements in words of 8 lanes"):
        state_image(SSMConfig(nheads=1, headdim=1, d_state=4, lanes=8), np.zeros((1, 1, 4)))
