"""State backtracking for speculative decoding of Mamba2: four policies, run and counted.

A speculative step runs a draft tree through a model (SpecMamba, arXiv 2509.19873): the draft
proposes it node by node, the target verifies all of it in one pass. Each node
advances the decode state of every layer by one token, from its parent's state.
Greedy acceptance (:func:`golden.tree.accepted_path`) then picks a root-to-node
path, and each model must continue from the state *after the last node of that
path*, as if it had decoded only the path's tokens. Mamba keeps no history:
once the pass is over, that state must be restored by a backtracking policy.

The decode state of one Mamba2 layer (:class:`Mamba2Mixer`) is a pair

``conv_state``, shape ``(d_conv − 1, conv_dim)``
    The causal conv1d window: the last ``d_conv − 1`` raw ``xBC`` rows
    (``conv_dim = d_inner + 2·d_state``), a shift register.
``ssm_state``, shape ``(nheads, headdim, d_state)``
    ``h`` of :mod:`golden.mamba2`.

The policies (one model, one layer; ``n`` nodes in the tree, the root
included; ``L`` = nodes on the accepted path = tokens committed by the step,
``1 ≤ L ≤ depth + 1``):

=====================  ==========================================================  =====================
policy                 kept during the pass, per node                              restore
=====================  ==========================================================  =====================
(a) ``store``          the full state (:class:`StoreStates`)                        re-point, no copy
(b) ``replay``         light intermediates Δ, dA, x, B and the raw xBC row          replay L updates
                       (:class:`StoreIntermediates`)                                from the checkpoint
(c) ``recompute``      nothing (:class:`Recompute`); ``scope="state"`` keeps the     re-run the layer on
                       layer input                                                  the L path tokens
(d) ``hybrid``         draft: (b); target: (c) along the accepted path              both
                       (:class:`SpeculativeBacktracking`, :data:`SYSTEM_POLICIES`)
=====================  ==========================================================  =====================

The *checkpoint* is the step's start state, the committed state: it already
sits in the state memory where the previous step left it, and the pass never
overwrites it (node states live in the FIFO ring, :mod:`golden.tree`), so
keeping it costs nothing; reading it back does.

Generic API. A policy drives any *recurrence*: an object with

``step(state, token, *, meter=None) -> Stepped(state, output, light, input)``
    One token through the layer: the verification pass's work. ``light`` is
    the tuple of arrays the state update consumes, ``input`` the token in
    the layer's value format.
``replay(state, light, *, meter=None) -> state``
    The state update alone, from ``light``; bit for bit ``step(...).state``.
``update(state, token, *, meter=None) -> state``
    Only the part of ``step`` the state depends on; bit for bit
    ``step(...).state`` (needed by ``Recompute(scope="state")`` only).

``state``, ``light`` and a token are numpy arrays or tuples of them.
:class:`Mamba2Mixer` (:mod:`golden.mixer`) is one Mamba2 layer, in either
numerics: binary32 with :func:`golden.mamba2.ssm_step_hw` (the SSM unit, bit
for bit) or the float64 of :mod:`golden.lm`. :class:`LMRecurrence` is a whole
:class:`golden.lm.MambaLM`, every layer's state at once, token ids in and
logits out: what :func:`golden.speculative.speculative_generate` restores.

Instrumentation. Every byte a policy keeps or reads goes through a
:class:`BacktrackMemory`, and every multiply of the mixer through
:meth:`CostMeter.mul`, so a :class:`CostMeter` holds the *actual* traffic and
work of a run. :mod:`golden.backtrack_cost` gives the same figures in closed
form; the tests check that the two agree exactly.
"""

from collections import Counter
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .lm import LMState, MambaLM
from .mixer import NUMERICS, Mamba2Mixer, MixerConfig, MixerParams, Stepped, mixer_init_params
from .tree import AcceptedPath, dead_times, validate_parents
from .validate import check_choice

__all__ = [
    "NUMERICS", "WHERE", "PHASES", "COMMITTED", "MixerConfig", "MixerParams", "mixer_init_params",
    "Stepped", "Mamba2Mixer", "LMRecurrence", "CostMeter", "BacktrackMemory", "StoreStates",
    "StoreIntermediates", "Recompute", "POLICIES", "SpeculativeBacktracking", "SYSTEM_POLICIES",
    "TreePass", "tree_pass", "restore", "backtrack", "sequential_run",
    "speculative_backtrack", "check_path", "check_policy",
]

