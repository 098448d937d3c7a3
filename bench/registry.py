"""Name -> plug-in registries for methods, suites and tasks.

One mechanism for built-ins and third-party plug-ins alike (as in lm-evaluation-harness):
every plug-in module is named by an entry point (groups ``bench.methods``, ``bench.suites``,
``bench.tasks``, ``bench.commands``) and registers its objects with the decorators below when imported. An entry
point may also name an object directly; it is then registered under the entry point's name.

``origin(name)`` says where a plug-in's code comes from (package, version and a hash of its
source): a method's goes into the key of every candidate it builds, so that a changed plug-in
is rebuilt rather than served from the cache, and every record carries its three plug-ins'.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import os
import sys
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Generic, TypeVar

from bench.errors import BenchError, os_problem

T = TypeVar("T")


def did_you_mean(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.5)
    return f"; did you mean '{close[0]}'?" if close else f"; choose from: {', '.join(sorted(choices))}"


@dataclass(frozen=True)
class Origin:
    """A plug-in's distribution (None when it is not installed from one), the module that defines
    it, and the SHA-256 (16 hex digits) of the source of that module and of the modules of its own
    package that it uses, so that an edit of an editable or local plug-in shows."""

    package: str | None
    version: str | None
    module: str
    code: str


@functools.cache
def code_hash(module: str) -> str:
    """Hash of ``module``'s source and, transitively, of the modules of its package it refers
    to (``methods.srnet`` and the ``methods.kit`` it imports; a top-level module alone). Read once
    per process, like the commit, so it describes the code this process runs."""
    scope = getattr(sys.modules.get(module), "__package__", None) or module
    seen, todo, h = set(), [module], hashlib.sha256()
    while todo:
        name = todo.pop()
        if name in seen or name not in sys.modules:
            continue
        seen.add(name)
        mod = sys.modules[name]
        for value in vars(mod).values():
            other = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
            if isinstance(other, str) and (other == scope or other.startswith(scope + ".")):
                todo.append(other)
    for name in sorted(seen):
        path = getattr(sys.modules[name], "__file__", None)
        h.update(name.encode() + b"\0")
        if path:
            try:
                with open(path, "rb") as f:
                    h.update(f.read())
            except OSError:
                pass
    return h.hexdigest()[:16]


class Registry(Generic[T]):
    def __init__(self, kind: str, group: str) -> None:
        self.kind = kind
        self.group = group
        self._items: dict[str, T] = {}
        self._broken: dict[str, str] = {}  # plug-ins that failed to import: why
        self._modules: dict[str, str] = {}  # a plug-in's module -> "method plug-in 'x' of package y"
        self._dists: dict[str, tuple[str, str]] = {}  # an entry point's module -> (package, version)
        self._loaded = False

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            item = obj() if isinstance(obj, type) else obj  # classes are registered as instances
            old = self._items.get(name)
            if old is not None and (type(old).__module__, type(old).__qualname__) != (type(item).__module__, type(item).__qualname__):
                raise BenchError(f"{self.kind} '{name}' is registered twice")  # a module imported again may re-register
            if isinstance(obj, type) and not getattr(item, "name", None):
                item.name = name  # a plug-in need not repeat the name it is registered under
            self._items[name] = item
            return obj

        return deco

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for ep in entry_points(group=self.group):
            package = f"{ep.dist.name} {ep.dist.version}" if ep.dist else "unknown package"
            self._modules.setdefault(ep.module, f"{self.kind} plug-in '{ep.name}' of package {package}")
            if ep.dist:
                self._dists.setdefault(ep.module, (ep.dist.name, ep.dist.version))
            try:
                obj = ep.load()
            except Exception as e:  # a broken plug-in names itself and its package; the rest still work
                self._broken[ep.name] = f"{self.kind} plug-in '{ep.name}' of package {package} ({ep.value}) failed to load: " \
                                        f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                print(f"bench: warning: {self._broken[ep.name]}; skipped", file=sys.stderr)
                continue
            if not isinstance(obj, types.ModuleType) and ep.name not in self._items:
                self.register(ep.name)(obj)
        if not self._items:
            raise BenchError(
                f"no {self.kind}s are registered: install the project (pip install -e .) so its entry points exist"
            )

    def get(self, name: str) -> T:
        self._load()
        if name in self._broken and name not in self._items:
            raise BenchError(self._broken[name])
        if name not in self._items:
            raise BenchError(f"unknown {self.kind} '{name}'{did_you_mean(name, list(self._items))}")
        return self._items[name]

    def origin(self, name: str) -> Origin:
        """Where plug-in ``name`` comes from (see ``Origin``)."""
        module = type(self.get(name)).__module__
        owner = max((m for m in self._dists if module == m or module.startswith(m + ".")), key=len, default=None)
        package, version = self._dists[owner] if owner else (None, None)
        return Origin(package, version, module, code_hash(module))

    def names(self) -> list[str]:
        self._load()
        return sorted(self._items)

    def refresh(self) -> None:
        """Scan the entry points again on next use (after installing a plug-in in-process)."""
        self._loaded = False
        self._broken.clear()


def plugin_of(error: BaseException) -> str | None:
    """Which plug-in raised ``error``: the innermost frame of its traceback in a plug-in's module
    (by the entry points of every registry), named with its package; None if no plug-in's code is
    in it (then it is the harness's own bug)."""
    owners = {m: who for r in (METHODS, SUITES, TASKS, COMMANDS) for m, who in r._modules.items()}
    tb, found = error.__traceback__, None
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if who := next((w for m, w in owners.items() if module == m or module.startswith(m + ".")), None):
            found = who
        tb = tb.tb_next
    return found


def failure(e: Exception) -> str:
    """An exception that is not a BenchError, in one line: an error of the operating system (a
    full disk: ``bench.errors.os_problem``) as its path and cause, whoever met it; else which
    plug-in raised it (its package and version) and where, or the harness's own code (a bug);
    ``BENCH_DEBUG=1`` (``--debug``) gives the whole traceback instead."""
    if os.environ.get("BENCH_DEBUG"):
        return "".join(traceback.format_exception(e)).rstrip()
    if (line := os_problem(e)) is not None:
        return line
    frame = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    where = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    who = plugin_of(e)
    return (f"{who} raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}{where}"
            if who else f"{type(e).__name__}: {e}{where} (a bug in the harness)") + "; --debug for the traceback"


METHODS: Registry = Registry("method", "bench.methods")
SUITES: Registry = Registry("suite", "bench.suites")
TASKS: Registry = Registry("task", "bench.tasks")
COMMANDS: Registry = Registry("command", "bench.commands")
