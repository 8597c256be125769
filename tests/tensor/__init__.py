"""Module 01: Tensor, its differentiable ops and the shared argument checks (tinytorch.core.tensor, .validation)."""
