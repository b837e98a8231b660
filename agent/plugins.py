"""Plugin discovery: import every module of the plugin packages once.

Each module registers its component classes with `@register(kind, type)` as a side
effect of being imported, so adding a type touches no shared file. A module that
fails to import is remembered (not fatal): the compiler mentions it when a
pipeline asks for a type that is missing.
"""

from __future__ import annotations

import importlib
import pkgutil

PLUGIN_PACKAGES = ("agent.channels", "agent.interceptors", "sources", "sinks")

_failures: dict[str, str] | None = None


def load_plugins() -> dict[str, str]:
    """Import all plugin modules (once); returns {module: error} for those that failed."""
    global _failures
    if _failures is not None:
        return _failures
    _failures = {}
    for package_name in PLUGIN_PACKAGES:
        try:
            package = importlib.import_module(package_name)
        except ImportError as exc:
            _failures[package_name] = f"{type(exc).__name__}: {exc}"
            continue
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            module = f"{package_name}.{info.name}"
            try:
                importlib.import_module(module)
            except Exception as exc:  # a broken plugin must not hide the others
                _failures[module] = f"{type(exc).__name__}: {exc}"
    return _failures
