"""The accelerator's off-chip memory map: where every weight plane, state, record and buffer lives.

The accelerator feeds itself from HBM (VHK158) or DDR (VCK190); the host writes
registers only (four 64-bit base addresses, ``hw/regmap.py``) and the hardware
computes every other address from the constants of this map::

    address = BASE[class] + region.offset + layer·layer_stride (+ node·node_stride)

One weight set serves both passes (SPEQ self-speculation, arXiv 2510.18525): the
draft pass reads the nibble planes only, the target pass both planes. Each pass
keeps its own decode state, so the state and checkpoint classes hold one set per
model, ``target`` and ``draft``.

Region classes, each starting on a 4 KiB boundary and laid out in this order:

``weights``
    First ``ssm_params``, per layer the SSM engine's parameters ``A``, ``dt_bias``
    and ``D`` (binary32, ``nheads`` each), then per BSFP v1 matrix (:mod:`golden.bsfp`): the nibble plane ``{s, c}``
    (4 bits a weight) and the residue plane ``{W, e0, m9..m0}`` (12 bits a weight)
    in the linear engine's job layout (:func:`golden.weight_planes.pack_matrix`:
    output tiles of the array's ``rows · cols`` MAC slots, input chunks of
    ``linear.max_k``, each job's slice regions per weight port
    (:func:`golden.weight_planes.engine_weight_ports`) padded to the weight stream's word,
    :func:`golden.weight_planes.stream_word_bits`), so a job's planes are read in
    long sequential bursts; then the scale exponents ``k`` (one ``uint8`` per
    tensor, or per group of ``BSFPConfig.group_size`` along a row, row-major,
    ``rows = out_features``). The matrices are ``in_proj`` and
    ``out_proj`` per layer, and the embedding, which is also the LM head unless
    ``LMConfig.tie_embeddings`` is false (then ``lm_head`` follows). The other
    parameters of a layer are binary32 (``layer_params``: conv1d weight
    ``conv_dim × d_conv`` and bias, the block norm and the gated norm), and
    ``norm_f`` closes the class.
``state``
    First ``ssm``, per layer the SSM state slots of :data:`SSM_SLOTS`: two banks
    of each model's committed state (a commit pass reads one and writes the
    other, so a reset in mid-pass leaves the committed bank whole; the host
    flips ``STATE_BANK`` once the step is done) and two scratch slots the draft's
    tokens ping-pong between (a draft rollback is a change of slot, no copy).
    A slot holds ``nheads × headdim × d_state`` values in ``SSMConfig.state_format``
    in the SSM unit's tile order (row ``r = h·P + p``, ``⌈N/lanes⌉`` tiles of
    ``lanes`` values), striped over ``SSMConfig.state_ports`` (:func:`state_image`).
    Then the committed conv window ``(d_conv − 1) × conv_dim``
    of each model in binary32 (the layer state of :mod:`golden.backtrack`).
``checkpoint``
    What the backtracking policy (a key of :data:`MAP_POLICIES`) keeps off chip per
    tree node and layer, for ``TreeConfig.max_nodes`` nodes: full node states
    (``store``), replay records
    (``replay``: the raw conv row xBC, then x, B and dt, the words the state
    controller replays from; Δ and dA are recomputed from dt) or layer inputs
    (``recompute-state``). Records a policy keeps on chip have no region;
    :attr:`MemoryMap.on_chip_bytes` counts them.
``io``
    First ``ssm``, per layer the SSM engine's buffers of :data:`SSM_BUFFERS`: each
    model's node input records (``B``, ``C``, ``x``, ``dt`` per node, binary32,
    written by the layer's conv1d stage, read by the tree pass and again by the
    commit pass, which replays the accepted path from them) and its nodes' ``y``.
    Then token ids in and out (``uint32``, one per tree node) and the logits of each
    model's pass (binary32, ``max_nodes × vocab``).

Every region and every layer or node entry starts on a 4 KiB boundary, so the
bursts of an entry are cut at 4 KiB boundaries (AMBA AXI4) counting from its
start, and every stride is a multiple of the page.

The three ``ssm`` regions come first in their classes and are sized from the SSM
unit the hardware is built with (``config.ssm``, ``tree.max_nodes``), so their
offsets (0) and strides are constants of the hardware (:func:`ssm_engine_layout`)
for every model whose layer is no larger than the unit's; a map of a larger model
(a table of a layout the design cannot run) sizes them for the model.
"""

from dataclasses import dataclass, field

import numpy as np

