"""npusim: PyTorch on a simulated NPU.

``import npusim`` (or plain ``import torch``, through PyTorch's backend autoload) registers the ``npusim`` device:

    x = torch.arange(8.0, device="npusim")
    with npusim.profile() as report:
        y = (x + x) * x
    print(report.table())

The chip and the fidelity come from ``NPUSIM_CONFIG`` (a preset name or a YAML path, default ``default``) and
``NPUSIM_MODE`` (``functional`` or ``timed``), or from :func:`init` before the device is first used.
"""

import os
from pathlib import Path


def _autoload():
    """Entry point of PyTorch's device-backend autoload; importing this package does the work. Defined before
    ``import torch`` because ``import npusim`` imports torch, whose autoload then finds this module half-imported."""


import torch  # noqa: E402

from . import _C  # noqa: E402
from .profiler import KernelRecord, Report, profile  # noqa: E402

__all__ = ["init", "profile", "Report", "KernelRecord", "config_dirs", "properties"]


def config_dirs():
    """Directories searched for preset names: the presets installed with the package."""
    return [str(Path(__file__).resolve().parent / "configs")]


def init(config=None, mode=None):
    """Choose the chip configuration and simulation mode; call before the device is first used.

    ``config`` is a preset name (``npusim configs`` lists them) or a YAML path; ``mode`` is ``"functional"``
    (fast, results only) or ``"timed"`` (the SystemC model: results plus cycles). Unset arguments come from
    ``NPUSIM_CONFIG`` / ``NPUSIM_MODE``. Without a call, the environment is read when the device is first used.
    """
    config = config or os.environ.get("NPUSIM_CONFIG") or "default"
    mode = mode or os.environ.get("NPUSIM_MODE") or "functional"
    if mode not in ("functional", "timed"):
        raise ValueError(f"unknown mode {mode!r}: expected 'functional' or 'timed'")
    _C.init(config, mode, config_dirs())
    properties()  # build the chip now, so a bad configuration is reported by this call


def properties(device=0):
    """The chip's configuration figures (cores, clock, memory, mode) as a dict."""
    return _C.properties(device)


def _print_from_host_copy():
    """Format npusim tensors from a host copy, as PyTorch does for XLA and MTIA: printing needs many small ops
    (abs, masked_select, min, ...) that are host work, not something to simulate on the NPU."""
    import torch._tensor_str as tensor_str

    format_data = tensor_str._tensor_str

    def _tensor_str(self, indent):
        return format_data(self.cpu() if self.device.type == "npusim" else self, indent)

    tensor_str._tensor_str = _tensor_str


def _register():
    torch.utils.rename_privateuse1_backend("npusim")
    from . import device_module

    torch._register_device_module("npusim", device_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
    _print_from_host_copy()
    _C.set_default_config_dirs(config_dirs())
    _C.set_default_recording(False)  # npusim.profile() turns recording on while it is open
    from . import autograd_exit, eager_decompositions, inductor_hook  # noqa: PLC0415

    eager_decompositions.install()  # operators without a kernel, as PyTorch's decompositions on the device
    inductor_hook.install()  # torch.compile's decompositions, when Inductor loads
    autograd_exit.install()  # an exit after a backward pass that PyTorch's engine cannot abort


_register()
