"""A decode step as a program of the decoder core: where every word lives, and the records.

:class:`StepPlan` lays a :class:`golden.decoder.HardwareLM` out in the memory of a
:class:`hw.decoder.DecoderCore` (weights, parameters, committed states, and the buffers
between the stages) and writes the program of one step for a tree of ``V`` nodes
(``docs/decoder.md``): per layer

1. the pre-norm of every node's ``h`` (``norm``), binary16, token-major;
2. the in_proj jobs (``linear``), one per output tile; its rows are laid out as segments
   ``B``, ``C``, ``dt``, then each head group's ``x``, then ``z``
   (:func:`in_proj_segments`), each starting on a multiple of ``cols`` rows (zero rows
   between them), so the stream engines read a node's segment in place from the job's
   result records, a chunk of ``cols`` rows per record and a ragged last chunk;
3. per head group ``g`` (``ssm.head_groups``; one unless the design splits the heads):
   the conv1d (``conv1d``), three descriptors per node, its ``x`` channels of the group,
   ``B`` and ``C``, each reading the window its parent wrote (the committed window for
   the root) and writing its outputs into the node's SSM input record of the group
   (``B, C, x, dt``) and its own window; the first node of every tree depth waits for the
   conv1d engine to drain, so a parent's window is in memory before its children read it;
   ``dt`` of the group's heads into its records (``copy``); and the group's tree SSM pass
   (``ssm``), ``y`` of every node, no state written (a commit pass replays the accepted
   path). Group ``g``'s stages wait only for the in_proj jobs up to its ``x``: the jobs
   holding the next group's rows are handed out after group ``g``'s SSM pass, so the
   linear engine computes them while that pass runs (SpecMamba's per-head hand-over);
   the rest of in_proj (``z``) follows the last group's pass;
4. the gated norm (``gate_norm``): ``y`` (group by group) and ``z`` in place, binary16,
   token-major;
5. the out_proj jobs and the residual (``residual``), ``h`` updated in place;

then the final norm, the LM head's jobs, the argmax of every node and, in a target step,
the greedy acceptance of the tree (``accept``: the accepted path and its tokens, read
from the tree table the host writes beside the program). Each record waits
only for the engines whose results it reads (and the linear jobs of a layer for the
stage before them); the in_proj jobs queue in the linear engine, and the conv1d runs
beside the ``dt`` copy. A head group's SSM records, parameters (``A``, ``dt_bias``,
``D`` of its heads) and state image (the engine's layout of its heads, striped over the
state ports) follow the group before's.

Before the first layer, the copy engine gathers every node's embedding row into ``h``
from a row-major binary32 copy of the table (the BSFP planes hold the embedding only in
the LM head's job layout); the program names each node's row by its address, which the
host writes from the node's token (``program(parents, tokens)``).

A draft may instead run one node at a time (:meth:`StepPlan.node_program`, a plan made
with ``node_states``): the same records for a 1-node step, the node's conv1d reading its
parent's window and its SSM pass starting from its parent's state (the committed ones for
the root) and writing the node's own state to its buffer, where its children's passes
read it. A chain of ``L`` drafts is then ``L`` one-node passes instead of ``L`` tree
passes over ``1, 2, …, L`` nodes.

The plan writes into a flat byte array (``data``), addresses from ``base``; the host
copies it into the memory the core reaches.
"""

import dataclasses
from dataclasses import dataclass

import numpy as np

from specgen.golden.decoder import HardwareLM
from specgen.golden.memory_map import from_tile_order, state_image, unstripe_state
from specgen.golden.tree import (PATH_ENTRY_FIELDS, ROOT, node_table, tree_depths, tree_entries,
                                 validate_parents)
from specgen.golden.validate import check_int
from specgen.golden.weight_planes import pack_matrix, pack_matrix_draft
from specgen.hw.stream_engine import conv1d_plane_order

__all__ = ["StepPlan", "Segment", "in_proj_segments", "group_rows_end", "DRAFT_FLOWS"]

#: How a draft's passes run on the core: ``node``, one :meth:`StepPlan.node_program` per
#: expanded node from its parent's state; ``prefix``, per depth one
#: :meth:`StepPlan.program` over every node drafted so far, from the committed state.
DRAFT_FLOWS = ("node", "prefix")

#: Alignment of every buffer (the widest beat of the core's ports, and an AXI burst's
#: 4 KB boundary for the weight planes).
ALIGN, PLANE_ALIGN = 64, 4096


@dataclass(frozen=True)
class Segment:
    """One part of in_proj's output: ``rows`` rows from ``row0`` of the model's matrix,
    placed from row ``at`` (a multiple of ``cols``) of the padded one."""

    name: str
    row0: int
    rows: int
    at: int


