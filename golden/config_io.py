"""Plain data <-> :class:`golden.config.Config`: design files, overrides and a JSON Schema.

Everything here walks the dataclass fields of the config classes, so a field
added to a config class is read, overridden, shown and described without an
edit here, and no field name or default is typed twice.

* :func:`config_from_dict` builds a ``Config`` from nested dicts (a design
  file, or the ``config`` block of a ``manifest.json``): given a ``base``
  config, the dicts only need the keys they change.
* :func:`apply_overrides` applies ``key.path=value`` strings
  (``linear.rows=32``), each value read according to its field's type.
* :func:`config_schema` is the JSON Schema of the dict form; each property's
  description is the numpydoc ``Parameters`` entry of its class.

Every error is a :class:`ConfigError` whose message starts with the key path
and says what is allowed: ``"linear.rows must be an integer >= 1, not 0"``,
``"unknown key linear.rowz; allowed: rows, cols, ..."``.
"""

import dataclasses
import functools
import inspect
import json
import re
import types
import typing

from .config import Config

__all__ = ["ConfigError", "config_from_dict", "from_dict", "apply_overrides", "parse_override",
           "config_schema", "field_docs"]


class ConfigError(ValueError):
    """A design-file or override error; the message starts with the key path.

    Attributes
    ----------
    path : str
        Dotted key path (``"linear.rows"``), ``""`` for the whole config.
    """

    def __init__(self, message, *, path=""):
        super().__init__(message)
        self.path = path


def _join(path, key):
    return f"{path}.{key}" if path else key


@functools.cache
def _hints(cls):
    return typing.get_type_hints(cls)


def _fields(cls):
    """``{name: type}`` of the fields a caller may give (``init`` fields)."""
    hints = _hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}


def _optional(tp):
    """``(inner type, True)`` for ``X | None``, else ``(tp, False)``."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0], True
    return tp, False


def _base_type(tp):
    return typing.get_origin(tp) or tp


def _is_dataclass_type(tp):
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _tuples(value):
    """Lists (JSON, TOML and YAML arrays) as tuples, recursively: config fields are hashable."""
    if isinstance(value, (list, tuple)):
        return tuple(_tuples(v) for v in value)
    return value


def _convert(tp, value, path):
    """Read ``value`` (plain data) as a value of annotation ``tp``."""
    inner, optional = _optional(tp)
    if value is None and optional:
        return None
    if _is_dataclass_type(inner):
        return from_dict(inner, value, path=path)
    base = _base_type(inner)
    if base is tuple:
        return _tuples(value)
    if base is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _reword(message, cls, path):
    """``"LinearConfig.rows must be ..."`` -> ``"linear.rows must be ..."``."""
    owner = f"{cls.__name__}."
    if path:
        if owner in message:
            return message.replace(owner, f"{path}.")
        return f"{path}: {message}"
    return message.replace(owner, "")


def from_dict(cls, data, *, path=""):
    """Build the dataclass ``cls`` from the dict ``data``, every key checked.

    Parameters
    ----------
    cls : type
        A dataclass (``Config``, ``LinearConfig``, ...).
    data : dict
        ``{field: value}``; nested dataclass fields are nested dicts. Missing
        fields take the class's default.
    path : str
        Key path of ``data`` inside the whole config, for messages.

    Raises
    ------
    ConfigError
        ``data`` is not a dict, a key is unknown or a field without default
        is missing, or the class's own validation rejects a value; the
        message names the key path and the allowed keys or values.
    """
    fields = _fields(cls)
    where = path or "the config"
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a table of {', '.join(fields)}, not {data!r}",
                          path=path)
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise ConfigError(f"unknown key {_join(path, unknown[0])}; allowed: {', '.join(fields)}",
                          path=_join(path, unknown[0]))
    required = [f.name for f in dataclasses.fields(cls)
                if f.init and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]
    missing = [k for k in required if k not in data]
    if missing:
        raise ConfigError(f"missing key {_join(path, missing[0])} (required in {where}: "
                          f"{', '.join(required)})", path=_join(path, missing[0]))
    kwargs = {k: _convert(fields[k], v, _join(path, k)) for k, v in data.items()}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(_reword(str(exc), cls, path), path=path) from None


def _as_data(config):
    """The dict form of a config object, with tuples kept (``dataclasses.asdict``)."""
    return dataclasses.asdict(config)


def _merge(base, update):
    """``base`` with ``update`` merged in, tables key by key."""
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def config_from_dict(data, *, base=None):
    """A :class:`Config` from plain data.

    Parameters
    ----------
    data : dict
        The dict form of a config (:meth:`Config.to_dict`, a design file).
    base : Config, optional
        Values for every key ``data`` leaves out (a board preset); without
        it, ``data`` must give every field that has no default.

    Raises
    ------
    ConfigError
    """
    if not isinstance(data, dict):
        raise ConfigError(f"the config must be a table of {', '.join(_fields(Config))}, "
                          f"not {data!r}")
    if base is not None:
        if not isinstance(base, Config):
            raise TypeError(f"config_from_dict.base must be a Config, not {base!r}")
        data = _merge(_as_data(base), data)
    return from_dict(Config, data)


def _field_type(path):
    """The annotation of the field at dotted ``path`` of ``Config``."""
    cls, tp = Config, Config
    done = ""
    for key in path.split("."):
        if not _is_dataclass_type(cls):
            raise ConfigError(f"{done} is a value, not a table; set {done}=VALUE", path=done)
        fields = _fields(cls)
        if key not in fields:
            raise ConfigError(f"unknown key {_join(done, key)}; allowed: {', '.join(fields)}",
                              path=_join(done, key))
        tp = fields[key]
        cls = _optional(tp)[0]
        done = _join(done, key)
    return tp


def _parse_text(tp, text, path):
    """The value of ``text`` (a ``--set`` value) for a field of annotation ``tp``."""
    inner, optional = _optional(tp)
    if optional and text.strip().lower() in ("none", "null"):
        return None
    base = _base_type(inner)
    if base is str:
        return text
    if base is bool:
        if text.strip().lower() in ("true", "1", "yes"):
            return True
        if text.strip().lower() in ("false", "0", "no"):
            return False
        raise ConfigError(f"{path} must be true or false, not {text!r}", path=path)
    if base is int:
        try:
            return int(text, 0)
        except ValueError:
            return text    # the class's own check names the field and the allowed values
    if base is float:
        try:
            return float(text)
        except ValueError:
            return text
    # Tables, tuples and anything else: JSON (``[[9, 0], [11, 2]]``, ``{"rows": 8}``).
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_override(text):
    """``"linear.rows=32"`` -> ``("linear.rows", "32")``.

    Raises
    ------
    ConfigError
        No ``=``, or an empty key.
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"an override must be KEY=VALUE with a dotted key "
                          f"(linear.rows=32), not {text!r}")
    return key, value


