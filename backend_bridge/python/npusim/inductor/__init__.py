"""torch.compile for npusim: an Inductor backend whose fused node groups become single npusim kernels.

Registered lazily: the first time Inductor looks for the device's code generator (``torch.npusim.Scheduling``, see
device_module.py), registration.register() installs the device interface, the wrapper's device lines and the
scheduling and wrapper classes, so ``import torch`` stays as fast as before. This package's own import is light (the
modules import Inductor, not this file), so that npusim/inductor_hook.py can load native_ops while Inductor itself is
still importing. docs/compile.md explains what fuses and how compiled kernels appear in reports.
"""
