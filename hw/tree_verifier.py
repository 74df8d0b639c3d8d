"""``TreeVerifier``: SpecMamba's FIFO tree-verification scheduler
(arXiv 2509.19873; ``docs/tree.md``).

It loads a breadth-first flattened draft tree (one parent index per node),
drives the FIFO schedule of :func:`golden.tree.fifo_schedule` for every layer
pass with a :class:`hw.ring_fifo.RingFIFO` of live state slots, then takes the
target's per-node match bits and reports the greedy accepted path
(:func:`golden.tree.accepted_path`). The beat stream it emits is exactly
:func:`golden.tree.schedule_beats`.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.hdl import ResetInserter
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from specgen.golden.config import Config
from specgen.golden.validate import check_int
from specgen.hw.bits import OneHot, index_width
from specgen.hw.ring_fifo import RingFIFO

__all__ = ["TreeVerifier"]


class TreeVerifier(wiring.Component):
    """FIFO tree-verification scheduler and greedy acceptance.

    Parameters
    ----------
    max_nodes : int
        Largest tree, root included (≥ 2).
    fifo_depth : int
        Live state slots in the ring (≥ 1).
    max_passes : int
        Largest value of :attr:`passes` (≥ 1); default 64, the layers of Mamba2-2.7B.

    Attributes
    ----------
    tree : In(stream.Signature({"parent": node_bits, "last": 1}))
        The flattened tree, one beat per node in BFS order, ``last`` on the
        final node. Node 0's ``parent`` is ignored (it is the root). Accepted
        (``ready`` high) only while idle or loading.
    passes : In(range(max_passes + 1))
        Layer passes to schedule, sampled with the ``tree`` beat carrying
        ``last``; 0 counts as 1.
    schedule : Out(stream.Signature(...))
        One beat per cycle while scheduling (``valid`` does not depend on
        ``ready``). Fields: ``node_valid`` (0 for a release-only beat),
        ``node``, ``root`` (node reads the committed state), ``parent_slot``
        (slot read when not ``root``), ``write_slot`` (slot node writes:
        ``node mod fifo_depth``), ``release`` and ``release_slot`` (a slot
        freed after this node; its state may be overwritten from the next
        beat on), ``last`` (the node ending the layer pass: every slot still
        live is released after it, and the next beat starts the next pass).
    match : In(stream.Signature({"match": 1, "last": 1}))
        Per-node match bits in BFS order (bit of node 0 ignored), ``last`` on
        the final node; accepted once every pass is scheduled.
    path : Out(stream.Signature({"node": node_bits, "tokens": node_bits + 1, "last": 1}))
        The accepted path, root first, ``last`` on the deepest accepted node.
        ``tokens`` = nodes on the path = accepted draft tokens + 1 bonus token.
    peak_level : Out(range(fifo_depth + 1))
        Most slots live at once (the node being written included) in the
        current tree; cleared by a new tree's first beat.
    busy : Out(1)
        A tree is loading, being scheduled or verified, or its path is being sent.
    error : Out(1)
        Sticky until the next tree's first beat: the tree needed more than
        ``fifo_depth`` live slots, had more than ``max_nodes`` nodes, or
        broke BFS order (a parent not below its node, or parents decreasing).
        Scheduling stops at the node that does not fit (nothing of it is
        emitted) or is skipped for a bad tree; match bits are still taken and
        the path still reported, so nothing deadlocks.

    Notes
    -----
    Timing: the first schedule beat is valid two cycles after the ``tree``
    beat with ``last`` (:attr:`latency` = 2: each beat's checks are registered,
    and a CHECK cycle decides between scheduling and skipping). A node beat is
    emitted every cycle; a release-only beat is inserted before node ``i + 1``
    for every slot after the first that dies after node ``i``, so a pass of ``N``
    nodes takes ``N`` + (extra releases) cycles without back-pressure; the
    last node's beat flushes the ring, so the end of a pass costs no cycles.
    The path's first beat is valid ``depth + 4`` cycles after the ``match``
    beat with ``last`` (``depth`` of the deepest accepted node: its acceptance
    is registered a cycle after its beat, then a walk from it up to the root
    stores the path root first).
    """

    def __init__(self, *, max_nodes, fifo_depth, max_passes=64):
        self._max_nodes = check_int("TreeVerifier", "max_nodes", max_nodes, min=2)
        self._fifo_depth = check_int("TreeVerifier", "fifo_depth", fifo_depth, min=1)
        self._max_passes = check_int("TreeVerifier", "max_passes", max_passes, min=1)
        nb = index_width(self._max_nodes)
        sb = index_width(self._fifo_depth)
        self._nb, self._sb = nb, sb
        self.schedule_layout = data.StructLayout({
            "node_valid": 1, "node": nb, "root": 1, "parent_slot": sb, "write_slot": sb,
            "release": 1, "release_slot": sb, "last": 1,
        })
        super().__init__({
            "tree": In(stream.Signature(data.StructLayout({"parent": nb, "last": 1}))),
            "passes": In(range(self._max_passes + 1)),
            "schedule": Out(stream.Signature(self.schedule_layout)),
            "match": In(stream.Signature(data.StructLayout({"match": 1, "last": 1}))),
            "path": Out(stream.Signature(data.StructLayout({"node": nb, "tokens": nb + 1, "last": 1}))),
            "peak_level": Out(range(self._fifo_depth + 1)),
            "busy": Out(1),
            "error": Out(1),
        })

    @classmethod
    def from_config(cls, config, *, max_passes=64):
        """The verifier of a :class:`golden.config.Config`'s ``tree`` config."""
        if not isinstance(config, Config):
            raise TypeError(f"TreeVerifier.from_config needs a golden.config.Config, not {config!r}")
        return cls(max_nodes=config.tree.max_nodes, fifo_depth=config.tree.fifo_depth,
                   max_passes=max_passes)

    @property
    def module_name(self):
        """Verilog name encoding the parameters, e.g. ``tree_verifier_n64_d16_p64``."""
        return f"tree_verifier_n{self._max_nodes}_d{self._fifo_depth}_p{self._max_passes}"

    @property
    def max_nodes(self):
        return self._max_nodes

    @property
    def fifo_depth(self):
        return self._fifo_depth

    @property
    def max_passes(self):
        return self._max_passes

    @property
    def latency(self):
        """Cycles from the ``tree`` beat with ``last`` to the first valid schedule beat."""
        return 2

    def elaborate(self, platform):
        m = Module()
        n_max, depth = self._max_nodes, self._fifo_depth
        nb, sb = self._nb, self._sb

        # Verilator's -Wall flags comparisons with narrow constants and operands of
        # unequal widths in Amaranth's output, so tests against zero use any(),
        # counters run down to zero, and compared operands share one width.
        def onehot(index):
            return (Const(1, n_max) << Value.cast(index).as_unsigned())[:n_max]

        def bit(vector, index):
            # Padded to every index value, so the emitted case statement is complete.
            return Array([vector[b] for b in range(n_max)] + [Const(0, 1)] * ((1 << nb) - n_max))[index]

        # Tree storage: parent, depth and ring slot of every node (LUTRAM, asynchronous read).
        m.submodules.parents = par_mem = Memory(shape=unsigned(nb), depth=n_max, init=[])
        m.submodules.depths = dep_mem = Memory(shape=unsigned(nb), depth=n_max, init=[])
        m.submodules.slots = slot_mem = Memory(shape=unsigned(sb), depth=n_max, init=[])
        m.submodules.path_nodes = path_mem = Memory(shape=unsigned(nb), depth=n_max, init=[])
        par_w, dep_w, slot_w, path_w = (mem.write_port() for mem in (par_mem, dep_mem, slot_mem, path_mem))
        par_r = par_mem.read_port(domain="comb")
        dep_r = dep_mem.read_port(domain="comb")
        slot_r = slot_mem.read_port(domain="comb")
        path_r = path_mem.read_port(domain="comb")
        # MATCH reads a node's parent and depth on ports of its own, addressed by the
        # idx register alone: no address mux in front of the LUT RAM on the path to
        # `best` (logic levels, docs/estimate.md).
        par_m = par_mem.read_port(domain="comb")
        dep_m = dep_mem.read_port(domain="comb")
        # Accepted flags, written at idx in every match beat and read at the parent
        # (LUT RAM, one level, instead of a 64-to-1 mux of a flag vector).
        m.submodules.accepted = acc_mem = Memory(shape=1, depth=n_max, init=[])
        acc_w = acc_mem.write_port()
        acc_r = acc_mem.read_port(domain="comb")

        # The ring of live slots holds (node, slot) pairs. `flush` empties it at the end
        # of a pass, when every slot left is dead: one cycle instead of one per slot.
        ring = RingFIFO(width=nb + sb, depth=depth)
        flush = Signal()
        m.submodules.ring = ResetInserter({"sync": flush})(ring)
        head_node = ring.r.payload[:nb]
        head_slot = ring.r.payload[nb:]

        has_child = Signal(n_max)   # node has at least one child
        last_child = Signal(n_max)  # node is the last child of its parent
        dead = Signal(n_max)        # node's state is dead (this pass)

        # Phases, one-hot (reset: LOAD).
        phase = OneHot(("load", "check", "sched", "match", "find", "walking", "send"),
                       init="load")
        load, check, sched, match, find, walking, send = phase.states.values()

        idx = Signal(nb)                   # beat index while loading / matching
        room = Signal(range(n_max + 1), init=n_max)  # beats that still fit while loading
        left = Signal(range(n_max + 1))    # match beats still expected
        prev_parent = Signal(nb)
        cslot = Signal(sb)                 # idx mod fifo_depth while loading
        last_node = Signal(nb)
        passes_left = Signal(range(self._max_passes))  # passes after the current one
        node = Signal(nb)                  # node being scheduled
        # A copy of `node` for the has_child/last_child lookups (two 64-to-1 muxes):
        # `node` alone drove 83 loads, above the 64 of the board designs' fanout rule
        # (gen.estimate_fanout). Its next value is computed from itself, so neither
        # Yosys nor Vivado merges the two registers.
        node_q = Signal(nb)
        wslot = Signal(sb)                 # node mod fifo_depth
        best = Signal(nb)
        best_depth = Signal(nb)
        walk = Signal(nb)
        k = Signal(nb)
        path_len = Signal(nb)              # depth of the deepest accepted node
        out_i = Signal(nb)

        def next_slot(s):
            return Mux(s == depth - 1, 0, s + 1) if depth > 1 else Const(0, sb)

        # Combinational outputs are plain expressions (continuous assignments in the
        # Verilog), so every one has a value from time 0 on, in every simulator.

        # LOAD terms.
        parent = self.tree.payload.parent
        first = ~idx.any() & room.any()
        in_range = room.any()
        bad = ~first & ((parent >= idx) | (idx[1:].any() & (parent < prev_parent)))
        take = load & self.tree.valid
        # A beat's checks are registered (b1_err) and reach `error` the cycle after, so
        # no comparison of the incoming parent reaches the phase; the CHECK cycle after
        # the last beat decides with them (logic levels, docs/estimate.md).
        b1_err = Signal()
        err_final = self.error | b1_err
        # SCHEDULE terms.
        is_root = ~node.any()
        is_last = node == last_node
        leaf = ~bit(has_child, node_q)
        closes_parent = bit(last_child, node_q)
        head_dead = ring.r.valid & bit(dead, head_node)  # an older slot died after an earlier node
        node_beat = ~head_dead
        # With an empty ring the candidate for release is the node itself (a leaf dies at
        # once), bypassing the ring.
        bypass = ~ring.r.valid
        cand = Mux(bypass, node, head_node)
        cand_dead = (closes_parent & (cand == par_r.data)) | (leaf & (cand == node))
        release = cand_dead & ~is_last
        overflow = ~ring.w.ready
        node_fire = sched & node_beat & self.schedule.ready & ~overflow
        # MATCH terms, in two stages: a beat's node (its parent, depth, and whether the
        # parent is below it) is registered (s1_*) from the LUT RAM, then the parent's
        # accepted flag is read and `best` updated, so neither stage holds a LUT RAM read
        # and two comparisons in series (logic levels, docs/estimate.md).
        left_any = left.any()
        m_first = ~idx.any()
        m_beat = match & self.match.valid & left_any
        s1_valid, s1_first, s1_match, s1_par_ok = Signal(), Signal(), Signal(), Signal()
        s1_idx, s1_par, s1_dep = Signal(nb), Signal(nb), Signal(nb)
        # A parent at or above idx (a bad tree) is not accepted yet this pass; in a
        # good tree it is always below idx, so its flag was written in an earlier beat.
        accepted = s1_first | (s1_match & acc_r.data & s1_par_ok)
        # PATH terms.
        is_end = out_i == path_len

        out = self.schedule.payload
        m.d.comb += [
            self.tree.ready.eq(load),
            self.match.ready.eq(match),
            self.busy.eq((load & (idx.any() | ~room.any())) | check | sched | match | find
                         | walking | send),
            dep_r.addr.eq(parent),
            par_r.addr.eq(Mux(walking, walk, node)),
            slot_r.addr.eq(par_r.data),
            path_r.addr.eq(out_i),
            par_m.addr.eq(idx), dep_m.addr.eq(idx), acc_r.addr.eq(s1_par),
            acc_w.addr.eq(s1_idx), acc_w.data.eq(accepted), acc_w.en.eq(s1_valid),
            par_w.addr.eq(idx), par_w.data.eq(parent), par_w.en.eq(take & in_range),
            dep_w.addr.eq(idx), dep_w.data.eq(Mux(first, 0, dep_r.data + 1)), dep_w.en.eq(take & in_range),
            slot_w.addr.eq(idx), slot_w.data.eq(cslot), slot_w.en.eq(take & in_range),
            path_w.addr.eq(k), path_w.data.eq(walk), path_w.en.eq(walking & k.any()),

            self.schedule.valid.eq(sched & (head_dead | ~overflow)),
            out.node_valid.eq(node_beat),
            out.node.eq(Mux(node_beat, node, 0)),
            out.root.eq(node_beat & is_root),
            out.parent_slot.eq(Mux(node_beat & ~is_root, slot_r.data, 0)),
            out.write_slot.eq(Mux(node_beat, wslot, 0)),
            out.release.eq(head_dead | (node_beat & release)),
            out.release_slot.eq(Mux(head_dead, head_slot,
                                    Mux(release, Mux(bypass, wslot, head_slot), 0))),
            out.last.eq(node_beat & is_last),
            ring.w.payload.eq(Cat(node, wslot)),
            ring.w.valid.eq(node_fire & ~is_last & ~(bypass & release)),
            ring.r.ready.eq(sched & self.schedule.ready
                            & (head_dead | (~overflow & release & ~bypass))),
            flush.eq(sched & node_beat & (overflow | (self.schedule.ready & is_last))),

            self.path.valid.eq(send),
            self.path.payload.node.eq(Mux(out_i.any(), path_r.data, 0)),
            self.path.payload.tokens.eq(path_len + 1),
            self.path.payload.last.eq(is_end),
        ]

        # --- LOAD: take the tree, one node per beat --------------------------------------
        with m.If(take):
            m.d.sync += [prev_parent.eq(parent), cslot.eq(next_slot(cslot))]
            with m.If(in_range):
                m.d.sync += [idx.eq(idx + 1), room.eq(room - 1), last_node.eq(idx)]
            new_last = Mux(idx[1:].any() & (parent != prev_parent), onehot(idx - 1), 0) \
                | Mux(self.tree.payload.last & idx.any(), onehot(idx), 0)
            with m.If(first):
                m.d.sync += [has_child.eq(0), last_child.eq(0), self.peak_level.eq(0)]
            with m.Elif(in_range):
                m.d.sync += [has_child.eq(has_child | onehot(parent)),
                             last_child.eq(last_child | new_last)]
            with m.If(self.tree.payload.last):
                m.d.sync += [
                    idx.eq(0), room.eq(n_max), cslot.eq(0), node.eq(0), node_q.eq(0), wslot.eq(0),
                    dead.eq(0),
                    left.eq(Mux(in_range, idx + 1, n_max)),
                    passes_left.eq(Mux(self.passes.any(), self.passes - 1, 0)),
                ]
                phase.goto(m, "check")
        m.d.sync += b1_err.eq(take & (bad | ~in_range))
        with m.If(take & first):
            m.d.sync += self.error.eq(0)     # (b1_err is 0: no beat was taken in CHECK)
        with m.Elif(b1_err):
            m.d.sync += self.error.eq(1)

        # --- CHECK: the last beat's checks have landed ------------------------------------
        with m.If(check):
            # A bad tree skips scheduling; its match bits and path still flow.
            with m.If(err_final):
                phase.goto(m, "match")
            with m.Else():
                phase.goto(m, "sched")

        # --- SCHEDULE: one beat per cycle, `passes` times ---------------------------------
        with m.If(node_fire):
            # Slots in use while this node is written: the ring plus its own.
            with m.If(ring.level >= self.peak_level):
                m.d.sync += self.peak_level.eq(ring.level + 1)
            m.d.sync += [
                dead.eq(dead | Mux(closes_parent, onehot(par_r.data), 0) | Mux(leaf, onehot(node), 0)),
                node.eq(node + 1), node_q.eq(node_q + 1), wslot.eq(next_slot(wslot)),
            ]
            with m.If(is_last):
                m.d.sync += [dead.eq(0), node.eq(0), node_q.eq(0), wslot.eq(0),
                             passes_left.eq(passes_left - 1)]
                with m.If(~passes_left.any()):
                    phase.goto(m, "match")
        with m.If(sched & node_beat & overflow):
            m.d.sync += [self.error.eq(1), node.eq(0), node_q.eq(0), wslot.eq(0)]
            phase.goto(m, "match")

        # --- MATCH: per-node match bits, greedy acceptance --------------------------------
        m.d.sync += [s1_valid.eq(m_beat), s1_first.eq(m_first), s1_idx.eq(idx),
                     s1_match.eq(self.match.payload.match), s1_par.eq(par_m.data),
                     s1_dep.eq(dep_m.data), s1_par_ok.eq(par_m.data < idx)]
        with m.If(m_beat):
            m.d.sync += [idx.eq(idx + 1), left.eq(left - 1)]
        with m.If(match & self.match.valid & self.match.payload.last):
            m.d.sync += idx.eq(0)
            phase.goto(m, "find")
        with m.If(s1_valid):
            with m.If(s1_first):
                m.d.sync += [best.eq(0), best_depth.eq(0)]
            with m.Elif(accepted & (s1_dep > best_depth)):
                # BFS order: the first accepted node of a new depth is the lowest index.
                m.d.sync += [best.eq(s1_idx), best_depth.eq(s1_dep)]

        # --- FIND, WALK: store the path root first, walking up from the deepest node ------
        with m.If(find & ~s1_valid):
            # The last match beat's update of `best` has landed (a cycle after the beat).
            m.d.sync += [walk.eq(best), k.eq(best_depth), path_len.eq(best_depth), out_i.eq(0)]
            phase.goto(m, "walking")

        with m.If(walking):
            with m.If(k.any()):
                m.d.sync += [walk.eq(par_r.data), k.eq(k - 1)]
            with m.Else():
                phase.goto(m, "send")

        # --- PATH: send it ---------------------------------------------------------------
        with m.If(send & self.path.ready):
            m.d.sync += out_i.eq(out_i + 1)
            with m.If(is_end):
                phase.goto(m, "load")

        return m
