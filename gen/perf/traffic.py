"""The bytes a decoder-core program moves through memory, by kind, at any scale.

The decoder core (:class:`hw.decoder.DecoderCore`) keeps every word in memory: each
stage reads its operands through AXI4 masters of its own and writes its results the
same way (``docs/decoder.md``). On a board whose memory bandwidth binds (VCK190's DDR),
those bytes cost time beside the weights and the SSM state. This module counts them
from the design and the model's widths, as :meth:`hw.step_program.StepPlan.program`,
:meth:`~hw.step_program.StepPlan.commit_program` and the engines lay them out:

* **weights**: the linear engine's planes, padding rows included (both planes, or the
  nibble plane alone in SPEQ's draft pass; ``golden.weight_planes``);
* **state**: the SSM engine's state image of every layer and head group, read (and
  written where the pass keeps a node's state);
* **stage**: everything else. Per node: the embedding row's gather; per layer the
  norm (``h`` and its weights read, binary16 out), every linear job's activations
  (each output tile reads its inputs again: ``hw.activation_reader``) and result
  records (``cols`` binary32 words padded to the result port's beats), the conv1d
  per channel (parent window, new value, taps and bias in; ``silu`` and the new window
  out, each in its power-of-two element, ``hw.stream_engine.conv1d_engine``), the
  move of ``dt``, the SSM engine's parameters, input records and ``y``, the gated
  norm and the residual; then the final norm, the LM head, the argmax and the greedy
  acceptance; and the sequencer's fetch of every record.

A commit moves, per layer and head group, the parameters, the accepted path's input
records and the state (read and written), and copies the last node's conv windows.

The decoder-core benches (``tests/test_decoder_core.py``) and the RTL generation tests
(``tests/test_rtl_generate.py``) hold these counts equal to the bytes the RTL's AXI
ports move on Verilator (``sim.axi_master.Memory`` counts every beat);
``tests/test_traffic.py`` works one pass and one commit out by hand and checks the
record size against a paper-scale core's.
"""

import functools
from dataclasses import dataclass

from specgen.golden.mamba2 import row_words
from specgen.golden.validate import check_choice, check_int
from specgen.golden.weight_planes import (layout_args, matrix_draft_bytes, matrix_plane_bytes,
                                          matrix_tiles)
from specgen.hw.activation_reader import X_PORT_BITS
from specgen.hw.step_program import in_proj_segments

__all__ = ["Traffic", "PARTS", "pass_traffic", "commit_traffic", "RECORD_BYTES", "X_BEAT_BYTES"]

#: Bytes of a program record of the decoder core at the boards' 40-bit addresses
#: (``hw.sequencer``: the widest engine's descriptor plus the header, rounded up to a
#: power of two; ``tests/test_traffic.py`` builds a paper-scale core to check it).
RECORD_BYTES = 128
#: Bytes of a beat of the linear engine's activation port (``hw.activation_reader``):
#: a job reads each token's inputs in whole beats.
X_BEAT_BYTES = X_PORT_BITS // 8

# The stream engines' elements (hw.stream_engine): binary32 fields zero-padded to a
# power of two of at least 32 bits, the norms' binary16 output packed two to a word; the
# counts below write each operand's bytes out (4 a binary32 element, 2 a binary16 one).
_ARGMAX_RESULT = 8                # hw.argmax.argmax_out_layout, in a 64-bit element
_TREE_ENTRY = 8                   # golden.tree: a node's table and path words


def _pow2_bytes(bits):
    return 1 << max(5, (bits - 1).bit_length()) >> 3


@dataclass(frozen=True)
class Traffic:
    """Bytes of one program: ``weights``, ``state`` (SSM state images, read plus
    written) and ``stage`` (the rest, :mod:`gen.perf.traffic`), each split ``(read,
    written)``; ``parts`` splits ``stage`` by what moves it (name to ``(read,
    written)``: :data:`PARTS`)."""

    weights: tuple = (0, 0)
    state: tuple = (0, 0)
    stage: tuple = (0, 0)
    parts: tuple = ()

    @property
    def read(self):
        return self.weights[0] + self.state[0] + self.stage[0]

    @property
    def written(self):
        return self.weights[1] + self.state[1] + self.stage[1]

    @property
    def total(self):
        return self.read + self.written


#: The parts of a program's stage bytes (:attr:`Traffic.parts`).
PARTS = {"activations": "the linear jobs' inputs (every output tile's job reads them)",
         "results": "the linear jobs' result records",
         "conv1d": "the conv1d's windows, new values, taps and bias; its outputs and windows",
         "ssm io": "the SSM passes' parameters and input records, y, and the moves of dt "
                   "(and of B and C into later head groups' records)",
         "norms": "the pre-norms, gated norms and final norm (operands, weights, outputs)",
         "residual": "the residual adds",
         "head": "the embedding rows' gather, the argmax and the acceptance",
         "program": "the sequencer's fetch of the program's records"}