#: Where a policy keeps an item: on-chip RAM (BRAM/URAM) or the off-chip state memory.
WHERE = ("on_chip", "off_chip")

#: Phases of a speculative step that a :class:`CostMeter` tells apart.
PHASES = ("pass", "restore")

#: Key of the committed state (the checkpoint before restore, the result after it).
COMMITTED = "committed"


# -- counting -----------------------------------------------------------------------

class CostMeter:
    """What a backtracking run did: bytes kept and read, multiplies performed.

    Counters are split by phase: ``"pass"`` (the tree pass, policies'
    ``record``) and ``"restore"``. A meter is mutable; it is an instrument,
    not a config.

    Attributes
    ----------
    phase : str
        The phase that new counts go to; set by :func:`tree_pass` and :func:`restore`.
    macs : dict
        Multiplies per phase. One elementwise product of two numbers is one
        MAC, with or without the add that follows it; additions, divisions,
        square roots and table look-ups (softplus, exp, SiLU) are not counted.
    """

    def __init__(self):
        self.phase = "pass"
        self.macs = dict.fromkeys(PHASES, 0)
        self._bytes = Counter()

    def mul(self, a, b):
        """``a·b`` (numpy broadcasting), counting one MAC per element of the product."""
        r = np.multiply(a, b)
        self.macs[self.phase] += int(np.size(r))
        return r

    def charge(self, macs):
        """Count ``macs`` multiplies done by code that is not itself instrumented."""
        self.macs[self.phase] += int(macs)

    def moved(self, op, where, item, nbytes):
        """Record ``nbytes`` of ``item`` stored (``op="store"``) or loaded at ``where``."""
        self._bytes[(self.phase, op, where, item)] += int(nbytes)

    def bytes(self, *, phase=None, op=None, where=None, item=None):
        """Bytes moved, summed over every key that matches the given fields."""
        return sum(v for (p, o, w, i), v in self._bytes.items()
                   if (phase is None or p == phase) and (op is None or o == op)
                   and (where is None or w == where) and (item is None or i == item))

    def records(self):
        """``{(phase, op, where, item): bytes}``, for printing."""
        return dict(self._bytes)


def _arrays(value):
    return value if isinstance(value, tuple) else (value,)


def _nbytes(value):
    return sum(np.asarray(a).nbytes for a in _arrays(value))


class BacktrackMemory:
    """The storage a policy may use across the pass, every access counted.

    Entries are copied on store and on load, so nothing a policy reads back
    can alias live data. Only the committed state is there before the pass
    (:meth:`hold`, free: the previous step left it there).
    """

    def __init__(self, meter):
        self.meter = meter
        self._data = {}

    def hold(self, key, value, *, where="off_chip"):
        """Place ``value`` without counting (the committed state, already in memory)."""
        self._data[key] = (where, _copy(value))

    def store(self, key, value, *, where, item):
        """Keep a copy of ``value`` (an array or a tuple of arrays) under ``key``; counted."""
        check_choice("BacktrackMemory.store", "where", where, WHERE)
        self._data[key] = (where, _copy(value))
        self.meter.moved("store", where, item, _nbytes(value))

    def load(self, key, *, item):
        """A copy of the entry under ``key``; counted at the entry's location."""
        where, value = self._data[key]
        self.meter.moved("load", where, item, _nbytes(value))
        return _copy(value)

    def rename(self, key, new_key):
        """Re-point: the entry becomes ``new_key`` with no data moved (a pointer update)."""
        self._data[new_key] = self._data.pop(key)

    def peek(self, key):
        """The entry under ``key`` without counting: what the next pass reads anyway."""
        return _copy(self._data[key][1])

    def keys(self):
        return tuple(self._data)


def _copy(value):
    if isinstance(value, tuple):
        return tuple(np.array(a, copy=True) for a in value)
    return np.array(value, copy=True)


# -- the whole language model as a recurrence -------------------------------------

