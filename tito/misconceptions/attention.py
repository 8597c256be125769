"""Module 12 (attention): the mistakes learners typically make in scores, masks, ALiBi, RoPE and the KV cache."""
from tito.misconceptions import Mistake

MISTAKES = [
    Mistake(
        name="scale-by-e", exercise="attention_scores",
        misconception="The scores are divided by the key width E: but dot products of unit-variance vectors have "
                      "variance E, so the scale that brings them back to 1 is 1/sqrt(E).",
        replacement="""
scale = 1.0 / query.shape[-1] if scale is None else scale
return (query @ key.transpose(-2, -1)) * float(scale)
"""),
    Mistake(
        name="causal-excludes-diagonal", exercise="causal_mask",
        misconception="A causal query sees only the keys before it: but it sees its own position too (j <= i), "
                      "otherwise the first query has no key at all.",
        replacement="""
return np.arange(key_len)[None, :] < np.arange(query_len)[:, None] + offset
"""),
    Mistake(
        name="minus-inf-rows-give-nan", exercise="attention_weights",
        misconception="Masking is adding -inf and a softmax: but a row whose every key is masked computes "
                      "-inf - (-inf) = NaN, which must become a row of 0 instead.",
        replacement="""
bias = np.where(mask, 0, -np.inf) if mask.dtype == bool else mask
return (scores + Tensor(bias, dtype=scores.dtype)).softmax(axis=-1)
"""),
    Mistake(
        name="padding-mask-not-flipped", exercise="merge_masks",
        misconception="Every boolean mask means True = attend: but key_padding_mask keeps nn.MultiheadAttention's "
                      "opposite convention, True = padding, ignore it.",
        replacement="""
if key_padding_mask is not None:
    masks.append(key_padding_mask[:, None, None, :])
if not masks:
    return None
if all(m.dtype == bool for m in masks):
    merged = masks[0]
    for m in masks[1:]:
        merged = merged & m
    return merged
merged = 0.0
for m in masks:
    merged = merged + (np.where(m, 0.0, -np.inf) if m.dtype == bool else m)
return merged
"""),
    Mistake(
        name="alibi-ignores-offset", exercise="alibi_bias",
        misconception="Query i sits at position i: but after `offset` cached keys it sits at i + offset, and the "
                      "distance to key j is |i + offset - j|.",
        replacement="""
distance = np.abs(np.arange(query_len)[:, None] - np.arange(key_len)[None, :])
return (0.0 - alibi_slopes(num_heads)[:, None, None] * distance).astype(dtype)
"""),
    Mistake(
        name="rotation-backwards", exercise="rotate_pairs",
        misconception="Any rotation by the angle will do: but (a·cos + b·sin, -a·sin + b·cos) turns the other way, "
                      "so positions count backwards and nothing matches RoPE's published values.",
        replacement="""
half = x.shape[-1] // 2
first, second = (np.s_[..., 0::2], np.s_[..., 1::2]) if interleaved else (np.s_[..., :half], np.s_[..., half:])
a, b = x[first], x[second]
out = np.empty_like(x)
out[first] = a * cos + b * sin
out[second] = -a * sin + b * cos
return out
"""),
    Mistake(
        name="cache-overwrites", exercise="KVCache.update",
        misconception="The cache holds the latest keys and values: but it must keep every earlier one too, "
                      "appended along the sequence axis, or a new token attends only to itself.",
        replacement="""
self.keys, self.values = keys, values
return self.keys, self.values
"""),
]
