"""PyTorch, the benchmarks' reference, loaded so that it does not slow down what it is compared with.

PyTorch's CPU wheels use GNU OpenMP, whose worker threads keep spinning for a while after each parallel
region when OMP_WAIT_POLICY is unset. The benchmarks run tinytorch and PyTorch in turns in one process;
on a 2-core machine the spinning thread holds a core that tinytorch's threads need right after PyTorch
ran. Measured on this project's 2-core machine, sparse SGD step at GPT-2 size: tinytorch 14.6-15.4 ms
alone, 19.2-19.3 ms right after PyTorch's step, 15.4 ms with OMP_WAIT_POLICY=PASSIVE, while PyTorch's
own step stayed at 9.2-9.4 ms. So the benchmarks ask for passive waiting before torch loads; an
OMP_WAIT_POLICY you set yourself wins, and the header line of each benchmark prints the one in force.
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # read once, when torch's OpenMP runtime starts

try:
    import torch
except ImportError:
    torch = None


def torch_text(missing="not installed (pip install torch==2.13.0 adds its column)"):
    "torch's version, thread count and OpenMP wait policy for a benchmark's header line, or `missing`."
    if torch is None:
        return missing
    return (f"{torch.__version__} ({torch.get_num_threads()} threads, "
            f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')})")
