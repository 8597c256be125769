"""Checks of the repository as a whole: notebooks run and match the package, import layers, no CLI in the library."""
