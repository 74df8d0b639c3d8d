"""Atomic output folders, atomic files and manifests for every ``specgen`` command.

A command writes into a fresh temporary folder beside the target and renames
it into place only when everything succeeded, so an error (or Ctrl-C) never
leaves a half-written output behind. A command that adds pages to a shared
folder (``docs``) writes each file through a temporary file and a rename
instead (:func:`write_files`).

Replacing a folder never loses data:

* the folder is replaced only if its ``manifest.json`` says that specgen wrote
  it, with the same command (``specgen golden`` does not replace a Verilog
  folder);
* a file that the manifest lists but whose bytes changed since (a user's edit)
  makes the command refuse, naming it;
* everything the manifest does not list (a Vivado run under ``vivado/``, a
  user's notes) is carried over into the new folder; if a new output has the
  same name, the command refuses, naming it;
* ``--out`` that is empty, ``.``, or the current folder or one of its parents
  is refused.
"""

import contextlib
import hashlib
import importlib.metadata
import json
import os
import shutil
import tempfile
from pathlib import Path

from specgen.gen.cli.errors import CLIError

__all__ = ["atomic_dir", "check_out", "write_files", "write_manifest", "sha256_file",
           "specgen_version", "MANIFEST"]

MANIFEST = "manifest.json"

# Manifests written before they recorded their command: the generator field told them apart.
_LEGACY_GENERATORS = {"specgen": "verilog", "specgen golden": "golden"}

# At most this many names in a one-line refusal.
_NAMES_SHOWN = 3


def specgen_version():
    """The installed distribution's version (``specgen --version``, every manifest)."""
    try:
        return importlib.metadata.version("specgen")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def _names(paths):
    paths = sorted(paths)
    shown = ", ".join(paths[:_NAMES_SHOWN])
    return shown + (f" and {len(paths) - _NAMES_SHOWN} more" if len(paths) > _NAMES_SHOWN else "")


def check_out(out, *, flag="--out", folder=True):
    """Refuse an output path that could only be a mistake; return it as a ``Path``.

    Parameters
    ----------
    out : str or os.PathLike
        The path the user gave.
    flag : str
        The option's name, for the message.
    folder : bool
        ``True`` for a folder that the command replaces: ``.``, the current
        folder and its parents are refused too (replacing them would move the
        user's files aside). ``False`` for a page or a file written into a
        folder: only an empty path is refused.

    Raises
    ------
    CLIError
        One line naming ``flag``.
    """
    text = os.fspath(out)
    if not text.strip():
        raise CLIError(f"{flag} is empty; give a folder such as build/out")
    path = Path(text)
    if folder:
        target = path.resolve()
        cwd = Path.cwd().resolve()
        if target == cwd or target in cwd.parents:
            raise CLIError(f"{flag} {text!r} is the current folder or one of its parents; "
                           "give a new or specgen-written subfolder such as build/out")
    return path


def _read_manifest(out, command):
    """Return the manifest of ``out``, checked to be specgen's own output of ``command``."""
    path = out / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        manifest = None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise CLIError(f"--out {str(out)!r} holds a {MANIFEST} that specgen did not write; "
                       "choose an empty or new folder")
    kind = manifest.get("command", _LEGACY_GENERATORS.get(manifest.get("generator")))
    if kind is None or not str(manifest.get("generator", "")).startswith("specgen"):
        raise CLIError(f"--out {str(out)!r} holds a {MANIFEST} that specgen did not write; "
                       "choose an empty or new folder")
    if kind != command:
        raise CLIError(f"--out {str(out)!r} holds the output of 'specgen {kind}', not "
                       f"'specgen {command}'; choose another folder")
    return manifest


def _foreign(out, listed):
    """Paths under ``out`` (relative, POSIX) that the manifest does not list.

    A folder that holds no listed file is one entry (``vivado``), not its
    contents; symbolic links are never followed.
    """
    listed = set(listed) | {MANIFEST}
    parents = {p.rsplit("/", 1)[0] for p in listed if "/" in p}
    parents |= {q for p in parents for q in _ancestors(p)}
    found = []

    def walk(folder, prefix):
        for entry in sorted(folder.iterdir()):
            rel = prefix + entry.name
            if rel in listed and entry.is_file() and not entry.is_symlink():
                continue
            if rel in parents and entry.is_dir() and not entry.is_symlink():
                walk(entry, rel + "/")
                continue
            found.append(rel)
    walk(out, "")
    return found


