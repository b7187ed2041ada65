"""Failed authentication is limited per client address: after AUTH_FAILURE_LIMIT wrong tokens within the
window, further wrong tokens on the API, /metrics and the sign-in form answer 429 with Retry-After, while a
valid token is always accepted. The address is the peer's own unless the peer is a trusted proxy. The count
lives in the real Redis (under this test's own keys, see conftest), shared by every process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from accounts.lockout import failure_record, lockout_remaining, redis_for
from tests.support import PROJECT_DIR, child_env, wait_until

pytestmark = [pytest.mark.django_db, pytest.mark.tcp]

WRONG = "ccs_" + "x" * 43


@pytest.fixture
def limit(settings) -> int:
    settings.AUTH_FAILURE_LIMIT = 3
    settings.AUTH_FAILURE_WINDOW_SECONDS = 60
    return 3


def _assert_locked_out(response) -> int:
    assert response.status_code == 429, response.content[:200]
    retry_after = int(response["Retry-After"])
    assert 0 < retry_after <= 60
    return retry_after


def test_wrong_tokens_beyond_the_limit_get_429_problems_with_retry_after(api, token, limit):
    for _ in range(limit):
        assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG).status_code == 401
    refused = api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG)
    _assert_locked_out(refused)
    assert refused["Content-Type"] == "application/problem+json" and refused.json()["status"] == 429
    # A valid token is accepted whatever the count, in either place; wrong ones stay refused.
    assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=token).status_code == 200
    assert api.get("/api/jobs", {"token": token}).status_code == 200
    _assert_locked_out(api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG))


def test_at_the_default_limit_a_valid_token_answers_200_and_a_wrong_one_429(api, token, settings):
    assert settings.AUTH_FAILURE_LIMIT == 20
    for _ in range(20):
        assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG).status_code == 401
    assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=token).status_code == 200
    refused = api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG)
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 600
    assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=token).status_code == 200


def test_the_query_form_of_the_token_counts_too(api, limit):
    for _ in range(limit):
        assert api.get("/api/jobs", {"token": WRONG}).status_code == 401
    _assert_locked_out(api.get("/api/jobs", {"token": WRONG}))


def test_another_address_is_not_locked_out(api, token, limit):
    for _ in range(limit + 1):
        api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG, REMOTE_ADDR="10.0.0.1")
    _assert_locked_out(api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG, REMOTE_ADDR="10.0.0.1"))
    assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG, REMOTE_ADDR="10.0.0.2").status_code == 401


def test_requests_without_a_token_and_valid_tokens_do_not_count(api, token, limit):
    for _ in range(limit * 2):
        assert api.get("/api/jobs").status_code == 401
        assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=token).status_code == 200
    assert lockout_remaining("127.0.0.1") == 0


def test_the_metrics_endpoint_shares_the_limit(api, limit):
    for _ in range(limit):
        assert api.get("/metrics", {"token": WRONG}).status_code == 401
    locked = api.get("/metrics", {"token": WRONG})
    _assert_locked_out(locked)
    assert locked["Content-Type"] == "application/problem+json"


def test_the_sign_in_form_counts_failures_and_answers_429(client, token, limit):
    for _ in range(limit):
        assert client.post("/login", {"token": WRONG}).status_code == 401
    refused = client.post("/login", {"token": WRONG})
    _assert_locked_out(refused)
    assert "Too many failed authentications" in refused.content.decode()
    assert "_auth_user_id" not in client.session
    assert client.post("/login", {"token": token}).status_code == 302
    assert "_auth_user_id" in client.session


def test_the_lockout_ends_with_its_window(api, token, settings):
    settings.AUTH_FAILURE_LIMIT = 1
    settings.AUTH_FAILURE_WINDOW_SECONDS = 1
    assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG).status_code == 401
    assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG).status_code == 429
    wait_until(lambda: lockout_remaining("127.0.0.1") == 0, 10, interval=0.1, message="the window to end")
    assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG).status_code == 401


def test_the_count_is_shared_with_other_processes(api, token, limit, settings, _auth_failures_of_its_own):
    """Failures counted by another process (as another gunicorn worker would) lock this one out."""
    script = (
        "import sys, django; django.setup()\n"
        "from django.conf import settings\n"
        "settings.AUTH_FAILURE_KEY_PREFIX, settings.AUTH_FAILURE_WINDOW_SECONDS = sys.argv[1], 60\n"
        "from accounts.lockout import failure_record\n"
        "for _ in range(int(sys.argv[2])): failure_record('127.0.0.1')\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, _auth_failures_of_its_own, str(limit)],
        cwd=PROJECT_DIR, env=child_env(), check=True, timeout=60,
    )  # fmt: skip
    _assert_locked_out(api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG))
    assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=token).status_code == 200


def test_every_count_expires(limit, settings):
    failure_record("10.1.2.3")
    key = settings.AUTH_FAILURE_KEY_PREFIX + "10.1.2.3"
    client = redis_for(settings.REDIS_URL)
    assert client.get(key) == b"1" and 0 < client.ttl(key) <= 60


def test_without_redis_the_limit_lapses_but_authentication_works(api, token, limit, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    for _ in range(limit + 2):
        assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG).status_code == 401
    assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=token).status_code == 200


def test_a_forged_forwarded_for_from_an_untrusted_peer_changes_nothing(api, token, limit, settings):
    assert settings.TRUSTED_PROXIES == []  # off by default
    for forged in range(limit):
        response = api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG, HTTP_X_FORWARDED_FOR=f"192.0.2.{forged}")
        assert response.status_code == 401
    # Every failure counted against the peer, none against the forged addresses.
    _assert_locked_out(api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG, HTTP_X_FORWARDED_FOR="192.0.2.99"))
    assert all(lockout_remaining(f"192.0.2.{n}") == 0 for n in range(limit))
    assert lockout_remaining("127.0.0.1") > 0
    assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=token, HTTP_X_FORWARDED_FOR="192.0.2.1").status_code == 200


def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_count(api, limit, settings):
    settings.TRUSTED_PROXIES = ["127.0.0.0/8"]
    for _ in range(limit):
        api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG, HTTP_X_FORWARDED_FOR="198.51.100.7")
    _assert_locked_out(api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG, HTTP_X_FORWARDED_FOR="198.51.100.7"))
    # Another client behind the same proxy, and the proxy's own address, are not limited.
    assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG, HTTP_X_FORWARDED_FOR="198.51.100.8").status_code == 401
    assert lockout_remaining("127.0.0.1") == 0


@pytest.mark.parametrize(
    ("peer", "forwarded", "trusted", "client"),
    [
        ("10.0.0.5", "203.0.113.9", [], "10.0.0.5"),  # no proxy trusted: the header is ignored
        ("10.0.0.5", "203.0.113.9", ["10.0.0.5"], "203.0.113.9"),
        ("10.0.0.5", "203.0.113.9, 10.0.0.6", ["10.0.0.0/24"], "203.0.113.9"),  # two proxies in a row
        # A client's own forged entry sits left of the address the proxy appended: it is never reached.
        ("10.0.0.5", "1.2.3.4, 203.0.113.9", ["10.0.0.5"], "203.0.113.9"),
        ("10.0.0.5", "", ["10.0.0.5"], "10.0.0.5"),  # no header: the proxy's own address
        ("10.0.0.5", "not-an-address", ["10.0.0.5"], "10.0.0.5"),
        ("2001:db8::5", "2001:db8:1::9", ["2001:db8::/64"], "2001:db8:1::9"),
    ],
)
def test_the_client_address_is_the_peer_unless_a_trusted_proxy_forwards(peer, forwarded, trusted, client, settings):
    from django.test import RequestFactory

    from config.api.requests import client_address

    settings.TRUSTED_PROXIES = trusted
    request = RequestFactory().get("/api/jobs", REMOTE_ADDR=peer, HTTP_X_FORWARDED_FOR=forwarded)
    assert client_address(request) == client


def test_a_malformed_trusted_proxy_stops_start_up_with_the_entry_named():
    script = "import django; django.setup()"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=PROJECT_DIR, env=child_env(TRUSTED_PROXIES="10.0.0.1,proxy.example"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "TRUSTED_PROXIES holds 'proxy.example'" in result.stderr
