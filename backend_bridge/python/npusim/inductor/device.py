"""What Dynamo and Inductor ask of a device: its interface (devices, streams, properties) and the lines the
generated wrapper writes to set the device, guard it and synchronise it."""

from __future__ import annotations

import types

import torch
from torch._dynamo.device_interface import DeviceInterface
from torch._inductor.codegen.common import DeviceOpOverrides

from .. import device_module


class NpusimInterface(DeviceInterface):
    device = torch.device
    Event = staticmethod(device_module.Event)
    Stream = device_module.Stream

    class Worker:
        @staticmethod
        def set_device(device):
            device_module.set_device(device)

        @staticmethod
        def current_device():
            return device_module.current_device()

        @staticmethod
        def get_device_properties(device=None):
            return NpusimInterface.get_device_properties(device)

    @staticmethod
    def current_device():
        return device_module.current_device()

    @staticmethod
    def set_device(device):
        device_module.set_device(device)

    @staticmethod
    def maybe_exchange_device(device):
        previous = device_module.current_device()
        if device != previous:
            device_module.set_device(device)
        return previous

    @staticmethod
    def exchange_device(device):
        return NpusimInterface.maybe_exchange_device(device)

    @staticmethod
    def device_count():
        return device_module.device_count()

    @staticmethod
    def is_available():
        return device_module.is_available()

    @staticmethod
    def stream(stream):
        return device_module.stream(stream)

    @staticmethod
    def current_stream():
        return device_module.current_stream()

    @staticmethod
    def set_stream(stream):
        device_module.set_stream(stream)

    @staticmethod
    def get_raw_stream(device_index):
        return 0  # launches go to the current stream; the wrapper passes no stream

    @staticmethod
    def synchronize(device=None):
        device_module.synchronize(device)

    @classmethod
    def get_device_properties(cls, device=None):
        # Inductor's heuristics read these (split reductions by multi_processor_count): the chip's cores.
        from .. import properties

        index = torch.device(device).index if device is not None else None
        chip = properties(index or 0)
        return types.SimpleNamespace(
            name=chip["name"],
            multi_processor_count=chip["cores"],
            max_threads_per_multi_processor=chip["vector_lanes"],
            warp_size=chip["vector_lanes"],
            total_memory=chip["total_memory"],
            major=1,
            minor=0,
        )

    @staticmethod
    def get_compute_capability(device=None):
        return 0

    @staticmethod
    def is_bf16_supported(including_emulation=False):
        return True

    @staticmethod
    def is_dtype_supported(dtype, including_emulation=False):
        return dtype != torch.float64 and not dtype.is_complex

    @staticmethod
    def memory_allocated(device=None):
        return device_module.memory_allocated(device)

    @staticmethod
    def is_triton_capable(device=None):
        return False


class NpusimDeviceOpOverrides(DeviceOpOverrides):
    def import_get_raw_stream_as(self, name):
        return f"def {name}(device_index): return 0"

    def set_device(self, device_index):
        return f"torch.npusim.set_device({device_index})"

    def synchronize(self):
        return "torch.npusim.synchronize()"

    def device_guard(self, device_index):
        return f"torch.npusim.device({device_index})"
