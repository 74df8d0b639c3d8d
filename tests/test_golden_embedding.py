"""The embedding reader's command (:mod:`golden.embedding`), byte for byte."""

import pytest

from specgen.golden.embedding import embedding_command
from tests.oracles import seeded_rng


def test_the_command_covers_exactly_the_row():
    rng = seeded_rng("embedding_rows")
    for _ in range(2000):
        beat = 1 << int(rng.integers(2, 8))
        row_bytes = beat * int(rng.integers(1, 400))
        vocab = int(rng.integers(1, 60_000))
        base_bytes = beat * int(rng.integers(0, 1 << 24))
        token = int(rng.integers(0, vocab))
        addr, beats, bad = embedding_command(token, vocab=vocab, row_bytes=row_bytes,
                                             beat_bytes=beat, base=base_bytes // beat)
        assert not bad
        # Bytes [addr·beat, (addr + beats)·beat) are row `token` of a row-major table.
        assert addr * beat == base_bytes + token * row_bytes
        assert beats * beat == row_bytes


def test_a_mamba2_row():
    """Mamba2-2.7B: FP16 rows of 2,560 words = 5,120 B, 32-byte beats: 160 beats a row."""
    assert embedding_command(3, vocab=50_288, row_bytes=5120, beat_bytes=32, base=1000) == \
        (1000 + 3 * 160, 160, False)


def test_bad_token_and_layout_errors():
    assert embedding_command(10, vocab=10, row_bytes=64, beat_bytes=32) == (0, 0, True)
    with pytest.raises(ValueError, match=r"^embedding.row_bytes must be a multiple of "
                                         r"beat_bytes \(32\), not 48$"):
        embedding_command(0, vocab=10, row_bytes=48, beat_bytes=32)
    with pytest.raises(ValueError, match=r"^embedding.beat_bytes must be a power of two, not 24$"):
        embedding_command(0, vocab=10, row_bytes=48, beat_bytes=24)
    with pytest.raises(ValueError, match=r"^embedding.token must be an integer >= 0, not -1$"):
        embedding_command(-1, vocab=10, row_bytes=64, beat_bytes=32)
