"""Tests of the tito command line: module map, learner lifecycle, summary, release, round trips."""
