"""The management commands call the same actions as the API and run their jobs in-process."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from accounts.models import AuditEntry
from corpora.models import Corpus, Task
from services.models import Service
from tests.corpora.helpers import make_corpus_dir

pytestmark = pytest.mark.django_db


def _call(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_an_operator_runs_the_whole_cycle_from_the_command_line(corpus_root):
    directory = make_corpus_dir(corpus_root, "cli", documents=4)
    assert "succeeded" in _call("import_corpus", "cli", str(directory))
    assert Corpus.objects.get(name="cli").state == "ready"
    _call("register_service", "tex_to_html", "--lease-seconds", "60")
    assert "succeeded" in _call("activate_service", "cli", "tex_to_html")
    assert Task.objects.filter(service__name="tex_to_html", status=0).count() == 4
    _call("set_lease", "tex_to_html", "none")
    assert Service.objects.get(name="tex_to_html").lease_seconds is None
    (directory / "more.tex").write_text("\\documentclass{article}\\begin{document}x\\end{document}")
    assert "'documents': 1" in _call("extend_corpus", "cli")
    _call("deactivate_service", "cli", "tex_to_html", "--confirm", "tex_to_html")
    _call("delete_service", "tex_to_html", "--confirm", "tex_to_html")
    _call("delete_corpus", "cli", "--confirm", "cli")
    assert not Corpus.objects.exists() and not Task.objects.exists()
    actions = list(AuditEntry.objects.filter(actor__startswith="cli").order_by("id").values_list("action", flat=True))
    assert actions == [
        "corpus.import", "service.register", "service.activation", "service.lease", "corpus.extend",
        "service.deactivation", "service.delete", "corpus.delete",
    ]  # fmt: skip


def test_command_errors_are_one_line_and_change_nothing(corpus_root, tmp_path):
    with pytest.raises(CommandError, match="outside the corpus roots"):
        _call("import_corpus", "x", str(tmp_path))
    with pytest.raises(CommandError, match="Pass confirm"):
        make_corpus_dir(corpus_root, "c")
        _call("import_corpus", "c", str(corpus_root / "c"))
        _call("delete_corpus", "c", "--confirm", "wrong")
    with pytest.raises(CommandError, match="positive whole number"):
        _call("set_lease", "import", "-3")
    with pytest.raises(CommandError, match="protected"):
        _call("delete_service", "import", "--confirm", "import")
    assert list(Corpus.objects.values_list("name", flat=True)) == ["c"]
    assert AuditEntry.objects.filter(outcome__startswith="4").count() == 3
