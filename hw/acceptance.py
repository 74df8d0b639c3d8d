"""``GreedyAcceptance``: greedy (lossless) acceptance of a verified draft tree in hardware.

After a tree step the target's argmax of every node is in memory (the argmax engine's
beats). This block reads them beside the tree table (each node's draft token and parent,
:data:`golden.tree.TREE_ENTRY_FIELDS`) and writes the accepted path
(:data:`golden.tree.PATH_ENTRY_FIELDS`): node ``i ≥ 1`` matches when its draft token is
the target's argmax at its parent, it is accepted when it matches and its parent is
accepted, and the path runs from the root to the deepest accepted node, ties to the
lowest BFS index (:func:`golden.tree.greedy_acceptance`, SpecMamba's tree verification,
arXiv 2509.19873). The host reads the committed tokens and the path to commit from
memory instead of walking the tree itself.
"""

from amaranth import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from specgen.golden.tree import PATH_ENTRY_FIELDS, TREE_ENTRY_FIELDS
from specgen.golden.validate import check_int

from .bits import index_width

__all__ = ["GreedyAcceptance", "entry_layout"]


def entry_layout(fields):
    """A 64-bit :class:`data.StructLayout` of ``(name, low bit, bits)`` fields (the gaps
    padding)."""
    members, at = {}, 0
    for name, lo, bits in fields:
        if lo > at:
            members[f"_pad{at}"] = lo - at
        members[name] = bits
        at = lo + bits
    members[f"_pad{at}"] = 64 - at
    return data.StructLayout(members)


