"""A learner who completes modules in order runs the later modules on their *own* earlier code.

In a temporary copy of the repository (the helpers of `test_roundtrip.py`): start modules 02
and 04, paste the solutions into both learner notebooks, and complete 02 then 04. The learner's
ReLU also appends a line to a probe file named by an environment variable, so the test can see
which runs executed the learner's module-02 code rather than the reference.

Module 04's losses use `Tensor.log_softmax` (module 01), not the activation layers, so what a
later module *running* the learner's 02 looks like is shown with module 03, whose tests and
notebooks put `ReLU` into `Sequential`: `tito test --module 03` after completing 02 and 04 must
call the learner's ReLU, and completing 04 must not have put the reference 02 back.
"""
import json

from .test_roundtrip import copy, paste_solutions_back, tito  # noqa: F401  (copy is a fixture)
from tito.release import cell_source, read_notebook, write_notebook
from tito.repo import discover_modules, exported_from, learner_notebook, package_file

PROBE_VARIABLE = "TINYTORCH_CHAIN_PROBE"
RELU_SOLUTION = "        return x.relu()"
RELU_WITH_PROBE = (
    f'        probe = __import__("os").environ.get("{PROBE_VARIABLE}")\n'
    '        if probe:\n'
    '            with open(probe, "a") as file:\n'
    '                file.write("learner ReLU.forward\\n")\n'
    + RELU_SOLUTION
)


def module_labelled(copy, label):
    return next(module for module in discover_modules(copy) if module.label == label)


def add_probe_to_learner_relu(copy, module) -> None:
    """The learner's ReLU.forward, solution pasted, also records each call in the probe file."""
    target = learner_notebook(copy, module, module.notebook)
    notebook = read_notebook(target)
    cells = [cell for cell in notebook["cells"] if "class ReLU(" in cell_source(cell)]
    assert len(cells) == 1 and cell_source(cells[0]).count(RELU_SOLUTION) == 1, "ReLU.forward's solution not found"
    cells[0]["source"] = cell_source(cells[0]).replace(RELU_SOLUTION, RELU_WITH_PROBE)
    write_notebook(notebook, target)


def exported_from_learner(copy, dotted_module, module) -> bool:
    source = exported_from(package_file(copy, dotted_module))
    return source == learner_notebook(copy, module, module.notebook).resolve()


def test_completing_02_then_04_keeps_the_learners_02_and_later_modules_run_it(copy, tmp_path, monkeypatch):
    probe = tmp_path / "probe.txt"
    monkeypatch.setenv(PROBE_VARIABLE, str(probe))
    activations, losses = module_labelled(copy, "02_activations"), module_labelled(copy, "04_losses")
    for module in (activations, losses):
        started = tito(copy, "module", "start", f"{module.number:02d}")
        assert started.returncode == 0, started.text
        paste_solutions_back(copy, module)
    add_probe_to_learner_relu(copy, activations)

    completed_02 = tito(copy, "module", "complete", "02", "--", "-q")
    assert completed_02.returncode == 0, completed_02.text
    assert exported_from_learner(copy, "core.activations", activations)
    assert probe.is_file() and "learner ReLU.forward" in probe.read_text(), "02's own checks ran the learner's ReLU"
    probe.unlink()

    completed_04 = tito(copy, "module", "complete", "04", "--", "-q")
    assert completed_04.returncode == 0, completed_04.text
    assert exported_from_learner(copy, "core.losses", losses)
    assert exported_from_learner(copy, "core.activations", activations), "completing 04 put the reference 02 back"
    progress = json.loads((copy / ".tito" / "progress.json").read_text())["modules"]
    assert progress["02_activations"]["completed"] and progress["04_losses"]["completed"]

    if probe.exists():
        probe.unlink()
    layers = tito(copy, "test", "--module", "03")
    assert layers.returncode == 0, layers.text
    assert probe.is_file() and "learner ReLU.forward" in probe.read_text(), \
        "module 03's tests and notebooks did not call the learner's ReLU"
