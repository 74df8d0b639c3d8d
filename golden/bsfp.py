"""BSFP v1: SPEQ's bit-sharing floating point, the golden model the RTL matches bit for bit.

SPEQ ("From Quarter to All", arXiv 2510.18525) lets a 4-bit draft model
and the FP16 target model share one copy of the weights. The paper does not publish
its exact bit map; this module is the project's own self-consistent reading of the
paper and the SPEQ notes (``docs/sources.md``), called **BSFP v1**. ``docs/bsfp.md`` is the contract in prose.

FP16 word (bias 15)::

    bit  15 | 14 | 13 12 11 | 10 | 9 .. 0
         s  | e4 | e3 e2 e1 | e0 | m9..m0
              W      c

1. **Tensor scaling (Algorithm 1).** The smallest integer ``k >= 0`` with
   ``max|W| * 2**-k < 2``, per tensor or per group of ``group_size`` weights along the
   last (input) axis, i.e. ``k = max(0, E_max - 15)`` on biased exponents. Scaled
   weights are the FP16 rounding (round-to-nearest-even) of ``W * 2**-k``; this is
   exact except where the result is subnormal and bits are shifted out. Those weights
   are counted in :class:`ScalingReport`, never hidden.
2. **Waste bit.** After scaling every biased exponent is <= 15, so ``e4`` is free: it
   becomes ``W``.
3. **Draft code (E3M0).** ``c = e[3:1]`` (bits 13..11) read in place, zero-copy.
4. **Remapping.** A stored exponent listed in :attr:`BSFPConfig.remap` (default 9 and
   11, the SPEQ notes' "important exponents 8-11") gets its code rewritten to the target
   code (9 -> 0b000, 11 -> 0b010) and ``W = 1``. ``e0`` and the mantissa are untouched,
   so the FP16 reconstructor restores the original ``e[3:1]`` from the code when
   ``W = 1``: lossless.
5. **Split planes.** The nibble plane ``{s, c}`` (4 bits: the "quarter" the draft reads)
   and the residue plane ``{W, e0, m9..m0}`` (12 bits). Merging them gives the stored
   word back bit for bit.

Everything is vectorized numpy on raw ``uint16`` bit patterns.
"""

import functools
from dataclasses import dataclass, field

import numpy as np

from .validate import check_choice, check_int

__all__ = [
    "BSFP_VERSION", "DRAFT_FORMATS", "PAIR_REPRESENTATIVES", "DEFAULT_REMAP",
    "BSFPConfig", "ScalingReport", "BSFPTensor", "DraftValues",
    "scale_exponents", "expand_scales", "scale_down", "encode", "split_planes", "merge_planes",
    "pack_nibbles", "unpack_nibbles", "restore_exponent_table", "restore_stored",
    "unscale", "reconstruct", "draft_exponent_table", "draft_table", "draft_index",
    "draft_misread_mask", "draft_dequantize", "draft_terms", "draft_dot", "full_terms",
    "full_dot", "draft_product_range", "draft_accumulator_spec", "draft_terms_with",
]

BSFP_VERSION = "v1"

#: Draft formats. ``E3M0`` is BSFP v1; the others are ablations (see :func:`draft_table`).
DRAFT_FORMATS = ("E3M0", "E3M0-noremap", "E3M0+W", "E2M1", "E1M2")

#: Which exponent of a natural pair ``{2c, 2c+1}`` an E3M0 code stands for.
PAIR_REPRESENTATIVES = ("upper", "lower")

#: The SPEQ notes' remap table: (source biased exponent, target 3-bit code).
DEFAULT_REMAP = ((9, 0b000), (11, 0b010))

_SIGN = np.uint16(0x8000)
_MAG = np.uint16(0x7FFF)
_MAN = np.uint16(0x03FF)
_EXP_INF = 0x1F
# Largest stored biased exponent after Algorithm 1 (max|W|*2**-k < 2).
_MAX_STORED_EXP = 15
# The largest k ever needed: FP16's largest finite biased exponent is 30.
_MAX_K = 30 - _MAX_STORED_EXP


