"""Module 10: tokenizers, the built-in corpus and semantics (tinytorch.text.tokenization, .corpus, .semantics)."""