@dataclass(frozen=True, eq=False)
class LMRecurrence:
    """A :class:`golden.lm.MambaLM` as one recurrence: token ids in, logits out.

    The policies then restore every layer's state at once, as
    :func:`golden.speculative.speculative_generate` needs. Layer ``l`` is the
    model's own :class:`Mamba2Mixer` ``lm.mixers[l]`` (float64, ``"ref"``)
    and the recurrence's values are its layers', in layer order:

    ``state``
        ``(conv_0, ssm_0, conv_1, ssm_1, …)``: :meth:`pack` of a
        :class:`golden.lm.LMState` (:meth:`unpack` gives it back).
    ``light``
        Every layer's ``(xBC, x, B, Δ, dA)``, concatenated.
    ``input``
        Every layer's input vector: what ``Recompute(scope="state")`` keeps
        and :meth:`update` takes as its token.

    A token costs ``n_layer`` times one layer's work and traffic, so a run's
    :class:`CostMeter` holds :func:`golden.backtrack_cost.backtrack_cost` of
    ``lm.config.mixer`` with ``numerics="ref"`` (the embedding and the head
    are not counted).
    """

    lm: MambaLM

    def __post_init__(self):
        if not isinstance(self.lm, MambaLM):
            raise TypeError(f"LMRecurrence.lm must be a golden.lm.MambaLM, not {self.lm!r}")

    @staticmethod
    def pack(state):
        """An :class:`golden.lm.LMState` as ``(conv_0, ssm_0, conv_1, ssm_1, …)``."""
        return tuple(a for layer in zip(state.conv, state.ssm) for a in layer)

    @staticmethod
    def unpack(state):
        """The :class:`golden.lm.LMState` of a packed state."""
        return LMState(conv=state[0::2], ssm=state[1::2])

    @staticmethod
    def join(logits, layers):
        """The model's :class:`Stepped` from its logits and its layers' ``Stepped``
        (:meth:`golden.lm.MambaLM.step_layers`)."""
        return Stepped(state=tuple(a for s in layers for a in s.state), output=logits,
                       light=tuple(a for s in layers for a in s.light),
                       input=tuple(s.input for s in layers))

    def _per_layer(self, value, width, name):
        n = len(self.lm.mixers)
        if not isinstance(value, tuple) or len(value) != width * n:
            raise TypeError(f"LMRecurrence {name} must be a tuple of {width * n} arrays "
                            f"({width} per layer), not {type(value).__name__}"
                            f"{f' of {len(value)}' if isinstance(value, tuple) else ''}")
        return [value[width * i:width * (i + 1)] for i in range(n)]

    def step(self, state, token, *, meter=None):
        """The model's decode step; ``output`` is the logits."""
        self._per_layer(state, 2, "state")
        logits, _, layers = self.lm.step_layers(self.unpack(state), token, meter=meter)
        return self.join(logits, layers)

    def replay(self, state, light, *, meter=None):
        """Every layer's :meth:`Mamba2Mixer.replay`."""
        pairs = zip(self.lm.mixers, self._per_layer(state, 2, "state"),
                    self._per_layer(light, 5, "light"))
        return tuple(a for mixer, s, li in pairs for a in mixer.replay(s, li, meter=meter))

    def update(self, state, token, *, meter=None):
        """Every layer's :meth:`Mamba2Mixer.update`; ``token`` holds the layers' inputs."""
        pairs = zip(self.lm.mixers, self._per_layer(state, 2, "state"),
                    self._per_layer(token, 1, "inputs"))
        return tuple(a for mixer, s, (u,) in pairs for a in mixer.update(s, u, meter=meter))


def sequential_run(rec, state, tokens):
    """The plain decode: ``rec.step`` on each token in turn. The oracle of every policy."""
    for token in tokens:
        state = rec.step(state, token).state
    return state


# -- policies ---------------------------------------------------------------------

def _need(rec, owner, *methods):
    for name in methods:
        if not callable(getattr(rec, name, None)):
            raise TypeError(f"{owner} needs a recurrence with the method {name}(), not {rec!r}")


@dataclass(frozen=True, kw_only=True)
class StoreStates:
    """(a) Store the full state of every node; restore by re-pointing.

    ============  ===========================  ==========  ==========================================
    when          what                         where       bytes per layer
    ============  ===========================  ==========  ==========================================
    each node     store the node's state       off chip    ``S = E·s + (d_conv−1)·conv_dim·v``
    restore       accepted node's slot becomes off chip    0 (a pointer update; the next pass reads
                  the committed state                      it as it would read any committed state)
    ============  ===========================  ==========  ==========================================

    ``s``, ``v``: bytes per state element and per other value (binary32: 4).
    Per step: ``n·S`` stored, nothing loaded, no MACs. Full states stay off
    chip: one Mamba2-2.7B layer state is 2.7 MB, every node of a 17-node tree
    over 64 layers 2.9 GB.
    """

    name: ClassVar[str] = "store"

    def check(self, rec):
        _need(rec, "StoreStates", "step")

    def record(self, memory, node, token, stepped):
        memory.store(("state", node), stepped.state, where="off_chip", item="state")

    def restore(self, rec, memory, path, tokens, meter):
        memory.rename(("state", path[-1]), COMMITTED)


