"""The conversion environment every worker carries (scripts/system-packages): the journal classes of TeX Live's
publishers collection and the babel languages are found inside the sandbox, where latexmlc looks for them."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from conversion import sandbox
from conversion.processes import scratch_prefix

# Classes arXiv's papers use (docs/decisions/conversion-environment.md), and babel languages beside English.
WANTED = ("revtex4-2.cls", "aastex631.cls", "jmlr.cls", "IEEEtran.cls", "acmart.cls", "elsarticle.cls",
          "mnras.cls", "llncs.cls", "ngerman.ldf", "french.ldf", "russianb.ldf", "tracklang.sty")  # fmt: skip


def test_kpsewhich_finds_the_classes_and_languages_arxivs_papers_use_inside_the_sandbox():
    kpsewhich = shutil.which("kpsewhich")
    assert kpsewhich, "kpsewhich is not installed: scripts/system-packages installs TeX Live"
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("cortex-kpsewhich-")) as scratch:
        os.chmod(scratch, 0o711)  # noqa: S103 - passable: the sandbox user reaches work/ through it
        work = Path(scratch) / "work"
        work.mkdir()
        with sandbox.launched(sandbox.DEFAULT, work, kpsewhich) as launch:
            found = subprocess.run(
                [*launch.argv_prefix, launch.executable, *WANTED], **launch.popen_options(),
                stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False,
            )  # fmt: skip
    paths = found.stdout.decode().split()
    assert sorted(Path(path).name for path in paths) == sorted(WANTED), found.stderr.decode()
    assert all(path.startswith("/usr/share/texlive/") for path in paths)
