"""``docs/blocks-layer.md``'s figures table names the blocks the vck190 preset builds
and their latencies, read from the blocks (so the page cannot drift)."""

import re
from pathlib import Path

import pytest

from specgen.golden.config import preset
from specgen.golden.mamba2 import MAMBA2_VOCAB
from specgen.hw.argmax import Argmax
from specgen.hw.conv1d import Conv1d
from specgen.hw.gated_norm import GatedRMSNorm
from specgen.hw.residual import Residual

DOC = Path(__file__).resolve().parent.parent / "docs" / "blocks-layer.md"


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_figures_table_matches_the_blocks():
    cfg = preset("vck190")
    blocks = [Conv1d.from_config(cfg), GatedRMSNorm.from_config(cfg), Residual.from_config(cfg),
              Argmax.from_config(cfg, size=MAMBA2_VOCAB)]
    rows = dict(re.findall(r"^\| `(\w+)` \| (\d+) \|", DOC.read_text(), re.M))
    assert rows == {b.module_name: str(b.latency) for b in blocks}
    norm = blocks[1]
    assert f"two 5,120-vectors per {norm.pair_cycles:,} cycles" in DOC.read_text()
