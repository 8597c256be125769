"""Module 18's `decoder` kernel: `DecodePlan` runs a `TransformerLM`'s cached forward on plain arrays.

Against the plain kernel (module 13's `model_decoder`, the model's own forward with `KVCache`s): the same
logits step by step (float32 and float64 tolerance), the same tokens from `generate` greedy and sampled, for
every configuration the plan covers; the cases it does not cover fall back to the plain decoder; Hugging
Face's `generate` gives the same tokens with the fast kernels on. The weights are scaled up from GPT-2's
N(0, 0.02), and the zero biases drawn, so that attention and the MLP move the logits: a plan that dropped a
mask, a rotation or a bias would change them.
"""
import copy

import numpy as np
import pytest

from tinytorch import fast
from tinytorch.core import kernels
from tinytorch.core.autograd import no_grad
from tinytorch.core.layers import Module
from tinytorch.models import TransformerConfig, TransformerLM, from_hf
from tinytorch.models.generation import model_decoder
from tests.transformers.test_hf_parity import BUILDERS, hf_greedy, numpy_state, transformers  # noqa: F401

BASE = dict(vocab_size=53, max_seq_len=48, d_model=32, num_layers=2, num_heads=4)
COVERED = {"gpt2": dict(arch="gpt2"),
           "gpt2-untied": dict(arch="gpt2", tie_embeddings=False),
           "gpt2-no-bias": dict(arch="gpt2", bias=False),
           "gpt2-rope": dict(arch="gpt2", position="rope"),
           "llama": dict(arch="llama"),
           "llama-gqa": dict(arch="llama", num_kv_heads=2),
           "llama-mqa-head-dim": dict(arch="llama", num_kv_heads=1, head_dim=16),
           "llama-interleaved": dict(arch="llama", rope_interleaved=True),
           "llama-tied-bias": dict(arch="llama", tie_embeddings=True, bias=True),
           "llama-no-positions": dict(arch="llama", position="none"),
           "llama-yarn": dict(arch="llama", max_seq_len=12,
                              rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 12}),
           "llama-dynamic": dict(arch="llama", max_seq_len=12, rope_scaling={"rope_type": "dynamic", "factor": 2.0})}


def model_for(name, seed=0, dtype=np.float32):
    model = TransformerLM(TransformerConfig(**{**BASE, **COVERED.get(name, {})}), seed=seed)
    rng = np.random.default_rng(seed)
    for parameter in model.parameters():          # larger weights, and biases that are not zero
        data = parameter.data * 10 if parameter.data.any() else rng.normal(0, 0.5, parameter.shape)
        parameter.data = data.astype(dtype)
    return model


@pytest.mark.parametrize("name", COVERED)
def test_the_plan_gives_the_models_logits_for_the_prompt_and_every_step(name):
    for dtype, tolerance in ((np.float32, 2e-4), (np.float64, 1e-9)):
        model = model_for(name, dtype=dtype)
        assert fast.DecodePlan.supports(model)
        ids = np.random.default_rng(1).integers(0, BASE["vocab_size"], (3, 30))
        plain, plan = model_decoder(model, 3, 30), fast.plan_decoder(model, 3, 30)
        assert isinstance(plan, fast.DecodePlan)
        with no_grad():
            for chunk in (slice(0, 7), slice(7, 8), slice(8, 9), slice(9, 13), slice(13, 30)):   # prompt, steps, a run
                want, got = plain(ids[:, chunk]), plan(ids[:, chunk])
                assert got.shape == want.shape == (3, BASE["vocab_size"]) and got.dtype == want.dtype == dtype
                np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance, err_msg=f"{name} {chunk}")


@pytest.mark.parametrize("name", COVERED)
def test_generate_gives_the_same_tokens_with_either_kernel(name):
    model = model_for(name, seed=2)
    prompt = np.random.default_rng(3).integers(0, BASE["vocab_size"], (3, 6))
    for options in (dict(), dict(temperature=1.0, seed=5)):
        with fast.fast_kernels(on=False):
            plain, plain_single = model.generate(prompt, 20, **options), model.generate(prompt[0], 20, **options)
        with fast.fast_kernels():
            quick, single = model.generate(prompt, 20, **options), model.generate(prompt[0], 20, **options)
        assert np.array_equal(quick, plain), (name, options)
        assert single.shape == (26,) and np.array_equal(single, plain_single), (name, options)   # a 1-D prompt


