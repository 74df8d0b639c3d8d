"""The memory system's size targets, as checks that fail when a preset or the RTL moves
past them (``docs/memory.md``, "The memory system's targets, measured")."""

import pytest

from specgen.golden.backtrack_cost import BRAM_BYTES, URAM_BYTES
from specgen.golden.config import preset
from specgen.golden.tree import fifo_schedule, seed_shapes
from specgen.gen.studies.tree_memory import rtl_peak_level
from specgen.hw.hierarchy import silence
from specgen.hw.tree_ssm import TreeSSMUnit


def _unit(board):
    return silence(TreeSSMUnit.from_config(preset(board)))     # built for its sizes only


@pytest.mark.parametrize("board", ["vck190", "vhk158"])
def test_tile_ring_is_at_most_an_eighth_of_storing_every_node(board):
    """For each of the seed's tree shapes that fits the ring (branching 2-3, depth 4-5,
    FIFO depth 16), the tiles live at the RTL's peak (``TreeVerifier.peak_level``) hold
    at most 1/8 of the bytes of every node's whole layer state."""
    config = preset(board)
    unit = _unit(board)
    c = config.ssm
    tile_bytes = unit.tile_elems * 4
    state_bytes = c.nheads * c.headdim * c.d_state * 4
    checked = 0
    for shape in seed_shapes():
        if fifo_schedule(shape.parents, fifo_depth=len(shape.parents)).peak_live \
                > config.tree.fifo_depth:
            continue
        peak = rtl_peak_level(shape.parents, fifo_depth=config.tree.fifo_depth,
                              max_nodes=config.tree.max_nodes)
        assert 8 * peak * tile_bytes <= len(shape.parents) * state_bytes, (shape, peak)
        checked += 1
    assert checked >= 5


def test_on_chip_state_storage_at_vhk158_scale_is_within_60_percent_of_block_memory():
    """The tile ring, the state held on chip, against the XCVH1582's RAMB36 and URAM
    (``BoardConfig.bram36``, ``uram288``; ``docs/boards.md``): within 60 % (it is 0.27 %).
    With the capacities unknown (0) the check fails rather than passes."""
    board = preset("vhk158").board
    block_bits = 8 * (board.bram36 * BRAM_BYTES + board.uram288 * URAM_BYTES)
    ring = _unit("vhk158").ring_bits()
    # slots × rows a tile (10 issues of 2 rows, the gap's) × d_state × binary32
    assert ring == 16 * 20 * 128 * 32
    assert ring <= 0.6 * block_bits, (ring, block_bits)
    assert ring / block_bits == pytest.approx(0.00274, abs=1e-5)
