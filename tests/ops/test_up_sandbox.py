"""`manage.py up` and the settings with an unusable or misspelt conversion sandbox: one line, no start."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ops.stack import PrerequisiteMissing, check_prerequisites
from tests.support import PROJECT_DIR, child_env


def test_up_says_in_one_line_that_the_sandbox_of_its_workers_cannot_start(settings, tmp_path):
    settings.CONVERSION_BWRAP = str(tmp_path / "no-bwrap")
    with pytest.raises(PrerequisiteMissing, match=r"^the conversion sandbox cannot start: [^\n]*no-bwrap is not inst"):
        check_prerequisites(latexml_workers=1)
    check_prerequisites(latexml_workers=0)  # no workers here: nothing to sandbox


def test_a_misspelt_sandbox_mode_stops_start_up_with_one_line_naming_it():
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=PROJECT_DIR, env=child_env(CONVERSION_SANDBOX="off"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.strip() == "configuration error: CONVERSION_SANDBOX must be one of bwrap, none, not 'off'"
