"""BSFP v1 weight planes in memory: the byte images the weight stream reads, and its beats.

SPEQ (arXiv 2510.18525) keeps one copy of the weights for the draft and the target: the
draft pass reads the 4-bit nibble plane ``{s, c}`` alone, a quarter of the bytes, and the
target pass reads it with the 12-bit residue plane ``{W, e0, m9..m0}`` and merges the two
(:func:`golden.bsfp.split_planes`, :func:`golden.bsfp.merge_planes`). This module fixes how
those planes lie in memory so that each is read in long sequential bursts, and what the
weight stream (``hw.weight_stream.WeightStream``) must deliver from them.

Layout, for a stream of ``n`` weight beats of ``rows`` stored words each (one beat is what
one weight port of the linear unit takes in one transfer):

* A **slice** is 4 bits of every word of a beat, weight ``h`` in bits ``4h .. 4h + 3`` of a
  ``4·rows``-bit *sub-beat* (little-endian bytes, so weight ``2i`` is the low nibble of byte
  ``i``, as :func:`golden.bsfp.pack_nibbles` packs). The sub-beats of the ``n`` beats follow
  each other in beat order, and the region is padded with zero bytes to a whole number of
  ``word_bits``-bit words (the read master's word), so that no word holds two jobs.
* The **nibble plane** of a job is one slice region: ``{s, c}``.
* The **residue plane** of a job is three slice regions back to back, each
  :func:`region_bytes` long: residue bits 3..0 (``m3..m0``), then 7..4 (``m7..m4``), then
  11..8 (``W, e0, m9, m8``). Each residue slice is as wide as the nibble plane, so one read
  master per slice streams it at the rate of the nibble plane, with no width converter.
* A layer's jobs lie one after another in each plane (:func:`pack_jobs`), so the draft pass
  reads one contiguous nibble area and the target pass four long sequential runs per job.
* A job whose rows fill at most ``1/q`` of the array's slots (``n_rows ≤ rows·cols/q``,
  ``q`` in :data:`PACKS` dividing ``rows``: :func:`pack_factor`) uses only slots
  ``h < rows/q`` of every column (row ``h·cols + g``), so its beats are **packed** ``q``
  to a sub-beat (:func:`pack_beats`), input by input: an input's ``c`` beats (the port's
  columns) take :func:`input_sub_beats` sub-beats, ``ceil(c/q)`` rounded up to a multiple
  of the stream's beats a transfer ``B`` (``weight_beats``), and its beat ``b``'s slots
  ``h < rows/q`` go to weights ``(b mod q)·rows/q + h`` of its sub-beat ``b // q``; the
  padding slots, all zero, are not stored. The regions shrink about ``q``-fold (a
  1,024-row out_proj on a 5,376-slot array reads a quarter of its padded tile), and the
  weight stream hands the sub-beats to the linear unit as they are: a transfer of ``B``
  sub-beats fills ``q·B`` columns, and no transfer holds two inputs' columns (each
  column's buffer holds one beat).
* The **draft plane** (:attr:`golden.config.LinearConfig.draft_plane`, :func:`draft_image`)
  is a second copy of the nibble plane laid out for the draft pass alone: each input's
  nibble sub-beats (packed as above) padded to a multiple of ``4 · B``, cut into groups
  of ``B`` sub-beats, group ``g`` in stripe ``g mod 4``, each stripe a region of its own.
  A weight stream's four read masters then each read one stripe in one long run and
  together deliver ``4 · B`` nibble sub-beats a transfer, where the nibble plane, read by
  one master, delivers ``B``: SPEQ's one-token draft passes take a quarter of the
  transfers, for 25 % more weight bytes than one copy.
* A whole matrix (``n_out × K``, rows are output features) is cut into jobs by
  :func:`matrix_tiles`: output rows in tiles of ``rows · cols`` (the array's MAC slots),
  each tile's inputs in chunks of at most ``max_k``, tile-major; :func:`pack_matrix` lays
  them out, and :func:`matrix_plane_bytes` gives the two planes' sizes that the memory map
  (:mod:`golden.memory_map`) reserves. A job that covers only part of ``K`` yields partial
  sums that the next chunk's pass must add.
* With ``split`` (:attr:`golden.config.LinearConfig.split_tiles`) a matrix's last, partial
  tile is cut into **pieces** that pack further (:func:`tile_pieces`): 336 rows of a
  512-slot tile read 512 slots as one job, but 384 as a piece of 256 rows packed 2 and one
  of 80 packed 4. Each piece is a job of its own (its rows start at a multiple of
  ``cols``), so a memory-bound pass reads fewer bytes for one more job's compute.

Everything is numpy on raw ``uint16`` stored words; the nibble and residue bits are taken
from the word here, by the bit positions of BSFP v1, not through ``split_planes``, so the
tests check the two routes against each other.
"""

