"""Compiled kernels at run time: what the generated wrapper calls.

``load_kernel`` turns a kernel's source (kernel.py writes it) into a :class:`CompiledKernel`. A call builds the
program for the call's sizes (once per size), lowers it to one fused npusim kernel built by the kernel builder and
cached by its spec, and launches it; a program the emitter cannot express runs through the interpreter, op by op on
the device. ``NPUSIM_COMPILE_INTERPRET=1`` interprets every kernel (to check the fused kernels against it).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import warnings

import torch
from torch._inductor import config as inductor_config

from .. import _C
from . import interpreter, segments
from .lowering import NotLowered, lower
from .program import build

log = logging.getLogger(__name__)

# How each compiled kernel ran, by name: "fused" (one kernel) or "interpreted: <why>". Tests and reports read it.
ROUTES: dict[str, str] = {}


class CompiledKernel:
    def __init__(self, name, fused_name, source):
        namespace = {"torch": torch}
        exec(compile(source, f"<npusim compiled kernel {name}>", "exec"), namespace)
        self.name = name
        self.fused_name = fused_name
        self.source = source
        self.function = namespace["program"]
        self.arguments = namespace["ARGUMENTS"]
        # (sizes, names of host tensor arguments, extents) -> (program, (the spec's description, its FusedSpecs (the
        # kernel, or its parts), index tables, host scalars, host index tables, the argument entries its accesses use,
        # the staged loads) or None)
        self._prepared = {}
        self._interpreter_caches = {}  # (sizes, device) -> what the interpreter keeps between launches
        self._device_tables = {}  # (device, id of a host index table) -> (the table, its copy on the device)

    def __repr__(self):
        return f"CompiledKernel({self.name})"

    def _prepare(self, key):
        sizes, host_arguments, extents = key
        program = build(self.fused_name, self.function, self.arguments, sizes)
        fused = None
        if os.environ.get("NPUSIM_COMPILE_INTERPRET") == "1":
            ROUTES[self.name] = "interpreted: NPUSIM_COMPILE_INTERPRET=1"
        else:
            try:
                description, tables, host_scalars, host_tables, staged = lower(
                    program, host_arguments, dict(zip(self.arguments, extents, strict=True))
                )
                # The kernel, or its parts when its masks split it (segments.py): launched one after another.
                parts = segments.split(description, host_tables, len(self.arguments) + len(tables)) or [description]
                specs = [_C.FusedSpec(part) for part in parts]
                fused = (description, specs, tables, host_scalars, host_tables, _arguments_read(description), staged)
            except NotLowered as why:
                ROUTES[self.name] = f"interpreted: {why}"
                log.info("npusim: compiled kernel %s runs op by op: %s", self.name, why)
        self._prepared[key] = (program, fused)
        return program, fused

    def __call__(self, *args):
        self.launch(self.resolve(args))

    def resolve(self, args):
        """What a call with these arguments launches: a :class:`Launch` (its program built and lowered once per
        size)."""
        given, sizes = args[: len(self.arguments)], tuple(int(s) for s in args[len(self.arguments) :])
        host_arguments = frozenset(
            name for name, t in zip(self.arguments, given, strict=True) if t.device.type == "cpu"
        )
        # An indexed access checks its indices against the elements its tensor holds from its first one (a host
        # tensor's copy for the launch holds other elements than it: none are known).
        extents = tuple(
            0 if t.device.type == "cpu" else t.untyped_storage().nbytes() // t.element_size() - t.storage_offset()
            for t in given
        )
        key = (sizes, host_arguments, extents)
        program, fused = self._prepared.get(key) or self._prepare(key)
        device = next(t.device for t in given if t.device.type == "npusim")
        return Launch(self, key, program, fused, given, device)

    def launch(self, launch):
        """Runs one resolved call: its fused kernel, or the program op by op when there is none."""
        _C.set_op(self.name, launch.device.index or 0)
        try:
            if launch.fused is None or not self._launch_fused(launch):
                self._prepared[launch.key] = (launch.program, None)
                cache = self._interpreter_caches.setdefault((launch.key[0], launch.device), {})
                interpreter.run(launch.program, launch.given, launch.device, cache)
        finally:
            _C.set_op("", launch.device.index or 0)

    def _device_table(self, device, table):
        """A host-computed index table's copy on the device, made at its first launch there."""
        kept = self._device_tables.get((device, id(table)))
        if kept is None:
            kept = self._device_tables[(device, id(table))] = (table, table.to(device))
        return kept[1]

    def argument_block(self, launch):
        """The fused kernel's argument block for a resolved call, and the tensors it passes for the program's
        arguments (a host tensor the kernel writes is copied back by :meth:`copy_back` after the launch)."""
        program, (_, _, tables, (host_nodes, hoisted, as_arguments), host_tables, read, staged) = (
            launch.program,
            launch.fused,
        )
        given, device = launch.given, launch.device
        # Host scalar arithmetic on host tensors (an optimizer's beta ** step from its step count) is done here and
        # its results go in the launch's argument block (a GEMM epilogue's in one small tensor); host tensors the
        # kernel itself reads are copied over, the others are not needed on the device (entry 0).
        tensors = [t if t.device == device else t.to(device) if k in read else 0 for k, t in enumerate(given)]
        arguments = tensors + [_index_table(device, dtype, length) for dtype, length in tables]
        arguments += [self._device_table(device, table) for table in host_tables]
        if hoisted:
            values = interpreter.run(program, given, device, numbers=host_nodes)
            scalars = [values[n].reshape(()).to(torch.float32) for n in hoisted]
            if as_arguments:
                arguments += [scalar.item() for scalar in scalars]
            else:
                arguments.append(torch.stack(scalars).to(device))
        for staging in staged:  # its source on the device (a host tensor read only through it was not copied above)
            source = tensors[staging.argument]
            if not isinstance(source, torch.Tensor):
                source = given[staging.argument].to(device)
            arguments.append(staging.copy(source))
        return arguments, tensors

    def copy_back(self, launch, tensors):
        for name, original, used in zip(self.arguments, launch.given, tensors, strict=True):
            if isinstance(used, torch.Tensor) and used is not original and name in launch.program.stored:
                original.copy_(used)

    def _launch_fused(self, launch):
        """Launches the fused kernel; False when the kernel builder cannot express it."""
        arguments, tensors = self.argument_block(launch)
        _C.set_op(self.name, launch.device.index or 0)  # again: a staged copy is an aten operator of its own
        # No part writes what the kernel reads (segments.py), so a part the builder cannot express leaves the
        # interpreter the inputs it needs.
        specs = launch.fused[1]
        for spec in specs:
            if not _C.launch_fused(spec, arguments):
                ROUTES[self.name] = "interpreted: the kernel builder cannot express it"
                return False
        ROUTES[self.name] = "fused" if len(specs) == 1 else f"fused, in {len(specs)} parts"
        self.copy_back(launch, tensors)
        return True


