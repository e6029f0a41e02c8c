"""Optional dependencies of the harness's developer tools, asked for by name.

A plain ``pip install kspark`` brings what the engine, the server and ``qtt run`` need. A few
developer tools run the project's own tests and need the ``test`` extra; they ask for it here,
and a user without it reads one line saying what to install instead of an ImportError.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, *, extra: str, tool: str) -> ModuleType:
    """``import module``, or exit with one line naming the extra that brings it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise SystemExit(
            f"{tool} needs the Python package '{module}', from kspark's '{extra}' extra: "
            f"pip install 'kspark[{extra}]'."
        ) from None
