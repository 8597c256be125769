"""Hostile inputs to module 06, optimizers: this subject's table of the bad-input battery
(tests/bad_input_battery.py): each case calls the API with one mistake and must raise the documented
error, naming the offending value, and change nothing.
"""
import numpy as np
import pytest

from tests.bad_input_battery import Case, check_case, constructing
from tinytorch.core.autograd import RowSparseGrad
from tinytorch.core.layers import Parameter
from tinytorch.core.optimizers import SGD, Adagrad, Adam, AdamW, SparseAdam
from tinytorch.core.tensor import Tensor

F16, F32, F64 = np.float16, np.float32, np.float64
NAN = float("nan")


def one_param():
    return [Parameter(np.ones(3))]


def stepped(optimizer, bad_grad, sparse_first=False):
    """Build: two parameters, one good step (so the optimiser has state), then a good gradient for the first
    and `bad_grad(second)` for the second; `step()` must refuse before updating either."""
    def build():
        first, second = Parameter(np.linspace(1, 2, 6).reshape(3, 2)), Parameter(np.linspace(-1, 1, 10).reshape(5, 2))
        opt = optimizer([first, second])
        first.grad = RowSparseGrad([0, 2], np.ones((2, 2), np.float32), (3, 2)) if sparse_first else np.ones((3, 2))
        second.grad = RowSparseGrad([1], np.ones((1, 2), np.float32), (5, 2)) if sparse_first else np.ones((5, 2))
        opt.step()
        first.grad = RowSparseGrad([1], np.ones((1, 2), np.float32), (3, 2)) if sparse_first else np.full((3, 2), 0.5)
        second.grad = bad_grad(second)
        return opt.step, [opt]
    return build


def after_setting_lr(build_stepped, lr):
    "Build: as `build_stepped`, whose gradients are all fine, but with `opt.lr = lr` set after the first step."
    def build():
        step, watched = build_stepped()
        watched[0].lr = lr
        return step, watched
    return build


def sparse_rows(indices, shape=(5, 2)):
    return lambda p: RowSparseGrad(indices, np.ones((len(indices), shape[1]), np.float32), shape)


