"""The suite's own settings (tests/conftest.py), tried on small suites run here."""

from __future__ import annotations

import pytest

LEAKS = """
import os


def test_a_library_writes_to_the_environment():
    os.environ["CHECKS_SUITE_LEAK"] = "1"  # as torch.compile adds TORCHINDUCTOR_CACHE_DIR
    os.environ["PATH"] = "/nowhere"
    del os.environ["HOME"]


def test_the_next_test_finds_the_environment_as_it_was():
    assert "CHECKS_SUITE_LEAK" not in os.environ
    assert os.environ["PATH"] != "/nowhere" and "HOME" in os.environ
"""


def test_a_test_that_writes_to_the_environment_leaves_the_next_one_the_environment_it_found(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest("from tests.conftest import environment_as_found  # noqa: F401\n")
    pytester.makepyfile(test_leaks=LEAKS)
    result = pytester.runpytest_inprocess("-p", "no:xdist", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
