"""Embedding lookup as a memory read: the ``EmbeddingReader`` block's contract.

``h = E[token]`` reads one row of the embedding table (``vocab × d_model``; with
tied weights the LM head's matrix too) from memory. The block turns a token
into one read command of the project's AXI4 read master
(``hw.axi_master.command_layout``: a region's first beat and its length in
beats; the master cuts it into bursts of at most ``max_burst`` beats that never
cross a 4 KB boundary, AMBA AXI IHI 0022 A3.4.1). The row's data come back from
memory unchanged. The contract is the command:

* the table starts at beat ``base`` (its byte address ÷ ``beat_bytes``, the
  port's data width in bytes) and a row is ``row_bytes`` bytes, a multiple of
  ``beat_bytes``, so row ``token`` is the region
  ``addr = base + token·(row_bytes/beat_bytes)``, ``beats = row_bytes/beat_bytes``;
* a token ``≥ vocab`` issues no command and is reported (``bad``): a wrong token
  id is a runtime fault, never a read outside the table.
"""

from .validate import check_int

__all__ = ["embedding_command", "row_beats"]


def row_beats(*, row_bytes, beat_bytes):
    """Beats of one row: ``row_bytes / beat_bytes`` (``beat_bytes`` a power of two that
    divides ``row_bytes``)."""
    check_int("embedding", "beat_bytes", beat_bytes, min=1)
    if beat_bytes & (beat_bytes - 1):
        raise ValueError(f"embedding.beat_bytes must be a power of two, not {beat_bytes!r}")
    check_int("embedding", "row_bytes", row_bytes, min=beat_bytes)
    if row_bytes % beat_bytes:
        raise ValueError(f"embedding.row_bytes must be a multiple of beat_bytes ({beat_bytes}), "
                         f"not {row_bytes!r}")
    return row_bytes // beat_bytes


def embedding_command(token, *, vocab, row_bytes, beat_bytes, base=0):
    """The read command of ``E[token]`` (module docstring).

    Returns
    -------
    (addr, beats, bad) : (int, int, bool)
        ``addr`` in beats; ``(0, 0, True)`` for a token ``>= vocab``.
    """
    check_int("embedding", "vocab", vocab, min=1)
    beats = row_beats(row_bytes=row_bytes, beat_bytes=beat_bytes)
    base = check_int("embedding", "base", base, min=0)
    token = check_int("embedding", "token", token, min=0)
    if token >= vocab:
        return 0, 0, True
    return base + token * beats, beats, False