class _Parts:
    """Bytes ``(read, written)`` by part, and the program's records."""

    def __init__(self):
        self.bytes = {k: [0, 0] for k in PARTS}
        self.records = 0

    def add(self, part, read=0, written=0):
        self.bytes[part][0] += read
        self.bytes[part][1] += written

    def scaled(self, n):
        c = _Parts()
        c.bytes = {k: [n * r, n * w] for k, (r, w) in self.bytes.items()}
        c.records = n * self.records
        return c

    def traffic(self, *, weights, state, record_bytes):
        self.add("program", self.records * record_bytes)
        parts = tuple((k, tuple(v)) for k, v in self.bytes.items())
        stage = tuple(sum(v[i] for _, v in parts) for i in (0, 1))
        return Traffic(weights=weights, state=state, stage=stage, parts=parts)


def _ssm_geometry(config, model, groups, elem):
    """``(Hg, record, state)``: heads a pass, bytes of a node's input record and of a
    pass's state image of ``elem``-byte words (``golden.memory_map.ssm_engine_layout``
    for the pass's heads)."""
    Hg = model.nheads // groups
    record = 4 * (2 * model.d_state + Hg * model.headdim + Hg)
    state = elem * Hg * model.headdim * row_words(model.d_state, config.ssm.lanes)
    return Hg, record, state