from .backtrack import (
    SYSTEM_POLICIES,
    Recompute,
    SpeculativeBacktracking,
    StoreIntermediates,
    StoreStates,
)
from .config import Config
from .lm import LMConfig
from .mamba2 import MAMBA2_SIZES, SSMConfig
from .validate import check_choice
from .weight_planes import layout_args, matrix_draft_bytes, matrix_job_count, matrix_plane_bytes

__all__ = ["ALIGN", "REGION_CLASSES", "MODELS", "WORD_BYTES",
           "DEFAULT_POLICY", "MAP_POLICIES", "unit_checkpoint", "Region", "MemoryMap", "align", "replay_record_words",
           "layer_param_words", "SSM_SLOTS", "SSM_BUFFERS", "SSMEngineLayout", "ssm_engine_layout",
           "stripe_state", "unstripe_state", "state_image", "tile_order", "from_tile_order"]

#: Alignment of every region, layer entry and node entry: one 4 KiB page (AXI4's burst boundary).
ALIGN = 4096
#: Region classes, in address order; each has a 64-bit base register (``hw/regmap.py``).
REGION_CLASSES = ("weights", "state", "checkpoint", "io")
#: The two passes that keep a state of their own (SPEQ self-speculation).
MODELS = ("target", "draft")
#: Bytes of a binary32 value or a ``uint32`` token id.
WORD_BYTES = 4
#: The backtracking combination a map is laid out for unless told otherwise: the SpecMamba notes'
#: hybrid (draft replays from records on chip, target recomputes).
DEFAULT_POLICY = "hybrid"
#: The backtracking combinations a map can be laid out for: :data:`golden.backtrack.SYSTEM_POLICIES`
#: and the hybrid with the draft's replay records off chip. At board scale those records are
#: ``n_layer · max_nodes`` of them (about 175 MB for Mamba2-2.7B and 64 nodes), more than a part's
#: on-chip RAM is likely to spare, so the map must be able to hold them.
MAP_POLICIES = {**SYSTEM_POLICIES,
                "hybrid-records-off-chip": SpeculativeBacktracking(
                    draft=StoreIntermediates(where="off_chip"), target=Recompute())}

_STATE_BYTES = {"fp32": 4, "fp16": 2}

#: Slots of ``state.ssm`` per layer, in address order: the committed banks of both models and
#: the draft's two scratch slots.
SSM_SLOTS = ("target0", "target1", "draft0", "draft1", "scratch0", "scratch1")
#: Buffers of ``io.ssm`` per layer, in address order.
SSM_BUFFERS = ("target.in", "target.y", "draft.in", "draft.y")


@dataclass(frozen=True)
class SSMEngineLayout:
    """Sizes and strides (bytes) of the SSM engine's regions, from the SSM unit and the tree.

    ``record_bytes``: one node's input record ``4·(2N + H·P + H)``; ``y_bytes``: one
    node's ``y``, ``4·H·P``; ``state_bytes``: one state in the tile order,
    ``s·H·P·⌈N/lanes⌉·lanes``, striped over the state ports (:func:`stripe_state`),
    ``stripe_bytes`` a stripe; ``params_bytes``: ``A``, ``dt_bias``, ``D``, ``4·3H``.
    The strides are page multiples: ``slot_stride``/``state_layer_stride`` of
    ``state.ssm``, ``buffer_stride``/``io_layer_stride`` of ``io.ssm``,
    ``params_stride`` of ``weights.ssm_params``.
    """

    record_bytes: int
    y_bytes: int
    state_bytes: int
    stripe_bytes: int
    params_bytes: int
    slot_stride: int
    state_layer_stride: int
    buffer_stride: int
    io_layer_stride: int
    params_stride: int


