"""The benchmarks' `--kernels` and `--workers-apart` options: which of tinytorch's kernels to time (module 18's switch).

Benchmarks time the fast kernels by default, as a user who wants speed runs them (`tinytorch.fast.use_fast()`);
`--kernels plain` times the plain ones that modules 05-06 write. `--workers-apart off` sets module 18's
`KEEP_WORKERS_APART = False`: its worker threads may then run on the calling thread's core (section 1).
"""
KERNEL_CHOICES = ("fast", "plain")


def add_kernels_option(parser):
    parser.add_argument("--kernels", choices=KERNEL_CHOICES, default="fast",
                        help="tinytorch's kernels: module 18's fast ones (default) or the plain ones of modules 05-06")
    parser.add_argument("--workers-apart", choices=("on", "off"), default="on",
                        help="keep module 18's worker threads off the calling thread's core (default on; Linux)")


def use_kernels(choice, workers_apart="on"):
    "Switch tinytorch to `choice` ('fast' or 'plain') and set KEEP_WORKERS_APART; returns the header line's words."
    from tinytorch import fast

    (fast.use_fast if choice == "fast" else fast.use_plain)()
    fast.KEEP_WORKERS_APART = workers_apart == "on"
    return (f"tinytorch kernels: {choice} (tinytorch.fast.use_{choice}()); worker threads kept off the caller's core: "
            f"{workers_apart} (tinytorch.fast.KEEP_WORKERS_APART)")
