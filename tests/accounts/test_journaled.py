"""accounts.actions.journaled: a write action journals every call itself, whoever calls it, in the
transaction of its write; a refusal is journaled after its write is rolled back."""

from __future__ import annotations

import pytest
from django.db import transaction
from rest_framework import serializers

from accounts.actions import journal_note, journaled
from accounts.models import ApiToken, AuditEntry
from config.errors import BadRequest, Conflict

pytestmark = pytest.mark.django_db


@journaled("test.write", target="{name}")
def _write(*, name: str, actor: str, fail: Exception | None = None, **fields: object) -> ApiToken:
    token = ApiToken.objects.create(actor=name, prefix=name[:12], digest=name)
    journal_note(row=token.pk)
    if fail is not None:
        raise fail
    return token


@journaled("test.outer", target="{name}")
def _outer(*, name: str, actor: str) -> None:
    _write(name=name, actor="someone else", size=1)


@journaled("test.secret", target="config", secret_input=True)
def _secret(data: dict, *, actor: str) -> None:
    if "bad" in data:
        raise BadRequest("refused", errors={"bad": ["no"]})
    journal_note(after=sorted(data))


class _Input(serializers.Serializer):
    name = serializers.CharField(max_length=8)
    size = serializers.IntegerField(min_value=1)


def _entry() -> AuditEntry:
    return AuditEntry.objects.get()


def test_a_call_from_anywhere_is_journaled_with_its_arguments_and_notes():
    token = _write(name="alpha", actor="shell", size=3)
    entry = _entry()
    assert (entry.actor, entry.action, entry.target, entry.outcome, entry.status_code) == (
        "shell", "test.write", "alpha", "ok", None,
    )  # fmt: skip
    assert entry.params == {"size": 3, "row": token.pk}  # the actor and what the target says are not repeated


def test_a_refusal_rolls_the_write_back_and_is_journaled_all_the_same():
    with pytest.raises(Conflict):
        _write(name="beta", actor="job", fail=Conflict("beta exists already"))
    assert not ApiToken.objects.filter(actor="beta").exists()
    entry = _entry()
    assert (entry.target, entry.outcome, entry.status_code) == ("beta", "409 Conflict", 409)


def test_a_refusal_inside_the_callers_transaction_keeps_the_callers_work():
    with transaction.atomic():
        kept = ApiToken.objects.create(actor="kept", prefix="kept", digest="kept")
        with pytest.raises(Conflict):
            _write(name="gamma", actor="job", fail=Conflict("no"))
    assert ApiToken.objects.filter(pk=kept.pk).exists() and not ApiToken.objects.filter(actor="gamma").exists()
    assert _entry().status_code == 409


def test_a_crash_is_journaled_as_500_and_raised():
    with pytest.raises(RuntimeError):
        _write(name="delta", actor="job", fail=RuntimeError("disk on fire"))
    entry = _entry()
    assert (entry.outcome, entry.status_code) == ("500 Internal server error", 500)


def test_an_action_called_by_another_is_part_of_its_entry():
    _outer(name="eps", actor="op")
    entry = _entry()
    assert (entry.action, entry.actor, entry.target) == ("test.outer", "op", "eps")
    assert set(entry.params) == {"row"}  # the inner action's notes


def test_submitted_input_is_checked_inside_the_attempt():
    with pytest.raises(BadRequest) as refused:
        _write(actor="screen", submitted=_Input(data={"name": "zeta", "size": "0", "other": "x"}))
    assert refused.value.errors == {"size": ["Ensure this value is greater than or equal to 1."]}
    entry = _entry()
    assert (entry.target, entry.status_code) == ("zeta", 400)
    assert entry.params == {"size": "0"}  # as sent, and only the input's fields
    token = _write(actor="screen", submitted=_Input(data={"name": "eta", "size": "2"}))
    assert token.actor == "eta"
    assert AuditEntry.objects.get(target="eta").params == {"size": 2, "row": token.pk}


def test_a_secret_input_is_never_recorded():
    _secret({"password": "hunter2"}, actor="op")
    with pytest.raises(BadRequest):
        _secret({"bad": "hunter2"}, actor="op")
    params = list(AuditEntry.objects.order_by("id").values_list("params", flat=True))
    assert params == [{"after": ["password"]}, {"refused": ["bad"]}]
