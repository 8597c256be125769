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
    Mistake(
        name="linear-multiplies", exercise="linear_inv_freq",
        misconception="To reach factor times further, the frequencies grow by the factor: but position "
                      "interpolation squeezes positions, m turns as m / factor did, so frequencies shrink.",
        replacement="""
return inv_freq * factor
"""),
    Mistake(
        name="dynamic-base-not-raised", exercise="dynamic_ntk_inv_freq",
        misconception="Dynamic NTK multiplies the base by the scale s: but the base is raised by s^(d/(d-2)), "
                      "which is what divides the slowest pair by exactly s.",
        replacement="""
seq_len = max(seq_len, max_position_embeddings)
scale = factor * seq_len / max_position_embeddings - (factor - 1)
return (base * scale) ** (-np.arange(0, dim, 2) / dim)
"""),
    Mistake(
        name="yarn-range-swapped", says="range swapped", exercise="yarn_correction_range",
        misconception="low comes from beta_slow and high from beta_fast: but more turns is a faster pair, "
                      "a smaller index, so low = i(beta_fast).",
        replacement="""
def pair_index(turns):
    return dim * math.log(original_max_position_embeddings / (turns * 2 * math.pi)) / (2 * math.log(base))
low, high = pair_index(beta_slow), pair_index(beta_fast)
if truncate:
    low, high = math.floor(low), math.ceil(high)
return max(low, 0), min(high, dim - 1)
"""),
    Mistake(
        name="yarn-ramp-reversed", says="ramp reversed", exercise="yarn_inv_freq",
        misconception="The ramp's 1 keeps a pair and its 0 interpolates: but fast pairs (ramp 0) keep their "
                      "frequency and slow ones (ramp 1) are divided by the factor.",
        replacement="""
low, high = yarn_correction_range(dim, base, original_max_position_embeddings, beta_fast, beta_slow, truncate)
if low == high:
    high += 0.001
ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0.0, 1.0)
theta = float(base) ** (-np.arange(0, dim, 2) / dim)
return theta * ramp + theta / factor * (1.0 - ramp)
"""),
    Mistake(
        name="llama3-bands-swapped", exercise="llama3_inv_freq",
        misconception="Short wavelengths are the ones to stretch: but pairs that turn many times in training "
                      "already saw every angle and are kept; the long wavelengths are divided by the factor.",
        replacement="""
L0 = original_max_position_embeddings
wavelen = 2 * math.pi / inv_freq
smooth = (L0 / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
return np.where(wavelen < L0 / high_freq_factor, inv_freq / factor,
                np.where(wavelen > L0 / low_freq_factor, inv_freq, blended))
"""),
    Mistake(
        name="dynamic-never-resets", says="never resets", exercise="RopeFrequencies.update",
        misconception="Once stretched, the frequencies stay stretched: but transformers goes back to plain "
                      "RoPE when a sequence shorter than the trained length comes, so short inputs read as trained.",
        replacement="""
if seq_len > self.seen_len:
    self.inv_freq, _ = rope_frequencies(self.dim, self.base, self.rope_scaling,
                                        self.max_position_embeddings, seq_len)
    self.seen_len = seq_len
    return True
return False
"""),
]
