"""Module 13: norms, MLPs, the block, GPT-2/LLaMA-shaped models, generation, HF-format state dicts,
training (NumPy only). Parity with Hugging Face transformers: tests/transformers/test_hf_parity.py."""
import math

import numpy as np
import pytest

from tinytorch.core.attention import KVCache
from tinytorch.core.autograd import gradcheck, no_grad
from tinytorch.core.tensor import Tensor
from tinytorch.models import (
    DecoderBlock, GELUMLP, LayerNorm, RMSNorm, SwiGLUMLP, TransformerConfig, TransformerLM, config_from_hf,
    config_to_hf, from_hf, pick_tokens, to_hf, train_language_model, unigram_loss,
)
from tinytorch.text.embeddings import RotaryEmbedding


def float64_copy(module):
    for p in module.parameters():
        p.data = p.data.astype(np.float64)
    return module


def leaf(rng, *shape):
    return Tensor(rng.standard_normal(shape), requires_grad=True, dtype=np.float64)


def tiny(arch, **overrides):
    options = dict(arch=arch, vocab_size=37, max_seq_len=24, d_model=16, num_layers=2, num_heads=4)
    if arch == "llama":
        options["num_kv_heads"] = 2
    options.update(overrides)
    return TransformerLM(TransformerConfig(**options), seed=0)


# --- norms and MLPs --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("norm_class", [LayerNorm, RMSNorm])
def test_norm_gradcheck(rng, norm_class):
    norm = float64_copy(norm_class(5, eps=1e-3))
    for p in norm.parameters():
        p.data = rng.standard_normal(p.shape)
    assert gradcheck(lambda x, *params: norm(x), [leaf(rng, 3, 2, 5)] + norm.parameters())


def test_layer_norm_output_has_zero_mean_unit_variance(rng):
    x = rng.standard_normal((4, 32)) * 7 + 3
    y = LayerNorm(32)(Tensor(x)).data
    assert np.allclose(y.mean(-1), 0, atol=1e-5) and np.allclose(y.var(-1), 1, atol=1e-3)


def test_rms_norm_output_has_unit_root_mean_square_and_ignores_scale(rng):
    x = rng.standard_normal((4, 32))
    y = RMSNorm(32, eps=1e-12)(Tensor(x)).data
    assert np.allclose(np.sqrt((y * y).mean(-1)), 1, atol=1e-5)
    assert np.allclose(RMSNorm(32, eps=1e-12)(Tensor(5 * x)).data, y, atol=1e-5)


@pytest.mark.parametrize("bad, error", [(dict(dim=0), ValueError), (dict(dim=4, eps=0), ValueError),
                                        (dict(dim=4, eps=-1e-5), ValueError), (dict(dim=2.5), TypeError)])
def test_norm_bad_arguments(bad, error):
    with pytest.raises(error):
        LayerNorm(**bad)
    with pytest.raises(error):
        RMSNorm(**bad)


def test_norm_bad_input_shape():
    with pytest.raises(ValueError, match=r"\(\*, 4\)"):
        LayerNorm(4)(np.zeros((2, 3), np.float32))


@pytest.mark.parametrize("mlp_class", [GELUMLP, SwiGLUMLP])
def test_mlp_gradcheck(rng, mlp_class):
    mlp = float64_copy(mlp_class(4, 6, seed=0))
    assert gradcheck(lambda x, *params: mlp(x), [leaf(rng, 2, 3, 4)] + mlp.parameters())


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_block_gradcheck(rng, arch):
    config = TransformerConfig(arch=arch, d_model=8, num_heads=2, num_kv_heads=1 if arch == "llama" else None, d_ff=12)
    rope = RotaryEmbedding(4, interleaved=False) if arch == "llama" else None
    block = float64_copy(DecoderBlock(config, rope=rope, seed=0))
    assert gradcheck(lambda x, *params: block(x), [leaf(rng, 2, 3, 8)] + block.parameters())


