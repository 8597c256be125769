"""Module 06: SGD, Adam, AdamW, Adagrad, SparseAdam (tinytorch.core.optimizers)."""
