"""Runs npusim's changes to Inductor's decomposition table as soon as Inductor imports it.

Inductor picks its decompositions before it looks for the device's code generator (which is when the rest of the
backend registers, see inductor/__init__.py), and importing Inductor at ``import torch`` would cost a second. So
``import npusim`` only installs this finder (this module imports nothing heavy): the moment
``torch._inductor.decomposition`` is imported, inductor.native_ops.skip_decompositions() runs on its table.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

_MODULE = "torch._inductor.decomposition"


class _AfterDecompositionImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)  # find the real module, once
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            _skip_decompositions(module)

        spec.loader.exec_module = exec_module
        return spec


def _skip_decompositions(module):
    from .inductor import native_ops  # noqa: PLC0415  imports only torch, so it loads while Inductor is importing

    native_ops.skip_decompositions(module.decompositions)


def install():
    if _MODULE in sys.modules:  # Inductor is already in: change its table now
        _skip_decompositions(sys.modules[_MODULE])
    elif not any(isinstance(finder, _AfterDecompositionImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterDecompositionImport())
