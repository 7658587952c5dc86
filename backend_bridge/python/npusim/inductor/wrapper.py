"""The host-side code Inductor generates for an npusim graph: PyTorch's Python wrapper, with npusim's kernels
defined by npusim.inductor.runtime.load_kernel and called like functions (no Triton, no raw streams: a launch goes
to the current npusim stream, as an eager op's does)."""

from __future__ import annotations

from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen


class NpusimWrapperCodegen(PythonWrapperCodegen):
    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            return SubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return NpusimWrapperCodegen()

    def write_header(self):
        super().write_header()
        self.imports.writeline("from npusim.inductor.runtime import load_kernel as npusim_load_kernel")
        self.imports.writeline("from npusim.inductor.launch_together import LaunchTogether as npusim_launch_together")

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
        if device is not None and device.type == "npusim":
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)
