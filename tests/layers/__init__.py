"""Module 03: Module, Parameter, Linear, Dropout, Sequential, state_dict, buffers and checkpoints (tinytorch.core.layers, .checkpoint)."""
