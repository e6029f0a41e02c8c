"""The execution plan: versioned steps, DDL commands and their JSON serde (no pyspark).

Importing the package registers every step version: ``steps.py`` holds the stateless
ones, ``steps_*.py`` modules the others.
"""

from __future__ import annotations

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    if _module.name.startswith("steps"):
        importlib.import_module(f"{__name__}.{_module.name}")
