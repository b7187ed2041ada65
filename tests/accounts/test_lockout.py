"""Failed authentication is limited per client address: after AUTH_FAILURE_LIMIT wrong tokens within the
window, the API, /metrics and the sign-in form answer 429 with Retry-After, whatever token comes next.
The count lives in the real Redis (under this test's own keys, see conftest), shared by every process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from accounts.lockout import failure_record, lockout_remaining, redis_for
from tests.support import PROJECT_DIR, child_env, wait_until

pytestmark = pytest.mark.django_db

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
    # Locked out means every token is refused unread: guessing right would not be told apart.
    _assert_locked_out(api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=token))
    _assert_locked_out(api.get("/api/jobs", {"token": token}))


def test_the_query_form_of_the_token_counts_too(api, limit):
    for _ in range(limit):
        assert api.get("/api/jobs", {"token": WRONG}).status_code == 401
    _assert_locked_out(api.get("/api/jobs", {"token": WRONG}))


def test_another_address_is_not_locked_out(api, token, limit):
    for _ in range(limit + 1):
        api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG, REMOTE_ADDR="10.0.0.1")
    _assert_locked_out(api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=token, REMOTE_ADDR="10.0.0.1"))
    assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=token, REMOTE_ADDR="10.0.0.2").status_code == 200


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
    refused = client.post("/login", {"token": token})
    _assert_locked_out(refused)
    assert "Too many failed authentications" in refused.content.decode()
    assert "_auth_user_id" not in client.session


def test_the_lockout_ends_with_its_window(api, token, settings):
    settings.AUTH_FAILURE_LIMIT = 1
    settings.AUTH_FAILURE_WINDOW_SECONDS = 1
    assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=WRONG).status_code == 401
    assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=token).status_code == 429
    wait_until(lambda: lockout_remaining("127.0.0.1") == 0, 10, interval=0.1, message="the window to end")
    assert api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=token).status_code == 200


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
    _assert_locked_out(api.get("/api/jobs", HTTP_X_SERVICE_TOKEN=token))


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
