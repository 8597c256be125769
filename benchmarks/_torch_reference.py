"""PyTorch, the benchmarks' reference, and `settle()`, which keeps it from slowing down what it is compared with.

PyTorch's CPU wheels use GNU OpenMP, whose worker threads keep spinning for a few milliseconds after each
parallel region (OMP_WAIT_POLICY unset). The benchmarks run tinytorch and PyTorch in turns in one process;
on a 2-core machine a spinning thread holds a core that tinytorch's threads need right after PyTorch ran.
Measured on this project's 2-core machine, a 2-thread gather of 8,192 GPT-2 rows right after a PyTorch
matmul: 5.2-5.9 ms with 0-5 ms in between, 3.7 ms after 10, 20 or 50 ms. Setting OMP_WAIT_POLICY=PASSIVE
instead would slow PyTorch itself where it runs many small parallel regions (its GPT-2 training step in
bench_transformer.py --small: 11.9 ms at its default, 14.2 ms passive). So PyTorch keeps its default, and
each turn of an implementation starts with `settle()`, a 20 ms pause in which spinning threads go to sleep,
then one untimed call: after a pause, threads start cold (a 10000 x 256 sparse SGD step of tinytorch: 3.6 ms
back to back, 4.5 ms after 20 ms idle), and a training loop runs its steps back to back.

NumPy's OpenBLAS does the same for longer: after a matrix product its threads spin for about 0.1 s.
`python benchmarks/_torch_reference.py` measures it: 50 PyTorch (512, 128) @ (128, 512) products alone, and
right after 20 NumPy products and a pause of 0.02-0.3 s (one run on the project's 2-core machine: 21.1 ms alone;
39.6-110.4 ms after a 20 ms pause; 18.1-23.8 ms after 150-200 ms). So a PyTorch turn that follows NumPy's products
(tinytorch's step, the NumPy floor) starts with `settle(after_blas=True)`, a 0.2 s pause.
"""
import os
import time

try:
    import torch
except ImportError:
    torch = None

SETTLE_SECONDS = 0.02
BLAS_SETTLE_SECONDS = 0.2


def settle(after_blas=False):
    """Pause (untimed) so that threads the previous run left spinning go to sleep before the next timed run;
    `after_blas=True`: long enough for OpenBLAS's threads, after NumPy's matrix products."""
    time.sleep(BLAS_SETTLE_SECONDS if after_blas else SETTLE_SECONDS)


def torch_text(missing="not installed (pip install torch==2.13.0 adds its column)"):
    "torch's version, thread count and OpenMP wait policy for a benchmark's header line, or `missing`."
    if torch is None:
        return missing
    policy = os.environ.get("OMP_WAIT_POLICY", "unset")
    return f"{torch.__version__} ({torch.get_num_threads()} threads, OMP_WAIT_POLICY {policy})"


def _blas_spin_report():
    "Print the best and worst of 5 timings of PyTorch products alone and after NumPy's products and a pause."
    import numpy as np
    a, w = np.random.rand(512, 128).astype(np.float32), np.random.rand(128, 512).astype(np.float32)
    ta, tw = torch.from_numpy(a), torch.from_numpy(w)

    def torch_ms():
        start = time.perf_counter()
        for _ in range(50):
            torch.matmul(ta, tw)
        return (time.perf_counter() - start) * 1e3
    torch_ms()
    print(f"50 PyTorch (512, 128) @ (128, 512) products, {torch_text()}")
    print(f"  alone: best {min(torch_ms() for _ in range(5)):.1f} ms")
    for pause in (0.02, 0.05, 0.1, 0.15, 0.2, 0.3):
        times = []
        for _ in range(5):
            for _ in range(20):
                a @ w                                 # NumPy's OpenBLAS threads now spin
            time.sleep(pause)
            times.append(torch_ms())
        print(f"  after 20 NumPy products and a {pause * 1e3:.0f} ms pause: {min(times):.1f}-{max(times):.1f} ms")


if __name__ == "__main__":
    if torch is None:
        raise SystemExit(torch_text())
    _blas_spin_report()
