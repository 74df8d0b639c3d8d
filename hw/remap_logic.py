"""Remap-code detection logic shared by the SPEQ exponent decoder and FP16 reconstructor.

SPEQ detects remapped draft codes with NOR gates; these helpers derive that logic
from any remap table (``golden.bsfp.BSFPConfig.remap``) instead of hard-coding it.
"""

from amaranth import C, Cat, Signal

__all__ = ["prime_cover", "remap_slug", "nor_cover"]


def prime_cover(codes, width):
    """A cover of the set ``codes`` of ``width``-bit values by prime implicants.

    Quine–McCluskey: merge cubes that differ in one cared-for bit until none merge,
    then pick primes greedily (most uncovered codes first, then fewest literals).
    At most 4 bits here, so exactness of the cover is not worth more code.

    Returns
    -------
    list of (int, int)
        ``(mask, value)`` cubes, sorted; ``x`` is in the set iff some cube has
        ``x & mask == value``.
    """
    full = (1 << width) - 1
    cubes = {(full, c) for c in codes}
    primes = set()
    while cubes:
        merged, used = set(), set()
        for a in cubes:
            for b in cubes:
                if a[0] == b[0] and (a[1] ^ b[1]).bit_count() == 1:
                    diff = a[1] ^ b[1]
                    merged.add((a[0] & ~diff, a[1] & ~diff))
                    used.update((a, b))
        primes |= cubes - used
        cubes = merged
    uncovered = set(codes)
    cover = []
    while uncovered:
        best = max(sorted(primes), key=lambda cube, left=frozenset(uncovered): (
            sum(1 for x in left if x & cube[0] == cube[1]), -cube[0].bit_count(),
            -cube[0], -cube[1]))
        cover.append(best)
        uncovered = {x for x in uncovered if x & best[0] != best[1]}
    covered = {x for x in range(1 << width) if any(x & mk == v for mk, v in cover)}
    assert covered == set(codes), (codes, cover)
    return sorted(cover)


def remap_slug(remap):
    """``r9to0_11to2`` for the remap table ``((9, 0b000), (11, 0b010))``."""
    return "r" + "_".join(f"{src}to{tgt}" for src, tgt in remap)


def nor_cover(m, index, cover, *, prefix):
    """``OR`` over ``cover`` of ``NOR(index bits XOR cube bits)``: set membership as NOR gates.

    Each cube gets a named signal ``{prefix}_{mask:b}_{value:b}`` so the NOR terms are
    visible in the Verilog and the waveform.
    """
    terms = []
    for mask, value in cover:
        literals = [index[b] if not (value >> b) & 1 else ~index[b]
                    for b in range(len(index)) if (mask >> b) & 1]
        term = Signal(name=f"{prefix}_{mask:0{len(index)}b}_{value:0{len(index)}b}")
        # An empty cube (mask 0) covers every index: a NOR of nothing is 1.
        m.d.comb += term.eq(~Cat(*literals).any() if literals else 1)
        terms.append(term)
    return Cat(*terms).any() if terms else C(0, 1)