def apply_overrides(config, overrides):
    """Return ``config`` with ``overrides`` applied, in order, and validated.

    Parameters
    ----------
    config : Config
    overrides : iterable of (str, str or object)
        ``(dotted key, value)``; a ``str`` value is read according to the
        field's type (``"32"`` for an int, ``"none"`` for an optional field,
        JSON for a table or a tuple), any other value is used as it is.

    Raises
    ------
    ConfigError
        Unknown key (the message lists the allowed keys at that level), or a
        value the field's class rejects.
    """
    data = _as_data(config)
    for key, value in overrides:
        tp = _field_type(key)
        if isinstance(value, str):
            value = _parse_text(tp, value, key)
        *parents, leaf = key.split(".")
        node = data
        for part in parents:
            node = node[part]
        node[leaf] = value
    return config_from_dict(data)


# ----------------------------------------------------------------------------------------
# JSON Schema
# ----------------------------------------------------------------------------------------

_PARAM = re.compile(r"^(?P<names>[A-Za-z_][\w, ]*?) : (?P<type>.+)$")


@functools.cache
def field_docs(cls):
    """``{field: description}`` from the numpydoc ``Parameters`` section of ``cls``."""
    lines = inspect.cleandoc(cls.__doc__ or "").splitlines()
    out, names, text = {}, [], []
    try:
        start = next(i for i, line in enumerate(lines[:-1])
                     if line == "Parameters" and set(lines[i + 1]) == {"-"}) + 2
    except StopIteration:
        return out

    def flush():
        for name in names:
            out[name] = " ".join(text)
    for i in range(start, len(lines)):
        line = lines[i]
        match = _PARAM.match(line)
        if i + 1 < len(lines) and lines[i + 1] and set(lines[i + 1]) == {"-"}:
            break    # the next section's header
        if match:
            flush()
            names, text = [n.strip() for n in match["names"].split(",")], []
        elif line.startswith("    ") and names:
            text.append(line.strip())
        elif line.strip():
            break    # prose after the section
    flush()
    return out


def _json_default(value):
    if dataclasses.is_dataclass(value):
        return json.loads(json.dumps(_as_data(value), default=list))
    if isinstance(value, tuple):
        return json.loads(json.dumps(value))
    return value


def _schema_of(tp):
    inner, optional = _optional(tp)
    if _is_dataclass_type(inner):
        schema = _object_schema(inner)
    else:
        base = _base_type(inner)
        kind = {bool: "boolean", int: "integer", float: "number", str: "string",
                tuple: "array", list: "array", dict: "object"}.get(base)
        schema = {"type": kind} if kind else {}
    if optional:
        schema = {"anyOf": [schema, {"type": "null"}]}
    return schema


def _object_schema(cls):
    docs = field_docs(cls)
    props, required = {}, []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        prop = _schema_of(_hints(cls)[f.name])
        if f.name in docs:
            prop["description"] = docs[f.name]
        if f.default is not dataclasses.MISSING:
            prop["default"] = _json_default(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            prop["default"] = _json_default(f.default_factory())
        else:
            required.append(f.name)
        props[f.name] = prop
    schema = {"type": "object", "title": cls.__name__,
              "description": (cls.__doc__ or "").strip().splitlines()[0],
              "properties": props, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def config_schema():
    """The JSON Schema (draft 2020-12) of the dict form of :class:`Config`.

    It checks structure and types; ranges and choices are checked by the
    config classes themselves (:func:`config_from_dict`), whose messages list
    them.
    """
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **_object_schema(Config)}
