"""The sweep file: which designs and which step a ``specgen sweep`` evaluates.

A TOML file::

    [sweep]
    mode = "grid"              # every combination of the axes; or "random"
    samples = 8                # random: points drawn (without repetition)
    seed = 1                   # random: the draw's seed

    [design]
    board = "vhk158"           # the preset each point starts from, unless an axis names it
    set = ["tree.max_nodes=64"]  # fixed --set overrides, applied before the axes'

    [step]
    target = "2.7B"
    draft = "370M"
    accept = 4.91              # committed tokens/step; or alpha = 0.8
    sizing = "preset"

    [axes]
    board = ["vhk158", "vck190"]      # board presets
    tree = ["2,2,1,1", "chain4"]      # tree shapes, as specgen perf --tree
    "linear.rows" = [64, 128]         # any other key: a --set key path and its values
    "board.clock_mhz" = [250, 300]

Each point is a dict ``{axis: value}``; its id (:func:`point_id`) is a hash of it, so a
re-run finds the points already written.
"""

import hashlib
import itertools
import json
import random
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SweepSpec", "load_spec", "point_id", "MODES", "SpecError"]

MODES = ("grid", "random")
_SECTIONS = ("sweep", "design", "step", "axes")
_STEP_KEYS = ("target", "draft", "accept", "alpha", "sizing", "policy")


class SpecError(ValueError):
    """A sweep file that cannot be used; the message names the key and what is allowed."""


def point_id(point):
    """A stable 12-hex-digit id of a point (its sorted JSON)."""
    return hashlib.sha1(json.dumps(point, sort_keys=True).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep file (module docstring)."""

    axes: dict
    mode: str = "grid"
    samples: int | None = None
    seed: int = 0
    board: str | None = None
    overrides: tuple = ()
    step: dict = field(default_factory=dict)

    def points(self):
        """Every point of the grid, or the random sample, in a reproducible order."""
        keys = sorted(self.axes)
        grid = [dict(zip(keys, values)) for values in
                itertools.product(*(self.axes[k] for k in keys))]
        if self.mode == "random":
            rng = random.Random(self.seed)
            grid = rng.sample(grid, min(self.samples, len(grid)))
        return grid


def _fail(path, msg):
    raise SpecError(f"{path}: {msg}")


def load_spec(path):
    """Read and check a sweep file.

    Raises
    ------
    SpecError
        Unreadable file, bad TOML, an unknown section or key, an empty axis; the message
        names the file, the key and the allowed values.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        _fail(path, "no such file")
    except (OSError, UnicodeDecodeError) as exc:
        _fail(path, f"cannot read: {exc}")
    except tomllib.TOMLDecodeError as exc:
        _fail(path, f"not valid TOML: {' '.join(str(exc).split())}")
    for key in data:
        if key not in _SECTIONS:
            _fail(path, f"unknown section [{key}]; allowed: {', '.join(_SECTIONS)}")
        if not isinstance(data[key], dict):
            _fail(path, f"[{key}] must be a table")
    sweep, design, step = data.get("sweep", {}), data.get("design", {}), data.get("step", {})
    axes = data.get("axes", {})
    for key in sweep:
        if key not in ("mode", "samples", "seed"):
            _fail(path, f"unknown key sweep.{key}; allowed: mode, samples, seed")
    for key in design:
        if key not in ("board", "set"):
            _fail(path, f"unknown key design.{key}; allowed: board, set")
    for key in step:
        if key not in _STEP_KEYS:
            _fail(path, f"unknown key step.{key}; allowed: {', '.join(_STEP_KEYS)}")
    mode = sweep.get("mode", "grid")
    if mode not in MODES:
        _fail(path, f"sweep.mode must be one of {', '.join(MODES)}, not {mode!r}")
    samples = sweep.get("samples")
    if mode == "random" and (not isinstance(samples, int) or samples < 1):
        _fail(path, f"sweep.samples must be an integer >= 1 with mode random, not {samples!r}")
    seed = sweep.get("seed", 0)
    if not isinstance(seed, int):
        _fail(path, f"sweep.seed must be an integer, not {seed!r}")
    if not axes:
        _fail(path, "[axes] must give at least one axis (board, tree or a --set key path)")
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            _fail(path, f"axes.{key} must be a non-empty list of values, not {values!r}")
    overrides = design.get("set", [])
    if not isinstance(overrides, list) or not all(isinstance(s, str) for s in overrides):
        _fail(path, f"design.set must be a list of 'key=value' strings, not {overrides!r}")
    board = design.get("board")
    if board is None and "board" not in axes:
        _fail(path, "give design.board or a board axis")
    for key in ("target", "draft"):
        if key not in step:
            _fail(path, f"step.{key} is required (e.g. target = \"2.7B\", draft = \"370M\")")
    if ("accept" in step) == ("alpha" in step) and step.get("draft") != "none":
        _fail(path, "give step.accept (tokens/step) or step.alpha (acceptance rate), one of them")
    return SweepSpec(axes={k: list(v) for k, v in axes.items()}, mode=mode, samples=samples,
                     seed=seed, board=board, overrides=tuple(overrides), step=dict(step))