@dataclass(frozen=True, kw_only=True)
class StoreIntermediates:
    """(b) Store every node's light intermediates; replay the accepted path from the checkpoint.

    ============  ===========================  ==========  ==========================================
    when          what                         where       bytes per layer
    ============  ===========================  ==========  ==========================================
    each node     store ``(xBC, x, B, Δ, dA)``  ``where``   ``ℓ = (conv_dim + d_inner + d_state
                                                           + 2·nheads)·v``
    restore       load the checkpoint          off chip    ``S``
    restore       load each path node's light  ``where``   ``L·ℓ``
    restore       store the replayed state     off chip    ``S``
    ============  ===========================  ==========  ==========================================

    Work: ``L·(d_inner + 2·E)`` MACs (:meth:`Mamba2Mixer.replay`). SpecMamba
    keeps the draft's intermediates on chip (the default ``where``).

    Parameters
    ----------
    where : {"on_chip", "off_chip"}
    """

    name: ClassVar[str] = "replay"
    where: str = "on_chip"

    def __post_init__(self):
        check_choice("StoreIntermediates", "where", self.where, WHERE)

    def check(self, rec):
        _need(rec, "StoreIntermediates", "step", "replay")

    def record(self, memory, node, token, stepped):
        memory.store(("light", node), stepped.light, where=self.where, item="intermediates")

    def restore(self, rec, memory, path, tokens, meter):
        state = memory.load(COMMITTED, item="checkpoint")
        for node in path:
            state = rec.replay(state, memory.load(("light", node), item="intermediates"), meter=meter)
        memory.store(COMMITTED, state, where="off_chip", item="committed")


@dataclass(frozen=True, kw_only=True)
class Recompute:
    """(c) Keep the checkpoint; re-run the layer on the accepted path's tokens.

    ``scope="layer"``: re-run :meth:`Mamba2Mixer.step`, the whole layer,
    ``L·F`` MACs: what a re-run of the model stack does, since each layer's
    output is the next layer's input. The path's tokens come from that re-run
    (layer 0: the embedding), so they are not counted as traffic.

    ``scope="state"``: re-run only what the state depends on
    (:meth:`Mamba2Mixer.update`, ``L·U`` MACs: no z rows, ``h'·C``, gate,
    norm or ``W_out``). Without the re-run of the layer below, the layer's
    inputs must then be kept from the pass:

    ============  ===========================  ==========  ==========================================
    when          what                         where       bytes per layer
    ============  ===========================  ==========  ==========================================
    each node     (``"state"``) store the       ``where``   ``d_model·v``
                  layer input
    restore       load the checkpoint          off chip    ``S``
    restore       (``"state"``) load each path  ``where``   ``L·d_model·v``
                  node's input
    restore       store the recomputed state   off chip    ``S``
    ============  ===========================  ==========  ==========================================

    Parameters
    ----------
    scope : {"layer", "state"}
    where : {"on_chip", "off_chip"}
        Location of the kept inputs (``scope="state"`` only).
    """

    SCOPES: ClassVar[tuple] = ("layer", "state")
    scope: str = "layer"
    where: str = "off_chip"

    def __post_init__(self):
        check_choice("Recompute", "scope", self.scope, self.SCOPES)
        check_choice("Recompute", "where", self.where, WHERE)

    @property
    def name(self):
        return "recompute" if self.scope == "layer" else "recompute-state"

    def check(self, rec):
        _need(rec, "Recompute", "step", "update" if self.scope == "state" else "step")

    def record(self, memory, node, token, stepped):
        if self.scope == "state":
            memory.store(("input", node), stepped.input, where=self.where, item="inputs")

    def restore(self, rec, memory, path, tokens, meter):
        state = memory.load(COMMITTED, item="checkpoint")
        for node in path:
            if self.scope == "layer":
                state = rec.step(state, tokens[node], meter=meter).state
            else:
                state = rec.update(state, memory.load(("input", node), item="inputs"), meter=meter)
        memory.store(COMMITTED, state, where="off_chip", item="committed")


#: One model's policies by name: (a) ``store``, (b) ``replay``, (c) ``recompute``,
#: and (c) restricted to the state's dependencies.
POLICIES = {
    "store": StoreStates(),
    "replay": StoreIntermediates(),
    "recompute": Recompute(),
    "recompute-state": Recompute(scope="state"),
}

_POLICY_TYPES = (StoreStates, StoreIntermediates, Recompute)


