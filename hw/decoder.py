"""The decoder core: the layer sequencer and every engine of a Mamba2 decode step.

:class:`SequencedCore` joins a :class:`hw.sequencer.Sequencer` to a set of engines (each a
component with a ``desc`` stream, a ``busy`` and an ``error`` bit and its own AXI4
masters): engine ``e`` of the dict is the sequencer's engine index ``e``, its ``busy`` is
bit ``e`` of the barrier, and every master is a port of the core named
``m_axi_<engine>_<port>``. :class:`DecoderCore` is the core of a whole decode step
(``docs/decoder.md``): for ``V`` tree nodes, one program runs every layer's pre-norm,
in_proj, conv1d, the move of ``dt`` into the SSM records, the tree SSM pass, the gated
norm, out_proj and the residual, then the final norm, the LM head, the greedy argmax
of each node and the greedy acceptance of the tree (the accepted path), with every word
in memory and no host work between the stages
(:mod:`hw.step_program` writes the program). The host writes the SSM unit's node table
(``tbl_*``, the tree's FIFO schedule) once per step, as on the accelerator.
"""

from amaranth import Cat, Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from specgen.golden.config import Config
from specgen.golden.fp import FP16
from specgen.golden.lm import LMConfig

from .linear_engine import LinearEngine
from .sequencer import Sequencer, SeqError, start_layout
from .ssm_engine import SSMEngine
from .stream_engine import (acceptance_engine, argmax_engine, conv1d_engine, copy_engine,
                            element_bits, norm_engine, residual_engine)

__all__ = ["DECODER_ENGINES", "DecoderCore", "SequencedCore", "window_bytes"]

#: The decoder core's engines, in the sequencer's index order.
DECODER_ENGINES = ("linear", "ssm", "conv1d", "copy", "norm", "gate_norm", "residual", "argmax",
                   "accept")


def window_bytes(model):
    """Bytes of one channel's conv window in memory: ``d_conv − 1`` binary32 words in the
    conv1d engine's element (the power of two ≥ their bits, 16 bytes for ``d_conv = 4``)."""
    return element_bits(32 * (model.d_conv - 1)) // 8