# --- the model --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_model_shapes_names_and_gradients(rng, arch):
    model = tiny(arch)
    ids = rng.integers(0, 37, size=(3, 9))
    assert model(ids).shape == (3, 9, 37) and model(ids[0]).shape == (9, 37)
    names = dict(model.named_parameters())
    if arch == "gpt2":
        assert {"transformer.wte.weight", "transformer.wpe.weight", "transformer.h.1.attn.c_attn.weight",
                "transformer.h.0.mlp.c_fc.bias", "transformer.ln_f.bias"} <= set(names)
        assert "lm_head.weight" not in names and names["transformer.h.0.attn.c_attn.weight"].shape == (16, 48)
    else:
        assert {"model.embed_tokens.weight", "model.layers.1.self_attn.k_proj.weight", "model.norm.weight",
                "model.layers.0.mlp.gate_proj.weight", "lm_head.weight"} <= set(names)
        assert names["model.layers.0.self_attn.k_proj.weight"].shape == (16, 8)        # 2 kv heads of 4
        assert not any(name.endswith(".bias") for name in names)
    loss = model.loss(ids[:, :-1], ids[:, 1:])
    loss.backward()
    assert all(p.grad is not None and np.isfinite(p.grad).all() for p in model.parameters())


def test_tied_head_shares_the_token_table(rng):
    model = tiny("gpt2")
    x = rng.standard_normal((1, 2, 16)).astype(np.float32)
    assert np.allclose(model.token_embedding.attend(Tensor(x)).data, x @ model.transformer.wte.weight.data.T)
    untied = tiny("gpt2", tie_embeddings=False)
    assert untied.lm_head.weight.shape == (16, 37)


def test_model_forward_in_float64_gradchecks(rng):
    model = float64_copy(tiny("llama", num_layers=1, vocab_size=7, d_model=8, num_heads=2, num_kv_heads=1, d_ff=8))
    ids = rng.integers(0, 7, size=(1, 3))
    assert gradcheck(lambda *params: model(ids), model.parameters())


def test_gpt2_positions_beyond_the_table_raise():
    model = tiny("gpt2")
    with pytest.raises(ValueError, match="max_seq_len=24"):
        model(np.zeros((1, 25), np.int64))
    with pytest.raises(IndexError, match="out of range"):
        model(np.array([[0, 37]]))


@pytest.mark.parametrize("bad, words", [
    (dict(arch="bert"), "arch"), (dict(d_model=10, num_heads=4), "divisible"),
    (dict(num_heads=4, num_kv_heads=3), "must divide"), (dict(dropout=1.0), "dropout"), (dict(vocab_size=0), "vocab_size"),
])
def test_config_bad_values(bad, words):
    with pytest.raises(ValueError, match=words):
        TransformerLM(TransformerConfig(**bad))


def test_llama_defaults():
    c = TransformerConfig(arch="llama", d_model=64, num_heads=4)
    assert (c.tie_embeddings, c.bias, c.norm_eps, c.num_kv_heads, c.d_ff) == (False, False, 1e-6, 4, 192)
    g = TransformerConfig(arch="gpt2", d_model=64, num_heads=4)
    assert (g.tie_embeddings, g.bias, g.norm_eps, g.d_ff) == (True, True, 1e-5, 256)


# --- generation ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["gpt2", "llama"])
@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_cache_and_no_cache_give_the_same_tokens(rng, arch, temperature):
    model = tiny(arch)
    prompt = rng.integers(0, 37, size=(2, 4))
    with_cache = model.generate(prompt, 12, temperature=temperature, seed=7, use_cache=True)
    without = model.generate(prompt, 12, temperature=temperature, seed=7, use_cache=False)
    assert with_cache.shape == (2, 16) and np.array_equal(with_cache, without)


def test_greedy_generation_is_the_argmax_of_a_full_pass(rng):
    model = tiny("llama")
    out = model.generate(rng.integers(0, 37, size=5), 8)
    assert out.shape == (13,)
    assert np.array_equal(out[5:], model(out[:-1]).data[4:].argmax(-1))