def test_a_plan_decodes_once_the_prompt_is_a_single_token_and_reaches_its_length_exactly():
    model = model_for("gpt2")
    with fast.fast_kernels(on=False):
        plain = model.generate([7], 47)                    # 48 positions: the whole learned table
    with fast.fast_kernels():
        assert np.array_equal(model.generate([7], 47), plain)
        assert np.array_equal(model.generate([7], 0), [7])
    plan = fast.plan_decoder(model, 1, 4)
    with no_grad():
        plan(np.array([[1, 2, 3]]))
        with pytest.raises(ValueError, match="holds 4 positions; 3 are used and 2 more"):
            plan(np.array([[4, 5]]))


class OwnForward(TransformerLM):
    def forward(self, ids, attention_mask=None, position_ids=None, *, caches=None):
        return super().forward(ids, attention_mask, position_ids, caches=caches) * 0


@pytest.mark.parametrize("case", ["alibi", "sinusoidal", "subclass", "custom block part"])
def test_what_the_plan_does_not_cover_falls_back_to_the_models_own_forward(case):
    if case == "subclass":
        model = OwnForward(TransformerConfig(**BASE), seed=0)
    else:
        model = TransformerLM(TransformerConfig(**BASE, arch="llama", position={"custom block part": "rope"}.get(case, case)),
                              seed=0)
        if case == "custom block part":
            model.blocks[1].mlp = type("MyMLP", (type(model.blocks[1].mlp),), {})(BASE["d_model"], 64, seed=0)
    assert not fast.DecodePlan.supports(model)
    assert not isinstance(fast.plan_decoder(model, 1, 8), fast.DecodePlan)
    prompt = np.array([[3, 1, 4]])
    with fast.fast_kernels(on=False):
        plain = model.generate(prompt, 5)
    with fast.fast_kernels():
        assert np.array_equal(model.generate(prompt, 5), plain)
    if case == "subclass":
        assert np.array_equal(plain[0, 3:], [0] * 5)       # its own forward ran: all-zero logits pick id 0


def test_generate_asks_the_decoder_kernel_only_for_cached_unpadded_prompts(monkeypatch):
    model = model_for("llama")
    asked = []
    monkeypatch.setattr(kernels, "decoder", lambda *args: asked.append(args[1:]) or model_decoder(*args))
    prompt = np.array([[0, 5, 6], [4, 5, 6]])
    model.generate(prompt, 4)
    assert asked == [(2, 7)]                                # batch, prompt + new tokens
    model.generate(prompt, 4, use_cache=False)
    model.generate(prompt, 4, attention_mask=[[0, 1, 1], [1, 1, 1]])
    assert len(asked) == 1


def test_the_kernel_follows_the_switch_and_the_plan_reads_the_parameters_without_copying():
    model = model_for("gpt2")
    with fast.fast_kernels(on=False):
        assert kernels.kernel("decoder") is model_decoder
    with fast.fast_kernels():
        assert kernels.kernel("decoder") is fast.plan_decoder
    plan = fast.plan_decoder(model, 1, 4)
    assert plan.tokens is model.transformer.wte.weight.data
    assert plan.blocks[0]["keys"].shape == plan.blocks[0]["values"].shape == (1, 4, 4, 8)   # (B, Hkv, length, D)


@pytest.mark.torch
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_fast_generate_matches_transformers_generate(transformers, rng, name):
    hf = BUILDERS[name](transformers)
    model = from_hf(numpy_state(hf), hf.config.to_dict())
    prompt = rng.integers(0, 61, size=(2, 5))
    with fast.fast_kernels():
        assert fast.DecodePlan.supports(model)
        assert np.array_equal(model.generate(prompt, 15), hf_greedy(hf, prompt, 15))


def _swap(model, where, make):
    "Replace the part at dotted path `where` by make(old part)."
    *path, last = where.split(".")
    owner = model
    for name in path:
        owner = owner[int(name)] if name.isdigit() else getattr(owner, name)
    setattr(owner, last, make(getattr(owner, last)))


