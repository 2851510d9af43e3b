"""The one place fixtures are loaded from: pytest plugins in tests/support/ (pytest reads
``pytest_plugins`` only in the root conftest). Folder conftests hold only their folder's fixtures."""

import pytest

pytest.register_assert_rewrite("tests.support")

pytest_plugins = [
    "tests.support.clock",
    "tests.support.s3",
    "tests.support.slatedb",
    "tests.support.stores",
    "tests.support.threads",
]
