"""Remap-code detection logic shared by the SPEQ exponent decoder and FP16 reconstructor.

SPEQ detects remapped draft codes with NOR gates; these helpers derive that logic
from any remap table (``golden.bsfp.BSFPConfig.remap``) instead of hard-coding it.
:class:`BSFPStream` is the part both blocks share: a stream ``i`` -> ``o`` of one
BSFP config through ``stages`` registers.
"""

from amaranth import C, Cat, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from specgen.golden.bsfp import BSFPConfig
from specgen.golden.validate import check_int

from .pipeline import Staged

__all__ = ["BSFPStream", "prime_cover", "remap_slug", "nor_cover"]


class BSFPStream(Staged, wiring.Component):
    """Base of a stream block built from one :class:`golden.bsfp.BSFPConfig`.

    A subclass validates anything more of the config, derives its ``plan`` (the
    constants it reads from the golden table, with ``plan["cover"]`` the NOR
    terms of ``remapped``) and defines ``input_layout``.

    Parameters
    ----------
    config : golden.bsfp.BSFPConfig
        The BSFP v1 config.
    stages : int
        Pipeline registers after the logic (``>= 0``).
    plan : callable
        ``plan(config) -> dict``, run once the config is known to be a ``BSFPConfig``.
    output_shape : shape
        The payload shape of ``o``.
    """

    def __init__(self, *, config, stages, plan, output_shape):
        name = type(self).__name__
        if not isinstance(config, BSFPConfig):
            raise TypeError(f"{name}.config must be a BSFPConfig, not {config!r}")
        self._config = config
        self._stages = check_int(name, "stages", stages, min=0)
        self._plan = plan(config)
        super().__init__({
            "i": In(stream.Signature(self.input_layout)),
            "o": Out(stream.Signature(output_shape)),
        })

    @classmethod
    def from_config(cls, config, *, stages=1):
        """The block of a ``golden.config.Config``'s BSFP config, with ``stages`` registers
        (1: the draft and the full pass each register their output once)."""
        from specgen.golden.config import Config
        if not isinstance(config, Config):
            raise TypeError(f"{cls.__name__}.from_config needs a golden.config.Config, "
                            f"not {config!r}")
        return cls(config=config.bsfp, stages=stages)

    @property
    def config(self):
        return self._config

    @property
    def remap_cover(self):
        """The NOR terms of ``remapped``: ``(mask, value)`` cubes over the block's
        remap index; an index matches when ``index & mask == value``."""
        return self._plan["cover"]


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
