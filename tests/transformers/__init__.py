"""Module 13: TransformerLM, generation, Hugging Face interop, training, the position option (tinytorch.models)."""