def test_sampling_is_repeatable_with_a_seed_and_restores_training_mode(rng):
    model = tiny("gpt2", dropout=0.1)
    model.train()
    prompt = rng.integers(0, 37, size=(1, 3))
    a, b = (model.generate(prompt, 10, temperature=1.5, seed=11) for _ in range(2))
    assert np.array_equal(a, b) and model.training


def test_pick_tokens_follows_the_distribution():
    logits = np.log(np.array([[0.7, 0.2, 0.1]]))
    draws = np.concatenate([pick_tokens(logits, 1.0, rng) for rng in np.random.default_rng(0).spawn(3000)])
    assert np.allclose(np.bincount(draws, minlength=3) / 3000, [0.7, 0.2, 0.1], atol=0.03)
    assert pick_tokens(logits, 0.0).tolist() == [0]


@pytest.mark.parametrize("kwargs, words", [
    (dict(max_new_tokens=-1), "max_new_tokens"), (dict(max_new_tokens=2.0), "max_new_tokens"),
    (dict(max_new_tokens=3, temperature=-0.5), "temperature"), (dict(max_new_tokens=30), "max_seq_len=24"),
])
def test_generate_bad_options(kwargs, words):
    with pytest.raises(ValueError, match=words):
        tiny("gpt2").generate(np.array([[1, 2]]), **kwargs)


def test_caches_must_match_the_blocks():
    with pytest.raises(ValueError, match="one KVCache per block"):
        tiny("gpt2")(np.array([[1]]), caches=[KVCache()])


# --- Hugging Face format, without transformers ---------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_to_hf_from_hf_round_trip(rng, arch):
    model = tiny(arch)
    state = to_hf(model)
    again = from_hf(state, config_to_hf(model.config))
    ids = rng.integers(0, 37, size=(2, 6))
    assert np.array_equal(model(ids).data, again(ids).data)
    assert to_hf(again).keys() == state.keys() and all(np.array_equal(to_hf(again)[k], v) for k, v in state.items())
    assert config_from_hf(config_to_hf(model.config)) == model.config


def test_hf_layouts():
    gpt2, llama = to_hf(tiny("gpt2")), to_hf(tiny("llama", d_ff=40))
    assert gpt2["transformer.h.0.mlp.c_fc.weight"].shape == (16, 64)              # Conv1D: (in, out)
    assert np.array_equal(gpt2["lm_head.weight"], gpt2["transformer.wte.weight"])
    assert llama["model.layers.0.mlp.up_proj.weight"].shape == (40, 16)           # nn.Linear: (out, in)
    assert llama["lm_head.weight"].shape == (37, 16)


def test_from_hf_refuses_what_it_cannot_represent():
    state, config = to_hf(tiny("llama")), config_to_hf(tiny("llama").config)
    with pytest.raises(ValueError, match="hidden_act"):
        from_hf(state, dict(config, hidden_act="gelu"))
    with pytest.raises(ValueError, match="rope_type"):                   # linear, dynamic, yarn, llama3 load
        from_hf(state, dict(config, rope_scaling={"rope_type": "longrope", "factor": 2.0}))
    with pytest.raises(ValueError, match="model_type"):
        from_hf(state, dict(config, model_type="bert"))
    with pytest.raises(KeyError, match="missing"):
        from_hf({k: v for k, v in state.items() if k != "model.norm.weight"}, config)
    with pytest.raises(ValueError, match="shape"):
        from_hf(dict(state, **{"model.norm.weight": np.ones(3)}), config)
    gpt2 = tiny("gpt2")
    with pytest.raises(ValueError, match="gelu"):
        from_hf(to_hf(gpt2), dict(config_to_hf(gpt2.config), activation_function="relu"))


# --- training ------------------------------------------------------------------------------------------------------

def test_unigram_loss_is_the_entropy_of_the_frequencies():
    ids = np.array([0, 0, 0, 1])
    expected = -(3 * math.log(4 / 6) + math.log(2 / 6)) / 4          # add-one smoothing: counts 4, 2
    assert math.isclose(unigram_loss(ids, ids, 2), expected)


