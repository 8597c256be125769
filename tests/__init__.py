"""The test suite: one folder per public module or subject (see tests/README.md).

A package, so that each folder may hold files of the same name (test_properties.py,
test_bad_inputs.py, ...) and share helpers by import."""