@dataclasses.dataclass
class Launch:
    """One call of a compiled kernel, resolved: its program for the call's sizes, its fused kernel (None when it runs
    op by op), the tensors given and their device."""

    kernel: CompiledKernel
    key: tuple
    program: object
    fused: tuple | None
    given: tuple
    device: torch.device


def _arguments_read(description):
    """The argument entries a spec's loads, stores and product read or write."""
    _, _, _, _, loads, stores, _, matmul = description
    return {argument for argument, *_ in loads + stores} | (set(matmul[:2]) if matmul is not None else set())


_tables = {}  # (device, dtype) -> 0, 1, 2, ... on the device


def _index_table(device, dtype, length):
    """At least `length` ascending integers of `dtype` on the device, for kernels that use an index as data."""
    table = _tables.get((device, dtype))
    if table is None or table.numel() < length:
        table = torch.arange(max(length, 1024), dtype=dtype, device=device)
        _tables[(device, dtype)] = table
    return table


def load_kernel(name, fused_name, source):
    """A compiled graph's kernel, made when its module loads (compiled anew or from Inductor's cache)."""
    if "k.matmul(" in source:
        _say_autotuning_is_not_done()
    return CompiledKernel(name, fused_name, source)


def _say_autotuning_is_not_done():
    """mode="max-autotune" benchmarks candidate kernels on the host's GPU or CPU; npusim's products take the GEMM
    loop's own tiling, so the mode changes nothing for them, and the user is told so. (Checked as a graph's module
    loads, which mode="max-autotune" does under its configuration, whether the graph was compiled or cached.)"""
    if inductor_config.max_autotune or inductor_config.max_autotune_gemm:
        warnings.warn(
            "npusim: mode='max-autotune' does not tune npusim's kernels: matrix products use the GEMM template with "
            "the kernel builder's own tiling (docs/compile.md, 'Options, limits and errors')",
            stacklevel=3,
        )
