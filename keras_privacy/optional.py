"""The optional dependencies (pyproject's extras), imported where they are used, with an error
that says what needs them and how to install them."""

from __future__ import annotations

import importlib
from types import ModuleType

ONNX_INSTALL = 'pip install -e ".[onnx]"'
"""The `onnx` extra: ONNX export (tf2onnx) and `anonymize --runtime onnx` (ONNX Runtime)."""


class MissingDependencyError(RuntimeError):
    """An optional package that the asked-for work needs is not installed."""


def import_optional(module: str, purpose: str, install: str) -> ModuleType:
    """`module` imported; MissingDependencyError naming `purpose` and `install` where it is
    not installed (a user's choice of extras, not a bug: one line, no traceback)."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingDependencyError(f"{purpose} needs {module}: {install}") from error
