"""``torch.npusim``: the device module, shaped like ``torch.cuda`` for the parts npusim supports so far."""

import torch

from . import _C


def is_available():
    return True


def device_count():
    return _C.device_count()


def is_initialized():
    """Whether the devices have been created (on first use, or by init()). torch.cuda's name: PyTorch asks it, e.g.
    to give an index-less ``device="npusim"`` the current device's index."""
    return _C.devices_open()


def init():
    """Creates the devices now (with the chip npusim.init or NPUSIM_CONFIG chose) rather than on first use."""
    _C.open_devices()


def current_device():
    return _C.current_device()


def set_device(device):
    """Makes ``device`` (an index, ``"npusim:1"`` or a torch.device) the calling thread's current npusim device."""
    index = torch.device(device).index if isinstance(device, str) else getattr(device, "index", device)
    _C.set_device(index or 0)


def synchronize(device=None):
    """Waits for every command submitted to the device; raises the error of a failed asynchronous kernel."""
    _C.synchronize(_index(device))


# Streams and events, as torch.cuda's: launches return at once, commands on one stream run in order, streams wait for
# each other only through events, and synchronize / Event.synchronize / Stream.synchronize wait for the device. An
# event's recording is stamped with the simulated clock, so Event.elapsed_time gives simulated milliseconds (timed
# mode).
class Stream(torch.Stream):
    """An npusim stream (``torch.Stream`` on the npusim device); usable as a context manager."""

    def __new__(cls, device=None, priority=0):
        return super().__new__(cls, device=torch.device("npusim", _index(device)), priority=priority)


def Event(enable_timing=False, blocking=False, interprocess=False):  # noqa: N802  torch.cuda.Event's name
    """An npusim event: a ``torch.Event`` on the npusim device (a plain one, which torch.Event's methods require of
    the other event they are given)."""
    return torch.Event(device="npusim", enable_timing=enable_timing, blocking=blocking)


def current_stream(device=None):
    return torch.accelerator.current_stream(torch.device("npusim", _index(device)))


def default_stream(device=None):
    return _C.default_stream(_index(device))


def set_stream(stream):
    torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes ``stream`` current within a ``with`` block, as ``torch.cuda.stream`` does (None: no change)."""

    def __init__(self, stream):
        self.stream, self.previous = stream, None

    def __enter__(self):
        if self.stream is not None:
            self.previous = current_stream()
            set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.previous is not None:
            set_stream(self.previous)
        return False


def stream(stream):
    return StreamContext(stream)


def get_device_name(device=None):
    return _C.properties(_index(device))["name"]


class DeviceProperties:
    """What torch.cuda.get_device_properties gives, for an npusim chip: attributes (name, total_memory,
    multi_processor_count — its cores — and the chip's own figures), read from its configuration."""

    def __init__(self, values):
        self.__dict__.update(values)
        self.multi_processor_count = values["cores"]

    def __repr__(self):
        return (
            f"_NpusimDeviceProperties(name='{self.name}', mode='{self.mode}', cores={self.cores}, "
            f"clock_ghz={self.clock_ghz}, total_memory={self.total_memory // 2**20}MB)"
        )


def get_device_properties(device=None):
    return DeviceProperties(_C.properties(_index(device)))


def memory_stats(device=None):
    return dict(_C.memory_stats(_index(device)))


def memory_allocated(device=None):
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None):
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None):
    """The device heap is reserved whole from the start, so its peak is its size."""
    return memory_reserved(device)


def memory_summary(device=None, abbreviated=False):
    """A readable table of memory_stats(), like torch.cuda.memory_summary()."""
    stats = memory_stats(device)
    mib = 1024 * 1024
    lines = [
        f"npusim memory summary, device {_index(device)} ({get_device_name(device)})",
        f"  allocated      {stats['allocated_bytes.all.current'] / mib:12.3f} MiB",
        f"  peak allocated {stats['allocated_bytes.all.peak'] / mib:12.3f} MiB",
        f"  reserved       {stats['reserved_bytes.all.current'] / mib:12.3f} MiB",
        f"  live allocations {stats['allocation.all.current']}, allocations in all {stats['allocation.all.allocated']}",
        f"  free blocks {stats['free_blocks']}, largest {stats['largest_free_block_bytes'] / mib:.3f} MiB, "
        f"fragmentation {100 * stats['fragmentation']:.1f}%",
    ]
    return "\n".join(lines)


def reset_peak_memory_stats(device=None):
    _C.reset_peak_memory_stats(_index(device))


def empty_cache():
    """Nothing to release: the allocator returns freed blocks to the device at once."""


def _is_in_bad_fork():
    """Whether this process was forked after its parent opened the devices: it cannot use them (as with CUDA)."""
    return _C.is_in_bad_fork()


def get_amp_supported_dtype():
    """The types torch.autocast(device_type="npusim") may cast to: both have native kernels."""
    return [torch.float16, torch.bfloat16]


# Random numbers: each device has a default torch.Generator (a Philox key and stream offset, see docs/random.md),
# which torch.manual_seed seeds through manual_seed_all, as it does CUDA's.
_default_generators = {}


def _index(device):
    if device is None or device == "npusim":
        return current_device()
    if isinstance(device, int):
        return device
    return torch.device(device).index or 0


def default_generator(device=None):
    """The default torch.Generator of an npusim device (the current one by default)."""
    index = _index(device)
    if index not in _default_generators:
        _default_generators[index] = _C.default_generator(index)
    return _default_generators[index]


def manual_seed(seed):
    default_generator().manual_seed(int(seed))


def manual_seed_all(seed):
    for index in range(device_count()):
        default_generator(index).manual_seed(int(seed))


def seed():
    default_generator().seed()


def seed_all():
    """Seeds every device from one fresh non-deterministic seed."""
    fresh = default_generator(0).seed()
    manual_seed_all(fresh)


def initial_seed():
    return default_generator().initial_seed()


def get_rng_state(device="npusim"):
    """The generator's state as a CPU uint8 tensor: its seed and stream offset."""
    return default_generator(device).get_state()


def set_rng_state(new_state, device="npusim"):
    default_generator(device).set_state(new_state)


def get_rng_state_all():
    return [get_rng_state(index) for index in range(device_count())]


def set_rng_state_all(new_states):
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


class device:
    """Context manager selecting the current npusim device, like torch.cuda.device; the previous one is current again
    on exit."""

    def __init__(self, device):
        self.index = torch.device(device).index if isinstance(device, str) else getattr(device, "index", device)
        self.previous = None

    def __enter__(self):
        self.previous = current_device()
        set_device(self.index or 0)
        return self

    def __exit__(self, *exc):
        set_device(self.previous)
        return False


def __getattr__(name):
    """torch.compile's code generator for the device, which Inductor asks this module for the first time it compiles
    for npusim (torch._inductor.codegen.common.init_backend_registration): importing it registers the Inductor
    backend then rather than at ``import torch``. There is no C++ wrapper code generator: Inductor's
    ``cpp_wrapper`` mode is not supported on npusim."""
    if name in ("Scheduling", "PythonWrapperCodegen"):
        from .inductor import registration

        registration.register()
        return {"Scheduling": registration.NpusimScheduling, "PythonWrapperCodegen": registration.NpusimWrapperCodegen}[
            name
        ]
    raise AttributeError(f"module 'torch.npusim' has no attribute {name!r}")
