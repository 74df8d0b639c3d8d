"""``docs/tree.md``'s memory table is what ``gen/studies/tree_memory.py`` writes today."""

import shutil
from pathlib import Path

from specgen.gen.studies.tree_memory import write_tree_memory

DOC = Path(__file__).resolve().parent.parent / "docs" / "tree.md"


def test_tree_memory_table_is_current(tmp_path):
    shutil.copy(DOC, tmp_path / "tree.md")
    write_tree_memory(out=tmp_path)
    assert (tmp_path / "tree.md").read_text() == DOC.read_text(), (
        "docs/tree.md is stale: run specgen docs tree-memory")
