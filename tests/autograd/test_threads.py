"""no_grad() is per thread (issue 15, defect 3): one thread evaluating under no_grad() does not stop another
from recording its graph."""
import threading

from tinytorch.core.tensor import Tensor


def test_no_grad_in_one_thread_does_not_stop_another_thread_recording():
    from tinytorch.core.autograd import is_grad_enabled, no_grad
    inside, done = threading.Event(), threading.Event()
    seen = {}

    def evaluate():
        with no_grad():
            inside.set()
            done.wait(timeout=60)
            seen["evaluator"] = is_grad_enabled()

    evaluator = threading.Thread(target=evaluate)
    evaluator.start()
    try:
        assert inside.wait(timeout=60)
        w = Tensor([1.0, 2.0], requires_grad=True)
        y = (w * w).sum()                                     # this thread is not inside no_grad()
        assert is_grad_enabled() and y.requires_grad
        y.backward()
        assert w.grad.tolist() == [2.0, 4.0]
    finally:
        done.set()
        evaluator.join(timeout=60)
    assert seen == {"evaluator": False}
    assert is_grad_enabled()
