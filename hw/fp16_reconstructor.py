"""``FP16Reconstructor``: SPEQ's full-precision pass, two BSFP v1 planes to the scaled FP16 word.

SPEQ (arXiv 2510.18525) keeps one copy of the weights for both models. The target
(full-precision) pass reads the nibble plane ``{s, c}`` and the residue plane
``{W, e0, m9..m0}``, merges them, and uses the waste bit ``W`` to undo the remapping of
the draft code, which gives back the exact (scaled) FP16 weight. This is
:func:`golden.bsfp.restore_stored` applied to :func:`golden.bsfp.merge_planes`
(``docs/bsfp.md`` §4). Unscaling by ``2**k`` is not done here: the PE adds ``k`` to each
product's exponent, which is exact (``golden.bsfp.full_terms``).
"""

from amaranth import C, Cat, Module, Signal
from amaranth.lib import data

from specgen.golden.bsfp import restore_exponent_table

from .pipeline import stream_stages
from .remap_logic import BSFPStream, nor_cover, prime_cover, remap_slug

__all__ = ["FP16Reconstructor"]


class FP16Reconstructor(BSFPStream):
    """Merge a nibble and a residue into the scaled FP16 weight, undoing BSFP v1 remapping.

    Parameters
    ----------
    config : golden.bsfp.BSFPConfig
        The BSFP v1 config; its :attr:`~golden.bsfp.BSFPConfig.effective_remap` is the
        table undone (empty for every draft other than ``"E3M0"`` and ``"E3M0+W"``:
        those store the plain scaled word, and the block only clears ``W``).
    stages : int
        Pipeline registers after the restore logic (``>= 0``). ``0``: the block is
        combinational, ``o.valid = i.valid``, ``i.ready = o.ready``.

    Attributes
    ----------
    i : In(stream.Signature(input_layout))
        One weight's two planes: ``nibble << 12 | residue`` (fields ``residue``: bits
        11..0 = ``W << 11 | e0 << 10 | m9..m0``; ``nibble``: bits 15..12 =
        ``s << 3 | c``), as :func:`golden.bsfp.split_planes` produces them.
    o : Out(stream.Signature(16))
        The scaled FP16 word ``restore_stored(merge_planes(nibble, residue))``:
        ``s | e4 = 0 | e[3:0] | m9..m0``. Bit 14 is always 0 (Algorithm 1 leaves
        biased exponents <= 15), so a PE may drop it and use a 15-bit weight path.

    Notes
    -----
    **Timing.** A transfer on ``i`` in cycle *t* shows on ``o`` with ``o.valid`` high
    in cycle *t + stages* (:attr:`latency`); with ``stages = 0`` in the same cycle.
    One item per cycle at full rate; ``i.ready`` is a combinational function of
    ``o.ready`` and the stage valid bits (each stage is ready when empty or when its
    successor is ready).

    **Reset.** Synchronous ``rst`` empties the stages; an item accepted in the reset
    cycle (``stages >= 1``) is dropped.

    **Logic.** ``remapped`` is high when ``W = 1`` and ``c`` is a remap target: a sum of
    NOR terms over ``{W, c}``, one per cube of a prime-implicant cover of the targets
    (default table: ``remapped = NOR(~W, c2, c0)``). Then ``e[3:1]`` is the source's
    ``e[3:1]``, else ``c``; ``e0``, the sign and the mantissa pass through and
    ``e4 = 0``, which also drops a ``W = 1`` the encoder never writes on a non-target
    code (the golden's definition).
    """

    def __init__(self, *, config, stages=1):
        super().__init__(config=config, stages=stages, plan=_restore_plan, output_shape=16)

    @property
    def module_name(self):
        """Verilog module name encoding every parameter that changes the logic, e.g.
        ``fp16_reconstructor_r9to0_11to2_s1`` (remap table undone, or ``plain``;
        stages)."""
        remap = self._config.effective_remap
        return f"fp16_reconstructor_{remap_slug(remap) if remap else 'plain'}_s{self._stages}"

    @property
    def input_layout(self):
        return data.StructLayout({"residue": 12, "nibble": 4})

    def elaborate(self, platform):
        m = Module()
        plan = self._plan
        nibble, residue = self.i.payload.nibble, self.i.payload.residue
        sign, code = nibble[3], nibble[0:3]
        w, e0, man = residue[11], residue[10], residue[0:10]

        remapped = Signal()
        m.d.comb += remapped.eq(nor_cover(m, Cat(code, w), plan["cover"], prefix="remap"))

        # The remapped code's original e[3:1]: the source exponent's pair.
        source_pair = Signal(3)
        with m.Switch(code):
            for tgt, pair in plan["pairs"].items():
                with m.Case(tgt):
                    m.d.comb += source_pair.eq(pair)
            with m.Default():
                m.d.comb += source_pair.eq(0)  # not remapped: unused

        e31 = Signal(3)
        with m.If(remapped):
            m.d.comb += e31.eq(source_pair)
        with m.Else():
            m.d.comb += e31.eq(code)

        # e4 = 0: the waste bit W is consumed here; the scaled word has E <= 15.
        word = Signal(16)
        m.d.comb += word.eq(Cat(man, e0, e31, C(0, 1), sign))
        stream_stages(m, i=self.i, o=self.o, payload=word, stages=self._stages)
        return m


def _restore_plan(config):
    """Read the restore constants from the golden table and check the structure.

    Returns ``cover`` (NOR terms of ``remapped`` over ``W << 3 | c``) and ``pairs``
    (target code -> restored ``e[3:1]``).
    """
    table = [int(v) for v in restore_exponent_table(config)]
    targets = sorted(tgt for _, tgt in config.effective_remap)
    # Index W << 4 | c << 1 | e0; e0 = 0 reads the restored e[3:1] of a remapped code.
    pairs = {t: table[(1 << 4) | (t << 1)] >> 1 for t in targets}
    cover = prime_cover([8 | t for t in targets], 4)
    for idx, e in enumerate(table):
        w, c, e0 = idx >> 4, (idx >> 1) & 7, idx & 1
        hit = any(((w << 3) | c) & mask == value for mask, value in cover)
        got = ((pairs[c] if hit else c) << 1) | e0
        if got != e:
            raise RuntimeError(f"FP16Reconstructor cannot implement restore_exponent_table: "
                               f"field {idx:05b} restores to {got}, the golden table says {e}")
    return {"cover": cover, "pairs": pairs}