from dataclasses import dataclass

import numpy as np

from .bsfp import BSFPConfig, restore_stored
from .validate import check_choice, check_int

__all__ = ["SLICE_BITS", "RESIDUE_SLICES", "PLANE_SLICES", "MODES", "PACKS", "pack_factor",
           "input_sub_beats", "pack_beats", "unpack_beats", "sub_beat_bits",
           "region_bytes", "column_beats", "slice_image", "plane_images", "unpack_slice",
           "pack_jobs", "port_count", "job_images", "job_sub_beats", "job_port_bytes",
           "engine_weight_ports",
           "stream_word_bits", "MatrixJob", "tile_pieces", "matrix_tiles", "matrix_job_count",
           "matrix_plane_bytes",
           "pack_matrix", "expected_beats", "weight15", "DRAFT_STRIPES",
           "draft_input_sub_beats", "input_transfers", "layout_args", "draft_image", "job_draft_image", "job_draft_port_bytes",
           "matrix_draft_bytes", "pack_matrix_draft", "expected_draft_transfers"]

#: Bits of one weight in one slice.
SLICE_BITS = 4
#: The 12-bit residue plane in 4-bit slices.
RESIDUE_SLICES = 3
#: Slices a target (verify) beat reads: the nibble plane and the residue slices.
PLANE_SLICES = 1 + RESIDUE_SLICES
#: Pass of a job: the draft reads the nibble plane, verify reads both planes.
MODES = ("verify", "draft")
#: Beats a sub-beat may pack (:func:`pack_factor`): the linear unit takes these.
PACKS = (1, 2, 4, 8)
#: Stripes of the draft plane: a weight stream's read masters (:func:`draft_image`).
DRAFT_STRIPES = 4


def pack_factor(n_rows, *, rows, cols):
    """Beats packed to a sub-beat for a job of ``n_rows`` rows on a ``rows × cols`` array:
    the largest ``q`` of :data:`PACKS` dividing ``rows`` with ``n_rows ≤ rows·cols/q``
    (every used slot of a column, row ``h·cols + g < n_rows``, has ``h < rows/q``)."""
    rows = check_int("weight_planes", "rows", rows, min=1)
    cols = check_int("weight_planes", "cols", cols, min=1)
    n_rows = check_int("weight_planes", "n_rows", n_rows, min=1, max=rows * cols)
    return max(q for q in PACKS if rows % q == 0 and n_rows * q <= rows * cols)


