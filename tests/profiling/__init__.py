"""Module 14: the profiler (tinytorch.profiler)."""