@dataclass(frozen=True, kw_only=True)
class BSFPConfig:
    """BSFP v1 parameters.

    Parameters
    ----------
    remap : tuple of (int, int) pairs, or dict
        ``(source, target)``: weights whose *stored* (scaled) biased exponent is
        ``source`` (0..15) get draft code ``target`` (0..7) and ``W = 1``. Normalized
        to a tuple sorted by source. Rules: sources are distinct, targets are distinct
        (the reconstructor inverts target -> source), and a target differs from the
        source's natural code ``source >> 1`` (remapping to itself resolves no
        collision). Every exponent 0..15 shares its natural code with its pair partner,
        so any other source resolves a collision. Default: the SPEQ notes' 9 -> 0b000,
        11 -> 0b010.
    group_size : int or None
        ``None``: one power-of-two scale per tensor. An int: one scale per group of
        ``group_size`` consecutive weights along the last (input) axis; a ragged last
        group is allowed. The SPEQ notes use 128.
    draft : str
        The draft reading, one of :data:`DRAFT_FORMATS`. ``"E3M0"`` is BSFP v1.
        ``"E3M0-noremap"`` stores the plain scaled word (no remapping) and reads the
        natural code. ``"E3M0+W"`` stores like ``"E3M0"`` and also reads ``W`` (a 5-bit
        draft). ``"E2M1"`` and ``"E1M2"`` are zero-copy bit subsets of the plain scaled
        word (no remapping), see :func:`draft_table`.
    pair_representative : str
        For an E3M0 code that still holds both exponents ``{2c, 2c+1}``: ``"lower"``
        decodes it as ``2c`` (default) or ``"upper"`` as ``2c+1`` (the geometric
        midpoint of the code's value range ``[2**(2c-15), 2**(2c+2-15))``). ``docs/bsfp-study.md`` measured both on all-MiniLM-L6-v2: ``2c``
        gives the lower weight and ``W @ x`` error with either scaling, because the
        squared error is dominated by the large-magnitude codes, where weights thin
        out towards the top of the pair.
    e2m1_window : int
        E2M1 only: the implied exponent bits ``e[3:2]`` (0..3). Default ``0b10``: the
        window of exponents 8..11 the SPEQ notes call important.
    e1m2_window : int
        E1M2 only: the implied exponent bits ``e[3:1]`` (0..7). Default ``0b101``:
        exponents 10..11.
    """

    remap: tuple = DEFAULT_REMAP
    group_size: int | None = None
    draft: str = "E3M0"
    pair_representative: str = "lower"
    e2m1_window: int = 0b10
    e1m2_window: int = 0b101

    def __post_init__(self):
        object.__setattr__(self, "remap", _check_remap(self.remap))
        if self.group_size is not None:
            check_int("BSFPConfig", "group_size", self.group_size, min=1)
        check_choice("BSFPConfig", "draft", self.draft, DRAFT_FORMATS)
        check_choice("BSFPConfig", "pair_representative", self.pair_representative,
                     PAIR_REPRESENTATIVES)
        check_int("BSFPConfig", "e2m1_window", self.e2m1_window, min=0, max=3)
        check_int("BSFPConfig", "e1m2_window", self.e1m2_window, min=0, max=7)

    @property
    def effective_remap(self):
        """The remap table the encoder applies: :attr:`remap` for ``"E3M0"`` and
        ``"E3M0+W"``, empty for the other formats (they read the plain scaled word)."""
        return self.remap if self.draft in ("E3M0", "E3M0+W") else ()

    @property
    def draft_bits(self):
        """Bits per weight the draft pass reads (sign included)."""
        return 5 if self.draft == "E3M0+W" else 4


def _check_remap(remap):
    if isinstance(remap, dict):
        remap = tuple(remap.items())
    if not isinstance(remap, (tuple, list)):
        raise TypeError(f"BSFPConfig.remap must be a tuple of (source exponent, target code) "
                        f"pairs or a dict, not {remap!r}")
    pairs = []
    for pair in remap:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"BSFPConfig.remap entries must be (source exponent, target code) "
                            f"pairs, not {pair!r}")
        src = check_int("BSFPConfig", "remap source exponent", pair[0], min=0, max=15)
        tgt = check_int("BSFPConfig", "remap target code", pair[1], min=0, max=7)
        if tgt == src >> 1:
            raise ValueError(f"BSFPConfig.remap target code must differ from the source's "
                             f"natural code e[3:1]; exponent {src} -> 0b{tgt:03b} is its own code")
        pairs.append((src, tgt))
    sources = [s for s, _ in pairs]
    targets = [t for _, t in pairs]
    if len(set(sources)) != len(sources):
        raise ValueError(f"BSFPConfig.remap source exponents must be distinct, not {sources!r}")
    if len(set(targets)) != len(targets):
        raise ValueError(f"BSFPConfig.remap target codes must be distinct, not {targets!r}")
    return tuple(sorted(pairs))


@dataclass(frozen=True)
class ScalingReport:
    """What Algorithm 1's power-of-two scaling did to the weights.

    Scaling by ``2**-k`` is exact for every weight whose scaled value is still normal.
    Weights scaled into the subnormal range are rounded to nearest even.

    Attributes
    ----------
    subnormal : int
        Nonzero weights that were scaled (``k > 0``) and whose scaled value is
        subnormal or zero.
    inexact : int
        Weights whose scaled FP16 value is not exactly ``W * 2**-k``: bits were lost.
        :func:`reconstruct` returns ``RNE(W * 2**-k) * 2**k`` for them (exact in FP16,
        sign kept, ``±0`` when flushed), not the original word.
    flushed_to_zero : int
        Inexact weights that became ``±0`` (a subset of ``inexact``).
    inexact_index : numpy.ndarray
        Flat (C-order) indices of the inexact weights, ``int64``.
    """

    subnormal: int
    inexact: int
    flushed_to_zero: int
    inexact_index: np.ndarray = field(repr=False)


@dataclass(frozen=True, eq=False)
class BSFPTensor:
    """A BSFP-encoded weight tensor.

    Attributes
    ----------
    config : BSFPConfig
    scales : numpy.ndarray
        ``uint8`` scale exponents ``k``: shape ``()`` per tensor, ``(..., n_groups)`` per
        group. The weight is ``stored * 2**k``.
    stored : numpy.ndarray
        ``uint16`` stored words: scaled FP16 with ``W`` and the remapped codes.
    nibbles : numpy.ndarray
        ``uint8`` nibble plane, one weight per byte: ``s << 3 | c``.
    residue : numpy.ndarray
        ``uint16`` residue plane: ``W << 11 | e0 << 10 | m9..m0``.
    report : ScalingReport
    """

    config: BSFPConfig
    scales: np.ndarray
    stored: np.ndarray
    nibbles: np.ndarray
    residue: np.ndarray
    report: ScalingReport

    @property
    def shape(self):
        return self.stored.shape

    def reconstruct(self):
        """The original FP16 words (see :func:`reconstruct`)."""
        return reconstruct(nibbles=self.nibbles, residue=self.residue, scales=self.scales,
                           config=self.config)

    def scale_per_weight(self):
        """``k`` broadcast to every weight (``uint8``, the tensor's shape)."""
        return expand_scales(self.scales, shape=self.shape, group_size=self.config.group_size)


