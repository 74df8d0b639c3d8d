"""``ExponentDecoder``: SPEQ's draft-pass decoder, a BSFP v1 draft code to sign and exponent.

SPEQ (arXiv 2510.18525) runs its 4-bit draft model on the nibble plane ``{s, c}`` of the
shared FP16 weights. A draft weight is ``(-1)**s * 2**(D[c] - 15) * 2**k``, so the
decoder only has to turn the 3-bit code ``c`` into the biased exponent ``D[c]``; the
product in the PE is then an exponent add. The paper's decoder detects the remapped
codes with NOR gates (for the default remap table ``hit = NOR(c2, c0)``).

Here the whole table comes from :func:`golden.bsfp.draft_exponent_table`, and the NOR
detection is generated from the config's remap table (``docs/bsfp.md`` §5,
``docs/blocks-speq.md``), so any valid remap table gets its own logic.
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import data

from specgen.golden.bsfp import draft_exponent_table
from specgen.golden.validate import check_choice

from .pipeline import stream_stages
from .remap_logic import BSFPStream, nor_cover, prime_cover, remap_slug

__all__ = ["DECODER_DRAFTS", "ExponentDecoder"]

#: Draft formats the decoder implements (the E3M0 family of ``BSFPConfig.draft``).
DECODER_DRAFTS = ("E3M0", "E3M0-noremap", "E3M0+W")


class ExponentDecoder(BSFPStream):
    """E3M0 draft decoder: draft code ``{s, c}`` (or ``{s, W, c}``) to sign and biased exponent.

    Parameters
    ----------
    config : golden.bsfp.BSFPConfig
        The BSFP v1 config. ``config.draft`` must be one of :data:`DECODER_DRAFTS`;
        ``config.remap`` and ``config.pair_representative`` shape the logic.
    stages : int
        Pipeline registers after the decode logic (``>= 0``). ``0``: the block is
        combinational, ``o.valid = i.valid``, ``i.ready = o.ready``.

    Attributes
    ----------
    i : In(stream.Signature(input_layout))
        Draft codes. For ``"E3M0"`` and ``"E3M0-noremap"`` the payload is the nibble
        ``n = s << 3 | c`` of the nibble plane (fields ``c``: bits 2..0, ``s``: bit 3).
        For ``"E3M0+W"`` it is ``s << 4 | W << 3 | c`` (fields ``c``, ``w``, ``s``):
        the 5-bit draft also reads the waste bit from the residue plane.
    o : Out(stream.Signature(output_layout))
        Draft weights: ``sign << 4 | exp`` (fields ``exp``: bits 3..0, ``sign``: bit 4).
        ``exp`` is the biased exponent ``D`` (0..15, bias 15) of
        :func:`golden.bsfp.draft_exponent_table`; the weight is
        ``(-1)**sign * 2**(exp - 15) * 2**k``. ``exp = 0`` still means ``2**-15``:
        a draft weight is never zero or subnormal.

    Notes
    -----
    **Timing.** A transfer on ``i`` in cycle *t* shows on ``o`` with ``o.valid`` high
    in cycle *t + stages* (:attr:`latency`); with ``stages = 0`` in the same cycle.
    One item per cycle at full rate. Each register stage holds one item and is
    ready when it is empty or its successor is ready, so ``i.ready`` is a
    combinational function of ``o.ready`` and the stage valid bits (no skid buffer:
    the stream is narrow and the path is a few OR gates).

    **Reset.** Synchronous ``rst`` empties the stages; an item accepted in the reset
    cycle (``stages >= 1``) is dropped.

    **Logic.** ``remapped`` is high for a remap target code (for ``"E3M0+W"``: ``W = 1``
    and a target code). It is a sum of NOR terms, one per cube of a prime-implicant
    cover of the target codes; each NOR takes the code bits XORed with the cube's
    bits. For the default table (targets ``000``, ``010``) the cover is one cube and
    ``remapped = NOR(c2, c0)``, the paper's detector. A remapped code selects its
    source exponent; any other code keeps its pair ``D[3:1] = c`` and takes ``D[0]``
    from a per-code constant (``2c`` or ``2c+1``, or the exponent its pair kept).
    """

    def __init__(self, *, config, stages=1):
        def plan(config):
            check_choice("ExponentDecoder", "config.draft", config.draft, DECODER_DRAFTS)
            return _decoder_plan(config)
        super().__init__(config=config, stages=stages, plan=plan, output_shape=self.output_layout)

    @property
    def module_name(self):
        """Verilog module name encoding every parameter that changes the logic, e.g.
        ``exponent_decoder_e3m0_r9to0_11to2_lo_s1`` (draft, remap table, pair
        representative, stages)."""
        draft = {"E3M0": "e3m0", "E3M0-noremap": "e3m0_noremap", "E3M0+W": "e3m0w"}
        parts = ["exponent_decoder", draft[self._config.draft]]
        if self._config.effective_remap:
            parts.append(remap_slug(self._config.effective_remap))
        parts += [self._config.pair_representative[:2], f"s{self._stages}"]
        return "_".join(parts)

    @property
    def input_layout(self):
        if self._config.draft == "E3M0+W":
            return data.StructLayout({"c": 3, "w": 1, "s": 1})
        return data.StructLayout({"c": 3, "s": 1})

    @property
    def output_layout(self):
        return data.StructLayout({"exp": 4, "sign": 1})

    def elaborate(self, platform):
        m = Module()
        plan = self._plan
        payload = self.i.payload
        if self._config.draft == "E3M0+W":
            index = Cat(payload.c, payload.w)
        else:
            index = payload.c

        remapped = Signal()
        m.d.comb += remapped.eq(nor_cover(m, index, plan["cover"], prefix="remap"))

        # A remapped code names its source exponent (the remap table read backwards).
        source = Signal(4)
        with m.Switch(index):
            for idx, exp in plan["sources"].items():
                with m.Case(idx):
                    m.d.comb += source.eq(exp)
            with m.Default():
                m.d.comb += source.eq(0)  # not remapped: unused

        # Every other code still names its natural pair {2c, 2c+1}: D[3:1] = c, and D[0]
        # picks the representative (or the one exponent the remapping left in the pair).
        lsb = Signal()
        ones = [idx for idx, bit in enumerate(plan["lsb"]) if bit]
        if ones:
            with m.Switch(index):
                with m.Case(*ones):
                    m.d.comb += lsb.eq(1)
                with m.Default():
                    m.d.comb += lsb.eq(0)

        exp = Signal(4)
        with m.If(remapped):
            m.d.comb += exp.eq(source)
        with m.Else():
            m.d.comb += exp.eq(Cat(lsb, payload.c))

        decoded = Signal(self.output_layout)
        m.d.comb += [decoded.exp.eq(exp), decoded.sign.eq(payload.s)]
        stream_stages(m, i=self.i, o=self.o, payload=decoded.as_value(), stages=self._stages)
        return m


def _decoder_plan(config):
    """Read the decoder's constants from the golden table and check the structure.

    Returns ``cover`` (NOR terms of ``remapped``), ``sources`` (remapped index -> source
    exponent) and ``lsb`` (``D[0]`` of each non-remapped index).
    """
    table = [int(v) for v in draft_exponent_table(config)]
    with_w = config.draft == "E3M0+W"
    offset = 8 if with_w else 0
    targets = sorted(offset | tgt for _, tgt in config.effective_remap)
    sources = {t: table[t] for t in targets}
    lsb = [0 if idx in sources else table[idx] & 1 for idx in range(len(table))]
    width = 4 if with_w else 3
    cover = prime_cover(targets, width)
    # The logic above is only right if every other code still decodes into its natural
    # pair; that is BSFP v1's rule (docs/bsfp.md §5). Checked here, at construction.
    for idx, d in enumerate(table):
        hit = any(idx & mask == value for mask, value in cover)
        got = sources[idx] if hit else ((idx & 7) << 1) | lsb[idx]
        if got != d:
            raise RuntimeError(f"ExponentDecoder cannot implement draft_exponent_table: index "
                               f"{idx} decodes to {got}, the golden table says {d}")
    return {"cover": cover, "sources": sources, "lsb": lsb}
