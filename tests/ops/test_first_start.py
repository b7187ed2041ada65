"""What `up`'s first start leaves in the database (ops.stack.first_start_load): the demo corpus with a
short-limit service of its own, and tex_to_html for real papers with the worker's own limits, activated on
nothing; and what a later start does with a database an earlier `up` made."""

from __future__ import annotations

import pytest

from corpora.models import Activation, Corpus
from ops import stack
from services.actions import service_register
from services.models import Service

pytestmark = pytest.mark.django_db


def _activated() -> set[tuple[str, str]]:
    return set(Activation.objects.values_list("corpus__name", "service__name"))


def test_the_first_start_gives_the_demo_its_own_service_and_real_papers_the_workers_limits(corpus_root):
    assert stack.first_start_load(actor="admin", demo=True) == "demo"

    demo = Service.objects.get(name=stack.DEMO_SERVICE)
    assert demo.name != stack.SERVICE and demo.profile["timeout_seconds"] == 30
    real = Service.objects.get(name=stack.SERVICE)
    assert real.profile["timeout_seconds"] is None and real.profile["memory_mb"] is None
    assert _activated() == {("demo", stack.DEMO_SERVICE)}  # tex_to_html is tied to no corpus
    assert stack.first_start_notice() is None


def test_without_the_demo_the_first_start_registers_tex_to_html_alone(corpus_root):
    assert stack.first_start_load(actor="admin", demo=False) is None

    assert Service.objects.filter(name=stack.SERVICE, profile__timeout_seconds=None).exists()
    assert not Service.objects.filter(name=stack.DEMO_SERVICE).exists()
    assert not Corpus.objects.exists() and not _activated()


def test_a_later_start_changes_nothing_and_names_the_old_demo_limit_of_tex_to_html(corpus_root):
    # A database of an earlier `up`: the demo corpus converted by tex_to_html at 30 s a document.
    service_register(name=stack.SERVICE, actor="admin", profile={"timeout_seconds": 30},
                     description=stack._OLD_DEMO_DESCRIPTION)  # fmt: skip
    Corpus.objects.create(name="demo", path=str(corpus_root / "demo"), state="ready")
    before = list(Service.objects.values_list("name", "profile").order_by("name"))

    assert stack.first_start_load(actor="admin", demo=True) is None
    assert list(Service.objects.values_list("name", "profile").order_by("name")) == before
    notice = stack.first_start_notice()
    assert notice is not None and "30 s" in notice and "ccs profile tex_to_html --preset default" in notice


def test_an_operators_own_tex_to_html_is_kept_and_not_named(corpus_root):
    service_register(name=stack.SERVICE, actor="admin", profile={"timeout_seconds": 30}, description="ours")
    assert stack.first_start_load(actor="admin", demo=True) == "demo"

    assert Service.objects.get(name=stack.SERVICE).profile["timeout_seconds"] == 30
    assert _activated() == {("demo", stack.DEMO_SERVICE)}
    assert stack.first_start_notice() is None
