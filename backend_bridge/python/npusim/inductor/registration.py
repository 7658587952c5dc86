"""Registers the Inductor backend for npusim (inductor/__init__.py says when), and keys Inductor's FX graph cache by
npusim's code generator."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from torch._dynamo.device_interface import register_interface_for_device
from torch._inductor.codegen.common import register_backend_for_device, register_device_op_overrides
from torch._inductor.custom_graph_pass import CustomGraphModulePass

from . import gemm, native_ops
from .device import NpusimDeviceOpOverrides, NpusimInterface
from .kernel import NpusimScheduling
from .wrapper import NpusimWrapperCodegen


@functools.cache
def codegen_version():
    """A digest of the code generator's sources and the native module, which decide what a cached graph contains."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for source in sorted(package.glob("*.py")):
        digest.update(source.read_bytes())
    native = next(package.parent.glob("_C*.so"), None)
    if native is not None:
        stat = native.stat()
        digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


class CodegenVersion(CustomGraphModulePass):
    """Keys Inductor's FX graph cache by npusim's code generator: a cached graph from another version of it is a
    miss. The pass itself leaves the graph as it is."""

    def __call__(self, graph):
        return None

    def uuid(self):
        return codegen_version()


@functools.cache
def register():
    gemm.install_lowerings()
    native_ops.install_lowerings()
    register_interface_for_device("npusim", NpusimInterface)
    register_device_op_overrides("npusim", NpusimDeviceOpOverrides())
    register_backend_for_device("npusim", NpusimScheduling, NpusimWrapperCodegen, device_custom_pass=CodegenVersion())