def test_training_beats_the_unigram_baseline():
    rng = np.random.default_rng(0)
    pattern = np.array([1, 2, 3, 4, 5, 6, 7, 8] * 200)                # perfectly predictable from context
    model = TransformerLM(TransformerConfig(vocab_size=9, max_seq_len=16, d_model=16, num_layers=1, num_heads=2), seed=0)
    seen = []
    run = train_language_model(model, pattern, pattern[:400], steps=40, batch_size=8, seq_len=16, lr=1e-2,
                               eval_every=20, seed=1, on_step=lambda step, loss: seen.append(step))
    assert seen == list(range(1, 41)) and run.eval_steps == [0, 20, 40]
    assert run.eval_losses[-1] < 0.5 * run.unigram_loss < run.eval_losses[0]


@pytest.mark.parametrize("kwargs, words", [
    (dict(steps=0), "steps"), (dict(batch_size=-1), "batch_size"), (dict(seq_len=100), "at least seq_len"),
    (dict(eval_every=0), "eval_every"),
])
def test_training_bad_arguments_fail_before_any_step(kwargs, words):
    model = TransformerLM(TransformerConfig(vocab_size=9, max_seq_len=16, d_model=16, num_layers=1, num_heads=2), seed=0)
    before = to_hf(model)
    options = dict(steps=2, batch_size=2, seq_len=8, eval_every=1)
    options.update(kwargs)
    with pytest.raises(ValueError, match=words):
        train_language_model(model, np.arange(60) % 9, np.arange(60) % 9, **options)
    assert all(np.array_equal(before[k], v) for k, v in to_hf(model).items())


def test_gpt2_input_block_is_module_11s_positional_encoding_with_a_start(rng):
    "wte[ids] + wpe[start..start+T-1] equals module 11's PositionalEncoding.forward(x, start) on the same table."
    from tinytorch.text.embeddings import PositionalEncoding
    model = tiny("gpt2")
    positions = PositionalEncoding.from_pretrained(model.transformer.wpe.weight.data)
    ids = rng.integers(0, 37, size=(2, 4))
    caches = model.new_caches()
    with no_grad():
        model(ids[:, :3], caches=caches)                                   # cache length 3: the next token is at 3
        step = model(ids[:, 3:], caches=caches).data
    x = positions(model.transformer.wte(ids), start=0)
    for block in model.blocks:
        x = block(x)
    expected = model.token_embedding.attend(model.transformer.ln_f(x)).data[:, 3:]
    assert np.allclose(step, expected, atol=1e-5)
    assert np.array_equal(positions(model.transformer.wte(ids[:, 3:]), start=3).data,
                          (model.transformer.wte(ids[:, 3:]) + model.transformer.wpe(np.array([3]))).data)


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope", "none"])
def test_the_input_block_is_module_11s_embedding_layer_under_hugging_face_names(position):
    "TransformerLM reads its input through module 11's EmbeddingLayer; the parameters keep GPT-2's names, once each."
    from tinytorch.models import TransformerConfig, TransformerLM
    from tinytorch.text.embeddings import EmbeddingLayer
    model = TransformerLM(TransformerConfig(vocab_size=37, max_seq_len=16, d_model=16, num_layers=1, num_heads=2,
                                            position=position), seed=0)
    block = model.input_block
    assert isinstance(block, EmbeddingLayer)
    assert block.token_embedding is model.transformer.wte and block.dropout is model.transformer.drop
    assert block.position_encoding is getattr(model.transformer, "wpe", None)
    assert block.scale_embeddings == (position == "sinusoidal")
    names = [name for name, _ in model.named_parameters()]
    assert not any(name.startswith("input_block") for name in names) and len(names) == len(set(names))
    assert ("transformer.wpe.weight" in names) == (position == "learned")
    ids = np.array([[1, 5, 7]])
    model.eval()
    expected = block(ids).data
    x = model.transformer.wte(ids).data * (np.sqrt(16) if position == "sinusoidal" else 1)
    if position in ("learned", "sinusoidal"):
        x = x + (model.transformer.wpe.weight.data if position == "learned" else model.transformer.wpe.table)[:3]
    np.testing.assert_allclose(expected, x, rtol=1e-6, atol=1e-6)