def _jobs(config, n_out, k, tokens, parts, *, reuse=False):
    """The activations read and results written by the linear jobs of an ``n_out × k``
    matrix over ``tokens`` tokens into ``parts``, with a record each (``reuse``: the
    inputs read once for every job of the matrix, a what-if)."""
    lin = config.linear
    y_port = config.board.memory_port_bits
    y_rec = -(-32 * lin.cols // y_port) * y_port // 8
    r = w = n = 0
    # (With reuse, the first tile's jobs read every input chunk once.)
    for j in matrix_tiles(n_out, k, rows=lin.rows, cols=lin.cols, max_k=lin.max_k,
                          split=lin.split_tiles):
        if not reuse or j.row0 == 0:
            r += tokens * -(-2 * j.n_k // X_BEAT_BYTES) * X_BEAT_BYTES
        w += -(-j.n_rows // lin.cols) * tokens * y_rec
        n += 1
    parts.add("activations", r)
    parts.add("results", 0, w)
    parts.records += n


def _weights(config, n_out, k, mode):
    kw = layout_args(config)
    if mode and config.linear.draft_plane:
        # A draft pass reads the draft plane (linear.draft_plane) instead of the nibble one.
        return matrix_draft_bytes(n_out, k, **kw)
    nib, res = matrix_plane_bytes(n_out, k, **kw)
    return nib if mode else nib + res


def pass_traffic(config, model, *, tokens, mode=0, groups=None, state_writes=0, accept=True,
                 state_elem_bytes=4, record_bytes=RECORD_BYTES, reuse=False):
    """The :class:`Traffic` of one pass of ``model`` over ``tokens`` nodes on ``config``'s
    decoder core, as :meth:`hw.step_program.StepPlan.program` runs it.

    Parameters
    ----------
    config : golden.config.Config
    model : golden.lm.LMConfig
        The widths (a :class:`gen.perf.system.MambaDims` too).
    tokens : int
        Nodes of the pass.
    mode : int
        0: both weight planes; 1: the nibble plane (SPEQ's draft pass), or the draft plane
        with ``linear.draft_plane``.
    groups : int, optional
        Head groups a layer (default ``config.ssm.head_groups``).
    state_writes : int
        States a layer written (1: a node pass keeping its node's).
    accept : bool
        The pass ends with the greedy acceptance of the tree (the target's tree pass);
        a draft's passes end at the argmax.
    state_elem_bytes : int
        Bytes of a state word (the design's ``fp32`` state: 4).
    record_bytes : int
        Bytes of a program record (:data:`RECORD_BYTES` at the boards' addresses).
    reuse : bool
        A what-if the RTL does not build: each matrix's inputs read once for all its
        jobs, and the stages' weights (norm weights, conv taps and bias) once a pass
        instead of once a node.
    """
    check_int("pass_traffic", "tokens", tokens, min=1)
    check_choice("pass_traffic", "mode", mode, (0, 1))
    check_int("pass_traffic", "state_writes", state_writes, min=0, max=1)
    G = config.ssm.head_groups if groups is None else groups
    return _pass_traffic(config, model, tokens, mode, G, state_writes, bool(accept),
                         state_elem_bytes, record_bytes, bool(reuse))


@functools.lru_cache(maxsize=4096)
def _pass_traffic(config, m, T, mode, G, state_writes, accept, elem, record_bytes, reuse):
    # One layer, counted once and multiplied: every layer of a pass moves the same bytes.
    # `once`: nodes that read a stage's weights (1 with reuse).
    once = 1 if reuse else T
    lay, wt = _Parts(), 0
    Hg, rec, state = _ssm_geometry(config, m, G, elem)
    window = _pow2_bytes(32 * (m.d_conv - 1))
    taps = _pow2_bytes(32 * m.d_conv) + 4                              # taps and bias
    padded = in_proj_segments(m, config.linear.cols, G)[1]
    lay.add("norms", (T + once) * m.d_model * 4, T * m.d_model * 2)    # pre-norm
    _jobs(config, padded, m.d_model, T, lay, reuse=reuse)              # in_proj
    wt += _weights(config, padded, m.d_model, mode)
    # The conv1d: every group's x, and B and C once (group 0's), which a copy moves into
    # the later groups' records.
    ch = m.conv_dim
    lay.add("conv1d", ch * (T * (window + 4) + once * taps), T * ch * (4 + window))
    lay.add("ssm io", G * (T * Hg * 4 + 12 * Hg + T * rec)             # dt's move, params,
            + (G - 1) * T * 2 * m.d_state * 4,                         # records, B and C;
            G * T * (Hg * 4 + Hg * m.headdim * 4)                      # dt, y; B and C
            + (G - 1) * T * 2 * m.d_state * 4)
    # Group 0: x, B and C a node, dt's move, the SSM pass; a later group: x a node, the
    # copy of B and C, dt's move, the SSM pass.
    lay.records += 3 * T + 2 + (G - 1) * (T + 3)
    lay.add("norms", (2 * T + once) * m.d_inner * 4, T * m.d_inner * 2)   # gated norm
    _jobs(config, m.d_model, m.d_inner, T, lay, reuse=reuse)           # out_proj
    wt += _weights(config, m.d_model, m.d_inner, mode)
    lay.add("residual", T * m.d_model * 8, T * m.d_model * 4)
    lay.records += 3                                                   # norm, gated norm, residual
    L = m.n_layer
    parts = lay.scaled(L)
    wt *= L
    parts.add("head", T * m.d_model * 4, T * m.d_model * 4)           # the embedding's gather
    parts.records += T
    parts.add("norms", (T + once) * m.d_model * 4, T * m.d_model * 2)  # final norm
    _jobs(config, m.vocab, m.d_model, T, parts, reuse=reuse)           # LM head
    wt += _weights(config, m.vocab, m.d_model, mode)
    parts.add("head", T * m.vocab * 4, T * _ARGMAX_RESULT)             # argmax
    parts.records += 3                                                 # final norm, argmax, END
    if accept:
        parts.add("head", 2 * T * _TREE_ENTRY, T * _TREE_ENTRY)        # tree in, path out
        parts.records += 1
    return parts.traffic(weights=(wt, 0), state=(L * G * state, L * G * state_writes * state),
                         record_bytes=record_bytes)


def commit_traffic(config, model, *, path, groups=None, replay=True, state_elem_bytes=4,
                   record_bytes=RECORD_BYTES):
    """The :class:`Traffic` of a commit of a ``path``-node accepted path
    (:meth:`hw.step_program.StepPlan.commit_program`): per layer and head group the SSM
    replay from the committed state (parameters, the path's input records, the state
    read and the new one written), then the last node's conv windows copied into the
    committed slot. ``replay=False``: the windows' copy alone (the node flow's
    ``window_program``, which adopts a stored state). The other parameters are
    :func:`pass_traffic`'s."""
    check_int("commit_traffic", "path", path, min=1)
    G = config.ssm.head_groups if groups is None else groups
    m, L = model, model.n_layer
    Hg, rec, state = _ssm_geometry(config, m, G, state_elem_bytes)
    window = _pow2_bytes(32 * (m.d_conv - 1))
    parts = _Parts()
    if replay:
        parts.add("ssm io", L * G * (12 * Hg + path * rec))
        parts.records += L * G
    parts.add("conv1d", L * m.conv_dim * window, L * m.conv_dim * window)
    parts.records += L + 1                                             # a copy a layer; END
    st = L * G * state if replay else 0
    return parts.traffic(weights=(0, 0), state=(st, st), record_bytes=record_bytes)