def in_proj_segments(model, cols, groups=1):
    """The segments of in_proj, each placed on a multiple of ``cols`` rows, and the padded
    row count: ``B``, ``C``, ``dt``, then per head group ``g`` (``groups`` of them,
    :attr:`golden.mamba2.SSMConfig.head_groups`) its ``x{g}``, then ``z``.

    The order is the step's: the linear engine computes the rows in order, so a group's
    SSM pass can start once the jobs up to its ``x`` are done (``B``, ``C`` and every
    group's ``dt`` come first) while the engine works on the next group's rows, and ``z``
    (read only by the gated norm) comes last. Every segment starts a record, so the stream
    engines read it in place (``cols`` rows a record); ``dt`` is one segment (a group's
    heads are a slice of a record), which keeps the padding of ``groups`` segments to the
    ``x`` parts."""
    Hg, P = model.nheads // groups, model.headdim
    # in_proj's rows in the model: z, x, B, C, dt (mamba_ssm's Mamba2).
    row0 = {"z": 0, "x": model.d_inner, "B": 2 * model.d_inner,
            "C": 2 * model.d_inner + model.d_state, "dt": 2 * model.d_inner + 2 * model.d_state}
    parts = [("B", row0["B"], model.d_state), ("C", row0["C"], model.d_state),
             ("dt", row0["dt"], model.nheads)]
    parts += [(f"x{g}", row0["x"] + g * Hg * P, Hg * P) for g in range(groups)]
    parts.append(("z", row0["z"], model.d_inner))
    out, at = [], 0
    for name, r0, rows in parts:
        out.append(Segment(name, r0, rows, at))
        at += -(-rows // cols) * cols
    return out, at


def group_rows_end(segments, groups):
    """Per head group, the padded in_proj row after its last ``x`` row
    (:func:`in_proj_segments`): the rows the jobs before the group's conv1d must cover."""
    by = {s.name: s for s in segments}
    return [by[f"x{g}"].at + by[f"x{g}"].rows for g in range(groups)]


def _pack(layout, value):
    return layout.const(value).as_value().value


def _up(n, align):
    return -(-n // align) * align


class StepPlan:
    """A model laid out for a :class:`hw.decoder.DecoderCore`, and its step programs.

    Parameters
    ----------
    core : hw.decoder.DecoderCore
        The core (its engines' descriptor layouts, record sizes and limits).
    lm : golden.decoder.HardwareLM
        The model in the core's design and pass (``linear_pass``).
    nodes : int
        Tree nodes of a step (``V``), at most ``core.max_nodes``.
    base : int
        Byte address of the plan's first byte in the core's memory.
    node_states : bool
        Keep every node's SSM state in memory, two sets of a buffer a node and layer
        (:meth:`adopt`), so that :meth:`node_program` can run a node from its parent's
        state (a draft's passes one node at a time); without it (the default) only the
        committed banks.

    Raises
    ------
    ValueError
        A model or pass the core cannot run (naming the field), or a layout beyond the
        core's address width.
    """

    def __init__(self, core, lm, *, nodes, base=0, node_states=False):
        if not isinstance(lm, HardwareLM):
            raise TypeError(f"StepPlan.lm must be a golden.decoder.HardwareLM, not {lm!r}")
        m = lm.lm.config
        # The core's stages are built for the model's widths; its layer count is only
        # the programs' (a draft model may have fewer layers).
        if dataclasses.replace(m, n_layer=core.model.n_layer) != core.model:
            raise ValueError(f"StepPlan: the model {m} does not have the widths the core is "
                             f"built for ({core.model}; only n_layer may differ)")
        if not 1 <= nodes <= core.max_nodes:
            raise ValueError(f"StepPlan.nodes must be in [1, {core.max_nodes}] (the core's "
                             f"max_nodes), not {nodes!r}")
        if lm.config.bsfp.group_size is not None:
            raise ValueError("StepPlan: bsfp.group_size must be None (one scale per tensor: "
                             "the linear engine's descriptor has one scale exponent)")
        self.core, self.lm, self.model, self.V, self.base = core, lm, m, nodes, base
        self.node_states = bool(node_states)
        #: Nodes of the step being run (``≤ V``: a drafted tree stopped early is smaller);
        #: :meth:`program` sets it, and the record strides and the readers follow it.
        self.n = nodes
        self.mode = 1 if lm.linear_pass == "draft" else 0
        eng = core.engines
        self.lin = eng["linear"]
        self.cols, self.rows = lm.config.linear.cols, lm.config.linear.rows
        self.rec = self.lin.y_record_bytes
        self.ssm_rec = eng["ssm"].record_bytes
        #: Head groups (``ssm.head_groups``): a layer's SSM work is this many engine passes,
        #: group ``g`` the heads ``g·Hg … (g + 1)·Hg − 1`` with their own input records,
        #: ``y``, parameters and state (its image, :attr:`group_state_bytes`, in turn).
        self.G = lm.config.ssm.head_groups
        self.Hg = m.nheads // self.G
        unit = eng["ssm"].unit.cfg
        if (unit.nheads, unit.headdim) != (self.Hg, m.headdim):
            raise ValueError(f"StepPlan: the core's SSM engine runs {unit.nheads} heads of "
                             f"{unit.headdim} a pass, the plan's model {self.Hg} of "
                             f"{m.headdim} (nheads {m.nheads}, ssm.head_groups {self.G})")
        #: Bytes of one group's state image (the engine's :attr:`~hw.ssm_engine.SSMEngine.state_bytes`).
        self.group_state_bytes = eng["ssm"].state_bytes
        self.layouts = {n: e.desc.payload.shape() for n, e in eng.items()}
        #: Model elements a beat of each engine (``golden.config.Config.stage_lanes``): its
        #: descriptors count beats.
        self.lanes = {n: getattr(e, "lanes", 1) for n, e in eng.items()}
        #: Planes the conv1d engine reads its windows and taps in (its ``window`` field's
        #: parts, ``Config.conv1d_parts``), and the channel each element of such an
        #: array holds.
        self.conv_parts = next(f.parts for f in eng["conv1d"].reads if f.name == "window")
        self.conv_order = conv1d_plane_order(m.conv_dim, lanes=self.lanes["conv1d"],
                                             parts=self.conv_parts)
        self._top = 0
        self.data = bytearray()
        self._weights()
        self._buffers()
        end = self.base + len(self.data)
        if end > 1 << self.lin.addr_width:
            raise ValueError(f"StepPlan: the layout needs {end} bytes, beyond the core's "
                             f"{self.lin.addr_width}-bit addresses")

    # -- layout ---------------------------------------------------------------------------
    def _alloc(self, nbytes, align=ALIGN):
        at = _up(self._top, align)
        self._top = at + nbytes
        if len(self.data) < self._top:
            self.data.extend(bytes(self._top - len(self.data)))
        return self.base + at

    def put(self, addr, payload):
        """Write ``payload`` (bytes) at core address ``addr``."""
        at = addr - self.base
        self.data[at:at + len(payload)] = bytes(payload)

    def get(self, addr, nbytes, data=None):
        """``nbytes`` at core address ``addr`` of ``data`` (default the plan's own bytes;
        any buffer laid out from ``base``)."""
        at = addr - self.base
        return bytes((self.data if data is None else data)[at:at + nbytes])

    def _words(self, values):
        return np.ascontiguousarray(values, np.float32).tobytes()

    def _matrix(self, stored):
        """A matrix's planes in memory: ``(scale, [(job, nibble addr, residue addr)])``."""
        c = self.lm.config.linear
        # The layout of the engine as built (its streams' word, its weight ports).
        layout = dict(rows=c.rows, cols=c.cols, max_k=c.max_k,
                      word_bits=self.lin.weight_stream.word_width, ports=self.lin.weight_ports,
                      split=c.split_tiles, weight_beats=c.weight_beats)
        nib, res, jobs = pack_matrix(stored, **layout)
        n_at, r_at = self._alloc(len(nib), PLANE_ALIGN), self._alloc(len(res), PLANE_ALIGN)
        self.put(n_at, nib)
        self.put(r_at, res)
        for j in jobs:
            if j.k0 or j.n_k != stored.shape[1]:
                raise ValueError(f"StepPlan: a matrix of {stored.shape[1]} inputs exceeds "
                                 f"linear.max_k ({c.max_k})")
        d_offs = [0] * len(jobs)
        d_at = 0
        if c.draft_plane:
            # The draft plane (linear.draft_plane): the draft passes' weights, striped.
            draft, d_offs = pack_matrix_draft(stored, **layout)
            d_at = self._alloc(len(draft), PLANE_ALIGN)
            self.put(d_at, draft)
        return [(j, n_at + j.nibble_offset, r_at + j.residue_offset, d_at + d)
                for j, d in zip(jobs, d_offs)]

    def _weights(self):
        m, lm = self.model, self.lm
        self.segments, padded = in_proj_segments(m, self.cols, self.G)
        self._seg = {s.name: s for s in self.segments}
        # A head group's SSM record: B, C, its x and dt (hw.ssm_engine).
        N, HgP = m.d_state, self.Hg * m.headdim
        self._rec_off = {"B": 0, "C": 4 * N, "x": 8 * N, "dt": 8 * N + 4 * HgP}
        self.layers = []
        for i in range(m.n_layer):
            p = f"backbone.layers.{i}.mixer."
            t_in = lm.encoded[p + "in_proj.weight"]
            stored = np.zeros((padded, m.d_model), np.uint16)
            for s in self.segments:
                stored[s.at:s.at + s.rows] = t_in.stored[s.row0:s.row0 + s.rows]
            t_out = lm.encoded[p + "out_proj.weight"]
            prm = lm.parameters(i)
            L = {"in_k": int(t_in.scales), "in_jobs": self._matrix(stored),
                 "out_k": int(t_out.scales), "out_jobs": self._matrix(t_out.stored)}
            for name in ("norm", "gate", "conv_b"):
                L[name] = self._alloc(4 * prm[name].size)
                self.put(L[name], self._words(prm[name]))
            # A channel's taps are one element of the conv1d engine (d_conv words), in its
            # planes' order (conv1d_plane_order).
            L["conv_w"] = self._alloc(4 * prm["conv_w"].size)
            self.put(L["conv_w"], self._words(prm["conv_w"][self.conv_order]))
            # Per head group its A, dt_bias and D (the engine's parameter block a pass).
            L["ssm_params"] = self._alloc(12 * m.nheads)
            self.put(L["ssm_params"], self._words(np.concatenate(
                [prm[k][g * self.Hg:(g + 1) * self.Hg] for g in range(self.G)
                 for k in ("A", "dt_bias", "D")])))
            self.layers.append(L)
        head = lm.encoded[lm.head_tensor]
        self.head_k, self.head_jobs = int(head.scales), self._matrix(head.stored)
        self.norm_f = self._alloc(4 * m.d_model)
        self.put(self.norm_f, self._words(lm.norm_f))
        # The embedding, row-major binary32 (the rows HardwareLM.embed gives: the FP16
        # words the BSFP planes encode), for the copy engine's gather.
        self.emb_row = 4 * m.d_model
        self.emb = self._alloc(m.vocab * self.emb_row)
        self.put(self.emb, self._words(np.stack([lm.embed(t) for t in range(m.vocab)])))

    def _buffers(self):
        m, V, eng = self.model, self.V, self.core.engines
        from specgen.hw.decoder import window_bytes
        self.wb = window_bytes(m)
        self.h_stride = _up(4 * m.d_model, ALIGN)
        self.h = self._alloc(V * self.h_stride)
        self.xn_stride = _up(2 * m.d_model, ALIGN)
        self.xn = self._alloc(V * self.xn_stride)
        self.g_stride = _up(2 * m.d_inner, ALIGN)
        self.g = self._alloc(V * self.g_stride)

        def records(jobs):
            groups = sum(-(-j[0].n_rows // self.cols) for j in jobs)
            return self._alloc(groups * V * self.rec)
        self.zx = records(self.layers[0]["in_jobs"])
        self.o = records(self.layers[0]["out_jobs"])
        self.logits = records(self.head_jobs)
        self.y = self._alloc(V * 4 * m.d_inner)
        self.am = self._alloc(8 * V)
        # The tree table (golden.tree.tree_entries) and the accepted path the acceptance
        # engine writes (golden.tree.greedy_acceptance): one 64-bit word a node each.
        self.tree = self._alloc(8 * V)
        self.path = self._alloc(8 * V)
        ssm = eng["ssm"]
        win = m.conv_dim * self.wb
        for L in self.layers:
            # Slot 0: the committed window; slot 1 + v: node v's.
            L["win"] = [self._alloc(win) for _ in range(V + 1)]
            # Every layer keeps its nodes' SSM input records: the commit pass replays the
            # accepted path from them.
            # (A head group's records, V of them, after the group before's.)
            L["ssm_in"] = self._alloc(self.G * V * self.ssm_rec)
            # Two state banks: a commit pass reads the committed one and writes the other,
            # so a pass cut by a reset leaves the committed state whole (rerun it).
            st = self.G * ssm.state_bytes
            L["state"] = [self._alloc(st), self._alloc(st)]
            if self.node_states:
                # Node v's state after its own token (node_program writes it; its
                # children's passes read it), in two sets: a state adopted as the
                # committed one (adopt) stays whole while the next step's node programs
                # write the other set.
                L["node_state"] = [[self._alloc(st) for _ in range(V)] for _ in range(2)]
        #: The committed bank (:meth:`flip` after a commit pass is done).
        self.bank = 0
        #: The set node programs write (:meth:`adopt` switches it).
        self.node_set = 0
        #: ``(set, node)`` whose stored state is the committed one, or None (the bank's).
        self.adopted = None

    # -- inputs -----------------------------------------------------------------------------
    def write_state(self, state):
        """The committed state (:class:`golden.lm.LMState`) into every layer's window slot 0
        (channel-major, a channel's ``d_conv − 1`` words oldest first in its element) and
        its SSM state (the engine's tile order, striped over its state ports)."""
        m = self.model
        self.adopted = None
        for L, conv, ssm in zip(self.layers, state.conv, state.ssm):
            w = np.zeros((m.conv_dim, self.wb // 4), np.float32)
            w[:, :m.d_conv - 1] = np.asarray(conv, np.float32).T
            self.put(L["win"][0], w[self.conv_order].tobytes())
            # The design's SSM unit (its state ports: the stripes), not the model's
            # geometry-only copy of it (HardwareLM.ssm has one state port).
            self.put(L["state"][self.bank], self._state_image(ssm))

    def _state_image(self, ssm):
        """A layer's SSM state (``(nheads, headdim, d_state)``) as the core holds it: each
        head group's image in the engine's tile order, striped over its state ports
        (:func:`golden.memory_map.state_image` of one pass's unit), group after group."""
        cfg = self.lm.config.ssm.pass_config
        ssm = np.asarray(ssm, np.float32)
        return b"".join(np.ascontiguousarray(
            state_image(cfg, ssm[g * self.Hg:(g + 1) * self.Hg]), np.float32).tobytes()
            for g in range(self.G))

    def table(self, parents):
        """``[(node, entry fields, src)]`` of the SSM engine's node table for ``parents``."""
        c = self.lm.config.tree
        return [(v, {"root": r, "parent_slot": ps, "write_slot": ws}, v)
                for v, (r, ps, ws) in enumerate(node_table(parents, fifo_depth=c.fifo_depth))]

    # -- the program --------------------------------------------------------------------------
    def _rec(self, engine, desc, wait=()):
        from specgen.hw.sequencer import OP_DISPATCH, encode_record
        core = self.core
        return encode_record(core.record_bits, op=OP_DISPATCH, engine=core.index(engine),
                             wait=[core.index(w) for w in wait],
                             payload=_pack(self.layouts[engine], desc))

    def _in_place(self, name, records, row0, n, v, lanes=1):
        """Operand ``name`` reading rows ``row0 … row0 + n − 1`` of node ``v`` from linear
        results at ``records``, ``lanes`` rows a beat (which divides ``cols`` and ``n``:
        ``golden.config.VectorConfig``): from the start of a record (``row0`` a multiple of
        ``cols``), or a slice of one record (a head group's ``dt``)."""
        skip = row0 % self.cols
        if skip:
            if skip + n > self.cols or skip % lanes:
                raise ValueError(f"StepPlan: rows {row0} … {row0 + n - 1} of a linear job's "
                                 f"results cross a record of {self.cols} rows (linear.cols) "
                                 f"or start off a beat of {lanes}: head groups "
                                 f"(ssm.head_groups) whose dt does not fit a record")
            return {f"{name}_addr": records + (row0 // self.cols * self.n + v) * self.rec
                    + 4 * skip, f"{name}_vstride": self.rec, f"{name}_cstride": 0,
                    f"{name}_chunk": n // lanes, f"{name}_chunks": 1,
                    f"{name}_tail": n // lanes}
        chunks = -(-n // self.cols)
        return {f"{name}_addr": records + (row0 // self.cols * self.n + v) * self.rec,
                f"{name}_vstride": self.rec, f"{name}_cstride": self.n * self.rec,
                f"{name}_chunk": self.cols // lanes, f"{name}_chunks": chunks,
                f"{name}_tail": (n - (chunks - 1) * self.cols) // lanes}

    @staticmethod
    def _vector(name, addr, n, vstride, lanes=1):
        return {f"{name}_addr": addr, f"{name}_vstride": vstride, f"{name}_cstride": 0,
                f"{name}_chunk": n // lanes, f"{name}_chunks": 1, f"{name}_tail": 0}

    def _norm(self, src, w, n, out, out_stride):
        """The pre-norm (or final norm) of every node's ``h`` at ``src``."""
        L = self.lanes["norm"]
        return {"vectors": self.n, "elements": n // L, **self._vector("y", *src, lanes=L),
                **self._vector("w", w, n, 0, L), "out_addr": out, "out_vstride": out_stride}

    def _jobs(self, jobs, k, x, x_stride, y, wait):
        out = []
        for i, (j, n_at, r_at, d_at) in enumerate(jobs):
            desc = {"mode": self.mode, "steps": j.n_k, "n_rows": j.n_rows, "n_tokens": self.n,
                    "k": k, "nibble_addr": n_at, "residue_addr": r_at, "x_addr": x,
                    "x_stride": x_stride, "y_addr": y + j.row0 // self.cols * self.n * self.rec}
            if self.lm.config.linear.draft_plane:
                desc["draft_addr"] = d_at
            out.append(self._rec("linear", desc, wait if i == 0 else ()))
        return out

    def program(self, parents, tokens, *, accept=True):
        """The records of one step over the tree ``parents`` (BFS order; at most ``V``
        nodes, the step's :attr:`n`) whose nodes hold ``tokens``: ``(bytes, record
        count)``; the last record is ``END``. With ``accept`` the step ends with the
        greedy acceptance of the tree (the host writes :meth:`tree_table` first and reads
        :meth:`path_of` after); without it (a draft pass), with the argmax."""
        p = validate_parents(parents)
        if p.size > self.V:
            raise ValueError(f"StepPlan.program: {p.size} nodes, the plan holds at most {self.V}")
        tokens = [int(t) for t in tokens]
        if len(tokens) != p.size or any(not 0 <= t < self.model.vocab for t in tokens):
            raise ValueError(f"StepPlan.program: tokens must be {p.size} ids in "
                             f"[0, {self.model.vocab}) (one a node), not {tokens!r}")
        return self._program(p, tokens, accept=accept, ids=range(p.size), parent=None)

    def node_program(self, v, parent, token, *, beside=None, before=None):
        """The records of a pass over node ``v`` alone (a draft's pass one node at a time:
        ``docs/decoder.md``), holding ``token``, from the state its parent ``parent`` left:
        the committed state and window (``parent`` is ``ROOT``) or the parent's own, which
        its node program wrote. It writes node ``v``'s window, SSM input record and state
        (its buffer of ``node_states``) where a tree program over the step would, and its
        logits and argmax as node 0 of a 1-node step (:meth:`logits_of` ``(data, 0)``).
        The host writes :meth:`node_table` first. ``(bytes, record count)``.

        ``beside``: another plan's commit (:meth:`commit_parts`: its records a layer and
        its node table) to run in the same program. Layer ``i``'s records go right after
        this pass's gated norm of layer ``i`` (the rest after the last layer's), so that
        commit's SSM replay of the layer runs while the linear engine works on this
        pass's out_proj and next in_proj: the linear and SSM engines overlap
        (``PERF_OVERLAP``). The commit's table is the program's: its first entry, the
        path's root, is this pass's node (the pass reads its record through its own
        ``input_addr``), so the host writes the commit's table instead of
        :meth:`node_table`. The two plans share no memory; the program ends when both
        are done.

        ``before``: the token of a node that runs first, in slot ``v − 1``, as node
        ``v``'s parent, from ``parent``'s state (a draft's path that ended on a node no
        pass ran carries it into the next step: its token rides in the root's pass). The
        pass is then a chain of two nodes; it keeps node ``v``'s state alone, and its
        logits are node 1's of a 2-node step (:meth:`logits_of` ``(data, 1)``); the host
        writes :meth:`node_table` ``(2)``. It cannot run ``beside`` a commit (their
        second table entries would differ)."""
        if not self.node_states:
            raise ValueError("StepPlan.node_program needs a plan made with node_states=True")
        v, parent = int(v), int(parent)
        first = v if before is None else v - 1
        if not 0 <= first <= v < self.V or not (parent == ROOT or 0 <= parent < self.V) \
                or parent in (v, first):
            carried = "" if before is None else f" (with the node before it in slot {v - 1})"
            raise ValueError(f"StepPlan.node_program: node {v}{carried} and parent {parent} "
                             f"must be distinct nodes in [0, {self.V}) (the parent may be ROOT)")
        chain = [token] if before is None else [before, token]
        if any(not 0 <= int(t) < self.model.vocab for t in chain):
            raise ValueError(f"StepPlan.node_program: token and before must be in "
                             f"[0, {self.model.vocab}), not {chain!r}")
        if before is not None and beside is not None:
            raise ValueError("StepPlan.node_program: a pass with a node before it cannot run "
                             "beside a commit")
        if beside is not None:
            layers, table = beside
            if [(j, src) for j, _, src in table[:1]] != [(0, 0)] or \
                    not table[0][1]["root"]:
                raise ValueError("StepPlan.node_program: beside must be a commit's "
                                 "(records a layer, table) whose first entry is the root "
                                 "reading record 0 (StepPlan.commit_parts)")
        return self._program(np.array([ROOT, 0][:len(chain)]), [int(t) for t in chain],
                             accept=False, ids=list(range(first, v + 1)), parent=parent,
                             beside=None if beside is None else beside[0])

    def node_table(self, nodes=1):
        """The SSM engine's node table of :meth:`node_program` (any node): one root entry,
        reading record 0 of the pass's ``input_addr``, which is the node's own record; with
        ``nodes`` 2 (a carried node ``before``), a chain of two, records 0 and 1."""
        return self.table([ROOT] + list(range(check_int("StepPlan", "nodes", nodes,
                                                        min=1, max=2) - 1)))

    def _program(self, p, tokens, *, accept, ids, parent, beside=None):
        """The records of a pass over the nodes ``ids`` (consecutive, one per entry of the
        tree ``p``), each node's window, input record and (with ``parent``) state in its
        own slot. ``parent`` is None for a tree pass from the committed state, or the node
        whose state and window a 1-node pass starts from (``ROOT``: the committed ones).
        ``beside``: another plan's records a layer, interleaved (:meth:`node_program`)."""
        beside = list(beside or ())
        self.n = V = p.size
        ids = [int(i) for i in ids]
        m = self.model
        seg, rec_off = self._seg, self._rec_off
        G, Hg, P = self.G, self.Hg, m.headdim
        lc, lr = self.lanes["copy"], self.lanes["residual"]
        # Every node's embedding row into h: a gather, one copy a node.
        recs = [self._rec("copy", {
            "vectors": 1, "elements": m.d_model // lc,
            **self._vector("x", self.emb + t * self.emb_row, m.d_model, 0, lc),
            "y_addr": self.h + v * self.h_stride, "y_vstride": 0}) for v, t in enumerate(tokens)]
        for i, L in enumerate(self.layers):
            recs.append(self._rec("norm", self._norm(
                (self.h, m.d_model, self.h_stride), L["norm"], m.d_model, self.xn,
                self.xn_stride), ("residual",) if i else ("copy",)))
            jobs, issued = L["in_jobs"], 0
            for g, end in enumerate(group_rows_end(self.segments, G)):
                # in_proj's jobs up to the one holding group g's last x row; group g's
                # stages wait for them, and its SSM pass runs while the linear engine
                # computes the next group's rows (SpecMamba's per-head hand-over).
                need = next(k for k, (j, *_) in enumerate(jobs)
                            if j.row0 + j.n_rows >= end) + 1
                fresh = need > issued
                if fresh:
                    recs += self._jobs(jobs[issued:need], L["in_k"], self.xn, self.xn_stride,
                                       self.zx, ("norm",) if issued == 0 else ())
                    issued = need
                base = L["ssm_in"] + (g * self.V + ids[0]) * self.ssm_rec
                recs += self._conv(L, g, p, ids, parent, base,
                                   first_wait=("linear",) if fresh else ())
                if g:
                    # B and C, which group 0's conv1d computed, into this group's records:
                    # a copy moves 8 bytes an element where the conv1d moves 60 (window,
                    # taps, bias), and every earlier record's work is done (group 0's SSM
                    # pass waited for its conv1d).
                    first = L["ssm_in"] + ids[0] * self.ssm_rec
                    recs.append(self._rec("copy", {
                        "vectors": V, "elements": 2 * m.d_state // lc,
                        **self._vector("x", first + rec_off["B"], 2 * m.d_state, self.ssm_rec,
                                       lc),
                        "y_addr": base + rec_off["B"], "y_vstride": self.ssm_rec}))
                recs.append(self._rec("copy", {
                    "vectors": V, "elements": Hg // lc,
                    **self._in_place("x", self.zx, seg["dt"].at + g * Hg, Hg, 0, lc),
                    "y_addr": base + rec_off["dt"], "y_vstride": self.ssm_rec},
                    ("linear",) if fresh else ()))
                if parent is None:
                    ssm = self._ssm(L, V, y_en=1, g=g)
                else:
                    # The pass starts from the parent's state and keeps the node's own; it
                    # reads the node's record as record 0 of its table.
                    off = g * self.group_state_bytes
                    ssm = {**self._ssm(L, V, y_en=1, out_node=V - 1, g=g), "input_addr": base,
                           "state_in_addr": off + (self.committed_state(L) if parent == ROOT
                                                   else L["node_state"][self.node_set][parent]),
                           "state_out_addr": off + L["node_state"][self.node_set][ids[-1]]}
                recs.append(self._rec("ssm", ssm, ("conv1d", "copy")))
            # The rest of in_proj (z), beside the last group's SSM pass.
            recs += self._jobs(jobs[issued:], L["in_k"], self.xn, self.xn_stride, self.zx, ())
            # The gated norm reads y group by group (a chunk each) and z in place.
            Ln, yg = self.lanes["gate_norm"], Hg * P
            gate = {"vectors": V, "elements": m.d_inner // Ln,
                    "y_addr": self.y, "y_vstride": 4 * yg, "y_cstride": 4 * self.V * yg,
                    "y_chunk": yg // Ln, "y_chunks": G, "y_tail": yg // Ln,
                    **self._vector("w", L["gate"], m.d_inner, 0, Ln),
                    **self._in_place("z", self.zx, seg["z"].at, m.d_inner, 0, Ln),
                    "out_addr": self.g, "out_vstride": self.g_stride}
            recs.append(self._rec("gate_norm", gate, ("ssm", "linear")))
            # Another plan's layer, once this layer's SSM pass is done (the gated norm
            # waited for it): its SSM pass runs beside this pass's linear jobs.
            if i < len(beside):
                recs += beside[i]
            if i == len(self.layers) - 1:
                recs += [r for layer in beside[i + 1:] for r in layer]
            recs += self._jobs(L["out_jobs"], L["out_k"], self.g, self.g_stride, self.o,
                               ("gate_norm",))
            recs.append(self._rec("residual", {
                "vectors": V, "elements": m.d_model // lr,
                **self._vector("h", self.h, m.d_model, self.h_stride, lr),
                **self._in_place("d", self.o, 0, m.d_model, 0, lr),
                "out_addr": self.h, "out_vstride": self.h_stride}, ("linear",)))
        recs.append(self._rec("norm", self._norm(
            (self.h, m.d_model, self.h_stride), self.norm_f, m.d_model, self.xn,
            self.xn_stride), ("residual",)))
        recs += self._jobs(self.head_jobs, self.head_k, self.xn, self.xn_stride, self.logits,
                           ("norm",))
        la = self.lanes["argmax"]
        recs.append(self._rec("argmax", {
            "vectors": V, "elements": m.vocab // la,
            **self._in_place("logits", self.logits, 0, m.vocab, 0, la),
            "result_addr": self.am, "result_vstride": 8}, ("linear",)))
        if not accept:
            return self._end(recs, ("argmax",) + (("ssm", "copy") if beside else ()),
                             "program")
        recs.append(self._rec("accept", {
            "vectors": 1, "elements": V, **self._vector("node", self.tree, V, 0),
            **self._vector("best", self.am, V, 0), "path_addr": self.path,
            "path_vstride": 0}, ("argmax",)))
        return self._end(recs, ("accept",), "program")

    def tree_table(self, parents, tokens):
        """``(address, bytes)`` of the tree table the acceptance engine reads
        (:func:`golden.tree.tree_entries`), for the host to write before the step."""
        return self.tree, tree_entries(parents, tokens).astype("<u8").tobytes()

    def path_of(self, data):
        """The accepted path the acceptance engine wrote in ``data``: ``(nodes, tokens)``,
        root first, ``tokens`` the target's argmax at each (the step's committed tokens)."""
        words = np.frombuffer(self.get(self.path, 8 * self.n, data), "<u8")
        fields = {name: (lo, bits) for name, lo, bits in PATH_ENTRY_FIELDS}

        def f(w, name):
            lo, bits = fields[name]
            return (int(w) >> lo) & ((1 << bits) - 1)
        on = [w for w in words if f(w, "on_path")]
        return [f(w, "node") for w in on], [f(w, "token") for w in on]

    def _ssm(self, L, nodes, *, y_en, out_node=None, g=0):
        """An SSM engine pass of layer ``L``'s head group ``g`` over ``nodes`` table
        entries: a tree pass (``y`` of every node, no state) or a commit pass
        (``out_node``'s state into the other bank, no ``y``)."""
        off, Hg = g * self.group_state_bytes, self.Hg
        return {"nodes": nodes, "out_node": out_node or 0, "out_en": int(out_node is not None),
                "y_en": y_en, "load_params": 1, "params_addr": L["ssm_params"] + 12 * g * Hg,
                "input_addr": L["ssm_in"] + g * self.V * self.ssm_rec,
                "state_in_addr": self.committed_state(L) + off,
                "state_out_addr": L["state"][1 - self.bank] + off,
                "y_addr": self.y + 4 * g * self.V * Hg * self.model.headdim}

    def _conv(self, L, g, p, ids, parent, base, first_wait):
        """The conv1d records of head group ``g`` of a pass over the nodes ``ids``: per
        node its ``x`` channels of the group, and for group 0 ``B`` and ``C`` (every
        group's SSM record holds them: :meth:`_program` copies them into a later group's),
        each reading the window its parent wrote (the committed one for a root) and
        writing the node's record at ``base`` (record ``v`` of the group's) and its own
        window. The first waits ``first_wait``; the first node of every tree depth waits
        for the conv1d engine to drain, so a parent's window is in memory before its
        children read it."""
        m, out, lanes = self.model, [], self.lanes["conv1d"]
        seg, rec_off, depth = self._seg, self._rec_off, tree_depths(p)
        # Window channels (xBC, the model's order) of x and of B and C.
        chan = {"x": 0, "B": m.d_inner, "C": m.d_inner + m.d_state}
        for v in range(p.size):
            if p[v] != ROOT:
                src = L["win"][1 + ids[int(p[v])]]
            elif parent is None:
                src = L["win"][0]
            else:
                src = L["win"][0 if parent == ROOT else 1 + parent]
            for n_seg, name in enumerate(("x", "B", "C") if g == 0 else ("x",)):
                s = seg[f"x{g}" if name == "x" else name]
                c0 = chan[name] + (g * self.Hg * m.headdim if name == "x" else 0)
                desc = {"vectors": 1, "elements": s.rows // lanes,
                        **self._planes("window", src, c0, self.wb, s.rows, lanes),
                        **self._in_place("x", self.zx, s.at, s.rows, v, lanes),
                        **self._planes("taps", L["conv_w"], c0, 4 * m.d_conv, s.rows, lanes),
                        **self._vector("bias", L["conv_b"] + 4 * c0, s.rows, 0, lanes),
                        "y_addr": base + v * self.ssm_rec + rec_off[name], "y_vstride": 0,
                        **self._planes("new_window", L["win"][1 + ids[v]], c0, self.wb)}
                wait = ()
                if v == 0 and n_seg == 0:
                    wait = first_wait
                elif n_seg == 0 and depth[v] != depth[v - 1]:
                    wait = ("conv1d",)
                out.append(self._rec("conv1d", desc, wait))
        return out

    def _planes(self, name, base, c0, nbytes, rows=None, lanes=1):
        """The descriptor fields of the conv1d's operand (``rows`` given) or result ``name``
        for channels from ``c0`` of an array of ``conv_dim`` channels (``nbytes`` each) at
        ``base``, in its planes (:func:`hw.stream_engine.conv1d_plane_order`): the segment
        starts at element ``c0 / P`` of each, the planes ``conv_dim / P`` elements apart."""
        P, n = self.conv_parts, self.model.conv_dim
        at = base + c0 // P * nbytes
        out = (self._vector(name, at, rows, 0, lanes) if rows is not None else
               {f"{name}_addr": at, f"{name}_vstride": 0})
        if P > 1:
            out[f"{name}_pstride"] = n // P * nbytes
        return out

    def _windows(self, raw):
        """Windows (binary32, ``(d_conv − 1, conv_dim)``) from a slot's bytes ``raw`` in the
        conv1d engine's plane order."""
        m = self.model
        w = np.empty((m.conv_dim, self.wb // 4), np.float32)
        w[self.conv_order] = np.frombuffer(raw, np.float32).reshape(m.conv_dim, self.wb // 4)
        return w[:, :m.d_conv - 1].T.copy()

    def committed_state(self, L):
        """Layer ``L``'s committed SSM state: its bank, or the node state :meth:`adopt`
        made the committed one."""
        if self.adopted is None:
            return L["state"][self.bank]
        s, v = self.adopted
        return L["node_state"][s][v]

    def _end(self, recs, last, what):
        from specgen.hw.sequencer import OP_END, encode_record
        recs.append(encode_record(self.core.record_bits, op=OP_END,
                                  wait=[self.core.index(w) for w in last]))
        if len(recs) > self.core.max_records:
            raise ValueError(f"StepPlan.{what}: {len(recs)} records, the core's max_records "
                             f"is {self.core.max_records}")
        return b"".join(recs), len(recs)

    def commit_table(self, path, *, nodes=None):
        """The node table of the commit pass over ``path`` (node indices, root first): a
        chain whose ``j``-th entry reads the ``j``-th path node's input record. ``nodes``:
        as :meth:`commit_program`."""
        path = self._check_path(path, nodes)
        return [(j, entry, int(path[j])) for j, entry, _ in
                self.table([ROOT] + list(range(len(path) - 1)))]

    def _check_path(self, path, nodes=None):
        n = self.n if nodes is None else int(nodes)
        if not 1 <= n <= self.V:
            raise ValueError(f"StepPlan: a step's nodes must be in [1, {self.V}], not {nodes!r}")
        path = [int(v) for v in path]
        if not path or path[0] != 0 or any(not 0 <= v < n for v in path):
            raise ValueError(f"StepPlan: a commit path must start at the root (node 0) and "
                             f"name nodes of the step in [0, {n}), not {path!r}")
        return path

    def commit_program(self, path, *, nodes=None):
        """The records of the commit after a step whose accepted path is ``path`` (node
        indices from the root, each the parent of the next): per layer the SSM replay of
        the path from the committed bank into the other one, and the copy of the path's
        last window into the layer's slot 0. After it is done, :meth:`flip` the banks.

        Both parts are idempotent (the replay reads the committed bank and the path's
        records; the copy reads the last node's slot), so a commit cut by a reset is rerun
        as it is. ``nodes``: the step's nodes (default the last program's; after
        :meth:`node_program` passes, the drafted tree's). ``(bytes, record count)``; the
        last record is ``END``."""
        layers, _ = self.commit_parts(path, nodes=nodes)
        return self._end([r for layer in layers for r in layer], ("ssm", "copy"),
                         "commit_program")

    def commit_parts(self, path, *, nodes=None):
        """The commit of :meth:`commit_program` in parts: ``(records, table)``, the records
        a layer (its SSM replay and its window copy) and the node table
        (:meth:`commit_table`), for :meth:`node_program`'s ``beside``."""
        path = self._check_path(path, nodes)
        layers = [[self._rec("ssm", self._ssm(L, len(path), y_en=0, out_node=len(path) - 1,
                                              g=g)) for g in range(self.G)]
                  + [self._window_copy(L, path[-1])] for L in self.layers]
        return layers, self.commit_table(path, nodes=nodes)

    def _window_copy(self, L, v):
        """The copy of node ``v``'s conv window of layer ``L`` into the committed slot."""
        win, lc = self.model.conv_dim * self.wb // 4, self.lanes["copy"]
        return self._rec("copy", {"vectors": 1, "elements": win // lc,
                                  **self._vector("x", L["win"][1 + v], win, 0, lc),
                                  "y_addr": L["win"][0], "y_vstride": 0})

    def window_program(self, v):
        """The records of a commit that needs no replay (a draft whose path's last node
        ``v`` ran a :meth:`node_program`, which stored its state): per layer the copy of
        ``v``'s window into the committed slot. After it is done, :meth:`adopt` ``(v)``.
        Idempotent (it reads ``v``'s slot). ``(bytes, record count)``."""
        if not self.node_states:
            raise ValueError("StepPlan.window_program needs a plan made with node_states=True")
        v = int(v)
        if not 0 <= v < self.V:
            raise ValueError(f"StepPlan.window_program: node {v} must be in [0, {self.V})")
        return self._end([self._window_copy(L, v) for L in self.layers], ("copy",),
                         "window_program")

    def adopt(self, v):
        """The commit of :meth:`window_program` is done: node ``v``'s stored state (its
        node program's, in the set they write) is the committed one, which the next
        step's root pass and commits read; node programs write the other set from now on,
        so the adopted state stays whole while they run."""
        if not self.node_states:
            raise ValueError("StepPlan.adopt needs a plan made with node_states=True")
        self.adopted = (self.node_set, int(v))
        self.node_set ^= 1

    def flip(self):
        """The commit pass is done: the bank it wrote is the committed one."""
        self.bank ^= 1
        self.adopted = None

    # -- results ------------------------------------------------------------------------------
    def logits_of(self, data, v):
        """Node ``v``'s logits (``uint32`` words) from a memory image ``data``."""
        out = np.empty(self.model.vocab, np.uint32)
        for r in range(self.model.vocab):
            at = self.logits + ((r // self.cols) * self.n + v) * self.rec + 4 * (r % self.cols)
            out[r] = np.frombuffer(self.get(at, 4, data), "<u4")[0]
        return out

    def argmax_of(self, data, v):
        """Node ``v``'s argmax beat from ``data``: ``(index, value word, nan)``."""
        from specgen.hw.argmax import argmax_out_layout
        lay = argmax_out_layout(self.model.vocab)
        word = int.from_bytes(self.get(self.am + 8 * v, 8, data), "little")

        def f(name):
            return (word >> lay[name].offset) & ((1 << lay[name].width) - 1)
        return f("index"), f("value"), f("nan")

    def window_of(self, data, layer, v):
        """Node ``v``'s new conv window of ``layer`` (binary32, ``(d_conv − 1, conv_dim)``)."""
        return self._windows(self.get(self.layers[layer]["win"][1 + v],
                                      self.model.conv_dim * self.wb, data))

    def committed_of(self, data, layer):
        """Layer ``layer``'s committed state in ``data``: ``(conv window, SSM state)``, the
        window as :meth:`window_of` (slot 0) and the SSM state in the model's
        ``(nheads, headdim, d_state)`` shape (the committed bank, unstriped)."""
        m, ssm = self.model, self.lm.config.ssm
        L = self.layers[layer]
        w = self._windows(self.get(L["win"][0], m.conv_dim * self.wb, data))
        gb = self.group_state_bytes
        groups = []
        for g in range(self.G):
            words = np.frombuffer(self.get(self.committed_state(L) + g * gb, gb, data),
                                  np.float32)
            groups.append(from_tile_order(ssm.pass_config, unstripe_state(
                words, lanes=ssm.lanes, ports=ssm.state_ports)))
        return w, np.concatenate(groups).copy()