# ================================================================ issue 23: reliability, third pass
# ---------------------------------------------------------------- defect 2: generate / evaluation_loss and a shared model's mode

def _record_modes_inside(model, pause=None):
    "Make `model`'s forward note every module's `training` flag when it runs (and wait on `pause` first, if given)."
    seen, original = [], model.forward

    def forward(*args, **kwargs):
        seen.append([module.training for _, module in model.named_modules()])
        if pause is not None:
            pause[0].set()
            pause[1].wait(timeout=60)
        return original(*args, **kwargs)
    model.forward = forward
    return seen


@pytest.mark.parametrize("mode", [True, False])
@pytest.mark.parametrize("call", ["generate", "evaluation_loss"])
def test_generate_and_evaluation_loss_never_switch_the_models_mode(mode, call):
    from tinytorch.models import evaluation_loss, generate
    model = tiny("gpt2", dropout=0.5).train(mode)
    seen = _record_modes_inside(model)
    ids = np.arange(30) % 37
    result = generate(model, ids[:4], 5) if call == "generate" else evaluation_loss(model, ids, 8)
    del model.forward
    assert seen and all(flags == [mode] * len(flags) for flags in seen), "the mode never changes, even inside"
    assert model.training is mode
    reference = tiny("gpt2", dropout=0.5).eval()                         # the same weights, no dropout
    expected = generate(reference, ids[:4], 5) if call == "generate" else evaluation_loss(reference, ids, 8)
    np.testing.assert_array_equal(result, expected)                      # and yet no dropout in the call


@pytest.mark.parametrize("call", ["generate", "evaluation_loss"])
def test_a_failing_call_leaves_the_mode_as_it_was(call):
    from tinytorch.models import evaluation_loss, generate
    model = tiny("gpt2", dropout=0.5).train()

    def broken(*args, **kwargs):
        raise FloatingPointError("boom")
    model.forward = broken
    with pytest.raises(FloatingPointError):
        generate(model, [1, 2], 3) if call == "generate" else evaluation_loss(model, np.arange(30) % 37, 8)
    del model.forward
    assert all(module.training for _, module in model.named_modules())


def test_generating_in_one_thread_leaves_the_model_training_in_another():
    import threading
    from tinytorch.models import generate
    model = tiny("gpt2", dropout=0.5).train()
    inside, done = threading.Event(), threading.Event()
    _record_modes_inside(model, pause=(inside, done))
    generator = threading.Thread(target=lambda: generate(model, [1, 2, 3], 1))
    generator.start()
    try:
        assert inside.wait(timeout=60)                                   # the other thread is mid-generate
        assert all(module.training for _, module in model.named_modules())
        drop = model.transformer.drop
        assert (drop(Tensor(np.ones((8, 16)))).data == 0).any(), "dropout still acts in this (training) thread"
    finally:
        done.set()
        generator.join(timeout=60)
    del model.forward


# ---------------------------------------------------------------- defect 5: from_hf keeps the checkpoint's precision

@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_from_hf_in_float64_keeps_every_bit_of_a_float64_checkpoint(arch):
    model = tiny(arch)
    for p in model.parameters():                       # values float32 cannot hold
        p.data = p.data.astype(np.float64) + np.float64(1e-12)
    state = to_hf(model)
    loaded = from_hf(state, config_to_hf(model.config), dtype=np.float64)
    for name, value in to_hf(loaded).items():
        assert value.dtype == np.float64
        np.testing.assert_array_equal(value, state[name], err_msg=name)