def _subclass(part):
    "The same part as an instance of a subclass whose forward negates the output (so the logits change)."
    kind = type(part)
    sub = type("Negated" + kind.__name__, (kind,), {"forward": lambda self, *a, **k: kind.forward(self, *a, **k) * -1})
    copy = sub.__new__(sub)
    copy.__dict__.update(part.__dict__)
    return copy


SWAPS = {"gpt2 final LayerNorm": ("gpt2", "transformer.ln_f", _subclass),
         "llama final RMSNorm": ("llama", "model.norm", _subclass),
         "untied head Linear": ("llama", "lm_head", _subclass),
         "q_proj Linear": ("llama", "model.layers.0.self_attn.q_proj", _subclass),
         "fused c_attn Linear": ("gpt2", "transformer.h.1.attn.c_attn", _subclass),
         "MLP Linear": ("gpt2", "transformer.h.0.mlp.c_fc", _subclass),
         "RotaryEmbedding": ("llama", "model.layers.0.self_attn.rope", _subclass),
         "token table": ("llama", "model.embed_tokens", _subclass),
         "learned positions": ("gpt2", "transformer.wpe", _subclass)}


@pytest.mark.parametrize("case", [*SWAPS, "a block of another kind", "scaled embeddings", "max_norm", "mixed dtypes",
                                  "dropout acting"])
def test_a_part_the_plan_would_not_read_as_the_model_runs_it_keeps_the_models_own_forward(case):
    "Every part the plan reads must be the class TransformerLM put there; else generate runs the model itself."
    arch, where, make = SWAPS.get(case, ("gpt2", None, None))
    model = model_for(arch)
    if where is not None:
        _swap(model, where, make)
    elif case == "a block of another kind":                 # any Module with the block's forward signature
        model.transformer.h[1] = type("Skip", (Module,), {"forward": lambda self, x, *args, **kwargs: x})()
    elif case == "scaled embeddings":
        model.input_block.scale_embeddings = True
    elif case == "max_norm":
        model.token_embedding.max_norm = 1.0
    elif case == "mixed dtypes":
        model.token_embedding.weight.data = model.token_embedding.weight.data.astype(np.float64)
    else:
        model = TransformerLM(TransformerConfig(**BASE, dropout=0.3), seed=0)
    assert not fast.DecodePlan.supports(model)
    assert not isinstance(fast.plan_decoder(model, 2, 12), fast.DecodePlan)
    prompt = np.random.default_rng(4).integers(0, BASE["vocab_size"], (2, 4))
    twin = copy.deepcopy(model)                              # max_norm renormalises the table it reads, in place
    with fast.fast_kernels(on=False):
        plain = model.generate(prompt, 8)
    with fast.fast_kernels():
        assert np.array_equal(twin.generate(prompt, 8), plain)   # generate turns dropout off: then the plan runs


def test_dropout_off_in_generate_or_eval_lets_the_plan_run():
    from tinytorch.core.layers import no_dropout
    model = TransformerLM(TransformerConfig(**BASE, dropout=0.3), seed=0)
    with no_dropout():
        assert fast.DecodePlan.supports(model)
    assert fast.DecodePlan.supports(model.eval())


def test_a_plan_called_directly_checks_its_ids_and_its_length():
    model = model_for("gpt2")
    plan = fast.plan_decoder(model, 2, 6)
    with no_grad():
        with pytest.raises(IndexError, match=r"token ids must be in \[0, 53\); got ids from -1 to 3"):
            plan(np.array([[1, 2], [3, -1]]))
        for bad in (np.array([[1, 2]]), np.array([1, 2]), np.zeros((2, 0), np.int64), np.ones((2, 2))):
            with pytest.raises(ValueError, match=r"integer ids of shape \(2, T\), T >= 1"):
                plan(bad)
        assert plan.start == 0                               # a refused call moves nothing on
    with pytest.raises(ValueError, match="the learned position table has 48 rows; a plan for 49 positions"):
        fast.plan_decoder(model, 1, 49)


def test_asking_for_the_decoder_kernel_before_its_module_is_imported_says_which_module_registers_it():
    import subprocess
    import sys
    code = "from tinytorch.core import kernels\ntry:\n    kernels.kernel('decoder')\nexcept LookupError as e:\n    print(e)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "decoder" in out and "tinytorch.models" in out, out