def check_policy(owner, field, policy):
    if not isinstance(policy, _POLICY_TYPES):
        raise TypeError(f"{owner}.{field} must be a StoreStates, StoreIntermediates or Recompute, "
                        f"not {policy!r}")
    return policy


@dataclass(frozen=True, kw_only=True)
class SpeculativeBacktracking:
    """Backtracking of a speculative step: one policy for the draft, one for the target.

    The SpecMamba notes' hybrid (d) is ``draft=StoreIntermediates(where="on_chip"),
    target=Recompute()``: the draft keeps Δ, A, B, x on chip, the target
    recomputes along the accepted path only (:data:`SYSTEM_POLICIES`).

    Parameters
    ----------
    draft, target : StoreStates, StoreIntermediates or Recompute
    """

    draft: object
    target: object

    def __post_init__(self):
        check_policy("SpeculativeBacktracking", "draft", self.draft)
        check_policy("SpeculativeBacktracking", "target", self.target)


#: The combinations the cost model compares. ``hybrid`` is the SpecMamba notes' (d);
#: ``hybrid-draft-stores`` the third-party reading in which the draft stores
#: full states; ``hybrid-selective`` restricts the target's re-run to
#: the state's dependencies.
SYSTEM_POLICIES = {
    "pure-store": SpeculativeBacktracking(draft=StoreStates(), target=StoreStates()),
    "pure-recompute": SpeculativeBacktracking(draft=Recompute(), target=Recompute()),
    "hybrid": SpeculativeBacktracking(draft=StoreIntermediates(where="on_chip"), target=Recompute()),
    "hybrid-draft-stores": SpeculativeBacktracking(draft=StoreStates(), target=Recompute()),
    "hybrid-selective": SpeculativeBacktracking(draft=StoreIntermediates(where="on_chip"),
                                                target=Recompute(scope="state")),
}


# -- running a step ----------------------------------------------------------------

@dataclass(frozen=True)
class TreePass:
    """The state of a speculative step after its tree pass, before restore.

    Attributes
    ----------
    rec : recurrence
    policy : StoreStates, StoreIntermediates or Recompute
    parents : numpy.ndarray
    tokens : tuple
        One token input per node.
    outputs : tuple of ndarray
        Each node's layer output (the target's would give its logits);
        ``None`` for a node the pass did not run.
    memory : BacktrackMemory
        What the policy kept, plus the committed state. The ring's node
        states are gone: restore can use only this.
    meter : CostMeter
    """

    rec: object
    policy: object
    parents: np.ndarray
    tokens: tuple
    outputs: tuple
    memory: BacktrackMemory
    meter: CostMeter


def check_path(parents, path):
    """Return ``path`` as a tuple after checking it runs from the root along tree edges.

    ``path`` is a sequence of node indices or an :class:`golden.tree.AcceptedPath`.
    """
    raw = path.nodes if isinstance(path, AcceptedPath) else path
    try:
        raw = tuple(raw)
    except TypeError:
        raise TypeError(f"path must be a sequence of node indices, not {path!r}") from None
    n = len(parents)
    nodes = []
    for k, v in enumerate(raw):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or not 0 <= v < n:
            raise ValueError(f"path[{k}] must be a node index in [0, {n - 1}], not {v!r}")
        nodes.append(int(v))
    nodes = tuple(nodes)
    if not nodes or nodes[0] != 0:
        raise ValueError(f"path must start at the root (node 0), not {nodes!r}")
    for k in range(1, len(nodes)):
        if parents[nodes[k]] != nodes[k - 1]:
            raise ValueError(f"path[{k}] must be a child of path[{k - 1}] = {nodes[k - 1]}, "
                             f"not node {nodes[k]} (child of {parents[nodes[k]]})")
    return nodes


def _run(rec, checkpoint, tokens, parents, meter):
    """Each node through ``rec.step`` from its parent's state, in BFS order; a node's
    state is dropped once its last child is done (the FIFO ring's release)."""
    dead = dead_times(parents)
    live = {}
    for i in range(parents.size):
        stepped = rec.step(checkpoint if i == 0 else live[int(parents[i])], tokens[i], meter=meter)
        yield stepped
        live[i] = stepped.state
        for j in [j for j in live if dead[j] <= i]:
            del live[j]


