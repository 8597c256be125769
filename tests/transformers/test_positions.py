"""ALiBi (module 12) and the position option of TransformerLM (module 13).

The slopes and the bias are checked against Press et al. (ICLR 2022) written out independently here: for H a
power of two the slopes are the geometric sequence starting at and multiplied by 2^(-8/H); for other H the
paper's code takes the power of two below H and then every other slope of twice that power.
"""
import math

import numpy as np
import pytest

from tinytorch.core.attention import KVCache, MultiHeadAttention, alibi_bias, alibi_slopes, scaled_dot_product_attention
from tinytorch.core.autograd import gradcheck, no_grad
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.models import ARCHITECTURES, POSITIONS, TransformerConfig, TransformerLM, config_to_hf, to_hf


def paper_slopes(n):
    "Press et al.: start = ratio = 2^(-2^-(log2 n - 3)) for a power of two; interleave otherwise."
    def power_of_two(k):
        start = 2 ** (-2 ** -(math.log2(k) - 3))
        return [start * start ** i for i in range(k)]
    if math.log2(n).is_integer():
        return power_of_two(n)
    below = 2 ** math.floor(math.log2(n))
    return power_of_two(below) + paper_slopes(2 * below)[0::2][:n - below]


@pytest.mark.parametrize("heads", [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 32])
def test_slopes_follow_the_paper(heads):
    assert np.allclose(alibi_slopes(heads), paper_slopes(heads), rtol=1e-12)


def test_slopes_examples_from_the_paper():
    assert np.allclose(alibi_slopes(8), [1 / 2 ** k for k in range(1, 9)])        # "1/2, 1/4, ..., 1/256"
    assert np.allclose(alibi_slopes(16), [1 / 2 ** (k / 2) for k in range(1, 17)])  # "1/sqrt(2), 1/2, ..."


@pytest.mark.parametrize("heads, L, S, offset", [(4, 5, 5, 0), (3, 1, 7, 6), (8, 3, 10, 7), (2, 4, 2, 0)])
def test_bias_is_minus_slope_times_distance(heads, L, S, offset):
    bias = alibi_bias(heads, L, S, offset=offset, dtype=np.float64)
    slopes = paper_slopes(heads)
    assert bias.shape == (heads, L, S)
    for h in range(heads):
        for i in range(L):
            for j in range(S):
                assert bias[h, i, j] == pytest.approx(-slopes[h] * abs(i + offset - j))


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-1, ValueError), (2.0, TypeError), (True, TypeError),
                                        (None, TypeError)])
def test_bad_head_counts_are_refused(bad, error):
    with pytest.raises(error, match="num_heads"):
        alibi_slopes(bad)


def test_alibi_and_rope_together_are_refused():
    from tinytorch.text.embeddings import RotaryEmbedding
    with pytest.raises(ValueError, match="not both"):
        MultiHeadAttention(16, 4, rope=RotaryEmbedding(4), alibi=True)


def test_gradcheck_attention_with_the_alibi_bias():
    rng = np.random.default_rng(0)
    q, k, v = (Tensor(rng.standard_normal((2, 3, 5, 4)), requires_grad=True, dtype=np.float64) for _ in range(3))
    causal = np.tril(np.ones((5, 5), bool))
    mask = np.where(causal, alibi_bias(3, 5, 5, dtype=np.float64), np.finfo(np.float64).min)
    assert gradcheck(lambda a, b, c: scaled_dot_product_attention(a, b, c, attn_mask=mask), [q, k, v])


def test_gradcheck_multi_head_attention_with_alibi():
    rng = np.random.default_rng(1)
    mha = MultiHeadAttention(8, 4, num_kv_heads=2, alibi=True, seed=0)
    for p in mha.parameters():
        p.data = p.data.astype(np.float64)
    x = Tensor(rng.standard_normal((1, 4, 8)), requires_grad=True, dtype=np.float64)
    assert gradcheck(lambda t: mha(t), [x])


