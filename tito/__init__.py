"""tito: the tinytorch command line.

A small, stdlib-only (at import) helper around the notebook workflow:
export notebooks with nbdev, run a module's tests and notebook, check that
`tinytorch/` is in sync with `modules/`, and the learner's side: learner
notebooks without the solutions (`tito.release`), their lifecycle and progress
(`tito.learner`, `tito.progress`) and honest checks of the learner's code
(`tito.checks`). Heavy tools (nbdev, execnb, pytest)
are imported only inside the commands and subprocesses that need them.
"""