def tree_pass(rec, policy, *, checkpoint, tokens, parents, meter=None, steps=None):
    """Run every node of a draft tree through ``rec``, letting ``policy`` keep what it needs.

    Node ``i`` is processed from its parent's state (node 0 from
    ``checkpoint``) in breadth-first order, as the FIFO tree verification does
    (:mod:`golden.tree`); a node state is dropped once its last child is
    done. After each node, ``policy.record`` may store into the counted
    :class:`BacktrackMemory`.

    A pass computed elsewhere (the FIFO tile schedule of
    :func:`golden.speculative.evaluate_tree`, the drafting of
    :func:`golden.speculative.draft_tree`) gives its ``steps`` instead: the
    policy records them in node order just the same.

    Parameters
    ----------
    rec : recurrence
        Has ``step`` (and ``replay`` / ``update`` if the policy needs them).
    policy : StoreStates, StoreIntermediates or Recompute
    checkpoint : state
        The committed state before the root token.
    tokens : sequence
        One token input per node, ``tokens[i]`` for node ``i``.
    parents : sequence of int
        BFS parent array (:func:`golden.tree.validate_parents`).
    meter : CostMeter, optional
        Counts go to its ``"pass"`` phase.
    steps : sequence of Stepped or None, optional
        Per node, what ``rec.step`` gives from its parent's state, bit for
        bit; ``None`` for a node that was not run (a leaf the draft did not
        expand): nothing is kept for it and :func:`restore` refuses a path
        through it. Default: run ``rec.step``.

    Returns
    -------
    TreePass
    """
    policy = check_policy("tree_pass", "policy", policy)
    policy.check(rec)
    p = validate_parents(parents)
    tokens = tuple(tokens)
    if len(tokens) != p.size:
        raise ValueError(f"tokens must hold one input per node ({p.size}), not {len(tokens)}")
    meter = meter if meter is not None else CostMeter()
    meter.phase = "pass"
    if steps is None:
        steps = _run(rec, checkpoint, tokens, p, meter)
    elif len(steps) != p.size:
        raise ValueError(f"steps must hold one Stepped or None per node ({p.size}), not {len(steps)}")
    memory = BacktrackMemory(meter)
    memory.hold(COMMITTED, checkpoint)
    outputs = []
    for i, stepped in enumerate(steps):
        outputs.append(None if stepped is None else stepped.output)
        if stepped is not None:
            policy.record(memory, i, tokens[i], stepped)
    return TreePass(rec=rec, policy=policy, parents=p, tokens=tokens, outputs=tuple(outputs),
                    memory=memory, meter=meter)


def restore(tp, *, path):
    """Restore the state after the last node of ``path``; counts go to the ``"restore"`` phase.

    Parameters
    ----------
    tp : TreePass
    path : sequence of int or AcceptedPath
        Root first; ``(0,)`` when no draft token was accepted.

    Returns
    -------
    state
        The committed state for the next step.
    """
    if not isinstance(tp, TreePass):
        raise TypeError(f"restore needs a TreePass, not {tp!r}")
    nodes = check_path(tp.parents, path)
    skipped = [i for i in nodes if tp.outputs[i] is None]
    if skipped:
        raise ValueError(f"restore: path node {skipped[0]} was not run in the pass")
    tp.meter.phase = "restore"
    tp.policy.restore(tp.rec, tp.memory, nodes, tp.tokens, tp.meter)
    return tp.memory.peek(COMMITTED)


def backtrack(rec, policy, *, checkpoint, tokens, parents, path, meter=None):
    """:func:`tree_pass` then :func:`restore`: one model's speculative step.

    Returns
    -------
    (state, outputs)
    """
    tp = tree_pass(rec, policy, checkpoint=checkpoint, tokens=tokens, parents=parents, meter=meter)
    return restore(tp, path=path), tp.outputs


def speculative_backtrack(system, *, draft, target, draft_checkpoint, target_checkpoint,
                          draft_tokens, target_tokens, parents, path, draft_meter=None,
                          target_meter=None):
    """Both models of a speculative step, each under its policy of ``system``.

    The draft and the target see the same tree (each its own token inputs:
    the embeddings of the same token ids) and restore to the same accepted path.

    Returns
    -------
    (draft_state, target_state)
    """
    if not isinstance(system, SpeculativeBacktracking):
        raise TypeError(f"system must be a SpeculativeBacktracking, not {system!r}")
    d, _ = backtrack(draft, system.draft, checkpoint=draft_checkpoint, tokens=draft_tokens,
                     parents=parents, path=path, meter=draft_meter)
    t, _ = backtrack(target, system.target, checkpoint=target_checkpoint, tokens=target_tokens,
                     parents=parents, path=path, meter=target_meter)
    return d, t
