"""``torch.npusim``: the device module, shaped like ``torch.cuda`` for the parts npusim supports so far."""

import torch

from . import _C


def is_available():
    return True


def device_count():
    return _C.device_count()


def current_device():
    return 0  # one device for now


def set_device(device):
    index = torch.device(device).index if isinstance(device, str) else getattr(device, "index", device)
    if (index or 0) != 0:
        raise RuntimeError(f"npusim: device {index} does not exist; there is 1")


def synchronize(device=None):
    """Wait for the device; launches complete before they return, so there is never work in flight yet."""


def get_device_name(device=None):
    return _C.properties(0)["name"]


def get_device_properties(device=None):
    return _C.properties(0)


def memory_stats(device=None):
    return dict(_C.memory_stats(0))


def memory_allocated(device=None):
    return _C.memory_stats(0)["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    return _C.memory_stats(0)["allocated_bytes.all.peak"]


def memory_reserved(device=None):
    return _C.memory_stats(0)["reserved_bytes.all.current"]


def reset_peak_memory_stats(device=None):
    _C.reset_peak_memory_stats(0)


def empty_cache():
    """Nothing to release: the allocator returns freed blocks to the device at once."""


def _is_in_bad_fork():
    return False


def manual_seed(seed):
    """Random numbers for npusim tensors are drawn on the CPU (through the fallback) from the CPU generator, which
    torch.manual_seed already seeds; there is no separate device generator yet."""


def manual_seed_all(seed):
    manual_seed(seed)


def get_rng_state(device="npusim"):
    """The state of the generator npusim's random numbers come from: the CPU's, for now (see manual_seed)."""
    return torch.get_rng_state()


def set_rng_state(new_state, device="npusim"):
    torch.set_rng_state(new_state)


def get_rng_state_all():
    return [get_rng_state()]


def set_rng_state_all(new_states):
    set_rng_state(new_states[0])


class device:
    """Context manager selecting the current npusim device, like torch.cuda.device (there is one device for now)."""

    def __init__(self, device):
        self.index = torch.device(device).index if isinstance(device, str) else getattr(device, "index", device)

    def __enter__(self):
        set_device(self.index or 0)
        return self

    def __exit__(self, *exc):
        return False
