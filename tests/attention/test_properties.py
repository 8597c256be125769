"""Property tests for RoPE (hypothesis, bounded budget): it preserves norms, is the identity at position 0,
and <R_m q, R_n k> depends only on m - n."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tinytorch.core.tensor import Tensor
from tinytorch.text.embeddings import RotaryEmbedding

pytestmark = pytest.mark.usefixtures("both_kernels")    # run with the plain and with the fast kernels (module 18)

F64 = np.float64
BUDGET = settings(max_examples=25, deadline=None)
SEEDS = st.integers(0, 2**32 - 1)


@st.composite
def rope_inputs(draw):
    dim = 2 * draw(st.integers(1, 8))
    shape = draw(st.sampled_from([(1,), (5,), (2, 3), (2, 2, 4)]))
    return dim, shape, draw(st.booleans()), draw(st.sampled_from([100.0, 10000.0, 500000.0])), draw(SEEDS)


@BUDGET
@given(case=rope_inputs())
def test_rope_preserves_every_vectors_norm_and_position_zero_is_the_identity(case):
    dim, shape, interleaved, base, seed = case
    rng = np.random.default_rng(seed)
    rope = RotaryEmbedding(dim, max_seq_len=16, base=base, interleaved=interleaved)
    x = rng.standard_normal(shape + (dim,))
    positions = rng.integers(-3000, 3000, size=shape)
    rotated = rope(Tensor(x, dtype=F64), positions=positions).data
    np.testing.assert_allclose(np.linalg.norm(rotated, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)
    unmoved = rope(Tensor(x, dtype=F64), positions=np.zeros(shape, np.int64)).data
    np.testing.assert_array_equal(unmoved, x)


@BUDGET
@given(dim_half=st.integers(1, 8), m=st.integers(-2000, 2000), n=st.integers(-2000, 2000),
       shift=st.integers(-2000, 2000), interleaved=st.booleans(), seed=SEEDS)
def test_rope_scores_depend_only_on_the_relative_position(dim_half, m, n, shift, interleaved, seed):
    dim = 2 * dim_half
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((1, dim)), rng.standard_normal((1, dim))
    rope = RotaryEmbedding(dim, max_seq_len=8, interleaved=interleaved)

    def score(position_q, position_k):
        rotated_q = rope(Tensor(q, dtype=F64), positions=[position_q]).data
        rotated_k = rope(Tensor(k, dtype=F64), positions=[position_k]).data
        return (rotated_q @ rotated_k.T).item()

    scale = np.linalg.norm(q) * np.linalg.norm(k)
    assert abs(score(m, n) - score(m + shift, n + shift)) <= 1e-9 * scale
    assert abs(score(m, n) - score(m - n, 0)) <= 1e-9 * scale