def ssm_engine_layout(config, model=None):
    """The :class:`SSMEngineLayout` of ``config``'s SSM unit and tree (``golden.config.Config``).

    With ``model`` (a :class:`golden.lm.LMConfig`), each entry is also large enough for the
    model's layer: the strides are then the hardware's (those of ``config`` alone) exactly
    when the model's layer is no larger than the unit's, the only models the hardware runs.
    """
    if not isinstance(config, Config):
        raise TypeError(f"ssm_engine_layout: config must be a golden.config.Config, "
                        f"not {config!r}")
    c, nodes = config.ssm, config.tree.max_nodes
    s = _STATE_BYTES[c.state_format]
    H, P, N = c.state_shape
    record = WORD_BYTES * (2 * N + H * P + H)
    y = WORD_BYTES * H * P
    state = s * H * P * c.row_words
    params = WORD_BYTES * 3 * H
    if model is not None:
        if not isinstance(model, LMConfig):
            raise TypeError(f"ssm_engine_layout: model must be a golden.lm.LMConfig, "
                            f"not {model!r}")
        mH, mP, mN = model.nheads, model.headdim, model.d_state
        record = max(record, WORD_BYTES * (2 * mN + mH * mP + mH))
        y = max(y, WORD_BYTES * mH * mP)
        state = max(state, s * mH * mP * mN)
        params = max(params, WORD_BYTES * 3 * mH)
    slot = align(state)
    buffer = align(nodes * max(record, y))
    return SSMEngineLayout(record_bytes=record, y_bytes=y, state_bytes=state,
                           stripe_bytes=state // c.state_ports, params_bytes=params,
                           slot_stride=slot, state_layer_stride=slot * len(SSM_SLOTS),
                           buffer_stride=buffer, io_layer_stride=buffer * len(SSM_BUFFERS),
                           params_stride=align(params))


