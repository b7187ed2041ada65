"""ccs on package attribution: the ranking as JSON is the API's answer byte for byte, as a table it keeps
the API's order, and the export streams the API's CSV to a file."""

from __future__ import annotations

import pytest

from tests.corpora.helpers import activated, imported
from tests.runs.test_packages import LOGS, PAIR, logs_write


@pytest.fixture
def packages(corpus_root) -> None:
    imported(corpus_root, "a", documents=4)
    activated("a")
    logs_write(LOGS)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_ccs_prints_the_ranking_and_streams_the_export(ccs, http, packages, tmp_path):
    result = ccs("packages", "a", "tex_to_html", "--json")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == http.get(f"{PAIR}/packages").text.strip()
    table = ccs("packages", "a", "tex_to_html")
    assert table.returncode == 0, table.stderr
    assert table.stdout.index("mathpartir") < table.stdout.index("minted")
    out = tmp_path / "packages.csv"
    exported = ccs("package-export", "a", "tex_to_html", "--output", str(out))
    assert exported.returncode == 0, exported.stderr
    assert out.read_bytes() == http.get(f"{PAIR}/packages/export").content
    assert out.read_text().startswith("kind,package,document,status,only_missing,clears,clears_weak,evidence\n")