def test_from_hf_reads_a_float16_checkpoint_exactly_and_rounds_only_to_the_requested_dtype():
    model = tiny("gpt2")
    half = {name: value.astype(np.float16) for name, value in to_hf(model).items()}
    for dtype in (np.float32, np.float64):              # float16 values are exact in both
        loaded = to_hf(from_hf(half, config_to_hf(model.config), dtype=dtype))
        for name, value in loaded.items():
            assert value.dtype == dtype
            np.testing.assert_array_equal(value, half[name].astype(dtype), err_msg=name)
    precise = {name: value.astype(np.float64) + 1e-12 for name, value in to_hf(model).items()}
    rounded = to_hf(from_hf(precise, config_to_hf(model.config)))      # the default float32: rounded once
    for name, value in rounded.items():
        np.testing.assert_array_equal(value, precise[name].astype(np.float32), err_msg=name)


# ---------------------------------------------------------------- defect 6: only None means "the default"

@pytest.mark.parametrize("name", ["num_kv_heads", "head_dim", "d_ff", "norm_eps"])
@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_a_zero_in_the_config_is_refused_naming_the_field_not_replaced_by_the_default(arch, name):
    with pytest.raises(ValueError, match=rf"{name} must be a positive (int|number).*; got 0"):
        TransformerConfig(arch=arch, d_model=16, num_heads=4, **{name: 0})
    defaults = TransformerConfig(arch=arch, d_model=16, num_heads=4, **{name: None})   # None: the family's default
    assert getattr(defaults, name) == getattr(TransformerConfig(arch=arch, d_model=16, num_heads=4), name)


@pytest.mark.parametrize("name, bad, error", [("norm_eps", float("nan"), ValueError), ("norm_eps", -1e-5, ValueError),
                                              ("norm_eps", float("inf"), ValueError), ("norm_eps", "1e-5", TypeError),
                                              ("rope_theta", 0, ValueError), ("head_dim", 2.0, TypeError),
                                              ("d_ff", -4, ValueError), ("num_kv_heads", True, TypeError)])
def test_invalid_config_values_raise_naming_the_field_and_the_rule(name, bad, error):
    with pytest.raises(error, match=rf"{name} must be a positive"):
        TransformerConfig(arch="llama", d_model=16, num_heads=4, **{name: bad})


@pytest.mark.parametrize("key, value, field", [("n_inner", 0, "d_ff"), ("layer_norm_epsilon", 0, "norm_eps")])
def test_from_a_hugging_face_gpt2_config_a_zero_is_refused_not_defaulted(key, value, field):
    config = config_to_hf(tiny("gpt2").config)
    config[key] = value
    with pytest.raises(ValueError, match=rf"{field} must be a positive"):
        config_from_hf(config)
    config[key] = None                                  # HF's own "not set": the default
    assert config_from_hf(config) == tiny("gpt2").config


@pytest.mark.parametrize("key, field", [("num_key_value_heads", "num_kv_heads"), ("rope_theta", "rope_theta")])
def test_from_a_hugging_face_llama_config_a_zero_is_refused_not_defaulted(key, field):
    config = config_to_hf(tiny("llama").config)
    config[key] = 0
    with pytest.raises(ValueError, match=rf"{field} must be a positive"):
        config_from_hf(config)
    config[key] = None
    assert config_from_hf(config).num_kv_heads == (4 if key == "num_key_value_heads" else 2)


# ---------------------------------------------------------------- issue 23, second part: flags and hyper-parameters

def _tiny_lm():
    return TransformerLM(TransformerConfig(vocab_size=11, max_seq_len=8, d_model=8, num_layers=1, num_heads=2), seed=0)


