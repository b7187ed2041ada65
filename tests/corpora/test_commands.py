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
    with pytest.raises(CommandError, match="no preset is named 'ar5iv'"):
        _call("register_service", "ar5iv", "--profile", "ar5iv")
    assert list(Corpus.objects.values_list("name", flat=True)) == ["c"]
    assert AuditEntry.objects.filter(outcome__startswith="4").count() == 4
    assert not Service.objects.filter(name="ar5iv").exists()
    _call("register_service", "ar5iv", "--profile", "arxiv")
    assert Service.objects.get(name="ar5iv").profile["nodefaultresources"] is True


def test_a_sandbox_is_carved_from_the_command_line_with_the_apis_checks(corpus_root):
    from corpora.models import Document
    from tests.corpora.helpers import activated, imported

    imported(corpus_root, "p", documents=3)
    activated("p")
    Task.objects.filter(corpus__name="p", service__name="tex_to_html", document__name="doc1").update(status=-4)
    assert "'documents': 1" in _call("carve_sandbox", "p", "fatals", "--service", "tex_to_html", "--status", "fatal")
    assert list(Document.objects.filter(corpus__name="fatals").values_list("name", flat=True)) == ["doc1"]
    assert Corpus.objects.get(name="fatals").parent.name == "p"
    with pytest.raises(CommandError, match="give the severity too"):
        _call("carve_sandbox", "p", "x", "--service", "tex_to_html", "--category", "undefined")
    with pytest.raises(CommandError, match="exists already"):
        _call("carve_sandbox", "p", "fatals", "--service", "tex_to_html")
    assert AuditEntry.objects.filter(action="corpus.sandbox").count() == 3