def test_alibi_attention_matches_a_per_head_reference():
    rng = np.random.default_rng(2)
    mha = MultiHeadAttention(12, 6, alibi=True, bias=False, seed=3)       # 6 heads: the interpolated slopes
    x = rng.standard_normal((2, 7, 12))
    q, k, v = (t.data.reshape(2, 7, 6, 2) for t in mha._project(Tensor(x)))
    i, j = np.arange(7)[:, None], np.arange(7)[None, :]
    out = np.zeros((2, 7, 6, 2))
    for b in range(2):
        for h, m in enumerate(paper_slopes(6)):
            s = q[b, :, h] @ k[b, :, h].T / math.sqrt(2) - m * (i - j) + np.where(j <= i, 0, -np.inf)
            w = np.exp(s - s.max(-1, keepdims=True))
            out[b, :, h] = (w / w.sum(-1, keepdims=True)) @ v[b, :, h]
    expected = mha.o_proj(Tensor(out.reshape(2, 7, 12))).data
    assert np.allclose(mha(x).data, expected, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_cached_decoding_equals_uncached_with_alibi(arch):
    config = TransformerConfig(arch=arch, vocab_size=40, max_seq_len=16, d_model=24, num_heads=6, num_layers=2,
                               position="alibi")
    model = TransformerLM(config, seed=4)
    ids = np.random.default_rng(5).integers(0, 40, size=(2, 11))
    full = model(ids).data
    with no_grad():
        caches = model.new_caches()
        parts = [model(ids[:, :4], caches=caches).data, model(ids[:, 4:7], caches=caches).data]
        parts += [model(ids[:, t:t + 1], caches=caches).data for t in range(7, 11)]
    assert caches[0].length == 11
    assert np.allclose(full, np.concatenate(parts, axis=1), atol=1e-5)
    cached = model.generate(ids[:, :3], 20, use_cache=True)                 # past max_seq_len: ALiBi has no table
    assert np.array_equal(cached, model.generate(ids[:, :3], 20, use_cache=False))


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_scheme_builds_and_trains_one_step(arch, position):
    config = TransformerConfig(arch=arch, vocab_size=30, max_seq_len=12, d_model=16, num_heads=4, num_kv_heads=2,
                               position=position)
    model = TransformerLM(config, seed=0)
    ids = np.random.default_rng(6).integers(0, 30, size=(3, 9))
    before = {name: p.data.copy() for name, p in model.named_parameters()}
    optimizer = AdamW(model.parameters(), lr=1e-2)
    loss = model.loss(ids[:, :-1], ids[:, 1:])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    assert np.isfinite(loss.item())
    changed = [name for name, p in model.named_parameters() if not np.array_equal(p.data, before[name])]
    assert len(changed) == len(before), "every parameter took a step"
    tables = [name for name in before if "wpe" in name or "embed_positions" in name]
    assert (len(tables) == 1) == (position == "learned")
    assert model.loss(ids[:, :-1], ids[:, 1:]).item() < loss.item(), "one step on the same batch lowers its loss"


def test_schemes_differ_only_in_position():
    "Same seed: every parameter the schemes share starts equal, so the experiment compares like with like."
    models = {p: TransformerLM(TransformerConfig(vocab_size=30, max_seq_len=12, d_model=16, num_heads=4, position=p),
                               seed=7) for p in POSITIONS}
    shared = dict(models["none"].named_parameters())
    for position, model in models.items():
        own = dict(model.named_parameters())
        assert set(own) - set(shared) == ({"transformer.wpe.weight"} if position == "learned" else set())
        assert all(np.array_equal(own[name].data, shared[name].data) for name in shared)


def test_default_positions_are_the_families_own():
    assert TransformerConfig(arch="gpt2").position == "learned"
    assert TransformerConfig(arch="llama").position == "rope"


def test_tables_refuse_positions_past_max_seq_len_and_others_do_not():
    ids = np.zeros((1, 9), dtype=np.int64)
    for position in POSITIONS:
        model = TransformerLM(TransformerConfig(vocab_size=5, max_seq_len=8, d_model=8, num_heads=2, position=position))
        if position in ("learned", "sinusoidal"):
            with pytest.raises(ValueError, match=f"exceed the {position} position table of max_seq_len=8"):
                model(ids)
        else:
            assert model(ids).shape == (1, 9, 5)


@pytest.mark.parametrize("bad", ["absolute", "ALiBi", 1])
def test_unknown_scheme_is_refused(bad):
    with pytest.raises(ValueError, match=r"unknown position .*; choose one of .*'alibi'"):
        TransformerConfig(position=bad)


@pytest.mark.parametrize("arch, position", [("gpt2", "alibi"), ("gpt2", "rope"), ("llama", "learned"), ("llama", "none")])
def test_hugging_face_conversion_needs_the_family_scheme(arch, position):
    config = TransformerConfig(arch=arch, vocab_size=20, max_seq_len=8, d_model=8, num_heads=2, position=position)
    with pytest.raises(ValueError, match="no Hugging Face"):
        config_to_hf(config)
    with pytest.raises(ValueError, match="no Hugging Face"):
        to_hf(TransformerLM(config))


# ================================================================ issue 23: reliability, third pass
# ---------------------------------------------------------------- defect 2: evaluate_copy and a shared model's mode

@pytest.mark.parametrize("mode", [True, False])
def test_evaluate_copy_leaves_the_models_mode_as_it_was(mode):
    from tinytorch.models.positions import copy_task, corpus_words, evaluate_copy
    words, vocab_size = corpus_words()
    config = TransformerConfig(arch="gpt2", vocab_size=vocab_size, max_seq_len=16, d_model=16, num_heads=2,
                               num_layers=1, dropout=0.5)
    batches = [copy_task(4, 16, words, np.random.default_rng(0), 4)]
    model = TransformerLM(config, seed=0).train(mode)
    result = evaluate_copy(model, batches)
    assert all(module.training is mode for _, module in model.named_modules())
    assert result == evaluate_copy(TransformerLM(config, seed=0).eval(), batches), "no dropout while evaluating"


# ---------------------------------------------------------------- defect 6: seen_len=0 is a value, not "no value"

def test_evaluate_copy_with_seen_len_0_counts_every_position_as_new():
    from tinytorch.models.positions import copy_task, corpus_words, evaluate_copy
    words, vocab_size = corpus_words()
    config = TransformerConfig(arch="gpt2", vocab_size=vocab_size, max_seq_len=16, d_model=16, num_heads=2,
                               num_layers=1)
    batches = [copy_task(4, 16, words, np.random.default_rng(0), 4)]
    model = TransformerLM(config, seed=0)
    result = evaluate_copy(model, batches, seen_len=0)
    assert result["loss_new"] == result["loss"] and result["accuracy_new"] == result["accuracy"]
    assert evaluate_copy(model, batches)["loss_new"] is None                 # None: no position is new
    for bad, error in ((-1, ValueError), (2.5, TypeError)):
        with pytest.raises(error, match="seen_len"):
            evaluate_copy(model, batches, seen_len=bad)


def test_passkey_rows_hold_one_key_and_ask_for_it_at_the_end(rng):
    from tinytorch.models.positions import IGNORE, PASSKEY_CHOICES, PASSKEY_QUERY, corpus_words, passkey_task
    words, _ = corpus_words()
    inputs, targets = passkey_task(64, 12, words, rng)
    keys = words[-PASSKEY_CHOICES:]
    assert inputs.shape == targets.shape == (64, 12) and (inputs[:, -1] == PASSKEY_QUERY).all()
    assert (targets[:, :-1] == IGNORE).all() and np.isin(targets[:, -1], keys).all()
    where = np.isin(inputs, keys)
    assert (where.sum(axis=1) == 1).all() and (inputs[where] == targets[:, -1]).all()
    depth = where.argmax(axis=1)
    assert depth.min() == 0 and depth.max() == 9                       # every position before the query's neighbour
    with pytest.raises(ValueError, match="length"):
        passkey_task(2, 2, words, rng)


def test_long_context_experiment_reads_plain_rope_at_l_and_scaled_rope_beyond(monkeypatch):
    "At the trained length every scaling (factor 1) is plain RoPE; beyond it each type builds its rope_scaling."
    from tinytorch.models import positions
    built = []
    original = positions.TransformerLM

    def spy(config, seed=None):
        built.append(config.rope_scaling)
        return original(config, seed=seed)
    monkeypatch.setattr(positions, "TransformerLM", spy)
    tiny = positions.PositionExperiment(train_len=8, period=3, eval_factors=(1, 4), steps=3, batch_size=4, d_model=8,
                                        num_layers=1, num_heads=2, eval_sequences=4)
    result = positions.long_context_experiment(tiny, scalings=("none", "linear", "llama3"))
    at_l = [result["summary"][name][8]["copy_loss_mean"] for name in ("none", "linear", "llama3")]
    assert np.allclose(at_l, at_l[0], atol=1e-6)
    assert {"rope_type": "linear", "factor": 4.0} in built
    assert any(s and s["rope_type"] == "llama3" and s["factor"] == 4.0 and s["original_max_position_embeddings"] == 8
               for s in built)
    with pytest.raises(ValueError, match="scalings"):
        positions.long_context_experiment(tiny, scalings=("ntk",))
