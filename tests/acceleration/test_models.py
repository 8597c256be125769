"""Module 18's fast kernels inside whole models: a GPT-2 and a LLaMA built from Hugging Face configs give
transformers' logits, and train along the plain kernels' trajectory (module 13's parity tests run plain)."""
import numpy as np
import pytest

from tinytorch import fast
from tinytorch.core.optimizers import SGD
from tinytorch.models import from_hf, to_hf
from tests.transformers.test_hf_parity import ATOL, BUILDERS, hf_logits, numpy_state, transformers  # noqa: F401

pytestmark = pytest.mark.torch


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_module_18_fast_kernels_give_transformers_logits_and_the_plain_training_trajectory(transformers, rng, name):
    "The fast `matmul` / `log_softmax` Functions (and the rest of module 18) inside a whole model: same numbers."
    hf = BUILDERS[name](transformers)
    ids = rng.integers(0, 61, size=(3, 13))
    trained = {}
    for on in (False, True):
        with fast.fast_kernels(on=on):
            model = from_hf(numpy_state(hf), hf.config.to_dict())
            assert np.allclose(model(ids).data, hf_logits(hf, ids), atol=ATOL)
            optimizer = SGD(model.parameters(), lr=0.1)   # not Adam: it scales pure-rounding gradients (a key's bias) up to lr
            model.train()
            for _ in range(3):
                loss = model.loss(ids[:, :-1], ids[:, 1:])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            trained[on] = to_hf(model)
    for key, plain in trained[False].items():
        np.testing.assert_allclose(trained[True][key], plain, rtol=1e-4, atol=1e-5, err_msg=key)
