import pytest

from specgen.hw.embedding import EmbeddingReader
from specgen.sim.lint import lint_component
from specgen.sim.runner import BenchFailure, run_bench

#: A non-power-of-two vocabulary (bad ids exist), 3 beats a row, a table at beat 1000.
SMALL = dict(vocab=37, row_bytes=96, beat_bytes=32, beat_bits=20)


def _run(dut, *, testcase=None, **extra):
    params = {**SMALL, "token_bits": len(dut.i.payload), "base": 1000, "latency": dut.latency,
              **extra}
    return run_bench(dut, name=dut.module_name, module="specgen.sim.embedding", testcase=testcase,
                     params=params)


@pytest.mark.sim
def test_embedding_reader():
    _run(EmbeddingReader(**SMALL))


@pytest.mark.sim
def test_embedding_bench_can_fail():
    with pytest.raises(BenchFailure, match="1 of 1 cocotb tests failed"):
        _run(EmbeddingReader(**SMALL), testcase="full_rate", corrupt=True)


def test_embedding_lint(tmp_path):
    dut = EmbeddingReader(vocab=50_288, row_bytes=5120, beat_bytes=32, beat_bits=32)
    ok, out = lint_component(dut, folder=tmp_path)
    assert ok, out


def test_embedding_properties_and_errors():
    dut = EmbeddingReader(row_bytes=5120, beat_bytes=32, beat_bits=32)
    assert dut.row_beats == 160 and dut.module_name == "EmbeddingReader_v50288_r160_b32"
    with pytest.raises(ValueError, match=r"^EmbeddingReader.beat_bits must hold the table's "
                                         r"8046080 beats, not 16$"):
        EmbeddingReader(row_bytes=5120, beat_bytes=32, beat_bits=16)
    with pytest.raises(ValueError, match=r"^embedding.row_bytes must be a multiple of beat_bytes "
                                         r"\(32\), not 100$"):
        EmbeddingReader(row_bytes=100, beat_bytes=32, beat_bits=32)
    with pytest.raises(ValueError, match=r"^EmbeddingReader.vocab must be an integer >= 1, not 0$"):
        EmbeddingReader(vocab=0, row_bytes=64, beat_bytes=32, beat_bits=32)