class GreedyAcceptance(wiring.Component):
    """Greedy acceptance over one tree at a time, on valid/ready streams.

    Parameters
    ----------
    max_nodes : int
        Nodes of a tree at most (≥ 1; ``≤ 2**16``, the table's parent field).
    vocab : int
        The argmax beats' vocabulary (its ``index`` width, :func:`hw.argmax.argmax_out_layout`).

    Attributes
    ----------
    i : In(stream.Signature(StructLayout({"node": 64, "best": 64})))
        One beat a node in BFS order: ``node`` the tree entry
        (:data:`golden.tree.TREE_ENTRY_FIELDS`), ``best`` the node's argmax beat (its
        ``index`` in the low bits). A parent not below its node is taken as a mismatch.
    last : In(1)
        High with the tree's last node (the stream engine counts the descriptor's
        elements); node ``max_nodes − 1`` ends a tree too.
    o : Out(stream.Signature(entry_layout(PATH_ENTRY_FIELDS)))
        As many beats as the tree has nodes: the path root first (``on_path``), then zeros.

    Notes
    -----
    Timing: ``i`` is taken one beat a cycle while a tree loads (``ready`` high); each
    beat reads its parent's entries from LUT RAM and writes its own, so a node may follow
    its parent directly. After the last node the path is walked from the deepest accepted
    node up to the root, one node a cycle (depth + 1 cycles), and the ``V`` output beats
    follow from a register, one a cycle under ``o.ready``: a tree of ``V`` nodes and
    accepted depth ``D`` takes about ``V + D + V + 2`` cycles without back-pressure: the
    first output beat is valid ``D +`` :attr:`latency` cycles after the cycle that takes
    the last input beat (the walk's ``D + 1`` cycles, one to load the register).
    """

    def __init__(self, *, max_nodes, vocab):
        self._max = check_int("GreedyAcceptance", "max_nodes", max_nodes, min=1, max=1 << 16)
        self._vocab = check_int("GreedyAcceptance", "vocab", vocab, min=2)
        self._tree = entry_layout(TREE_ENTRY_FIELDS)
        self._path = entry_layout(PATH_ENTRY_FIELDS)
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"node": self._tree, "best": 64}))),
            "last": In(1),
            "o": Out(stream.Signature(self._path)),
        })

    max_nodes = property(lambda self: self._max)
    vocab = property(lambda self: self._vocab)

    @property
    def module_name(self):
        return f"GreedyAcceptance_n{self._max}_v{self._vocab}"

    @property
    def latency(self):
        """Cycles from the last input beat to the first valid output beat, less the
        accepted depth ``D``."""
        return 3

    def elaborate(self, platform):
        m = Module()
        n_max, nb = self._max, index_width(self._max)
        tb = index_width(self._vocab)
        # Per node, LUT RAM read asynchronously (the parent's entry in the cycle its child
        # arrives; the path's entry while walking and sending).
        m.submodules.best_mem = best_mem = Memory(shape=unsigned(tb), depth=n_max, init=[])
        m.submodules.acc_mem = acc_mem = Memory(shape=unsigned(1), depth=n_max, init=[])
        m.submodules.dep_mem = dep_mem = Memory(shape=unsigned(nb), depth=n_max, init=[])
        m.submodules.par_mem = par_mem = Memory(shape=unsigned(nb), depth=n_max, init=[])
        m.submodules.path_node = pn_mem = Memory(shape=unsigned(nb), depth=n_max, init=[])
        m.submodules.path_tok = pt_mem = Memory(shape=unsigned(tb), depth=n_max, init=[])
        best_w, acc_w, dep_w, par_w, pn_w, pt_w = (
            x.write_port() for x in (best_mem, acc_mem, dep_mem, par_mem, pn_mem, pt_mem))
        best_r, acc_r, dep_r = (x.read_port(domain="comb") for x in (best_mem, acc_mem, dep_mem))
        par_r, walk_best = par_mem.read_port(domain="comb"), best_mem.read_port(domain="comb")
        pn_r, pt_r = pn_mem.read_port(domain="comb"), pt_mem.read_port(domain="comb")

        load, walking, send = Signal(init=1), Signal(), Signal()
        n = Signal(nb)                 # the node arriving (load), the beat sent (send)
        count = Signal(nb)             # nodes of the tree less one
        top = Signal(nb)               # the deepest accepted node
        top_depth = Signal(nb)
        walk = Signal(nb)              # the node being put on the path
        k = Signal(nb)                 # its depth
        o_valid = Signal()
        o_data = Signal(self._path)

        beat = self.i.payload
        parent = beat.node.parent[:nb]
        root = ~n.any()   # (not `n == 0`: Verilator's LOGNOT of a vector)
        take = Signal()
        accepted = Signal()
        depth = Signal(nb)
        m.d.comb += [
            self.i.ready.eq(load), take.eq(load & self.i.valid),
            best_r.addr.eq(parent), acc_r.addr.eq(parent), dep_r.addr.eq(parent),
            # A parent not below its node (a malformed table) reads no accepted entry.
            accepted.eq(root | ((beat.node.token == best_r.data) & acc_r.data & (parent < n)
                               & ~beat.node.parent[nb:].any())),
            depth.eq(Mux(root, 0, dep_r.data + 1)),
            best_w.addr.eq(n), best_w.data.eq(beat.best[:tb]), best_w.en.eq(take),
            acc_w.addr.eq(n), acc_w.data.eq(accepted), acc_w.en.eq(take),
            dep_w.addr.eq(n), dep_w.data.eq(depth), dep_w.en.eq(take),
            par_w.addr.eq(n), par_w.data.eq(parent), par_w.en.eq(take),
            # The walk: node ``walk`` at depth ``k`` of the path, its token the argmax there.
            par_r.addr.eq(walk), walk_best.addr.eq(walk),
            pn_w.addr.eq(k), pn_w.data.eq(walk), pn_w.en.eq(walking),
            pt_w.addr.eq(k), pt_w.data.eq(walk_best.data), pt_w.en.eq(walking),
            pn_r.addr.eq(n), pt_r.addr.eq(n),
            self.o.valid.eq(o_valid), self.o.payload.eq(o_data),
        ]
        # Deeper than the deepest so far (BFS: the first node of a depth wins a tie); the
        # root always (a new tree).
        elect = Signal()
        m.d.comb += elect.eq(root | (accepted & (depth > top_depth)))
        with m.If(take):
            with m.If(elect):
                m.d.sync += [top.eq(n), top_depth.eq(depth)]
            with m.If(self.last | (n == n_max - 1)):
                # The walk starts from the deepest node, this one included.
                m.d.sync += [load.eq(0), walking.eq(1), count.eq(n),
                             walk.eq(Mux(elect, n, top)), k.eq(Mux(elect, depth, top_depth))]
            with m.Else():
                m.d.sync += n.eq(n + 1)
        with m.If(walking):
            m.d.sync += [walk.eq(par_r.data), k.eq(k - 1)]
            with m.If(~k.any()):
                m.d.sync += [walking.eq(0), send.eq(1), n.eq(0)]
        # The output register: beat ``n`` of the tree, loaded when the register is free or
        # being taken.
        free = ~o_valid | self.o.ready
        with m.If(self.o.ready):
            m.d.sync += o_valid.eq(0)
        with m.If(send & free):
            on = n <= top_depth
            m.d.sync += [o_valid.eq(1), o_data.token.eq(Mux(on, pt_r.data, 0)),
                         o_data.node.eq(Mux(on, pn_r.data, 0)), o_data.on_path.eq(on),
                         n.eq(n + 1)]
            with m.If(n == count):
                m.d.sync += [send.eq(0), load.eq(1), n.eq(0), top.eq(0), top_depth.eq(0)]
        return m
