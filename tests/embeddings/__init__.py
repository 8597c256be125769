"""Module 11: Embedding, positions, EmbeddingLayer, options, EmbeddingBag, sparse gradients, quantization, the skip-gram demo (tinytorch.text.*)."""
