"""Atomic output folders, atomic files and manifests for every ``specgen`` command.

A command writes into a fresh temporary folder beside the target and renames
it into place only when everything succeeded, so an error never leaves a
half-written output behind. A command that adds pages to a shared folder
(``docs``) writes each file through a temporary file and a rename instead
(:func:`write_files`).
"""

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from .errors import CLIError

__all__ = ["atomic_dir", "write_files", "write_manifest", "sha256_file"]

MANIFEST = "manifest.json"


@contextlib.contextmanager
def atomic_dir(out):
    """Yield a temporary folder that replaces ``out`` when the block succeeds.

    ``out`` may not exist yet, may be empty, or may be an earlier output of
    specgen (it holds ``manifest.json``); anything else is refused, so a typo
    never wipes a user's folder.
    """
    out = Path(out).absolute()
    if out.exists():
        if not out.is_dir():
            raise CLIError(f"--out {str(out)!r} exists and is not a folder")
        if any(out.iterdir()) and not (out / MANIFEST).is_file():
            raise CLIError(f"--out {str(out)!r} is a non-empty folder not written by specgen; "
                           "choose an empty or new folder")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    except OSError as exc:
        raise CLIError(f"cannot write --out {str(out)!r}: {exc.strerror or exc}") from None
    try:
        yield tmp
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old)
        else:
            os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_files(out, files):
    """Write ``{name: bytes}`` into the folder ``out``, each file atomically.

    ``out`` is created if missing; other files in it are left alone. Each file
    is written to a temporary file beside it and renamed over it, so a reader
    never sees half a file, and gets the permissions a new file would (the
    umask), not ``mkstemp``'s 0600: a page is world-readable.

    Returns
    -------
    list of pathlib.Path
        The files written, in the order of ``files``.

    Raises
    ------
    CLIError
        If ``out`` is not a folder or cannot be written.
    """
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise CLIError(f"--out {str(folder)!r} exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"cannot write --out {str(folder)!r}: {exc.strerror or exc}") from None
    umask = os.umask(0)
    os.umask(umask)
    paths = []
    for name, data in files.items():
        path = folder / name
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
        except OSError as exc:
            raise CLIError(f"cannot write --out {str(folder)!r}: {exc.strerror or exc}") from None
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        paths.append(path)
    return paths


def sha256_file(path):
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_manifest(folder, **fields):
    """Write ``manifest.json``: ``fields`` plus the sha256 of every other file.

    The output is byte-stable: keys are sorted and no timestamps are written.
    """
    folder = Path(folder)
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != MANIFEST:
            files[path.relative_to(folder).as_posix()] = sha256_file(path)
    manifest = dict(fields, files=files)
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest
