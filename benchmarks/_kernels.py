"""The benchmarks' `--kernels` option: which of tinytorch's kernels to time (module 18's switch).

Benchmarks time the fast kernels by default, as a user who wants speed runs them (`tinytorch.fast.use_fast()`);
`--kernels plain` times the plain ones that modules 05-06 write.
"""
KERNEL_CHOICES = ("fast", "plain")


def add_kernels_option(parser):
    parser.add_argument("--kernels", choices=KERNEL_CHOICES, default="fast",
                        help="tinytorch's kernels: module 18's fast ones (default) or the plain ones of modules 05-06")


def use_kernels(choice):
    "Switch tinytorch to `choice` ('fast' or 'plain'); returns the words for the header line."
    from tinytorch import fast

    (fast.use_fast if choice == "fast" else fast.use_plain)()
    return f"tinytorch kernels: {choice} (tinytorch.fast.use_{choice}())"
