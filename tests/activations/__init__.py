"""Module 02: activations as layers (tinytorch.core.activations)."""
