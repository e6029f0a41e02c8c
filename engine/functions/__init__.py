"""Scalar and table functions of the ksqlDB dialect, as pure Python over engine values.

Importing this package registers every library module with ``REGISTRY``.
"""

from __future__ import annotations

import importlib
import pkgutil

from engine.functions.registry import REGISTRY, FunctionKind, ResolvedFunction

for _module in pkgutil.iter_modules(__path__):
    if _module.name.startswith("lib_"):
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["REGISTRY", "FunctionKind", "ResolvedFunction"]