def input_sub_beats(per_input, pack, align=1):
    """Sub-beats of one input's ``per_input`` beats packed ``pack`` to a sub-beat:
    ``ceil(per_input / pack)``, rounded up to a multiple of ``align`` (the weight stream's
    beats a transfer, so that no transfer holds two inputs)."""
    per_input = check_int("weight_planes", "per_input", per_input, min=1)
    check_choice("weight_planes", "pack", pack, PACKS)
    align = check_int("weight_planes", "align", align, min=1)
    return -(-(-(-per_input // pack)) // align) * align


def pack_beats(words, pack, *, per_input=None, align=1):
    """Beats ``words`` (shape ``(n, rows)``) packed ``pack`` to a sub-beat, input by input.

    The beats are inputs of ``per_input`` beats each (default ``n``: one input). Each
    input's beats take :func:`input_sub_beats` sub-beats: beat ``b`` of the input has its
    slots ``h < rows/pack`` at weights ``(b mod pack)·rows/pack + h`` of the input's
    sub-beat ``b // pack``; what is left of the input's sub-beats is zero. Shape
    ``(n / per_input · input_sub_beats(...), rows)``. Raises ``ValueError`` if a slot
    ``h ≥ rows/pack`` is not zero, or ``per_input`` does not divide ``n``."""
    w = np.asarray(words, dtype=np.uint16)
    n, rows = w.shape
    check_choice("weight_planes", "pack", pack, PACKS)
    if rows % pack:
        raise ValueError(f"weight_planes.pack must divide rows ({rows}), not {pack}")
    used = rows // pack
    if w[:, used:].any():
        raise ValueError(f"weight_planes.pack {pack}: beats use slots at or above "
                         f"rows/pack ({used}); only padding rows may be packed away")
    per = n if per_input is None else check_int("weight_planes", "per_input", per_input,
                                                 min=1)
    if n == 0:
        return np.zeros((0, rows), np.uint16)
    if n % per:
        raise ValueError(f"weight_planes.per_input must divide the beats ({n}), not {per}")
    subs = input_sub_beats(per, pack, align)
    full = np.zeros((n // per, subs * pack, used), np.uint16)
    full[:, :per] = w[:, :used].reshape(n // per, per, used)
    return full.reshape(-1, rows)


def unpack_beats(packed, pack, n, *, per_input=None, align=1):
    """Inverse of :func:`pack_beats`: the ``n`` beats (``(n, rows)``) of ``packed``."""
    p = np.asarray(packed, dtype=np.uint16)
    rows = p.shape[1]
    used = rows // pack
    per = n if per_input is None else per_input
    if n == 0:
        return np.zeros((0, rows), np.uint16)
    subs = input_sub_beats(per, pack, align)
    grid = p.reshape(n // per, subs * pack, used)[:, :per]
    out = np.zeros((n, rows), np.uint16)
    out[:, :used] = grid.reshape(n, used)
    return out


def sub_beat_bits(rows):
    """Bits of one beat in one slice: ``4 · rows``."""
    return SLICE_BITS * check_int("weight_planes", "rows", rows, min=1)


def region_bytes(n_beats, *, rows, word_bits):
    """Bytes of one slice region of ``n_beats`` beats, padded to whole ``word_bits`` words."""
    check_int("weight_planes", "n_beats", n_beats, min=0)
    word_bits = check_int("weight_planes", "word_bits", word_bits, min=8)
    if word_bits % 8:
        raise ValueError(f"weight_planes.word_bits must be a multiple of 8, not {word_bits}")
    bits = n_beats * sub_beat_bits(rows)
    return -(-bits // word_bits) * word_bits // 8


def column_beats(stored, *, rows, cols, ports=1, port=0):
    """The beats one weight port of ``hw.dsp_linear_unit.DSPLinearUnit`` takes for one job.

    Parameters
    ----------
    stored : array_like of uint16, shape (n_rows, K)
        The job's output rows (``n_rows ≤ rows · cols``) of BSFP stored words.
    rows, cols : int
        MAC slots per column and columns of the array.
    ports, port : int
        Weight ports of the array and the port whose beats are wanted.

    Returns
    -------
    numpy.ndarray of uint16, shape (K · len(port's columns), rows)
        For ``k`` ascending and, within it, the port's columns ``g ≡ port (mod ports)``
        ascending: slot ``h`` holds ``W[h · cols + g, k]``, and 0 where that row is
        ``≥ n_rows`` (padding rows carry zero weights).
    """
    rows = check_int("weight_planes", "rows", rows, min=1)
    cols = check_int("weight_planes", "cols", cols, min=1)
    ports = check_int("weight_planes", "ports", ports, min=1, max=cols)
    port = check_int("weight_planes", "port", port, min=0, max=ports - 1)
    w = np.asarray(stored, dtype=np.uint16)
    if w.ndim != 2 or not 1 <= w.shape[0] <= rows * cols:
        raise ValueError(f"weight_planes.stored must have shape (n_rows, K) with n_rows in "
                         f"[1, {rows * cols}], not {w.shape}")
    full = np.zeros((rows * cols, w.shape[1]), np.uint16)
    full[:w.shape[0]] = w
    grid = full.reshape(rows, cols, -1)            # [h, g, k]
    mine = grid[:, port::ports, :]                 # [h, g', k]
    return np.ascontiguousarray(mine.transpose(2, 1, 0).reshape(-1, rows))


def _slice_nibbles(words, index):
    """4-bit field ``index`` of every word: 0 the nibble plane, 1 .. 3 the residue slices."""
    w = np.asarray(words, dtype=np.uint16)
    if index == 0:
        # {s, c}: the sign (bit 15) over the draft code c = e[3:1] (bits 13..11).
        return (((w >> 15) & 1) << 3 | ((w >> 11) & 7)).astype(np.uint8)
    # Residue = W (bit 14) << 11 | e0 (bit 10) << 10 | m9..m0; slice j holds its bits
    # 4(j-1) .. 4(j-1) + 3.
    residue = ((w >> 14) & 1) << 11 | (w & 0x7FF)
    return ((residue >> (SLICE_BITS * (index - 1))) & 0xF).astype(np.uint8)


def slice_image(words, index, *, word_bits):
    """The bytes of slice ``index`` (0: nibble plane; 1, 2, 3: residue bits 3..0, 7..4,
    11..8) of the beats ``words`` (shape ``(n, rows)``), padded to whole words."""
    check_int("weight_planes", "index", index, min=0, max=PLANE_SLICES - 1)
    w = np.asarray(words, dtype=np.uint16)
    n, rows = w.shape
    nib = _slice_nibbles(w, index).reshape(-1)
    if nib.size % 2:
        nib = np.concatenate([nib, np.zeros(1, np.uint8)])
    packed = (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8)
    # Weight h of beat b is nibble b·rows + h of the concatenation: sub-beats follow each
    # other bit for bit, for any rows.
    out = np.zeros(region_bytes(n, rows=rows, word_bits=word_bits), np.uint8)
    out[:packed.size] = packed
    return out.tobytes()


def plane_images(words, *, word_bits, pack=1, per_input=None, align=1):
    """``(nibble_plane, residue_plane)`` bytes of one job's beats (shape ``(n, rows)``):
    the nibble slice region, and the three residue slice regions back to back; of the
    beats packed (:func:`pack_beats` with ``pack``, ``per_input`` and ``align``) where
    that changes them."""
    if pack != 1 or align != 1:
        words = pack_beats(words, pack, per_input=per_input, align=align)
    return (slice_image(words, 0, word_bits=word_bits),
            b"".join(slice_image(words, j, word_bits=word_bits)
                     for j in range(1, PLANE_SLICES)))


def unpack_slice(image, *, n_beats, rows):
    """Inverse of :func:`slice_image`: the ``(n_beats, rows)`` 4-bit fields of a region."""
    raw = np.frombuffer(bytes(image), np.uint8)
    bits = np.unpackbits(raw, bitorder="little")[:n_beats * rows * SLICE_BITS]
    fields = np.packbits(np.pad(bits.reshape(-1, SLICE_BITS), ((0, 0), (0, 4))), axis=1,
                         bitorder="little")
    return fields.reshape(n_beats, rows)


def pack_jobs(jobs, *, word_bits, align=4096, packs=None):
    """A layer's jobs laid out in the two planes.

    Parameters
    ----------
    jobs : list of array_like of uint16
        Each job's beats, shape ``(n, rows)`` (:func:`column_beats`).
    packs : list of int, optional
        Each job's :func:`pack_factor` (default 1: unpacked).
    word_bits : int
        The read master's word; every region is a whole number of them.
    align : int
        Byte alignment of each plane's start (the planes themselves are placed by
        the caller); 4 KB, a page, keeps the first burst whole.

    Returns
    -------
    nibble_plane, residue_plane : bytes
        The images; each job's regions follow the previous job's.
    offsets : list of (int, int, int)
        Per job: byte offset of its nibble region in ``nibble_plane``, of its residue
        region in ``residue_plane``, and its beats.
    """
    check_int("weight_planes", "align", align, min=1)
    nib, res, offsets = [], [], []
    n_off = r_off = 0
    packs = [1] * len(jobs) if packs is None else list(packs)
    for words, q in zip(jobs, packs, strict=True):
        a, b = plane_images(words, word_bits=word_bits, pack=q)
        offsets.append((n_off, r_off, int(np.asarray(words).shape[0])))
        nib.append(a)
        res.append(b)
        n_off += len(a)
        r_off += len(b)
    return b"".join(nib), b"".join(res), offsets


def port_count(cols, ports, *, owner="weight_planes", name="ports"):
    """``ports`` checked: weight ports of a ``cols``-column array, a divisor of ``cols``
    (each port streams ``cols / ports`` columns, ``g ≡ port (mod ports)``); errors name
    ``owner.name``."""
    cols = check_int("weight_planes", "cols", cols, min=1)
    ports = check_int(owner, name, ports, min=1, max=cols)
    if cols % ports:
        raise ValueError(f"{owner}.{name} must divide cols ({cols}), not {ports}")
    return ports


def job_images(stored, *, rows, cols, ports=1, word_bits, weight_beats=1):
    """``(nibble_plane, residue_plane)`` of one job (a tile of stored words, shape
    ``(n_rows, K)``) for an array with ``ports`` weight ports taking ``weight_beats``
    column beats a transfer: port ``p``'s regions (:func:`column_beats` of its columns,
    packed by the job's :func:`pack_factor` input by input, :func:`pack_beats`) follow
    port ``p − 1``'s in each plane, every port's region :func:`job_port_bytes` long, so
    port ``p`` reads from ``base + p · job_port_bytes`` (nibble) and
    ``base + 3p · job_port_bytes`` (residue)."""
    ports = port_count(cols, ports)
    weight_beats = check_int("weight_planes", "weight_beats", weight_beats, min=1)
    q = pack_factor(np.asarray(stored).shape[0], rows=rows, cols=cols)
    parts = [plane_images(column_beats(stored, rows=rows, cols=cols, ports=ports, port=p),
                          word_bits=word_bits, pack=q, per_input=cols // ports,
                          align=weight_beats) for p in range(ports)]
    return b"".join(a for a, _ in parts), b"".join(b for _, b in parts)


def job_sub_beats(n_k, *, cols, ports=1, pack=1, weight_beats=1):
    """Sub-beats of one port's region in a job of ``n_k`` inputs packed ``pack`` beats to
    a sub-beat (:func:`input_sub_beats` an input): what its weight stream reads and hands
    the linear unit, ``weight_beats`` a transfer."""
    ports = port_count(cols, ports)
    weight_beats = check_int("weight_planes", "weight_beats", weight_beats, min=1)
    return (check_int("weight_planes", "n_k", n_k, min=1)
            * input_sub_beats(cols // ports, pack, weight_beats))


def job_port_bytes(n_k, *, rows, cols, ports=1, word_bits, pack=1, weight_beats=1):
    """Bytes of one port's nibble region in a job of ``n_k`` inputs packed ``pack`` beats
    to a sub-beat (its residue regions are three times as long)."""
    subs = job_sub_beats(n_k, cols=cols, ports=ports, pack=pack, weight_beats=weight_beats)
    return region_bytes(subs, rows=rows, word_bits=word_bits)


def engine_weight_ports(config):
    """Weight ports of ``config``'s linear engine (:attr:`golden.config.LinearConfig.weight_ports`:
    6 on VHK158, 1 on the ``sim`` and VCK190 arrays)."""
    return config.linear.weight_ports


def stream_word_bits(config, port_bits=None):
    """The read masters' word of ``config``'s weight stream: the memory port
    (``port_bits``, default the board's), or ``linear.weight_beats`` sub-beats
    (``4 · linear.rows`` bits each: the beats the stream hands the linear unit in one
    transfer) where that is wider. Every region is a whole number of these words."""
    port_bits = config.board.memory_port_bits if port_bits is None else port_bits
    return max(config.linear.weight_beats * sub_beat_bits(config.linear.rows), port_bits)


@dataclass(frozen=True)
class MatrixJob:
    """One job of a matrix (:func:`matrix_tiles`): output rows ``row0 … row0 + n_rows − 1``,
    inputs ``k0 … k0 + n_k − 1``; with :func:`pack_matrix`, its regions' byte offsets in
    the nibble and the residue plane and its beats (``n_k · cols``)."""

    row0: int
    n_rows: int
    k0: int
    n_k: int
    nibble_offset: int = 0
    residue_offset: int = 0
    beats: int = 0


def tile_pieces(n_out, *, rows, cols, split=False):
    """The output-row pieces of an ``n_out``-row matrix on a ``rows × cols`` array:
    ``(row0, n_rows)`` pairs in order, one a job of :func:`matrix_tiles`.

    Full tiles of ``S = rows·cols`` rows first. Without ``split`` the last, partial tile
    is one piece (packed by :func:`pack_factor`). With ``split`` it is cut so that it
    reads the fewest slots in the fewest pieces: with ``b = S/q_max`` the smallest packed
    block (``q_max`` the largest of :data:`PACKS` dividing ``rows``), its ``r`` rows need
    ``m = ceil(r/b)`` blocks, and each set bit ``j`` of ``m``, highest first, is a piece
    of ``2^j·b`` rows packed ``q_max/2^j`` (the last piece takes what is left). Every
    piece starts at a multiple of ``b``, hence of ``cols`` (a result beat holds ``cols``
    rows, ``golden.dsp``).
    """
    n_out = check_int("weight_planes", "n_out", n_out, min=1)
    rows = check_int("weight_planes", "rows", rows, min=1)
    slots = rows * check_int("weight_planes", "cols", cols, min=1)
    full, last = divmod(n_out, slots)
    pieces = [(t * slots, slots) for t in range(full)]
    if not last:
        return pieces
    if not split:
        return pieces + [(full * slots, last)]
    block = slots // max(q for q in PACKS if rows % q == 0)
    m, at = -(-last // block), full * slots
    for j in reversed(range(m.bit_length())):
        if m >> j & 1:
            n = min(block << j, n_out - at)
            pieces.append((at, n))
            at += n
    return pieces


def matrix_tiles(n_out, k, *, rows, cols, max_k, split=False):
    """The jobs of an ``n_out × k`` matrix on a ``rows × cols`` array taking at most
    ``max_k`` inputs a job: output tiles of ``rows · cols`` rows (the last one cut into
    pieces with ``split``, :func:`tile_pieces`), each cut into input chunks of ``max_k``
    (the last ones shorter), tile-major."""
    k = check_int("weight_planes", "k", k, min=1)
    max_k = check_int("weight_planes", "max_k", max_k, min=1)
    return [MatrixJob(row0=r, n_rows=n, k0=c, n_k=min(max_k, k - c),
                      beats=min(max_k, k - c) * cols)
            for r, n in tile_pieces(n_out, rows=rows, cols=cols, split=split)
            for c in range(0, k, max_k)]


def matrix_job_count(n_out, k, *, rows, cols, max_k, split=False):
    """Jobs of :func:`matrix_tiles`, counted without listing the input chunks."""
    return (len(tile_pieces(n_out, rows=rows, cols=cols, split=split))
            * -(-check_int("weight_planes", "k", k, min=1)
                // check_int("weight_planes", "max_k", max_k, min=1)))


def matrix_plane_bytes(n_out, k, *, rows, cols, max_k, word_bits, ports=1, split=False,
                       weight_beats=1):
    """``(nibble_bytes, residue_bytes)`` of an ``n_out × k`` matrix laid out by
    :func:`pack_matrix`, without building it: a job's regions depend on its input chunk
    and its piece's :func:`pack_factor` only (a full tile packs nothing; the last tile's
    pieces may pack)."""
    nib = _matrix_bytes(job_port_bytes, n_out, k, rows=rows, cols=cols, max_k=max_k,
                        word_bits=word_bits, ports=ports, split=split,
                        weight_beats=weight_beats)
    return nib, RESIDUE_SLICES * nib


def _matrix_bytes(job_bytes, n_out, k, *, rows, cols, max_k, word_bits, ports, split,
                  weight_beats):
    """Σ over an ``n_out × k`` matrix's jobs of ``ports · job_bytes(n_k, pack=…)``, by
    tile piece (its pack) and input chunk (``max_k`` inputs, then the rest), without
    listing the jobs."""
    ports = port_count(cols, ports)
    full, rest = divmod(check_int("weight_planes", "k", k, min=1),
                        check_int("weight_planes", "max_k", max_k, min=1))
    kw = dict(rows=rows, cols=cols, ports=ports, word_bits=word_bits, weight_beats=weight_beats)

    def per_piece(pack):
        b = full * ports * job_bytes(max_k, pack=pack, **kw)
        if rest:
            b += ports * job_bytes(rest, pack=pack, **kw)
        return b
    return sum(per_piece(pack_factor(n, rows=rows, cols=cols))
               for _, n in tile_pieces(n_out, rows=rows, cols=cols, split=split))


def pack_matrix(stored, *, rows, cols, max_k, word_bits, ports=1, split=False, weight_beats=1):
    """A whole matrix of BSFP stored words (shape ``(n_out, K)``) as the engine's jobs.

    Returns
    -------
    nibble_plane, residue_plane : bytes
        The jobs of :func:`matrix_tiles` one after another (:func:`pack_jobs`).
    jobs : list of MatrixJob
        Each job with its offsets in the two planes.
    """
    w = np.asarray(stored, dtype=np.uint16)
    if w.ndim != 2 or 0 in w.shape:
        raise ValueError(f"weight_planes.stored must be a non-empty (n_out, K) matrix, "
                         f"not shape {w.shape}")
    nib, res, jobs = [], [], []
    n_off = r_off = 0
    for j in matrix_tiles(*w.shape, rows=rows, cols=cols, max_k=max_k, split=split):
        a, b = job_images(w[j.row0:j.row0 + j.n_rows, j.k0:j.k0 + j.n_k], rows=rows,
                          cols=cols, ports=ports, word_bits=word_bits,
                          weight_beats=weight_beats)
        jobs.append(MatrixJob(row0=j.row0, n_rows=j.n_rows, k0=j.k0, n_k=j.n_k,
                              nibble_offset=n_off, residue_offset=r_off, beats=j.beats))
        nib.append(a)
        res.append(b)
        n_off, r_off = n_off + len(a), r_off + len(b)
    return b"".join(nib), b"".join(res), jobs


def weight15(scaled):
    """The 15-bit full-pass weight ``{s, e3..e0, m9..m0}`` of scaled FP16 words (e4 = 0
    after BSFP scaling, so bit 14 is dropped)."""
    s = np.asarray(scaled, dtype=np.uint16)
    return ((s >> 15) << 14) | (s & 0x3FFF)


def expected_beats(words, *, mode, config=None):
    """What the weight stream delivers for beats ``words`` (shape ``(n, rows)``).

    Returns ``(weight, nibble)``, both ``(n, rows)``: in ``"verify"`` the 15-bit scaled
    word restored from the merged planes (:func:`golden.bsfp.restore_stored`) and the
    nibble; in ``"draft"`` the nibble, and weight 0 (no residue was read).
    """
    check_choice("weight_planes", "mode", mode, MODES)
    config = BSFPConfig() if config is None else config
    w = np.asarray(words, dtype=np.uint16)
    nibble = _slice_nibbles(w, 0)
    if mode == "draft":
        return np.zeros_like(w), nibble
    return weight15(restore_stored(w, config=config)), nibble


# -- the draft plane ---------------------------------------------------------------------

def input_transfers(per_input, pack, beats, *, wide=False):
    """Transfers of ``beats`` sub-beats one input of ``per_input`` column beats packed
    ``pack`` to a sub-beat takes (:func:`input_sub_beats` ``/ beats``); ``wide``, from the
    draft plane, four stripes a transfer (:func:`draft_input_sub_beats` ``/ (4 · beats)``).
    What bounds a linear job of fewer tokens (``hw.dsp_linear_unit``)."""
    if wide:
        return draft_input_sub_beats(per_input, pack, beats) // (DRAFT_STRIPES * beats)
    return input_sub_beats(per_input, pack, beats) // beats


def layout_args(config):
    """The plane layout's parameters of ``config``'s linear engine, as the
    ``matrix_*``/``pack_matrix*`` functions take them: the array, ``max_k``, the stream's
    word, the weight ports, ``split`` and ``weight_beats``."""
    lin = config.linear
    return dict(rows=lin.rows, cols=lin.cols, max_k=lin.max_k,
                word_bits=stream_word_bits(config), ports=engine_weight_ports(config),
                split=lin.split_tiles, weight_beats=lin.weight_beats)


def draft_input_sub_beats(per_input, pack, align=1):
    """Sub-beats of one input in the draft plane: :func:`input_sub_beats` rounded up to a
    multiple of ``DRAFT_STRIPES · align`` (one draft transfer: ``align`` sub-beats from
    each stripe), so that no draft transfer holds two inputs."""
    unit = DRAFT_STRIPES * check_int("weight_planes", "align", align, min=1)
    return -(-input_sub_beats(per_input, pack, align) // unit) * unit


def _draft_stripes(words, *, pack, per_input, align):
    """The draft plane's four stripes of one port's beats: ``(rows,)``-wide sub-beats each."""
    w = np.asarray(words, dtype=np.uint16)
    n, rows = w.shape
    per = n if per_input is None else per_input
    subs = pack_beats(w, pack, per_input=per, align=align)
    n_k = n // per
    s_in = input_sub_beats(per, pack, align)
    s_d = draft_input_sub_beats(per, pack, align)
    padded = np.zeros((n_k, s_d, rows), np.uint16)
    padded[:, :s_in] = subs.reshape(n_k, s_in, rows)
    groups = padded.reshape(-1, align, rows)
    return [groups[m::DRAFT_STRIPES].reshape(-1, rows) for m in range(DRAFT_STRIPES)]


def draft_image(words, *, word_bits, pack=1, per_input=None, align=1):
    """The draft plane of one port's beats ``words`` (shape ``(n, rows)``, ``per_input``
    beats an input): their nibbles packed ``pack`` to a sub-beat input by input
    (:func:`pack_beats`), each input's sub-beats padded with zeros to
    :func:`draft_input_sub_beats`, cut into groups of ``align`` sub-beats, group ``g`` in
    stripe ``g mod 4``; each stripe a nibble slice region (:func:`slice_image`, padded to
    whole ``word_bits`` words), the four back to back, equally long."""
    return b"".join(slice_image(st, 0, word_bits=word_bits)
                    for st in _draft_stripes(words, pack=pack, per_input=per_input,
                                             align=align))


def job_draft_image(stored, *, rows, cols, ports=1, word_bits, weight_beats=1):
    """The draft plane of one job (a tile of stored words, shape ``(n_rows, K)``): port
    ``p``'s :func:`draft_image` (of its :func:`column_beats`, packed by the job's
    :func:`pack_factor`) at ``p · job_draft_port_bytes``, stripe ``m`` of it ``m`` stripes
    in (``job_draft_port_bytes / 4`` each)."""
    ports = port_count(cols, ports)
    weight_beats = check_int("weight_planes", "weight_beats", weight_beats, min=1)
    q = pack_factor(np.asarray(stored).shape[0], rows=rows, cols=cols)
    return b"".join(draft_image(column_beats(stored, rows=rows, cols=cols, ports=ports,
                                             port=p), word_bits=word_bits, pack=q,
                                per_input=cols // ports, align=weight_beats)
                    for p in range(ports))


def job_draft_port_bytes(n_k, *, rows, cols, ports=1, word_bits, pack=1, weight_beats=1):
    """Bytes of one port's draft plane in a job of ``n_k`` inputs packed ``pack`` beats to
    a sub-beat: four stripes of ``n_k · draft_input_sub_beats / 4`` sub-beats, each whole
    words."""
    ports = port_count(cols, ports)
    weight_beats = check_int("weight_planes", "weight_beats", weight_beats, min=1)
    subs = (check_int("weight_planes", "n_k", n_k, min=1)
            * draft_input_sub_beats(cols // ports, pack, weight_beats))
    return DRAFT_STRIPES * region_bytes(subs // DRAFT_STRIPES, rows=rows, word_bits=word_bits)


def matrix_draft_bytes(n_out, k, *, rows, cols, max_k, word_bits, ports=1, split=False,
                       weight_beats=1):
    """Bytes of an ``n_out × k`` matrix's draft plane (:func:`pack_matrix_draft`), without
    building it."""
    return _matrix_bytes(job_draft_port_bytes, n_out, k, rows=rows, cols=cols, max_k=max_k,
                         word_bits=word_bits, ports=ports, split=split,
                         weight_beats=weight_beats)


def pack_matrix_draft(stored, *, rows, cols, max_k, word_bits, ports=1, split=False,
                      weight_beats=1):
    """A whole matrix's draft plane: the jobs of :func:`matrix_tiles` one after another
    (:func:`job_draft_image`). Returns ``(draft_plane, offsets)``, each job's byte offset
    in the plane in job order."""
    w = np.asarray(stored, dtype=np.uint16)
    if w.ndim != 2 or 0 in w.shape:
        raise ValueError(f"weight_planes.stored must be a non-empty (n_out, K) matrix, "
                         f"not shape {w.shape}")
    parts, offsets, at = [], [], 0
    for j in matrix_tiles(*w.shape, rows=rows, cols=cols, max_k=max_k, split=split):
        img = job_draft_image(w[j.row0:j.row0 + j.n_rows, j.k0:j.k0 + j.n_k], rows=rows,
                              cols=cols, ports=ports, word_bits=word_bits,
                              weight_beats=weight_beats)
        parts.append(img)
        offsets.append(at)
        at += len(img)
    return b"".join(parts), offsets


def expected_draft_transfers(words, *, pack=1, per_input=None, align=1):
    """What a weight stream hands the linear unit for one port's beats ``words`` in a draft
    pass read from the draft plane: per transfer, ``align`` elements, element ``e`` the
    ``(nibble, weight)`` of its ``rows`` slots, shape ``(align, rows)`` each: ``nibble``
    from stripe 0's sub-beat ``e``, ``weight`` the nibbles of stripes 1, 2, 3's sub-beat
    ``e`` in its bits 3..0, 7..4, 11..8 (the draft transfer's four groups). Returns
    ``(nibble, weight)`` of shape ``(transfers, align, rows)``."""
    st = [_slice_nibbles(x, 0).astype(np.uint16)
          for x in _draft_stripes(words, pack=pack, per_input=per_input, align=align)]
    n = st[0].shape[0] // align
    shaped = [x.reshape(n, align, -1) for x in st]
    return shaped[0], shaped[1] | shaped[2] << 4 | shaped[3] << 8

