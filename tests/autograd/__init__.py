"""Module 05: the autograd engine and its kernel table (tinytorch.core.autograd, .kernels)."""
