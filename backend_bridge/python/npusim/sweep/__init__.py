"""Design-space exploration: `npusim sweep` runs PyTorch workloads over sweeps of chip configurations, caches and
resumes them, searches with Optuna, and reports Pareto fronts (docs/sweeps.md)."""
