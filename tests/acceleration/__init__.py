"""Module 18: the fast kernels (tinytorch.fast), equal to the plain ones."""
