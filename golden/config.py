"""One frozen configuration object, with named presets, for every consumer.

``hw`` sizes its RTL from these objects, ``golden`` its models, ``gen`` its
output and the performance model its estimates, so no number is typed twice.
Block configs validate eagerly in ``__post_init__``; a bad field raises with a
message that names the field and the allowed values.

Presets
-------
``sim``
    Small dimensions that simulate in seconds on Verilator.
``vck190``, ``vhk158``
    The two Versal boards of the SpecMamba paper (SPEC §5).
"""

from dataclasses import dataclass, field, replace

from .validate import check_choice, check_float, check_int

__all__ = ["TreeConfig", "BoardConfig", "Config", "PRESETS", "preset", "preset_names"]


@dataclass(frozen=True, kw_only=True)
class TreeConfig:
    """SpecMamba FIFO-based tree verification.

    Parameters
    ----------
    fifo_depth : int
        Live state slots in the ring buffer (seed: 16).
    tile_size : int
        Hidden-state elements per tile (seed: 64).
    max_nodes : int
        Largest flattened draft tree the verifier accepts.
    """

    fifo_depth: int = 16
    tile_size: int = 64
    max_nodes: int = 64

    def __post_init__(self):
        check_int("TreeConfig", "fifo_depth", self.fifo_depth, min=1)
        check_int("TreeConfig", "tile_size", self.tile_size, min=1)
        check_int("TreeConfig", "max_nodes", self.max_nodes, min=1)

    @property
    def slot_bits(self):
        """Width of a state-slot index held in the ring buffer."""
        return max(1, (self.fifo_depth - 1).bit_length())


@dataclass(frozen=True, kw_only=True)
class BoardConfig:
    """Target board.

    Parameters
    ----------
    name : str
        Preset name.
    part : str or None
        Vivado part number; ``None`` for the simulation-only preset.
    clock_mhz : float
        Fabric clock the design is constrained to.
    memory : str
        ``"DDR"`` or ``"HBM"`` (or ``"none"`` for simulation).
    mem_bw_gbs : float
        Off-chip memory bandwidth in GB/s (SPEC §5, seed figures).
    dsp58 : int
        DSP58 slices on the part.
    """

    name: str
    part: str | None
    clock_mhz: float
    memory: str
    mem_bw_gbs: float
    dsp58: int

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"BoardConfig.name must be a non-empty string, not {self.name!r}")
        if self.part is not None and (not isinstance(self.part, str) or not self.part):
            raise TypeError(f"BoardConfig.part must be a non-empty string or None, not {self.part!r}")
        check_float("BoardConfig", "clock_mhz", self.clock_mhz, min=1.0, max=1000.0)
        check_choice("BoardConfig", "memory", self.memory, ("DDR", "HBM", "none"))
        check_float("BoardConfig", "mem_bw_gbs", self.mem_bw_gbs, min=0.0)
        check_int("BoardConfig", "dsp58", self.dsp58, min=0)


@dataclass(frozen=True, kw_only=True)
class Config:
    """Top-level configuration: a board plus every block config."""

    name: str
    board: BoardConfig
    tree: TreeConfig = field(default_factory=TreeConfig)

    def __post_init__(self):
        if not isinstance(self.board, BoardConfig):
            raise TypeError(f"Config.board must be a BoardConfig, not {self.board!r}")
        if not isinstance(self.tree, TreeConfig):
            raise TypeError(f"Config.tree must be a TreeConfig, not {self.tree!r}")

    def replace(self, **changes):
        """Return a copy with ``changes`` applied (and validated)."""
        return replace(self, **changes)

    def to_dict(self):
        """Plain-dict view for manifests and JSON reports."""
        from dataclasses import asdict
        return asdict(self)


_SIM = BoardConfig(name="sim", part=None, clock_mhz=100.0, memory="none", mem_bw_gbs=0.0, dsp58=0)
_VCK190 = BoardConfig(name="vck190", part="xcvc1902-vsva2197-2MP-e-S", clock_mhz=400.0,
                      memory="DDR", mem_bw_gbs=12.0, dsp58=1968)
_VHK158 = BoardConfig(name="vhk158", part="xcvh1582-vsva3697-2MP-e-S", clock_mhz=250.0,
                      memory="HBM", mem_bw_gbs=819.0, dsp58=7392)

PRESETS = {
    "sim": Config(name="sim", board=_SIM, tree=TreeConfig(fifo_depth=16, tile_size=8, max_nodes=64)),
    "vck190": Config(name="vck190", board=_VCK190, tree=TreeConfig(fifo_depth=16, tile_size=64)),
    "vhk158": Config(name="vhk158", board=_VHK158, tree=TreeConfig(fifo_depth=16, tile_size=64)),
}


def preset_names():
    """Names accepted by :func:`preset`, in a stable order."""
    return tuple(PRESETS)


def preset(name):
    """Return the named preset ``Config``.

    Raises
    ------
    ValueError
        If ``name`` is not a preset; the message lists the allowed names.
    """
    if name not in PRESETS:
        allowed = ", ".join(preset_names())
        raise ValueError(f"unknown board {name!r}; allowed: {allowed}")
    return PRESETS[name]