# ----------------------------------------------------------------------------------------
# Input checks and Algorithm 1


def _as_fp16_bits(weights, what="weights"):
    a = np.asarray(weights)
    if a.dtype == np.float16:
        return a.view(np.uint16)
    if a.dtype != np.uint16:
        raise TypeError(f"BSFP {what} must be FP16 bit patterns (uint16) or float16, "
                        f"not dtype {a.dtype}")
    return a


def _check_finite(bits):
    bad = (bits & _MAG) >= np.uint16(_EXP_INF << 10)
    count = int(np.count_nonzero(bad))
    if count:
        first = np.unravel_index(int(np.argmax(bad)), bits.shape)
        first = tuple(int(i) for i in first)
        raise ValueError(f"BSFP weights must be finite: {count} NaN/Inf value(s), first at "
                         f"index {first} (bits 0x{int(bits[first]):04x})")


def _n_groups(n, group_size):
    return -(-n // group_size)


def scale_exponents(weights, *, group_size=None):
    """Algorithm 1: the smallest ``k >= 0`` with ``max|W| * 2**-k < 2``.

    For FP16, ``max|W| < 2**(1+k)`` exactly when the largest biased exponent is at most
    ``15 + k``, so ``k = max(0, E_max - 15)``; zeros and subnormals need no scaling.

    Parameters
    ----------
    weights : numpy.ndarray
        FP16 bit patterns (``uint16``) or ``float16``, finite, at least 1-D for groups.
    group_size : int or None
        ``None`` for one scale per tensor, else one per group along the last axis.

    Returns
    -------
    numpy.ndarray
        ``uint8``; shape ``()`` or ``(..., ceil(n / group_size))``.
    """
    bits = _as_fp16_bits(weights)
    _check_finite(bits)
    mag = bits & _MAG
    if group_size is None:
        emax = int(mag.max()) >> 10 if mag.size else 0
        return np.array(max(0, emax - _MAX_STORED_EXP), dtype=np.uint8)
    group_size = check_int("BSFPConfig", "group_size", group_size, min=1)
    if mag.ndim == 0:
        raise ValueError("BSFP group scaling needs at least a 1-D weight array")
    grouped = _grouped(mag, group_size)
    emax = grouped.max(axis=-1) >> 10 if grouped.shape[-1] else np.zeros(grouped.shape[:-1], np.uint16)
    return np.maximum(emax.astype(np.int16) - _MAX_STORED_EXP, 0).astype(np.uint8)


def _grouped(a, group_size):
    """View ``a`` as ``(..., n_groups, group_size)``, zero-padding a ragged last group."""
    n = a.shape[-1]
    ng = _n_groups(n, group_size)
    pad = ng * group_size - n
    if pad:
        a = np.concatenate([a, np.zeros(a.shape[:-1] + (pad,), a.dtype)], axis=-1)
    return a.reshape(a.shape[:-1] + (ng, group_size))


def expand_scales(scales, *, shape, group_size):
    """Broadcast scale exponents ``k`` to one per weight (``uint8`` of ``shape``)."""
    scales = np.asarray(scales, dtype=np.uint8)
    if group_size is None:
        return np.broadcast_to(scales, shape)
    n = shape[-1]
    return np.repeat(scales, group_size, axis=-1)[..., :n]


def scale_down(mag, k):
    """Reference arithmetic: FP16 magnitudes times ``2**-k``, rounded to nearest even.

    Parameters
    ----------
    mag : numpy.ndarray
        ``uint16`` magnitudes (sign bit clear), finite.
    k : int or numpy.ndarray
        Scale exponents in ``[0, 15]``, broadcast against ``mag``.

    Returns
    -------
    scaled : numpy.ndarray
        ``uint16`` magnitudes of ``RNE(|W| * 2**-k)``.
    subnormal, inexact, flushed : numpy.ndarray
        ``bool`` flags (see :class:`ScalingReport`).

    Notes
    -----
    A result that is still normal (``E - k >= 1``) keeps its mantissa and loses ``k``
    from the exponent: exact. Otherwise the 11-bit significand is shifted right by
    ``r = k + 1 - max(E, 1) >= 1`` into a subnormal and rounded to nearest, ties to
    even (IEEE 754 §4.3.1, the rounding of the exact product). A carry into ``0x400``
    is the smallest normal, which the plain encoding already represents.
    """
    mag = np.asarray(mag, dtype=np.uint16)
    kk = np.broadcast_to(np.asarray(k, dtype=np.uint16), mag.shape)
    normal = mag >= ((kk + 1) << 10)
    low = ~normal & (mag != 0) & (kk > 0)
    m = mag.astype(np.uint32)
    e = m >> 10
    sig = np.where(e > 0, (m & 0x3FF) | 0x400, m)
    r = np.where(low, kk.astype(np.uint32) + 1 - np.maximum(e, 1), 1)
    q = sig >> r
    rem = sig & ((np.uint32(1) << r) - 1)
    half = np.uint32(1) << (r - 1)
    q = q + ((rem > half) | ((rem == half) & ((q & 1) == 1)))
    scaled = np.where(normal, mag - (kk << 10), np.where(low, q, mag)).astype(np.uint16)
    inexact = low & (rem != 0)
    return scaled, low, inexact, inexact & (q == 0)


_WORDS = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
# Status bits of a tabulated encode: why a weight is listed in the ScalingReport.
_SUBNORMAL, _INEXACT, _FLUSHED = 1, 2, 4
# Elements per chunk: the working set of a chunk stays in the L2 cache, which makes
# the memory-bound numpy passes over a 26 M-weight matrix about 2.5x faster.
_CHUNK = 1 << 16


@functools.lru_cache(maxsize=8)
def _encode_tables(remap):
    """Encode tabulated for every FP16 word and every ``k``: ``(stored, status)``.

    Both are ``(16, 65536)``, indexed ``[k, word]``; built from :func:`scale_down` and
    the remap table, so they *are* the reference arithmetic, evaluated once.
    NaN/Inf rows are garbage and never read (:func:`encode` rejects them first).
    """
    stored = np.empty((_MAX_K + 1, 1 << 16), np.uint16)
    status = np.empty((_MAX_K + 1, 1 << 16), np.uint8)
    field = _remap_field_table(remap)
    sign = _WORDS & _SIGN
    mag = _WORDS & _MAG
    for k in range(_MAX_K + 1):
        scaled, sub, inexact, flushed = scale_down(mag, k)
        word = sign | scaled
        stored[k] = (word & np.uint16(0x83FF)) | (field[word >> 10 & 0x1F] << 10)
        status[k] = sub * _SUBNORMAL | inexact * _INEXACT | flushed * _FLUSHED
    stored.setflags(write=False)
    status.setflags(write=False)
    return stored, status


@functools.lru_cache(maxsize=8)
def _reconstruct_table(remap):
    """Reconstruct tabulated: ``[k, stored word]`` -> original FP16 word."""
    config_like = _RemapOnly(remap)
    scaled = restore_stored(_WORDS, config=config_like)
    table = np.stack([unscale(scaled, k) for k in range(_MAX_K + 1)])
    table.setflags(write=False)
    return table


@dataclass(frozen=True)
class _RemapOnly:
    effective_remap: tuple


def _remap_field_table(remap):
    """32-entry table: stored exponent field (5 bits) -> field with ``W`` and code."""
    table = np.arange(32, dtype=np.uint16)
    for src, tgt in remap:
        table[src] = (1 << 4) | (tgt << 1) | (src & 1)
    return table


def _row_chunks(shape, group_size):
    """Slices over the flattened weights: whole rows when scales are per group."""
    size = int(np.prod(shape, dtype=np.int64))
    if group_size is None or not shape:
        step = _CHUNK
    else:
        step = max(1, _CHUNK // max(shape[-1], 1)) * shape[-1]
    return [slice(i, min(i + step, size)) for i in range(0, size, max(step, 1))]


def _flat_scales(scales, shape, group_size, sl):
    """``k`` for the flat slice ``sl`` (whole rows) of a tensor, ``uint32``."""
    if group_size is None:
        return int(scales)
    n = shape[-1]
    rows = np.asarray(scales).reshape(-1, scales.shape[-1])[sl.start // n:sl.stop // n]
    return np.repeat(rows, group_size, axis=-1)[:, :n].reshape(-1).astype(np.uint32)


def encode(weights, *, config=None):
    """Encode FP16 weights into BSFP v1.

    Parameters
    ----------
    weights : numpy.ndarray
        FP16 bit patterns (``uint16``) or ``float16``; any shape, the last axis is the
        input dimension (groups run along it). Zeros and subnormals are fine.
    config : BSFPConfig, optional
        Defaults to ``BSFPConfig()``.

    Returns
    -------
    BSFPTensor

    Raises
    ------
    ValueError
        If any weight is NaN or Inf (the message gives the count and the first index).

    Notes
    -----
    Per weight this is :func:`scale_down` followed by the remap of the exponent field.
    Both depend only on the 16-bit word and ``k``, so they are evaluated once for all
    65,536 words (:func:`_encode_tables`) and applied by table look-up, in
    cache-sized chunks.
    """
    config = BSFPConfig() if config is None else config
    if not isinstance(config, BSFPConfig):
        raise TypeError(f"BSFP config must be a BSFPConfig, not {config!r}")
    bits = np.ascontiguousarray(_as_fp16_bits(weights))
    scales = scale_exponents(bits, group_size=config.group_size)
    table, status_table = _encode_tables(config.effective_remap)
    flat_table = table.reshape(-1)
    flat_status = status_table.reshape(-1)
    flat = bits.reshape(-1)
    stored = np.empty(bits.shape, np.uint16)
    out = stored.reshape(-1)
    counts = np.zeros(8, np.int64)
    inexact = []
    nibbles = np.empty(bits.shape, np.uint8)
    residue = np.empty(bits.shape, np.uint16)
    for sl in _row_chunks(bits.shape, config.group_size):
        k = _flat_scales(scales, bits.shape, config.group_size, sl)
        words = flat[sl]
        st = None
        if isinstance(k, int):
            out[sl] = table[k][words]
            if k:
                st = status_table[k][words]
        elif k.any():
            idx = (k << 16) | words
            out[sl] = flat_table[idx]
            st = flat_status[idx]
        else:
            out[sl] = table[0][words]
        nibbles.reshape(-1)[sl], residue.reshape(-1)[sl] = split_planes(out[sl])
        if st is not None:
            hit = np.flatnonzero(st)
            if hit.size:
                sv = st[hit]
                counts += np.bincount(sv, minlength=8)
                inexact.append(hit[(sv & _INEXACT) != 0] + sl.start)
    status = np.arange(8)
    report = ScalingReport(
        subnormal=int(counts[(status & _SUBNORMAL) != 0].sum()),
        inexact=int(counts[(status & _INEXACT) != 0].sum()),
        flushed_to_zero=int(counts[(status & _FLUSHED) != 0].sum()),
        inexact_index=np.concatenate(inexact) if inexact else np.zeros(0, np.int64))
    return BSFPTensor(config=config, scales=scales, stored=stored, nibbles=nibbles,
                      residue=residue, report=report)


# ----------------------------------------------------------------------------------------
# Split planes


def split_planes(stored):
    """Split stored words into the nibble plane and the residue plane.

    Returns
    -------
    nibbles : numpy.ndarray
        ``uint8``, ``s << 3 | c`` with ``c = bits 13..11``: the 4 bits the draft reads.
    residue : numpy.ndarray
        ``uint16``, ``W << 11 | e0 << 10 | m9..m0`` (12 bits).
    """
    stored = _as_fp16_bits(stored, "stored words")
    nibbles = (((stored >> 12) & 0x8) | ((stored >> 11) & 0x7)).astype(np.uint8)
    residue = ((stored >> 3) & 0x800) | (stored & 0x7FF)
    return nibbles, residue


def merge_planes(nibbles, residue):
    """Merge the two planes back into stored words (exact inverse of :func:`split_planes`)."""
    nib = np.asarray(nibbles).astype(np.uint16)
    res = np.asarray(residue, dtype=np.uint16)
    return ((nib & 0x8) << 12) | ((nib & 0x7) << 11) | ((res & 0x800) << 3) | (res & 0x7FF)


def pack_nibbles(nibbles):
    """Pack a nibble plane two weights per byte along the last axis.

    Weight ``2i`` goes to the low nibble of byte ``i``, weight ``2i+1`` to the high
    nibble; an odd last weight is padded with a zero nibble.
    """
    nib = np.asarray(nibbles, dtype=np.uint8)
    if nib.shape[-1] % 2:
        nib = np.concatenate([nib, np.zeros(nib.shape[:-1] + (1,), np.uint8)], axis=-1)
    return (nib[..., 0::2] & 0xF) | ((nib[..., 1::2] & 0xF) << 4)


def unpack_nibbles(packed, n):
    """Inverse of :func:`pack_nibbles` for a last axis of ``n`` weights."""
    packed = np.asarray(packed, dtype=np.uint8)
    out = np.empty(packed.shape[:-1] + (2 * packed.shape[-1],), np.uint8)
    out[..., 0::2] = packed & 0xF
    out[..., 1::2] = packed >> 4
    return out[..., :n]


# ----------------------------------------------------------------------------------------
# FP16 reconstructor (full-precision pass)


def restore_exponent_table(config):
    """The FP16 reconstructor as a 32-entry table over the stored exponent field.

    Index ``W << 4 | c << 1 | e0``; value the 5-bit biased exponent of the scaled FP16
    word (``e4 = 0``). With ``W = 1`` and ``c`` a remap target, ``e[3:1]`` comes back as
    the source's ``e[3:1]`` and ``e0`` passes through. ``W = 0`` passes through. A word
    with ``W = 1`` and a code that is not a target is never produced by :func:`encode`;
    the table defines it as ``W`` dropped (``e[3:1] = c``).
    """
    table = np.arange(32, dtype=np.uint16) & 0xF
    for src, tgt in config.effective_remap:
        for e0 in (0, 1):
            table[(1 << 4) | (tgt << 1) | e0] = (src & 0xE) | e0
    return table


def restore_stored(stored, *, config):
    """Stored words -> scaled FP16 words: undo remapping (the FP16 reconstructor, 15-bit path)."""
    stored = _as_fp16_bits(stored, "stored words")
    table = restore_exponent_table(config)
    return (stored & np.uint16(0x83FF)) | (table[stored >> 10 & 0x1F] << 10)


def unscale(scaled, k):
    """Scaled FP16 words times ``2**k`` (exact: the result is always representable).

    A normal word adds ``k`` to its exponent (stored exponents are <= 15 and ``k <= 15``,
    so the sum is <= 30, finite). A subnormal word ``m' * 2**-24`` is renormalized.
    """
    scaled = _as_fp16_bits(scaled, "scaled words")
    kk = np.broadcast_to(np.asarray(k, dtype=np.uint16), scaled.shape)
    mag = scaled & _MAG
    normal = mag >= 0x400
    out = np.where(normal, scaled + (kk << 10), scaled).astype(np.uint16)
    idx = np.flatnonzero(~normal & (mag != 0) & (kk > 0))
    if idx.size:
        m = mag.reshape(-1)[idx].astype(np.int64)
        kv = kk.reshape(-1)[idx].astype(np.int64)
        p = _bit_length(m) - 1                       # leading one of m' (0..9)
        e = p + kv - 9                               # biased exponent if it normalizes
        norm = e >= 1
        man = np.where(norm, (m << np.maximum(10 - p, 0)) & 0x3FF, 0)
        new = np.where(norm, (e << 10) | man, m << kv)
        sign = scaled.reshape(-1)[idx] & _SIGN
        out.reshape(-1)[idx] = sign | new.astype(np.uint16)
    return out


def _bit_length(x):
    """Bit length of non-negative int64 values below 2**31, vectorized."""
    x = np.asarray(x, dtype=np.int64)
    n = np.zeros(x.shape, np.int64)
    for shift in (16, 8, 4, 2, 1):
        big = x >= (1 << shift)
        n += np.where(big, shift, 0)
        x = np.where(big, x >> shift, x)
    return n + (x > 0)


def reconstruct(*, nibbles, residue, scales, config):
    """Merge the planes and undo remapping and scaling: the original FP16 words.

    Bit-identical to the encoded weights except the :attr:`ScalingReport.inexact`
    ones, for which it returns ``RNE(W * 2**-k) * 2**k`` (exact in FP16, original sign,
    ``±0`` for flushed weights).
    """
    if not isinstance(config, BSFPConfig):
        raise TypeError(f"BSFP config must be a BSFPConfig, not {config!r}")
    nibbles = np.asarray(nibbles)
    residue = np.asarray(residue)
    if nibbles.shape != residue.shape:
        raise ValueError(f"BSFP nibble plane shape {nibbles.shape} does not match the residue "
                         f"plane shape {residue.shape}")
    scales = np.asarray(scales, dtype=np.uint8)
    if scales.size and int(scales.max()) > _MAX_K:
        raise ValueError(f"BSFP scales must be integers in [0, {_MAX_K}], not {int(scales.max())}")
    # restore_stored + unscale depend only on the stored word and k: tabulated once.
    table = _reconstruct_table(config.effective_remap)
    flat_table = table.reshape(-1)
    nib = np.ascontiguousarray(nibbles).reshape(-1)
    res = np.ascontiguousarray(residue).reshape(-1)
    result = np.empty(nibbles.shape, np.uint16)
    out = result.reshape(-1)
    for sl in _row_chunks(nibbles.shape, config.group_size):
        words = merge_planes(nib[sl], res[sl])
        k = _flat_scales(scales, nibbles.shape, config.group_size, sl)
        if isinstance(k, int):
            out[sl] = table[k][words]
        else:
            out[sl] = flat_table[(k << 16) | words]
    return result


# ----------------------------------------------------------------------------------------
# Draft decoding


def draft_exponent_table(config):
    """The E3M0 exponent decoder as data: code -> representative biased exponent.

    The draft weight for code ``c`` and sign ``s`` is ``(-1)**s * 2**(E[c] - 15)``
    (times ``2**k`` for the tensor/group scale); ``E[c] = 0`` still means ``2**-15``,
    the draft has no zero and no subnormals.

    Rules, in order: a remap target decodes to its source exponent (9, 11 by default);
    a code whose pair lost one exponent to remapping decodes to the one left
    (0b100 -> 8, 0b101 -> 10); any other code to ``2c`` (``"lower"``, default) or
    ``2c + 1`` (``"upper"``).

    Returns
    -------
    numpy.ndarray
        ``uint8``, 8 entries indexed by ``c`` for ``"E3M0"`` / ``"E3M0-noremap"``; 16
        entries indexed by ``W << 3 | c`` for ``"E3M0+W"``.
    """
    if config.draft not in ("E3M0", "E3M0-noremap", "E3M0+W"):
        raise ValueError(f"draft_exponent_table is defined for E3M0 drafts, not "
                         f"BSFPConfig.draft={config.draft!r}")
    remap = dict(config.effective_remap)
    inverse = {t: s for s, t in remap.items()}
    upper = config.pair_representative == "upper"

    def natural(c):
        left = [e for e in (2 * c, 2 * c + 1) if e not in remap]
        if len(left) == 1:
            return left[0]
        return 2 * c + 1 if upper else 2 * c

    if config.draft == "E3M0+W":
        without_w = [natural(c) for c in range(8)]
        with_w = [inverse.get(c, natural(c)) for c in range(8)]
        return np.array(without_w + with_w, dtype=np.uint8)
    return np.array([inverse.get(c, natural(c)) for c in range(8)], dtype=np.uint8)


def draft_table(config):
    """Every draft format as a table: draft index -> ``(sig, exp)``, value ``sig * 2**exp``.

    The magnitude of a draft weight is ``sig[i] * 2**(exp[i] + k)``; the sign is the
    stored sign. Indices (see :func:`draft_index`):

    ``E3M0``, ``E3M0-noremap``
        ``i = c`` (bits 13..11); ``sig = 1``, ``exp = E[c] - 15``.
    ``E3M0+W``
        ``i = W << 3 | c`` (bits 14..11); ``sig = 1``, ``exp = E[i] - 15``.
    ``E2M1``
        ``i = e1 e0 m9`` (bits 11..9); exponent ``E = e2m1_window << 2 | e[1:0]``; the
        dropped mantissa bits read as their midpoint: ``sig = 0b1 m9 1`` (``0b0 m9 1``
        if ``E = 0``), ``exp = max(E, 1) - 17``. Exponents outside the window alias.
    ``E1M2``
        ``i = e0 m9 m8`` (bits 10..8); ``E = e1m2_window << 1 | e0``;
        ``sig = 0b1 m9 m8 1`` (hidden bit 0 if ``E = 0``), ``exp = max(E, 1) - 18``.

    Returns
    -------
    sig : numpy.ndarray
        ``uint64``.
    exp : numpy.ndarray
        ``int32``.
    """
    if config.draft in ("E3M0", "E3M0-noremap", "E3M0+W"):
        e = draft_exponent_table(config).astype(np.int32)
        return np.ones(e.shape, np.uint64), e - 15
    i = np.arange(8)
    if config.draft == "E2M1":
        e = (config.e2m1_window << 2) | (i >> 1)
        mbits, frac = i & 1, 2
    else:
        e = (config.e1m2_window << 1) | (i >> 2)
        mbits, frac = i & 3, 3
    hidden = (e > 0).astype(np.int64) << frac
    sig = hidden | (mbits << 1) | 1
    exp = np.maximum(e, 1) - 15 - frac
    return sig.astype(np.uint64), exp.astype(np.int32)


def draft_index(stored, *, config):
    """The bits of each stored word the draft pass reads (besides the sign), as an index."""
    stored = _as_fp16_bits(stored, "stored words")
    if config.draft in ("E3M0", "E3M0-noremap"):
        return ((stored >> 11) & 0x7).astype(np.uint8)
    if config.draft == "E3M0+W":
        return ((stored >> 11) & 0xF).astype(np.uint8)
    if config.draft == "E2M1":
        return ((stored >> 9) & 0x7).astype(np.uint8)
    return ((stored >> 8) & 0x7).astype(np.uint8)


def draft_misread_mask(tensor):
    """Weights the 4-bit E3M0 draft reads as a remapped exponent they do not have.

    These have ``W = 0`` and a natural code equal to a remap target (with the default
    table: stored exponents 0 and 1, zeros included, read as 9; 4 and 5 read as 11).
    """
    remap = tensor.config.effective_remap
    if not remap:
        return np.zeros(tensor.shape, bool)
    targets = np.zeros(8, bool)
    for _, t in remap:
        targets[t] = True
    w = (tensor.stored >> 14) & 1
    return (w == 0) & targets[(tensor.stored >> 11) & 0x7]


@dataclass(frozen=True, eq=False)
class DraftValues:
    """Dequantized draft weights.

    Every BSFP v1 draft value is an FP16 (hence FP32) number: magnitudes lie in
    ``[2**-17, 61440]`` with at most 4 significant bits (see :func:`draft_table`;
    ``k <= 15``), so the conversions below are exact.

    Attributes
    ----------
    value : numpy.ndarray
        ``float64``, exact: ``±sig * 2**(exp + k)``.
    """

    value: np.ndarray

    @property
    def fp16(self):
        """``uint16`` FP16 bits of :attr:`value` (exact)."""
        return self.value.astype(np.float16).view(np.uint16)

    @property
    def fp32(self):
        """``uint32`` FP32 bits of :attr:`value` (exact)."""
        return self.value.astype(np.float32).view(np.uint32)


def draft_terms(tensor):
    """Exact draft weights as ``(sign, sig, exp)`` arrays: ``(-1)**sign * sig * 2**exp``.

    ``exp`` includes the scale ``k``.
    """
    sig_t, exp_t = draft_table(tensor.config)
    idx = draft_index(tensor.stored, config=tensor.config)
    k = tensor.scale_per_weight().astype(np.int32)
    sign = (tensor.stored >> 15).astype(np.uint8)
    return sign, sig_t[idx], exp_t[idx] + k


def draft_dequantize(tensor):
    """The draft weights the draft pass computes with, as :class:`DraftValues`.

    Same values as :func:`draft_terms`, through a table of the 2 x 16 signed draft
    magnitudes (sign and draft index) and an exact power-of-two scale.
    """
    sig_t, exp_t = draft_table(tensor.config)
    mag = np.ldexp(sig_t.astype(np.float64), exp_t)
    signed = np.concatenate([mag, -mag])
    idx = draft_index(tensor.stored, config=tensor.config)
    idx = idx + (tensor.stored >> 15).astype(np.uint8) * np.uint8(len(mag))
    value = signed[idx]
    if tensor.config.group_size is None:
        if int(tensor.scales):
            value *= 2.0 ** int(tensor.scales)
    elif np.any(tensor.scales):
        value *= np.exp2(np.arange(_MAX_K + 1, dtype=np.float64))[tensor.scale_per_weight()]
    return DraftValues(value=value)


def draft_product_range(config):
    """Range of the exact draft-product terms ``draft weight * FP16 activation``.

    An FP16 activation is ``sig_x * 2**exp_x`` with ``sig_x <= 2047`` and ``exp_x`` in
    ``[-24, 5]`` (:func:`golden.fp.decode`); the draft weight is
    ``sig_w * 2**(exp_w + k)`` with ``(sig_w, exp_w)`` from :func:`draft_table` and
    ``k`` in ``[0, 15]``. Every finite product term is therefore an integer multiple of
    ``2**lsb_exp`` with magnitude below ``2**msb_exp``, where
    ``lsb_exp = min(exp_w) - 24`` and ``msb_exp = bitlen(2047 * max(sig_w)) + 5 +
    max(exp_w) + 15``. For the default E3M0 table that is ``[-36, 31)``; for any
    BSFP v1 format it lies inside ``[-41, 32)``, within the FP16 x FP16 accumulator
    ``[-48, 32)`` of :func:`golden.dot.accumulator_spec`, so both PE modes share one
    accumulator.

    Returns
    -------
    dict
        ``lsb_exp``, ``msb_exp`` (exclusive bound on magnitudes), ``sig_bits`` (bits of
        a product significand).
    """
    sig, exp = draft_table(config)
    sig_bits = (2047 * int(sig.max())).bit_length()
    return {"lsb_exp": int(exp.min()) - 24, "msb_exp": sig_bits + 5 + int(exp.max()) + _MAX_K,
            "sig_bits": sig_bits}


def draft_accumulator_spec(config, *, n):
    """:class:`golden.dot.AccumulatorSpec` for ``n`` draft products (:func:`draft_product_range`)."""
    from .dot import AccumulatorSpec
    r = draft_product_range(config)
    return AccumulatorSpec(lsb_exp=r["lsb_exp"], msb_exp=r["msb_exp"], n=n)


def _activation_bits(x):
    return _as_fp16_bits(x, "activations")


def _pairwise(tensor, x):
    """Broadcast weights ``(..., out, n)`` against activations ``(..., n)`` -> ``(..., out, n)``."""
    x = np.asarray(x)
    if x.shape[-1] != tensor.shape[-1]:
        raise ValueError(f"activation length {x.shape[-1]} does not match the weights' "
                         f"input dimension {tensor.shape[-1]}")
    return x[..., None, :]


def draft_dot(tensor, x, *, fmt_out=None):
    """Draft-pass matrix-vector product ``y = W_draft @ x``, rounded once.

    Each product ``±sig_w * 2**(exp_w + k) * x`` is exact (an exponent add for E3M0);
    the products are summed exactly by :func:`golden.dot.round_sum`, the same
    accumulator the PE uses in full mode, and rounded once (RNE) to ``fmt_out``.
    NaN/Inf activations follow IEEE 754 (a draft weight is never zero).

    Parameters
    ----------
    tensor : BSFPTensor
        Weights ``(..., out, n)``.
    x : numpy.ndarray
        FP16 activation bits ``(..., n)``.
    fmt_out : golden.fp.FPFormat, optional
        Defaults to FP32.

    Returns
    -------
    numpy.ndarray
        Output bits, shape ``(..., out)`` (``uint32`` for FP32).
    """
    from . import dot as _dot
    from . import fp as _fp
    fmt_out = _fp.FP32 if fmt_out is None else fmt_out
    terms = draft_terms_with(tensor, x)
    return _dot.round_sum(terms, fmt_out)


def draft_terms_with(tensor, x):
    """The exact product terms of :func:`draft_dot`, as ``golden.dot.Terms``."""
    from . import dot as _dot
    from . import fp as _fp
    xb = _pairwise(tensor, _activation_bits(x))
    ws, wsig, wexp = draft_terms(tensor)
    cls = _fp.classify(xb, _fp.FP16)
    xs, xsig, xexp = _fp.decode(xb, _fp.FP16)
    nan = cls == _fp.FPClass.NAN
    inf = cls == _fp.FPClass.INF
    finite = ~(nan | inf)
    sign = (np.asarray(xs, np.uint8) ^ ws).astype(np.uint8)
    sig = np.where(finite, np.asarray(xsig, np.uint64) * wsig, np.uint64(0)).astype(np.uint64)
    exp = np.where(finite, np.asarray(xexp, np.int32) + wexp, 0).astype(np.int32)
    shape = np.broadcast_shapes(sign.shape, sig.shape)
    return _dot.Terms(sign=np.broadcast_to(sign, shape), sig=np.broadcast_to(sig, shape),
                      exp=np.broadcast_to(exp, shape), nan=np.broadcast_to(nan, shape),
                      inf=np.broadcast_to(inf, shape))


def full_terms(tensor, x):
    """Exact full-precision product terms: reconstructed scaled FP16 weight times ``x``,
    with the inverse scale applied exactly as ``+k`` on each term's exponent."""
    from . import dot as _dot
    from . import fp as _fp
    xb = _pairwise(tensor, _activation_bits(x))
    scaled = restore_stored(tensor.stored, config=tensor.config)
    wb, xb = np.broadcast_arrays(scaled, xb)
    terms = _dot.product_terms(wb, xb, _fp.FP16)
    k = np.broadcast_to(tensor.scale_per_weight().astype(np.int32), terms.exp.shape)
    return terms._replace(exp=(np.asarray(terms.exp, np.int32) + k).astype(np.int32))


def full_dot(tensor, x, *, fmt_out=None):
    """Full-precision pass ``y = W @ x`` from the BSFP planes, summed exactly, rounded once.

    Equals ``golden.dot.dot(W_original, x)`` for every weight tensor without inexact
    scaling (see :class:`ScalingReport`).
    """
    from . import dot as _dot
    from . import fp as _fp
    fmt_out = _fp.FP32 if fmt_out is None else fmt_out
    return _dot.round_sum(full_terms(tensor, x), fmt_out)
