"""Plugin discovery: the built-in plugin packages, then third-party plugins.

Built in: every module of PLUGIN_PACKAGES is imported once. Each registers its
component classes with `@register(kind, type)` (agent/api.py) as a side effect of
being imported, so adding a type touches no shared file.

Third party: after the built-ins, every entry point of the group `logflume.plugins`
(ENTRY_POINT_GROUP) of the installed distributions is loaded, in the order of
distribution name, then entry point name. An entry point names a module
(`upper = "site_plugins.upper"`) or an object in one (`"site_plugins.upper:Upper"`);
loading it imports the module, whose `@register` calls add its types, and the object
itself is not used. Each type remembers the entry point that brought it (`origin`).

A plugin never replaces a type: a name already registered, by a built-in or by a
plugin loaded before, refuses the plugin (`register` raises DuplicateType), with an
error naming both classes. Refused rather than replaced, because `type: json` must
mean the same on every host whatever else is installed there (a silent replacement
changes what a reviewed pipelines.yaml does); refused rather than namespaced
(`site_plugins/upper`), because a type's name would then depend on how its code is
packaged and the built-ins would need a namespace too. The site renames its type.

What fails is remembered, never fatal, and the other modules and plugins still
load: a built-in module that fails to import, under its module name; a plugin that
fails to load (its import raised, or it registered a name that is taken), under
`str(Origin)`, which names its distribution and entry point. A plugin that fails
adds no type, not even those it registered before it failed. The compiler mentions
the failures when a pipeline asks for a type that is missing; `logflume agent
plugins` lists what loaded and what did not.

Loading happens once per process: a plugin installed while an agent runs is found at
its next start, not at a reload.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import pkgutil
import sys

from agent.api import REGISTRY, DuplicateType, qualified_name

PLUGIN_PACKAGES = ("agent.channels", "agent.interceptors", "sources", "sinks")
ENTRY_POINT_GROUP = "logflume.plugins"


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where a registered type comes from: the plugin packages (`builtin`), or an
    entry point of an installed distribution."""

    distribution: str | None = None  # its name as its metadata spells it; None: built in
    version: str | None = None
    entry_point: str | None = None  # the entry point's name
    value: str | None = None  # what it names: "package.module" or "package.module:object"

    @property
    def builtin(self) -> bool:
        return self.distribution is None

    @property
    def provider(self) -> str:
        """`built-in`, or the distribution and its version: `site-plugins 1.0`."""
        return "built-in" if self.builtin else f"{self.distribution} {self.version}"

    def __str__(self) -> str:
        if self.builtin:
            return "built-in"
        return (
            f"plugin {self.distribution} {self.version} "
            f"(entry point {self.entry_point} = {self.value})"
        )


BUILTIN = Origin()


@dataclasses.dataclass
class _Loaded:
    failures: dict[str, str] = dataclasses.field(default_factory=dict)  # all of them
    plugin_failures: dict[str, str] = dataclasses.field(default_factory=dict)  # entry points'
    origins: dict[tuple[str, str], Origin] = dataclasses.field(default_factory=dict)  # plugins'


_loaded: _Loaded | None = None


def load_plugins() -> dict[str, str]:
    """Import the built-in plugin modules, then load the entry points (once); returns
    {what: error} for what failed: a built-in module by its name, a plugin by
    `str(Origin)`."""
    return _load().failures


def failed_plugins() -> dict[str, str]:
    """The entry points among `load_plugins()`'s failures: {str(Origin): error}."""
    return _load().plugin_failures


def origin(kind: str, name: str) -> Origin | None:
    """Where the registered type (kind, name) comes from: BUILTIN, a plugin's Origin,
    or None for a type registered some other way (code imported directly, such as the
    tests' fakes) or not registered."""
    loaded = _load()
    if (kind, name) in loaded.origins:
        return loaded.origins[(kind, name)]
    cls = REGISTRY.get((kind, name))
    return BUILTIN if cls is not None and is_builtin(cls) else None


def is_builtin(cls: type) -> bool:
    """Whether `cls` is defined in a module of the plugin packages."""
    return cls.__module__.startswith(tuple(f"{p}." for p in PLUGIN_PACKAGES))


def _load() -> _Loaded:
    global _loaded
    if _loaded is not None:
        return _loaded
    _loaded = loaded = _Loaded()  # set first: a plugin that asks while it loads sees it
    _import_builtins(loaded.failures)
    try:
        found = list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    except Exception as exc:  # unreadable metadata of some distribution
        what = f"entry points of group {ENTRY_POINT_GROUP}"
        loaded.failures[what] = loaded.plugin_failures[what] = f"{type(exc).__name__}: {exc}"
        found = []
    for entry_point in sorted(found, key=lambda e: _sort_key(_origin_of(e))):
        _load_entry_point(entry_point, loaded)
    return loaded


def _import_builtins(failures: dict[str, str]) -> None:
    for package_name in PLUGIN_PACKAGES:
        try:
            package = importlib.import_module(package_name)
        except ImportError as exc:
            failures[package_name] = f"{type(exc).__name__}: {exc}"
            continue
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            module = f"{package_name}.{info.name}"
            try:
                importlib.import_module(module)
            except Exception as exc:  # a broken plugin must not hide the others
                failures[module] = f"{type(exc).__name__}: {exc}"


def _origin_of(entry_point: importlib.metadata.EntryPoint) -> Origin:
    dist = entry_point.dist
    return Origin(
        distribution=dist.name if dist is not None else "(unknown distribution)",
        version=dist.version if dist is not None else "(unknown version)",
        entry_point=entry_point.name,
        value=entry_point.value,
    )


def _sort_key(where: Origin) -> tuple[str, str, str]:
    return ((where.distribution or "").lower(), where.entry_point or "", where.value or "")


def _load_entry_point(entry_point: importlib.metadata.EntryPoint, loaded: _Loaded) -> None:
    where = _origin_of(entry_point)
    before = set(REGISTRY)
    try:
        entry_point.load()
    except Exception as exc:  # a broken plugin must not hide the others
        # All or nothing: no half of a plugin. The modules that registered what is
        # taken back are forgotten too, so that another entry point naming one of
        # them imports it again, registering its types, rather than finding it imported.
        for key in [k for k in REGISTRY if k not in before]:
            sys.modules.pop(REGISTRY.pop(key).__module__, None)
        error = _refusal(exc, loaded) if isinstance(exc, DuplicateType) else None
        loaded.failures[str(where)] = loaded.plugin_failures[str(where)] = (
            error or f"{type(exc).__name__}: {exc}"
        )
        return
    for key in REGISTRY:
        if key not in before:
            loaded.origins[key] = where


def _refusal(exc: DuplicateType, loaded: _Loaded) -> str:
    """The error of a plugin that registered a name that is taken, naming both."""
    taken = loaded.origins.get((exc.kind, exc.name))
    holder = qualified_name(exc.existing)
    if taken is not None:
        holder += f" of {taken}"
    elif is_builtin(exc.existing):
        holder = f"the built-in {holder}"
    return (
        f"{exc.kind} type {exc.name!r} of {qualified_name(exc.new)} is refused: the name is "
        f"taken by {holder}, and a plugin cannot replace a type; give the plugin's type "
        "another name"
    )
