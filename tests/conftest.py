"""Shared test helpers.

The repository root goes first on sys.path so the tests always exercise this
working copy's `tinytorch/` and `tito/`, installed or not.
"""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TORCH_VERSION = "2.13.0"


def require_torch():
    """Return the torch module, or skip the calling test when it is not installed."""
    return pytest.importorskip(
        "torch", reason=f"torch not installed; parity tests need pip install torch=={TORCH_VERSION}"
    )


@pytest.fixture
def torch():
    """PyTorch for parity tests; the test is skipped without it."""
    return require_torch()


@pytest.fixture
def rng():
    """A NumPy generator with a fixed seed, fresh for every test."""
    import numpy as np

    return np.random.default_rng(0)


@pytest.fixture(params=["plain", "fast"])
def both_kernels(request):
    """Run the test once with the plain kernels (modules 05-06) and once with module 18's fast ones.

    Test files that exercise a kernel (gathers, segment sums, row-sparse gradients, optimiser updates) use it
    with `pytestmark = pytest.mark.usefixtures("both_kernels")`; the mode in force before is restored."""
    import tinytorch.fast  # noqa: F401  (registers the fast kernels; switches nothing)
    from tinytorch.core import kernels

    previous = kernels.set_mode(request.param)
    yield request.param
    kernels.set_mode(previous)


@pytest.fixture
def fast_kernels():
    """The fast kernels in force for this test (for tests of module 18's own machinery); restored after."""
    import tinytorch.fast

    with tinytorch.fast.fast_kernels():
        yield tinytorch.fast


def pytest_configure(config):
    config.addinivalue_line("markers", "torch: compares against PyTorch; skipped when torch is not installed")
    config.addinivalue_line("markers", "isolates(name): this check isolates the named exercise: the other "
                                       "exercises it runs have checks of their own (tito.summary blames its "
                                       "failure on that exercise)")


def pytest_runtest_setup(item):
    if item.get_closest_marker("torch") is not None:
        require_torch()


@pytest.fixture
def usage_error():
    """A check for a demo's bad command line: exit 2, one line on stderr naming `words`, no traceback, and
    nothing written under `cwd`/demo_output."""
    def check(result, words, cwd):
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0] and "Traceback" not in result.stderr
        assert not (cwd / "demo_output").exists()
    return check
