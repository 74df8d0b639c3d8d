"""Design files on the command line: ``--board``, ``--config FILE`` and ``--set KEY=VALUE``.

Every command that takes ``--board`` resolves its design the same way
(:func:`resolve_config`):

1. ``--board B`` starts from the preset ``B`` (:func:`golden.config.preset`);
2. ``--config FILE`` (TOML, JSON, or YAML when PyYAML is installed) changes
   the keys it gives; without ``--board``, the preset named by the file's
   ``board.name`` is the start, and a file naming no preset must give a whole
   config, as the ``config`` block of an emitted ``manifest.json`` does (a
   ``manifest.json`` itself is read too);
3. each ``--set key.path=value`` (``--set linear.rows=32``) then changes one
   field, in order.

The dict form and its checks are :mod:`golden.config_io`; this module adds the
files and the messages: every error is one line that names the file or the
flag, the key path and the allowed values (exit status 2).

``specgen config show`` prints the resolved config as JSON (which ``--config``
reads back) and ``specgen config schema`` its JSON Schema.
"""

import argparse
import json
import re
import sys
import tomllib
from pathlib import Path

from specgen.golden.config import preset, preset_names
from specgen.golden.config_io import ConfigError, apply_overrides, config_from_dict, config_schema, \
    parse_override

from specgen.gen.cli.errors import CLIError

__all__ = ["add_design_args", "resolve_config", "load_design_file", "add_parser", "int_at_least",
           "FORMATS"]

#: A design's name is part of its Verilog module names (hw.accelerator).
_DESIGN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")

#: File suffixes -> format names; YAML needs PyYAML.
FORMATS = {".toml": "TOML", ".json": "JSON", ".yaml": "YAML", ".yml": "YAML"}


def add_design_args(parser, *, boards=None, required=True):
    """Add ``--board``, ``--config FILE`` and ``--set KEY=VALUE`` to ``parser``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
    boards : sequence of str, optional
        Presets the command accepts (default: every preset), for the help.
    required : bool
        ``True``: the command needs a design; ``--board`` or ``--config``
        must be given (checked by :func:`resolve_config`).
    """
    boards = preset_names() if boards is None else boards
    parser.add_argument("--board", metavar="BOARD",
                        help=f"board preset to start from: {', '.join(boards)}")
    parser.add_argument("--config", metavar="FILE", dest="config_file",
                        help="design file (TOML, JSON or YAML; a manifest.json too) whose keys "
                             "change the preset's; with no --board it gives the whole config")
    parser.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                        dest="overrides",
                        help="change one field after --config, e.g. --set linear.rows=32 "
                             "--set board.clock_mhz=300 (repeatable; "
                             "'specgen config schema' lists the keys)")
    parser.set_defaults(design_required=required)


def _read(path):
    suffix = path.suffix.lower()
    kind = FORMATS.get(suffix)
    if kind is None and str(path) in preset_names() and not path.exists():
        raise CLIError(f"--config {str(path)!r} is a board preset, not a file: give --board {path}")
    if kind is None:
        raise CLIError(f"--config {str(path)!r}: unknown file type {suffix or '(none)'!r}; "
                       f"allowed: {', '.join(FORMATS)}")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CLIError(f"--config {str(path)!r}: no such file") from None
    except OSError as exc:
        raise CLIError(f"--config {str(path)!r}: {exc.strerror or exc}") from None
    try:
        if kind == "TOML":
            return tomllib.loads(raw.decode("utf-8"))
        if kind == "JSON":
            return json.loads(raw)
        try:
            import yaml
        except ImportError:
            raise CLIError(f"--config {str(path)!r}: reading YAML needs PyYAML "
                           "(pip install pyyaml); or give TOML or JSON") from None
        return yaml.safe_load(raw)
    except CLIError:
        raise
    except Exception as exc:    # each parser has its own error class; all mean "not valid"
        detail = " ".join(str(exc).split())
        raise CLIError(f"{path}: not valid {kind}: {detail}") from None


def load_design_file(path):
    """The config dict of a design file or of a ``manifest.json``.

    Raises
    ------
    CLIError
        Missing or unreadable file, unknown suffix, a syntax error (named
        with the file), or a top level that is not a table.
    """
    path = Path(path)
    data = _read(path)
    if not isinstance(data, dict):
        raise CLIError(f"{path}: the top level must be a table of config keys, not "
                       f"{type(data).__name__}")
    # An emitted manifest: its config block is the design.
    if str(data.get("generator", "")).startswith("specgen") and isinstance(data.get("config"),
                                                                           dict):
        data = data["config"]
    return data


def resolve_config(args):
    """The design of parsed ``args`` (:func:`add_design_args`): preset, file, overrides.

    Returns
    -------
    golden.config.Config or None
        ``None`` only when the command does not require a design and none
        was given.

    Raises
    ------
    CLIError
        One line naming the flag or the file, the key path and what is allowed.
    """
    board = getattr(args, "board", None)
    file = getattr(args, "config_file", None)
    overrides = getattr(args, "overrides", None) or []
    base = None
    if board is not None:
        try:
            base = preset(board)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
    if file is None:
        config = base
    else:
        data = load_design_file(file)
        named = data.get("board", {}).get("name") if isinstance(data.get("board"), dict) else None
        if base is None and named in preset_names():
            # The file names its board: the rest defaults to that board's preset.
            base = preset(named)
        try:
            config = config_from_dict(data, base=base)
        except ConfigError as exc:
            hint = (f" (or give --board to start from a preset: {', '.join(preset_names())})"
                    if base is None and str(exc).startswith("missing key") else "")
            raise CLIError(f"{file}: {exc}{hint}") from None
    if config is None:
        if overrides or getattr(args, "design_required", True):
            raise CLIError(f"give --board BOARD ({', '.join(preset_names())}) or "
                           "--config FILE")
        return None
    for text in overrides:
        try:
            config = apply_overrides(config, [parse_override(text)])
        except ConfigError as exc:
            raise CLIError(f"--set {text}: {exc}") from None
    if not _DESIGN_NAME.match(config.name):
        where = f"{file}: " if file is not None else ""
        raise CLIError(f"{where}name must be letters, digits and _ starting with a letter (it "
                       f"is part of the Verilog module names), not {config.name!r}")
    return config


# ----------------------------------------------------------------------------------------
# specgen config show | schema
# ----------------------------------------------------------------------------------------

def _cmd_show(args, *, out=None):
    out = sys.stdout if out is None else out
    config = resolve_config(args)
    print(json.dumps(config.to_dict(), indent=2, sort_keys=False), file=out)
    return config


def _cmd_schema(args, *, out=None):
    out = sys.stdout if out is None else out
    print(json.dumps(config_schema(), indent=2), file=out)


def add_parser(sub):
    """Add ``specgen config show`` and ``specgen config schema`` to the CLI's subparsers."""
    p = sub.add_parser("config", help="print a resolved design config, or the config's JSON "
                                      "Schema")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="print the config that --board/--config/--set "
                                           "resolve to, as JSON (readable by --config)")
    add_design_args(show)
    show.set_defaults(func=_cmd_show)
    schema = actions.add_parser("schema", help="print the JSON Schema of design files")
    schema.set_defaults(func=_cmd_schema)
    return p

def int_at_least(low):
    """An argparse ``type``: an integer ``>= low``; the error names the flag (argparse adds it)."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, not {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, not {value}")
        return value
    parse.__name__ = f"integer >= {low}"
    return parse