class SequencedCore(wiring.Component):
    """A :class:`hw.sequencer.Sequencer` driving ``engines``, every AXI master a port.

    Parameters
    ----------
    config : golden.config.Config
        The board's memory ports (the sequencer's master).
    engines : dict of str to wiring.Component
        Each with ``desc`` (``In(stream.Signature(layout))``), ``busy``, ``error`` and
        ``m_axi_*`` ports; in the sequencer's index order.
    max_records : int
        Records of a program at most.
    addr_width : int
        Byte-address width of every AXI port (the engines' must match).
    members : dict, optional
        More ports of the subclass (which it wires in :meth:`elaborate_extra`).

    Attributes
    ----------
    start : In(stream.Signature(start_layout(addr_width, max_records)))
        A program; taken while ``busy`` is low.
    busy, done, error, error_code : Out
        The sequencer's (:class:`hw.sequencer.Sequencer`).
    abort_req : In(1)
        The sequencer's: stop the running program (error code ``ABORTED``).
    idle : Out(1)
        No program runs and no engine has work: after an abort, the host reruns a
        program (or runs another) once this is high.
    engine_error : Out(len(engines))
        Bit ``e``: engine ``e`` saw an AXI error response (sticky in the engine).
    engine_busy : Out(len(engines))
        Bit ``e``: engine ``e``'s ``busy`` (it has work), combinationally; the
        performance counters of :class:`hw.decoder_top.DecoderTop` count it.
    m_axi_seq : the sequencer's read master, domain ``mem``
    m_axi_<engine>_<port> : each engine's masters, domain ``mem``
    """

    def __init__(self, *, config, engines, max_records, addr_width, members=None):
        if not isinstance(config, Config):
            raise TypeError(f"{type(self).__name__}.config must be a golden.config.Config, "
                            f"not {config!r}")
        self.engines = dict(engines)
        self.seq = Sequencer.from_config(
            config, engines={n: e.desc.payload.shape() for n, e in self.engines.items()},
            max_records=max_records, addr_width=addr_width)
        self.max_records, self.addr_width = max_records, addr_width
        self.ports = {"seq": self.seq.signature.members["axi"]}
        for who, eng in self.engines.items():
            for name, member in eng.signature.members.items():
                if name.startswith("m_axi_"):
                    self.ports[f"{who}_{name[len('m_axi_'):]}"] = member
        super().__init__({
            "start": In(stream.Signature(start_layout(addr_width, max_records))),
            "busy": Out(1), "done": Out(32), "error": Out(1), "error_code": Out(SeqError),
            "abort_req": In(1), "idle": Out(1), "engine_error": Out(len(self.engines)),
            "engine_busy": Out(len(self.engines)),
            **{f"m_axi_{name}": member for name, member in self.ports.items()},
            **(members or {}),
        })

    @property
    def record_bits(self):
        """Bits of a program record (:attr:`hw.sequencer.Sequencer.record_bits`)."""
        return self.seq.record_bits

    def index(self, engine):
        """The sequencer's index of ``engine``."""
        return list(self.engines).index(engine)

    def read_ports(self):
        """Names (``m_axi_<name>``) of the read masters, the sequencer's first."""
        return [n for n, m in self.ports.items() if "arvalid" in m.signature.members]

    def write_ports(self):
        """Names of the write masters."""
        return [n for n, m in self.ports.items() if "awvalid" in m.signature.members]

    def elaborate_extra(self, m):
        """Wire the subclass's own ports (``members``)."""

    def elaborate(self, platform):
        m = Module()
        seq = m.submodules.seq = self.seq
        for who, eng in self.engines.items():
            m.submodules[who] = eng
            wiring.connect(m, getattr(seq, who), eng.desc)
        wiring.connect(m, wiring.flipped(self.start), seq.start)
        engines = list(self.engines.values())
        m.d.comb += [seq.engine_busy.eq(Cat(e.busy for e in engines)),
                     self.engine_busy.eq(Cat(e.busy for e in engines)),
                     seq.abort_req.eq(self.abort_req),
                     self.idle.eq(~seq.busy & ~Cat(e.busy for e in engines).any()),
                     self.busy.eq(seq.busy), self.done.eq(seq.done), self.error.eq(seq.error),
                     self.error_code.eq(seq.error_code),
                     self.engine_error.eq(Cat(e.error for e in engines))]
        wiring.connect(m, wiring.flipped(self.m_axi_seq), seq.axi)
        for who, eng in self.engines.items():
            for name in eng.signature.members:
                if not name.startswith("m_axi_"):
                    continue
                outer = getattr(self, f"m_axi_{who}_{name[len('m_axi_'):]}")
                inner = getattr(eng, name)
                for a, b in (zip(outer, inner) if isinstance(inner, list) else [(outer, inner)]):
                    wiring.connect(m, wiring.flipped(a), b)
        self.elaborate_extra(m)
        return m


class DecoderCore(SequencedCore):
    """The sequencer and the nine engines of a decode step (:data:`DECODER_ENGINES`).

    Parameters
    ----------
    config : golden.config.Config
        The design; ``linear.contract`` must be ``"dspfp32"`` (the linear engine's) and
        ``ssm``'s geometry must be the model's (``nheads``, ``headdim``, ``d_state``).
    model : golden.lm.LMConfig
        The model dimensions the vector stages are built for (the norms' sizes, the
        conv1d's channels, the argmax's vocabulary).
    max_records : int
        Records of a step's program at most.
    addr_width : int
        Byte-address width of every AXI port.
    max_nodes : int, optional
        Tree nodes of a step at most (default ``min(tree.max_nodes, linear.max_tokens)``:
        a linear job's tokens are the step's nodes).

    Attributes
    ----------
    tbl_we, tbl_node, tbl_entry, tbl_src : In
        The SSM engine's node table (:class:`hw.ssm_engine.SSMEngine`); write while the
        core is idle.
    (and those of :class:`SequencedCore`)

    Raises
    ------
    ValueError
        A model the design's SSM unit or linear engine cannot run, naming the dimension.
    """

    def __init__(self, *, config, model, max_records, addr_width, max_nodes=None):
        if not isinstance(model, LMConfig):
            raise TypeError(f"DecoderCore.model must be a golden.lm.LMConfig, not {model!r}")
        c = config.ssm
        for dim in ("nheads", "headdim", "d_state"):
            if getattr(model, dim) != getattr(c, dim):
                raise ValueError(f"DecoderCore: the model's {dim} is {getattr(model, dim)}, the "
                                 f"design's SSM unit is built for {getattr(c, dim)} (ssm.{dim})")
        for what, k, tensor in (("d_model", model.d_model, "in_proj.weight"),
                                ("d_inner", model.d_inner, "out_proj.weight")):
            if k > config.linear.max_k:
                raise ValueError(f"DecoderCore: the model's {what} ({k}, the inputs of "
                                 f"backbone.layers.*.mixer.{tensor}) exceeds linear.max_k "
                                 f"({config.linear.max_k}), the inputs of one linear job")
        limit = min(config.tree.max_nodes, config.linear.max_tokens)
        V = limit if max_nodes is None else max_nodes
        if not 1 <= V <= limit:
            raise ValueError(f"DecoderCore.max_nodes must be in [1, {limit}] (tree.max_nodes, "
                             f"linear.max_tokens), not {max_nodes!r}")
        self.model, self.max_nodes = model, V
        kw = {"addr_width": addr_width}
        # The vector stages take config.stage_lanes elements a beat: the model's widths
        # must split into whole beats, and the descriptors count beats.
        lanes = {s: config.stage_lanes(s) for s in DECODER_ENGINES}
        wb = window_bytes(model)
        for stage, dims in (("norm", ("d_model",)), ("gate_norm", ("d_inner",)),
                            ("residual", ("d_model",)), ("copy", ("d_model", "nheads")),
                            ("conv1d", ("d_inner", "d_state")), ("argmax", ("vocab",))):
            for dim in dims:
                if getattr(model, dim) % lanes[stage]:
                    raise ValueError(f"DecoderCore: the model's {dim} ({getattr(model, dim)}) "
                                     f"is not a multiple of the {stage} engine's lanes "
                                     f"({lanes[stage]}, vector.lanes {config.vector.lanes})")

        # A head group's dt and x (ssm.head_groups) are copied and convolved on their own.
        G = c.head_groups
        for stage, dim, n in (("copy", "nheads", model.nheads // G),
                              ("conv1d", "d_inner", model.d_inner // G)):
            if G > 1 and n % lanes[stage]:
                raise ValueError(f"DecoderCore: a head group's {dim} ({model.nheads // G} of "
                                 f"the model's {model.nheads} heads, ssm.head_groups {G}: "
                                 f"{n}) is not a multiple of the {stage} engine's lanes "
                                 f"({lanes[stage]}, vector.lanes {config.vector.lanes})")

        def beats(stage, n):
            return -(-n // lanes[stage])
        conv_elems = beats("conv1d", max(model.d_inner, model.d_state))
        engines = {
            "linear": LinearEngine(config=config, **kw),
            "ssm": SSMEngine(config=config, **kw),
            # One descriptor per node and channel segment (x, B, C): a node reads its
            # parent's window, which is no linear function of the node index in a tree.
            "conv1d": conv1d_engine(config, max_vectors=1, max_elements=conv_elems, **kw),
            # dt of every node into its SSM record; a node's window (as words) at commit.
            "copy": copy_engine(config, max_vectors=V,
                                max_elements=beats("copy", max(model.nheads, model.d_model,
                                                               model.conv_dim * wb // 4)), **kw),
            "norm": norm_engine(config, size=model.d_model, gate=False, out_fmt=FP16,
                                max_vectors=V, **kw),
            "gate_norm": norm_engine(config, size=model.d_inner, gate=True, out_fmt=FP16,
                                     max_vectors=V, **kw),
            "residual": residual_engine(config, max_vectors=V,
                                        max_elements=beats("residual", model.d_model), **kw),
            "argmax": argmax_engine(config, size=model.vocab, max_vectors=V, **kw),
            # Greedy acceptance of the step's tree from the argmax beats: the path in memory.
            "accept": acceptance_engine(config, max_nodes=V, vocab=model.vocab, **kw),
        }
        assert tuple(engines) == DECODER_ENGINES
        ssm = engines["ssm"]
        tbl = {n: In(ssm.signature.members[n].shape)
               for n in ("tbl_we", "tbl_node", "tbl_entry", "tbl_src")}
        super().__init__(config=config, engines=engines, max_records=max_records,
                         addr_width=addr_width, members=tbl)
        self._config = config

    @property
    def module_name(self):
        m = self.model
        return (f"DecoderCore_d{m.d_model}_n{m.d_state}_h{m.nheads}x{m.headdim}_v{m.vocab}_"
                f"t{self.max_nodes}_{self.engines['linear'].module_name.removeprefix('LinearEngine_')}")

    def elaborate_extra(self, m):
        ssm = self.engines["ssm"]
        m.d.comb += [getattr(ssm, n).eq(getattr(self, n))
                     for n in ("tbl_we", "tbl_node", "tbl_entry", "tbl_src")]
