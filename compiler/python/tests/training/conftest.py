"""The training-stack tests (one file per framework): ``require(*modules)``, called at the top of
a test file, skips the whole file when a framework it needs is not installed, except under
``CI=true``, where a missing framework is an error (CI installs them all)."""

import importlib.util
import os

import pytest


def require(*modules):
    """Skips the calling test module unless every one of ``modules`` is importable; under
    ``CI=true`` a missing one fails the collection instead."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if not missing:
        return
    message = f"{', '.join(missing)} not installed"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}, and CI=true requires every framework", pytrace=False)
    pytest.skip(message, allow_module_level=True)


