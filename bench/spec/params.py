"""``--param key=value`` strings -> a method's Params dataclass, typed by its annotations."""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.registry import did_you_mean

_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}


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


def readable_path(value: Any, key: str) -> Path:
    """A path parameter is checked when the run is resolved, before anything trains."""
    path = Path(str(value)).expanduser()
    if not path.exists():
        raise BenchError(f"parameter '{key}': {value} does not exist")
    if not os.access(path, os.R_OK):
        raise BenchError(f"parameter '{key}': {value} is not readable")
    return path


def convert(value: Any, typ: Any, key: str) -> Any:
    if _is_paths(typ):  # one or several paths: key=a.jsonl,b.jsonl or a TOML list
        items = value.split(",") if isinstance(value, str) else value if isinstance(value, list | tuple) else [value]
        return tuple(readable_path(v.strip() if isinstance(v, str) else v, key) for v in items if v not in (None, ""))
    if _is_path(typ):
        return None if value in (None, "") else readable_path(value, key)
    if not isinstance(value, str):
        if typ is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)  # one spelling per configuration: 2 and 2.0 hash alike
        return value
    try:
        if typ is bool:
            if value.lower() in _TRUE | _FALSE:
                return value.lower() in _TRUE
            raise ValueError(value)
        if typ in (int, float, str):
            return typ(value)
        if typing.get_origin(typ) is typing.Literal:
            if value in typing.get_args(typ):
                return value
            raise BenchError(f"parameter '{key}' got '{value}'{did_you_mean(value, list(typing.get_args(typ)))}")
    except ValueError:
        raise BenchError(f"parameter '{key}' expects {getattr(typ, '__name__', typ)}, got '{value}'") from None
    return value


def parse_params(cls: type, raw: dict[str, Any], owner: str) -> Any:
    """An instance of ``cls`` from strings (or already-typed values); unknown keys are errors."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    for key in raw:
        if key not in names:
            raise BenchError(f"unknown parameter '{key}' for {owner}{did_you_mean(key, names)}")
    return cls(**{k: convert(v, hints[k], k) for k, v in raw.items()})


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
