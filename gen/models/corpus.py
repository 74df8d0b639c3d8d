"""The training corpus of the shipped models: CPython 3.11's own standard-library sources.

Byte-level, offline and licence-compatible: the top-level ``.py`` modules of the
standard library that ships with the interpreter (``sysconfig`` ``stdlib`` path),
distributed by the Python Software Foundation under the PSF License Agreement
(``LICENSE.txt`` next to them). No package is downloaded.

Assembly, so that anyone can rebuild it and check its sha256:

* the files ``<stdlib>/*.py`` (no sub-packages), sorted by name, except
  ``_sysconfigdata_*`` (generated per machine at build time);
* every 10th file of that list (indices 9, 19, …) is held out, whole, so a held-out
  prompt never shares a file with the training text;
* each split is the concatenation of its files' bytes, each file followed by
  one form feed (``\\x0c``) as a separator.

The shipped manifest records both splits' sha256 (:data:`gen.models.MANIFEST`);
:func:`load_corpus` raises if this interpreter's files give other bytes.
"""

import hashlib
import sysconfig
from pathlib import Path

__all__ = ["HOLDOUT_EVERY", "SEPARATOR", "corpus_files", "load_corpus", "sha256"]

#: Every ``HOLDOUT_EVERY``-th file (1-based) goes to the held-out split.
HOLDOUT_EVERY = 10
#: Between files: a byte that is rare in Python sources.
SEPARATOR = b"\x0c"


def corpus_files(stdlib=None):
    """The corpus files, sorted, as ``(train, heldout)`` lists of paths."""
    root = Path(sysconfig.get_paths()["stdlib"] if stdlib is None else stdlib)
    files = sorted(p for p in root.glob("*.py") if not p.name.startswith("_sysconfigdata_"))
    if not files:
        raise FileNotFoundError(f"no standard-library .py files under {root}")
    heldout = [p for i, p in enumerate(files) if i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1]
    train = [p for i, p in enumerate(files) if i % HOLDOUT_EVERY != HOLDOUT_EVERY - 1]
    return train, heldout


def sha256(data):
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def load_corpus(*, expect=None, stdlib=None):
    """The two splits as bytes: ``{"train": ..., "heldout": ...}``.

    Parameters
    ----------
    expect : mapping of str to str, optional
        ``{"train": sha256, "heldout": sha256}``; raise ``ValueError`` naming the
        split if the bytes differ (another CPython release has other sources).
    """
    splits = {name: b"".join(p.read_bytes() + SEPARATOR for p in files)
              for name, files in zip(("train", "heldout"), corpus_files(stdlib))}
    for name, want in (expect or {}).items():
        got = sha256(splits[name])
        if got != want:
            raise ValueError(f"corpus split {name!r} has sha256 {got}, the manifest records {want}; "
                             f"the corpus is CPython 3.11.7's standard library")
    return splits
