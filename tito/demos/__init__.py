"""Command-line front ends of the demos: argument parsing, progress, exit codes and plots.

Nothing in tinytorch imports this package; each module here has `main(argv) -> int`.
"""
