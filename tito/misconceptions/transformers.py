"""Module 13 (transformers): the normalisations, the pre-norm block and the bfloat16 conversions of the
checkpoint reader. The typical mistakes mix up the two normalisations, put the norm on the residual stream,
and treat bit patterns as numbers."""
from tito.misconceptions import Mistake

MISTAKES = [
    Mistake(
        name="layernorm-no-centring", exercise="LayerNorm.forward",
        misconception="LayerNorm divides by the spread, so the mean can stay: but it centres first, "
                      "(x - mean) / sqrt(var + eps); without centring it is RMSNorm.",
        replacement="""
centred = x - x.mean(axis=-1, keepdims=True)
var = (centred * centred).mean(axis=-1, keepdims=True)
return x / (var + self.eps).sqrt() * self.weight + self.bias
"""),
    Mistake(
        name="rmsnorm-centres", exercise="RMSNorm.forward",
        misconception="RMSNorm is LayerNorm without the bias: but it does not subtract the mean either; "
                      "it divides x itself by its root mean square.",
        replacement="""
centred = x - x.mean(axis=-1, keepdims=True)
ms = (centred * centred).mean(axis=-1, keepdims=True)
return centred / (ms + self.eps).sqrt() * self.weight
"""),
    Mistake(
        name="post-norm-stream", says="post-norm", exercise="DecoderBlock.forward",
        misconception="Normalising after each residual add is the same block: but GPT-2 and LLaMA normalise "
                      "each sub-layer's input (pre-norm); norming the stream itself changes every output and "
                      "removes the identity path.",
        replacement="""
norm_1, attn, norm_2, mlp = (getattr(self, name) for name in self.part_names)
x = norm_1(x + attn(x, attn_mask, key_padding_mask=key_padding_mask, token_positions=token_positions, cache=cache))
return norm_2(x + mlp(x))
"""),
    Mistake(
        name="bfloat16-converted-not-viewed", says="reinterpreted", exercise="bfloat16_to_float32",
        misconception="bfloat16 bits become a float by converting the integer: but the 16 bits are the top "
                      "half of a float32 word, to be reinterpreted, not converted (0x3F80 is 1.0, not 16256.0).",
        replacement="""
return bits.astype(np.float32)
"""),
    Mistake(
        name="bfloat16-truncates", says="truncates", exercise="float32_to_bfloat16",
        misconception="Dropping the low 16 bits is rounding: but it always rounds towards zero; bfloat16 "
                      "rounds to nearest, ties to even.",
        replacement="""
return (np.ascontiguousarray(values).view(np.uint32) >> 16).astype(np.uint16)
"""),
]
