"""The framework tests (issue 30): each file needs its framework (``test_torch.py``: torch and
opacus), imported with ``pytest.importorskip`` at its top. A missing framework skips the file,
except under ``CI=true`` (the CI installs every framework), where the skip becomes a failure."""

import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") == "true" and report.skipped and isinstance(collector, pytest.Module):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (
            f"{collector.path.name}: {reason} (CI=true: every framework must be installed)"
        )
