"""Load golden vector sets written by ``specgen golden`` (checked against the
manifest's sha256 before use, so a bench never runs on a corrupted file)."""

import hashlib
import json
from pathlib import Path

import numpy as np

__all__ = ["load_set", "VectorError"]


class VectorError(ValueError):
    pass


def load_set(folder, name):
    """Arrays of set ``name`` in ``folder`` as ``{array: ndarray}``.

    Raises
    ------
    VectorError
        If the manifest is missing or malformed, the set is unknown, or the
        file's sha256 does not match the manifest.
    """
    folder = Path(folder)
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        files, sets = manifest["files"], manifest["sets"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise VectorError(f"{folder}: not a golden vector folder (manifest.json: {exc})") from None
    if name not in sets:
        raise VectorError(f"{folder}: no set {name!r}; available: {', '.join(sorted(sets))}")
    path = folder / f"{name}.npz"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if files.get(path.name) != digest:
        raise VectorError(f"{path}: sha256 {digest} does not match the manifest")
    with np.load(path, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}
