"""Module 12: scaled dot-product attention, multi-head attention, RoPE, ALiBi, the KV cache (tinytorch.core.attention)."""