TRANSFORMER_CALLS = {
    "TransformerConfig(tie_embeddings='no')": (lambda: TransformerConfig(tie_embeddings="no"), TypeError,
                                               "tie_embeddings must be True or False"),
    "TransformerConfig(bias='no')": (lambda: TransformerConfig(bias="no"), TypeError, "bias must be True or False"),
    "TransformerConfig(dropout=True)": (lambda: TransformerConfig(dropout=True), TypeError, "dropout"),
    "TransformerConfig(dropout='0.1')": (lambda: TransformerConfig(dropout="0.1"), TypeError, "dropout"),
    "TransformerConfig(arch=1)": (lambda: TransformerConfig(arch=1), ValueError, "arch"),
    "generate(use_cache='no')": (lambda: _tiny_lm().generate([1, 2], 2, use_cache="no"), TypeError,
                                 "use_cache must be True or False"),
    "generate(temperature=nan)": (lambda: _tiny_lm().generate([1, 2], 2, temperature=float("nan")), ValueError,
                                  "temperature"),
    "pick_tokens(1-D logits)": (lambda: pick_tokens(np.zeros(5)), ValueError, "logits"),
    "pick_tokens(NaN logits)": (lambda: pick_tokens(np.array([[0.0, np.nan]])), ValueError, "logits"),
    "pick_tokens(NaN logits, sampled)": (lambda: pick_tokens(np.array([[0.0, np.nan]]), 1.0), ValueError, "logits"),
    "pick_tokens(no columns)": (lambda: pick_tokens(np.zeros((2, 0))), ValueError, "logits"),
    "pick_tokens(temperature=-1)": (lambda: pick_tokens(np.zeros((1, 3)), -1.0), ValueError, "temperature"),
    "pick_tokens(temperature='1')": (lambda: pick_tokens(np.zeros((1, 3)), "1"), TypeError, "temperature"),
    "from_hf(dtype=np.int32)": (lambda: from_hf(to_hf(_tiny_lm()), config_to_hf(_tiny_lm().config),
                                                dtype=np.int32), TypeError, "dtype"),
    "train_language_model(lr=inf)": (lambda: train_language_model(_tiny_lm(), np.arange(40) % 11, np.arange(40) % 11,
                                                                  steps=1, seq_len=4, lr=float("inf")),
                                     ValueError, "lr"),
}


@pytest.mark.parametrize("case", TRANSFORMER_CALLS)
def test_transformers_refuse_bad_flags_and_hyper_parameters_naming_them(case):
    call, kind, words = TRANSFORMER_CALLS[case]
    with pytest.raises(kind, match=words):
        call()


def test_a_refused_training_run_leaves_the_model_unchanged():
    model = _tiny_lm()
    before = {name: p.data.copy() for name, p in model.named_parameters()}
    with pytest.raises(ValueError):
        train_language_model(model, np.arange(40) % 11, np.arange(40) % 11, steps=1, seq_len=4, lr=float("inf"))
    assert all(np.array_equal(p.data, before[name]) for name, p in model.named_parameters())


# ---------------------------------------------------------------- issue 23, second part: empty and degenerate inputs

@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_a_model_takes_an_empty_sequence(arch):
    model = tiny(arch)
    assert model(np.zeros((2, 0), np.int64)).shape == (2, 0, model.config.vocab_size)
    caches = model.new_caches()
    assert model(np.zeros((1, 0), np.int64), caches=caches).shape == (1, 0, model.config.vocab_size)
    assert model(np.array([[1, 2]]), caches=caches).shape == (1, 2, model.config.vocab_size)


def test_caches_must_not_be_an_empty_list():
    with pytest.raises(ValueError, match="caches must hold one KVCache per block"):
        tiny("gpt2")(np.array([[1]]), caches=[])


def test_generate_names_an_empty_prompt():
    with pytest.raises(ValueError, match="ids must be a non-empty prompt"):
        tiny("gpt2").generate(np.zeros((1, 0), np.int64), 2)


@pytest.mark.parametrize("seed", [-1, 1.5, "0"])
@pytest.mark.parametrize("make", [
    lambda seed: TransformerLM(TransformerConfig(vocab_size=11, max_seq_len=8, d_model=8, num_layers=1,
                                                 num_heads=2), seed=seed),
    lambda seed: tiny("gpt2").generate([1, 2], 2, temperature=1.0, seed=seed),
    lambda seed: train_language_model(tiny("gpt2"), np.arange(40) % 11, np.arange(40) % 11, steps=1, seq_len=4,
                                      seed=seed),
])
def test_a_bad_seed_is_refused_naming_it(make, seed):
    with pytest.raises((TypeError, ValueError), match="seed must be"):
        make(seed)