def stripe_state(words, *, lanes, ports):
    """A state in the SSM unit's tile order (``words``: a flat array whose length is a
    multiple of ``lanes``, one unit word of ``lanes`` elements after another) in its
    memory order over ``ports`` state ports: stripe ``p`` (``len(words)/ports`` elements,
    the stripes back to back) holds elements ``p·w … p·w + w − 1`` (``w = lanes/ports``)
    of every unit word, in word order.

    Port ``p`` then reads (and writes) its stripe as one linear region, and the unit's
    word is the ports' slices side by side: the ports share the state's traffic
    evenly, with no reordering on chip. One port: the tile order itself.
    """
    a = np.asarray(words)
    if a.ndim != 1 or lanes < 1 or ports < 1 or lanes % ports or a.size % lanes:
        raise ValueError(f"stripe_state: {a.size} elements in words of {lanes} lanes over "
                         f"{ports} ports (ports must divide lanes, lanes the length)")
    return a.reshape(-1, ports, lanes // ports).transpose(1, 0, 2).reshape(-1)


def state_image(ssm, state):
    """A layer's SSM state (``ssm.state_shape`` values, any dtype) in its memory order:
    the unit's tile order (:func:`tile_order`), striped over ``ssm.state_ports``
    (:func:`stripe_state`)."""
    return stripe_state(tile_order(ssm, state), lanes=ssm.lanes, ports=ssm.state_ports)


def tile_order(ssm, state):
    """A layer's SSM state (``ssm.state_shape`` values, any dtype) in the unit's tile order,
    flat: row ``r = h·P + p`` after row ``r − 1``, each of ``N`` columns padded with zeros
    to ``ssm.row_words`` (``⌈N/lanes⌉·lanes`` when ``lanes ≤ d_state``). Word ``a`` of the
    unit's state port is elements ``a·lanes … a·lanes + lanes − 1``: tile ``k`` of row
    ``r`` at ``a = r·⌈N/lanes⌉ + k`` (``lanes ≤ d_state``), or rows ``a·Q … a·Q + Q − 1``
    (``Q = lanes/d_state`` rows of a head a word)."""
    H, P, N = ssm.state_shape
    a = np.asarray(state)
    if a.shape != (H, P, N):
        raise ValueError(f"tile_order: a state of shape {a.shape}, the unit's is {(H, P, N)}")
    rows = np.zeros((H * P, ssm.row_words), dtype=a.dtype)
    rows[:, :N] = a.reshape(H * P, N)
    return rows.reshape(-1)


def from_tile_order(ssm, words):
    """Inverse of :func:`tile_order`: the ``state_shape`` state of a flat tile order (the
    padding columns dropped)."""
    H, P, N = ssm.state_shape
    a = np.asarray(words)
    if a.size != H * P * ssm.row_words:
        raise ValueError(f"from_tile_order: {a.size} elements, the unit's tile order has "
                         f"{H * P * ssm.row_words}")
    return a.reshape(H * P, ssm.row_words)[:, :N].reshape(H, P, N)


def unstripe_state(words, *, lanes, ports):
    """The inverse of :func:`stripe_state`: a state in memory order back in the tile order."""
    a = np.asarray(words)
    if a.ndim != 1 or lanes < 1 or ports < 1 or lanes % ports or a.size % lanes:
        raise ValueError(f"unstripe_state: {a.size} elements in words of {lanes} lanes over "
                         f"{ports} ports (ports must divide lanes, lanes the length)")
    return a.reshape(ports, -1, lanes // ports).transpose(1, 0, 2).reshape(-1)


def unit_checkpoint(config):
    """The Mamba2 checkpoint (a key of :data:`golden.mamba2.MAMBA2_SIZES`) whose layer the SSM unit
    of ``config`` is built for (same heads, ``headdim`` and ``d_state``), or ``None``.

    The hardware's layout constants come from the map of that model,
    ``MemoryMap.build(config=config, model=LMConfig.from_model(unit_checkpoint(config)))``.
    """
    if not isinstance(config, Config):
        raise TypeError(f"unit_checkpoint: config must be a golden.config.Config, not {config!r}")
    ssm = config.ssm
    for size in MAMBA2_SIZES:
        layer = SSMConfig.from_model(size)
        if (layer.nheads, layer.headdim, layer.d_state) == (ssm.nheads, ssm.headdim, ssm.d_state):
            return size
    return None


def align(n, to=ALIGN):
    """``n`` rounded up to a multiple of ``to``."""
    return -(-n // to) * to


def replay_record_words(model):
    """Words of one node's replay record in one layer: raw xBC (``conv_dim``), x, B, dt."""
    return model.conv_dim + model.d_inner + model.d_state + model.nheads


def layer_param_words(model):
    """binary32 words of a layer's ``layer_params``: conv1d weight and bias, two norms
    (``A``, ``dt_bias`` and ``D`` are in ``weights.ssm_params``)."""
    return model.conv_dim * model.d_conv + model.conv_dim + model.d_model + model.d_inner


@dataclass(frozen=True, kw_only=True)
class Region:
    """One named array of entries in the memory map.

    Parameters
    ----------
    name : str
        Dotted name, class first (``"weights.in_proj.nibble"``).
    kind : str
        Its class, one of :data:`REGION_CLASSES`.
    offset : int
        Bytes from the class's base address to entry 0; a multiple of :data:`ALIGN`.
    size : int
        Bytes of one entry (unpadded).
    dims : tuple of (str, int, int)
        ``(index name, count, stride in bytes)``, outermost first; ``()`` for a
        single entry. Strides are multiples of :data:`ALIGN`.
    description : str
        What an entry holds.
    """

    name: str
    kind: str
    offset: int
    size: int
    dims: tuple = ()
    description: str = ""

    @property
    def entries(self):
        n = 1
        for _, count, _ in self.dims:
            n *= count
        return n

    @property
    def span(self):
        """Bytes from entry 0 to the end of the last entry's padding."""
        if not self.dims:
            return align(self.size)
        return sum((count - 1) * stride for _, count, stride in self.dims) + align(self.size)

    @property
    def end(self):
        """First class offset after the region."""
        return self.offset + self.span

    def stride(self, index):
        """Stride of the index named ``index`` (``"layer"``, ``"node"``)."""
        for name, _, stride in self.dims:
            if name == index:
                return stride
        raise KeyError(f"Region {self.name} has no index {index!r}; it has "
                       f"{', '.join(n for n, _, _ in self.dims) or 'none'}")

    def entry_offset(self, **index):
        """Class offset of one entry: ``offset + Σ index·stride``; every index of :attr:`dims` needed."""
        names = [n for n, _, _ in self.dims]
        if set(index) != set(names):
            raise ValueError(f"Region {self.name}: give the indices {names}, not {sorted(index)}")
        at = self.offset
        for name, count, stride in self.dims:
            i = index[name]
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < count:
                raise ValueError(f"Region {self.name}: {name} must be an integer in "
                                 f"[0, {count - 1}], not {i!r}")
            at += i * stride
        return at


@dataclass(frozen=True, kw_only=True)
class MemoryMap:
    """The memory map of a model on the accelerator built from a config; build with :meth:`build`.

    Attributes
    ----------
    config : golden.config.Config
    model : golden.lm.LMConfig
    policy : str
        Key of :data:`MAP_POLICIES`.
    regions : tuple of Region
        In address order.
    class_offsets : tuple of (str, int)
        Default offset of each class from the start of one contiguous buffer
        (the base addresses the registers hold when the host places the classes
        back to back).
    on_chip_bytes : int
        Bytes the policy keeps on chip (records with ``where="on_chip"``): no region holds them.
    """

    config: Config
    model: LMConfig
    policy: str
    regions: tuple
    class_offsets: tuple
    on_chip_bytes: int = 0
    _index: dict = field(default=None, repr=False, compare=False)

    @classmethod
    def build(cls, *, config, model, policy=DEFAULT_POLICY, check_capacity=True):
        """Lay out ``model`` for the accelerator of ``config``.

        Parameters
        ----------
        config : golden.config.Config
            Gives the tree (``max_nodes``), the state format and the board.
        model : golden.lm.LMConfig
            The model's dimensions (``LMConfig.from_model("2.7B")`` for the board presets).
        policy : str
            A key of :data:`MAP_POLICIES`.
        check_capacity : bool
            ``False`` skips the capacity check (to tabulate layouts that do not fit).

        Raises
        ------
        ValueError
            If the layout needs more than ``BoardConfig.memory_bytes`` (when that is not 0).
        """
        if not isinstance(config, Config):
            raise TypeError(f"MemoryMap.config must be a golden.config.Config, not {config!r}")
        if not isinstance(model, LMConfig):
            raise TypeError(f"MemoryMap.model must be a golden.lm.LMConfig, not {model!r}")
        check_choice("MemoryMap", "policy", policy, tuple(MAP_POLICIES))
        system = MAP_POLICIES[policy]
        m, nodes, bsfp = model, config.tree.max_nodes, config.bsfp
        L = m.n_layer
        regions, offsets, on_chip = [], [], 0
        cursor = [0]  # next free class offset

        def add(kind, name, size, description, layers=1, node_count=None, inner="node"):
            entry = align(size)
            dims = []
            if node_count is not None:
                dims.append((inner, node_count, entry))
                entry *= node_count
            if layers > 1 or node_count is not None:
                dims.insert(0, ("layer", layers, entry))
            r = Region(name=f"{kind}.{name}", kind=kind, offset=cursor[0], size=size,
                       dims=tuple(dims), description=description)
            regions.append(r)
            cursor[0] = r.end

        def scale_bytes(rows, cols):
            return 1 if bsfp.group_size is None else rows * -(-cols // bsfp.group_size)

        lin = config.linear
        layout = layout_args(config)

        def matrix(name, rows, cols, layers, what):
            shape = f"{rows} × {cols}"
            nib, res = matrix_plane_bytes(rows, cols, **layout)
            jobs = matrix_job_count(rows, cols, rows=lin.rows, cols=lin.cols, max_k=lin.max_k,
                                    split=lin.split_tiles)
            add("weights", f"{name}.nibble", nib,
                f"{what}: BSFP nibble plane {{s, c}}, {shape} in {jobs} jobs, the draft pass "
                f"reads only this", layers)
            add("weights", f"{name}.residue", res,
                f"{what}: BSFP residue plane {{W, e0, m}}, {shape} in {jobs} jobs, read by the "
                f"target pass", layers)
            add("weights", f"{name}.scales", scale_bytes(rows, cols),
                f"{what}: BSFP scale exponents k (uint8)", layers)
            if lin.draft_plane:
                add("weights", f"{name}.draft",
                    matrix_draft_bytes(rows, cols, **layout),
                    f"{what}: the nibble plane again, striped over each weight stream's four "
                    f"read masters for the draft pass (linear.draft_plane)", layers)

        eng = ssm_engine_layout(config, m)
        base = 0
        for kind in REGION_CLASSES:
            cursor[0] = 0
            if kind == "weights":
                add("weights", "ssm_params", eng.params_bytes,
                    "binary32 A = −exp(A_log), dt_bias, D of the SSM unit's heads", L)
                matrix("embedding", m.vocab, m.d_model, 1,
                       "embedding" + (" and tied LM head" if m.tie_embeddings else ""))
                matrix("in_proj", m.d_in_proj, m.d_model, L, "in_proj per layer")
                matrix("out_proj", m.d_model, m.d_inner, L, "out_proj per layer")
                add("weights", "layer_params", layer_param_words(m) * WORD_BYTES,
                    "binary32 conv1d weight and bias, norm, gated norm", L)
                if not m.tie_embeddings:
                    matrix("lm_head", m.vocab, m.d_model, 1, "LM head")
                add("weights", "norm_f", m.d_model * WORD_BYTES, "binary32 final norm weight")
            elif kind == "state":
                add("state", "ssm", eng.state_bytes,
                    f"SSM state slots {', '.join(SSM_SLOTS)}: nheads × headdim × d_state "
                    f"({config.ssm.state_format}, tile order"
                    + (f", striped over {config.ssm.state_ports} ports" if config.ssm.state_ports > 1
                       else "") + ")", L, len(SSM_SLOTS), inner="slot")
                for who in MODELS:
                    add("state", f"{who}.conv", m.conv_elems * WORD_BYTES,
                        f"{who}: committed conv window (d_conv − 1) × conv_dim (binary32)", L)
            elif kind == "checkpoint":
                s = _STATE_BYTES[config.ssm.state_format]
                for who in MODELS:
                    p = getattr(system, who)
                    if isinstance(p, StoreStates):
                        add("checkpoint", f"{who}.node_ssm", m.state_elems * s,
                            f"{who} (store): SSM state after each node", L, nodes)
                        add("checkpoint", f"{who}.node_conv", m.conv_elems * WORD_BYTES,
                            f"{who} (store): conv window after each node", L, nodes)
                        continue
                    if isinstance(p, StoreIntermediates):
                        name, size = "replay", replay_record_words(m) * WORD_BYTES
                        what = "replay record per node: raw xBC, x, B, dt (binary32)"
                    elif p.scope == "state":
                        name, size = "inputs", m.d_model * WORD_BYTES
                        what = "layer input per node (binary32)"
                    else:
                        continue  # Recompute(scope="layer") re-runs the model: it keeps nothing
                    if p.where == "on_chip":
                        on_chip += L * nodes * size
                    else:
                        add("checkpoint", f"{who}.{name}", size, f"{who} ({p.name}): {what}", L,
                            nodes)
            else:
                add("io", "ssm", eng.buffer_stride,
                    f"SSM engine buffers {', '.join(SSM_BUFFERS)}: max_nodes input records "
                    f"(B, C, x, dt) or y (binary32)", L, len(SSM_BUFFERS), inner="buffer")
                add("io", "tokens_in", nodes * WORD_BYTES, "token id of every tree node (uint32)")
                add("io", "tokens_out", nodes * WORD_BYTES,
                    "draft tokens, or the accepted path's tokens (uint32)")
                for who in MODELS:
                    add("io", f"{who}.logits", nodes * m.vocab * WORD_BYTES,
                        f"{who}: logits of every node, max_nodes × vocab (binary32)")
            offsets.append((kind, base))
            base += cursor[0]
        mm = cls(config=config, model=model, policy=policy, regions=tuple(regions),
                 class_offsets=tuple(offsets), on_chip_bytes=on_chip)
        if not isinstance(check_capacity, bool):
            raise TypeError(f"MemoryMap.check_capacity must be True or False, not {check_capacity!r}")
        if check_capacity:
            mm._check_capacity()
        return mm

    def __post_init__(self):
        object.__setattr__(self, "_index", {r.name: r for r in self.regions})

    def __getitem__(self, name):
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"MemoryMap has no region {name!r}; it has "
                           f"{', '.join(self._index)}") from None

    def __iter__(self):
        return iter(self.regions)

    def class_offset(self, kind):
        check_choice("MemoryMap", "class", kind, REGION_CLASSES)
        return dict(self.class_offsets)[kind]

    def class_size(self, kind):
        """Bytes of a class (a multiple of :data:`ALIGN`); 0 for an empty one."""
        check_choice("MemoryMap", "class", kind, REGION_CLASSES)
        return sum(r.span for r in self.regions if r.kind == kind)

    @property
    def total_bytes(self):
        """Bytes of all four classes placed back to back."""
        return sum(self.class_size(k) for k in REGION_CLASSES)

    def address(self, name, *, bases=None, **index):
        """Byte address of an entry of region ``name``.

        ``bases`` maps a class to its base address (the ``MEM_*_BASE`` registers);
        by default the classes sit back to back from address 0 (:attr:`class_offsets`).
        ``index`` gives ``layer`` and/or ``node`` as the region has them.
        """
        r = self[name]
        base = (bases or dict(self.class_offsets))[r.kind]
        return base + r.entry_offset(**index)

    def _check_capacity(self):
        board = self.config.board
        cap = board.memory_bytes
        if cap and self.total_bytes > cap:
            raise ValueError(
                f"MemoryMap: the layout needs {self.total_bytes:,} bytes "
                f"({self.total_bytes / 2**30:.2f} GiB), more than BoardConfig.memory_bytes = "
                f"{cap:,} of board {board.name!r}; allowed: layouts of at most {cap:,} bytes "
                f"(a smaller LMConfig, TreeConfig.max_nodes or MemoryMap.policy, one of "
                f"{', '.join(MAP_POLICIES)})")

