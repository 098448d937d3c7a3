"""Values -> their declared types: a method's or suite's ``Params`` dataclass, typed by its
annotations, and a run's fields (``bench.spec.run.check_field``), by one function, ``convert``.

The one rule of both front doors: text (the command line's, ``--param key=value``) is read as
the declared type; a value that is already typed (a sweep spec's TOML, a record's JSON) must be
of it. A bool is no number and a number no bool (``rewind = 1``, ``epochs = true``), a float is
no whole number (``batch_size = 16.7`` or ``16.0``), a whole number is a float (2 -> 2.0)."""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.registry import did_you_mean

_BOOL = {"true": True, "false": False}  # any case: a record's command line says True
NAMES = {bool: "bool (true or false)", int: "int (a whole number)", float: "float (a number)", str: "str (text)"}


def split_assignments(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BenchError(f"--param expects key=value, got '{item}'")
        if key.strip() in out:
            raise BenchError(f"parameter '{key.strip()}' given twice ({out[key.strip()]!r} and {value.strip()!r}); "
                             "give it once (a list of values is key=a,b)")
        out[key.strip()] = value.strip()
    return out


def _is_path(typ: Any) -> bool:
    return typ is Path or (typing.get_origin(typ) in (typing.Union, types.UnionType) and Path in typing.get_args(typ))


def _is_paths(typ: Any) -> bool:
    return typing.get_origin(typ) is tuple and typing.get_args(typ) == (Path, ...)


def readable_path(value: Any, label: str) -> Path:
    """A path parameter is checked when the run is resolved, before anything trains."""
    path = Path(str(value)).expanduser()
    if not path.exists():
        raise BenchError(f"{label}: {value} does not exist")
    if not os.access(path, os.R_OK):
        raise BenchError(f"{label}: {value} is not readable")
    return path


def _optional(typ: Any) -> Any:
    """``X`` of ``X | None``, else None."""
    if typing.get_origin(typ) in (typing.Union, types.UnionType):
        rest = [t for t in typing.get_args(typ) if t is not type(None)]
        if len(rest) == 1 and len(typing.get_args(typ)) == 2:
            return rest[0]
    return None


def _read(text: str, typ: Any) -> Any:
    """Text as ``typ`` (bool, int or float), or ValueError."""
    if typ is bool:
        return _BOOL[text.strip().lower()] if text.strip().lower() in _BOOL else text
    return typ(text.strip())


def convert(value: Any, typ: Any, label: str, *, parse: bool = True) -> Any:
    """``value`` as the declared type ``typ``, or a one-line BenchError naming ``label`` (the
    field or parameter), the type and the value. ``parse``: text is read as the type (the command
    line); otherwise a value must already be of it (a sweep spec: ``max_examples = "64"`` is
    refused, as it is not the number it looks like)."""
    if _is_paths(typ):  # one or several paths: key=a.jsonl,b.jsonl or a TOML list
        items = value.split(",") if isinstance(value, str) else value if isinstance(value, list | tuple) else [value]
        if not all(isinstance(v, str | Path) for v in items):
            raise BenchError(f"{label} expects paths, got {value!r}")
        return tuple(readable_path(v.strip() if isinstance(v, str) else v, label) for v in items if v not in (None, ""))
    if _is_path(typ):
        if value in (None, ""):
            return None
        if not isinstance(value, str | Path):
            raise BenchError(f"{label} expects a path, got {value!r}")
        return readable_path(value, label)
    if (inner := _optional(typ)) is not None:
        return None if value is None else convert(value, inner, label, parse=parse)
    if typing.get_origin(typ) is typing.Literal:
        allowed = typing.get_args(typ)
        if parse and isinstance(value, str):
            value = next((a for a in allowed if str(a) == value), value)
        if not any(type(value) is type(a) and value == a for a in allowed):
            if isinstance(value, str):
                raise BenchError(f"{label} got '{value}'{did_you_mean(value, [str(a) for a in allowed])}")
            raise BenchError(f"{label} expects one of {', '.join(map(str, allowed))}, got {value!r}")
        return value
    if typ not in NAMES:
        return value  # not a declared scalar type: the dataclass's own checks decide
    given = value
    if parse and isinstance(value, str) and typ is not str:
        try:
            value = _read(value, typ)
        except ValueError:
            pass  # refused below, with the text as given
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)  # one spelling per configuration: 2 and 2.0 hash alike
    if type(value) is not typ:  # a bool is an int to Python, not to a run
        raise BenchError(f"{label} expects {NAMES[typ]}, got {given!r}")
    return value


def parse_params(cls: type, raw: dict[str, Any], owner: str) -> Any:
    """An instance of ``cls`` from strings (or already-typed values); unknown keys are errors."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    for key in raw:
        if key not in names:
            raise BenchError(f"unknown parameter '{key}' for {owner}{did_you_mean(key, names)}")
    return cls(**{k: convert(v, hints[k], f"parameter '{k}'") for k, v in raw.items()})


def describe(cls: type) -> list[tuple[str, str, Any]]:
    """(name, type, default) of every parameter, for ``bench ls``."""
    hints = typing.get_type_hints(cls)

    def name(t: Any) -> str:
        if _is_path(t):
            return "path"
        if _is_paths(t):
            return "paths"
        if typing.get_origin(t) is typing.Literal:
            return "|".join(map(str, typing.get_args(t)))
        return getattr(t, "__name__", str(t))

    return [(f.name, name(hints[f.name]), f.default) for f in dataclasses.fields(cls)]
