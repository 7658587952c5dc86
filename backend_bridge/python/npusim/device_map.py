"""Sending what a script puts on another device (``cuda``, or the CPU by default) to npusim, without editing it."""

import contextlib
import unittest.mock

import torch
from torch.overrides import TorchFunctionMode


class _CudaToNpusim(TorchFunctionMode):
    """Rewrites ``cuda`` devices in the arguments of every torch call, and ``Tensor.cuda()``, to npusim."""

    @staticmethod
    def _map(value):
        if isinstance(value, torch.device) and value.type == "cuda":
            return torch.device("npusim", 0)
        if isinstance(value, str) and (value == "cuda" or value.startswith("cuda:")):
            return "npusim:0"
        return value

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.cuda:
            return args[0].to("npusim")
        if func == torch.Tensor.is_cuda.__get__:  # a fresh method-wrapper on every access: compare, not `is`
            return args[0].device.type in ("npusim", "cuda")
        args = tuple(self._map(value) for value in args)
        kwargs = {key: self._map(value) for key, value in kwargs.items()}
        return func(*args, **kwargs)


@contextlib.contextmanager
def map_device(source):
    """Within the block, `source` ("cuda" or "cpu") means npusim; None changes nothing."""
    if source is None:
        yield
        return
    if source == "cpu":
        previous = torch.get_default_device()
        torch.set_default_device("npusim")
        try:
            yield
        finally:
            torch.set_default_device(previous)
        return
    load = torch.load

    def load_onto_npusim(*args, map_location=None, **kwargs):
        # Checkpoints saved on a GPU, or loaded with map_location="cuda", come to npusim (via the CPU).
        if map_location is None or _CudaToNpusim._map(map_location) != map_location:
            loaded = load(*args, map_location="cpu", **kwargs)
            return torch.utils._pytree.tree_map_only(torch.Tensor, lambda t: t.to("npusim"), loaded)
        return load(*args, map_location=map_location, **kwargs)

    with contextlib.ExitStack() as stack:
        # torch.cuda's queries, random state, streams, events and memory statistics answer for npusim.
        replacements = {"is_available": lambda: True}
        for name in (
            "device_count current_device set_device synchronize get_device_name get_device_properties "
            "get_rng_state set_rng_state manual_seed manual_seed_all seed seed_all initial_seed "
            "Stream Event current_stream default_stream set_stream stream "
            "memory_allocated max_memory_allocated memory_reserved memory_stats reset_peak_memory_stats empty_cache"
        ).split():
            replacements[name] = getattr(torch.npusim, name)
        for name, replacement in replacements.items():
            stack.enter_context(unittest.mock.patch.object(torch.cuda, name, replacement))
        stack.enter_context(unittest.mock.patch.object(torch, "load", load_onto_npusim))
        stack.enter_context(_CudaToNpusim())
        yield
