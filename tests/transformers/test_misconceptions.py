"""Checks that point at one module-13 exercise each (tito/misconceptions/transformers.py lists the mistakes)."""
import numpy as np
import pytest

from tests.diagnosis import expect_close
from tinytorch.core.autograd import no_grad
from tinytorch.core.tensor import Tensor
from tinytorch.models import DecoderBlock, TransformerConfig
from tinytorch.text.embeddings import RotaryEmbedding


@pytest.mark.isolates("DecoderBlock.forward")   # the norms it calls (taught before it) have checks of their own
@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_the_block_normalises_each_sublayers_input_and_keeps_the_stream(arch):
    config = TransformerConfig(arch=arch, d_model=16, num_heads=4, num_kv_heads=2 if arch == "llama" else None,
                               position="rope" if arch == "llama" else "learned")
    rope = RotaryEmbedding(4, interleaved=False) if arch == "llama" else None
    block = DecoderBlock(config, rope=rope, seed=0)
    norm_1, attn, norm_2, mlp = (getattr(block, name) for name in block.part_names)
    x = Tensor(np.random.default_rng(0).standard_normal((2, 5, 16)))
    with no_grad():
        h = x + attn(norm_1(x))                    # pre-norm: the sub-layers read a normalised copy
        expected = (h + mlp(norm_2(h))).data
        post = norm_1(x + attn(x))                 # post-norm: the stream itself normalised
        post_norm = norm_2(post + mlp(post)).data
        got = block(x).data
    expect_close(got, expected, f"{arch} DecoderBlock(x)", diagnoses=[
        ("post-norm", "each sub-layer reads norm(x) and its output is added to x itself: x + attn(norm_1(x)), then "
                      "h + mlp(norm_2(h)); normalising the sum removes the residual identity path", post_norm)])