CASES = [
    # ---------------------------------------------------------------- optimisers: lr < 0 or NaN, bad betas and settings
    *[Case(f"optimizers/{cls.__name__.lower()}-lr-{label}",
           constructing(lambda p, cls=cls, lr=lr: cls(p, lr=lr), one_param),
           ValueError, rf"lr must be >= 0; got lr={lr}")
      for cls in (SGD, Adam, AdamW, Adagrad, SparseAdam) for label, lr in (("negative", -0.01), ("nan", NAN))],
    Case("optimizers/lr-string", constructing(lambda p: SGD(p, lr="0.1"), one_param),
         TypeError, r"lr must be a number; got '0.1'"),
    Case("optimizers/lr-bool", constructing(lambda p: Adam(p, lr=True), one_param),
         TypeError, r"lr must be a number; got True"),
    Case("optimizers/adam-beta1-1", constructing(lambda p: Adam(p, betas=(1.0, 0.999)), one_param),
         ValueError, r"betas\[0\] must be in \[0, 1\); got 1.0"),
    Case("optimizers/adamw-beta2-1", constructing(lambda p: AdamW(p, betas=(0.9, 1.0)), one_param),
         ValueError, r"betas\[1\] must be in \[0, 1\); got 1.0"),
    Case("optimizers/sparse-adam-beta-negative", constructing(lambda p: SparseAdam(p, betas=(-0.1, 0.9)), one_param),
         ValueError, r"betas\[0\] must be in \[0, 1\); got -0.1"),
    Case("optimizers/adam-beta-nan", constructing(lambda p: Adam(p, betas=(0.9, NAN)), one_param),
         ValueError, r"betas\[1\] must be in \[0, 1\); got nan"),
    Case("optimizers/adam-betas-not-a-pair", constructing(lambda p: Adam(p, betas=(0.9,)), one_param),
         ValueError, r"betas must be a pair \(beta1, beta2\); got \(0.9,\)"),
    Case("optimizers/adam-betas-none", constructing(lambda p: Adam(p, betas=None), one_param),
         TypeError, r"betas must be a pair \(beta1, beta2\) of numbers; got None"),
    Case("optimizers/adam-betas-string", constructing(lambda p: Adam(p, betas="ab"), one_param),
         TypeError, r"betas must be a pair \(beta1, beta2\) of numbers; got 'ab'"),
    Case("optimizers/sparse-adam-beta-string", constructing(lambda p: SparseAdam(p, betas=(0.9, "0.99")), one_param),
         TypeError, r"betas must be a pair \(beta1, beta2\) of numbers; got \(0.9, '0.99'\)"),
    Case("optimizers/sgd-momentum-negative", constructing(lambda p: SGD(p, lr=0.1, momentum=-0.9), one_param),
         ValueError, r"momentum must be >= 0; got momentum=-0.9"),
    Case("optimizers/sgd-weight-decay-nan", constructing(lambda p: SGD(p, lr=0.1, weight_decay=NAN), one_param),
         ValueError, r"weight_decay must be >= 0; got weight_decay=nan"),
    Case("optimizers/adam-eps-negative", constructing(lambda p: Adam(p, eps=-1e-8), one_param),
         ValueError, r"eps must be >= 0; got eps=-1e-08"),
    Case("optimizers/adagrad-lr-decay-negative", constructing(lambda p: Adagrad(p, lr_decay=-0.1), one_param),
         ValueError, r"lr_decay must be >= 0; got lr_decay=-0.1"),
    Case("optimizers/adagrad-initial-accumulator-negative",
         constructing(lambda p: Adagrad(p, initial_accumulator_value=-1.0), one_param),
         ValueError, r"initial_accumulator_value must be >= 0; got initial_accumulator_value=-1.0"),
    Case("optimizers/empty-parameter-list", constructing(lambda: SGD([], lr=0.1)),
         ValueError, r"optimizer got an empty parameter list"),
    Case("optimizers/single-tensor", constructing(lambda p: SGD(p, lr=0.1), lambda: Parameter(np.ones(2))),
         TypeError, r"params must be an iterable of tensors, such as model.parameters\(\); got a single Tensor"),
    Case("optimizers/integer-parameter", constructing(lambda: SGD([Tensor(np.ones(2, np.int64))], lr=0.1)),
         TypeError, r"params\[0\] must be floating point to be optimised; got dtype int64"),
    Case("optimizers/sgd-step-gradient-shape", stepped(lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda p: np.ones(5)),
         ValueError, r"params\[1\] has shape \(5, 2\) but its gradient has shape \(5,\)"),
    Case("optimizers/adam-step-gradient-shape", stepped(lambda ps: Adam(ps, lr=0.1), lambda p: np.ones((2, 5))),
         ValueError, r"params\[1\] has shape \(5, 2\) but its gradient has shape \(2, 5\)"),
    Case("optimizers/adam-step-sparse-gradient", stepped(lambda ps: AdamW(ps, lr=0.1), sparse_rows([0, 3])),
         TypeError, r"params\[1\] \(shape \(5, 2\)\): AdamW does not accept row-sparse gradients .* use SparseAdam"),
    Case("optimizers/sparse-adam-step-dense-gradient",
         stepped(lambda ps: SparseAdam(ps, lr=0.1), lambda p: np.ones((5, 2)), sparse_first=True),
         TypeError, r"params\[1\] \(shape \(5, 2\)\): SparseAdam needs a row-sparse gradient .* use Adam"),
    # `lr` may be changed between steps (a schedule): step() checks it again before touching anything
    *[Case(f"optimizers/{name}-lr-set-to-{label}-between-steps",
           after_setting_lr(stepped(optimizer, good_grad, sparse_first=sparse), lr), error, match)
      for name, optimizer, good_grad, sparse in (
          ("sgd", lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda p: np.full((5, 2), 0.5), False),
          ("adam", lambda ps: Adam(ps, lr=0.1), lambda p: np.full((5, 2), 0.5), False),
          ("adagrad", lambda ps: Adagrad(ps, lr=0.1), lambda p: np.full((5, 2), 0.5), False),
          ("sparse-adam", lambda ps: SparseAdam(ps, lr=0.1), sparse_rows([1, 3]), True))
      for label, lr, error, match in (("negative", -0.01, ValueError, r"lr must be >= 0; got lr=-0.01"),
                                      ("nan", NAN, ValueError, r"lr must be >= 0; got lr=nan"),
                                      ("none", None, TypeError, r"lr must be a number; got None"))],
    Case("optimizers/adagrad-weight-decay-sparse",
         stepped(lambda ps: Adagrad(ps, lr=0.1, weight_decay=0.1), sparse_rows([2])),
         TypeError, r"params\[1\] \(shape \(5, 2\)\): Adagrad's weight_decay=0.1 cannot be used with row-sparse"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_raises_the_documented_error_and_changes_nothing(case):
    check_case(case)


# ------------------------------------------------------------------------------------------------ mixed float dtypes
# The documented behaviour is in tests/bad_input_battery.py's docstring.

@pytest.mark.parametrize("param_dtype", [F16, F64], ids=["f16", "f64"])
@pytest.mark.parametrize("cls", [SGD, Adam, Adagrad])
def test_mixed_float_dtypes_optimisers_cast_gradients_to_the_parameters_dtype(cls, param_dtype):
    p = Parameter(np.ones(3))
    p.data = p.data.astype(param_dtype)
    p.grad = np.full(3, 0.5, dtype=F32 if param_dtype == F64 else F64)
    cls([p], lr=0.1).step()
    assert p.dtype == param_dtype and np.all(p.data < 1)
