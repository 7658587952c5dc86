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
    with (
        unittest.mock.patch.object(torch.cuda, "is_available", lambda: True),
        unittest.mock.patch.object(torch.cuda, "device_count", lambda: 1),
        unittest.mock.patch.object(torch.cuda, "synchronize", lambda device=None: None),
        _CudaToNpusim(),
    ):
        yield
