"""The shipped byte-level Mamba2 models: a target and a smaller draft, trained offline.

The weights live in ``gen/models/data/`` (package data, so an installed
``specgen`` has them): one FP16 ``.safetensors`` file per model, as the
accelerator stores weights, and ``manifest.json`` with each model's
:class:`golden.lm.LMConfig`, the file's sha256, the training record (seed,
steps, wall time, loss curve, held-out loss) and the corpus's sha256. They are
not under ``golden/``: golden is the specification, these are data it runs.
The recipe is :mod:`gen.models.train` (torch, ``make models``); the model card
is ``docs/models.md``. Reading them needs only numpy (:func:`golden.lm.load_tensors`).
"""

import hashlib
import json
from functools import lru_cache
from pathlib import Path

__all__ = ["DATA_DIR", "MANIFEST_NAME", "manifest", "model_names", "model_path", "load_model"]

DATA_DIR = Path(__file__).parent / "data"
MANIFEST_NAME = "manifest.json"


@lru_cache(maxsize=None)
def _manifest(path):
    return json.loads(Path(path).read_text())


def manifest():
    """The manifest, as a dict (``{"corpus": ..., "models": {name: record}}``)."""
    return _manifest(str(DATA_DIR / MANIFEST_NAME))


def model_names():
    """Names of the shipped models, in manifest order (``("target", "draft")``)."""
    return tuple(manifest()["models"])


def model_path(name):
    """The weight file of shipped model ``name``."""
    from specgen.golden.validate import check_choice
    check_choice("gen.models", "model", name, model_names())
    return DATA_DIR / manifest()["models"][name]["file"]


def load_model(name, *, verify=True):
    """Shipped model ``name`` as a :class:`golden.lm.MambaLM` (float64 copies of the FP16 weights).

    Parameters
    ----------
    name : str
        One of :func:`model_names`.
    verify : bool
        Check the file's sha256 against the manifest first.

    Raises
    ------
    ValueError
        Unknown name (listing the shipped ones), or a sha256 mismatch.
    """
    from specgen.golden.lm import LMConfig, MambaLM
    path = model_path(name)
    record = manifest()["models"][name]
    if verify:
        got = hashlib.sha256(path.read_bytes()).hexdigest()
        if got != record["sha256"]:
            raise ValueError(f"{path}: sha256 {got} differs from the manifest's {record['sha256']}")
    return MambaLM.load(path, config=LMConfig(**record["config"]))
