"""Module 04: cross_entropy and mse_loss (tinytorch.core.losses)."""