def _ancestors(rel):
    parts = rel.split("/")
    return {"/".join(parts[:i]) for i in range(1, len(parts))}


def _check_replaceable(out, command):
    """Check that ``out`` may be replaced; return the entries to carry over."""
    if not out.exists():
        return []
    if not out.is_dir():
        raise CLIError(f"--out {str(out)!r} exists and is not a folder")
    if not any(out.iterdir()):
        return []
    if not (out / MANIFEST).is_file():
        raise CLIError(f"--out {str(out)!r} is a non-empty folder not written by specgen; "
                       "choose an empty or new folder")
    manifest = _read_manifest(out, command)
    changed = [name for name, digest in manifest["files"].items()
               if (out / name).is_file() and sha256_file(out / name) != digest]
    if changed:
        raise CLIError(f"--out {str(out)!r}: {_names(changed)} changed since specgen wrote "
                       f"{'it' if len(changed) == 1 else 'them'}; move "
                       f"{'it' if len(changed) == 1 else 'them'} away or choose another folder")
    return _foreign(out, manifest["files"])


@contextlib.contextmanager
def atomic_dir(out, *, command):
    """Yield a temporary folder that replaces ``out`` when the block succeeds.

    Parameters
    ----------
    out : str or os.PathLike
        The output folder. It may not exist yet, may be empty, or may be an
        earlier output of ``specgen <command>``; anything else is refused
        before any work is done, so a typo never wipes a user's folder.
    command : str
        The command writing the folder (``"verilog"``, ``"golden"``); the
        block must write a manifest with the same ``command``
        (:func:`write_manifest`).

    Files of ``out`` that its manifest does not list are moved into the new
    folder; a clash with a new output is refused, and then ``out`` is left as
    it was.

    Raises
    ------
    CLIError
        One line naming ``--out`` and the offending files.
    """
    out = check_out(out).absolute()
    _check_replaceable(out, command)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
        # The folder a user gets has a new folder's permissions, not mkdtemp's 0700.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)
    except OSError as exc:
        raise CLIError(f"cannot write --out {str(out)!r}: {exc.strerror or exc}") from None
    try:
        yield tmp
        written = json.loads((tmp / MANIFEST).read_text()).get("command")
        if written != command:
            raise RuntimeError(f"atomic_dir(command={command!r}): the block wrote a manifest "
                               f"for {written!r}")
        # Checked again: the folder may have changed while the command ran.
        keep = _check_replaceable(out, command)
        clash = [rel for rel in keep if os.path.lexists(tmp / rel)]
        if clash:
            raise CLIError(f"--out {str(out)!r}: {_names(clash)} not written by specgen would "
                           "be overwritten; move them away or choose another folder")
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.rename(out, old)
            try:
                for rel in keep:
                    (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                    os.rename(old / rel, tmp / rel)
                os.rename(tmp, out)
            except BaseException:
                # Put everything back where it was: the user's files first.
                for rel in keep:
                    if os.path.lexists(tmp / rel) and not os.path.lexists(old / rel):
                        os.rename(tmp / rel, old / rel)
                if not out.exists():
                    os.rename(old, out)
                raise
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


def write_manifest(folder, *, command, **fields):
    """Write ``manifest.json``: ``fields``, the generator, its version and ``command``,
    plus the sha256 of every other file.

    ``command`` (``"verilog"``, ``"golden"``) is what :func:`atomic_dir` checks
    before it replaces the folder. The output is byte-stable for one specgen
    version: keys are sorted and no timestamps are written.
    """
    folder = Path(folder)
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != MANIFEST:
            files[path.relative_to(folder).as_posix()] = sha256_file(path)
    manifest = dict(fields, generator="specgen", command=command, version=specgen_version(),
                    files=files)
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest
