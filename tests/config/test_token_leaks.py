"""Service tokens stay out of log lines and out of redirects: gunicorn's access log (a real gunicorn), a
Celery worker's log (a real worker), Django's log lines, and the login redirect of a screen requested
with ?token=."""

from __future__ import annotations

import logging
import subprocess
import sys
from urllib.parse import parse_qs, urlsplit

import pytest

from config.logs import LineFormatter, mask_tokens
from config.middleware import url_without_token
from ops.stack import web_child
from tests.support import PROJECT_DIR, child_env, free_port, wait_until

SECRET = "ccs_" + "S3cr3tT0kenValue_abcdefghijklmnopqrstuvwx"


@pytest.mark.parametrize(
    ("line", "masked"),
    [
        (f"GET /api/jobs?token={SECRET}&limit=5 HTTP/1.1", "GET /api/jobs?token=***&limit=5 HTTP/1.1"),
        (f"/login?next=/audit%3Ftoken%3D{SECRET}", "/login?next=/audit%3Ftoken%3D***"),
        (f"?TOKEN={SECRET}", "?TOKEN=***"),
        (f"header X-Service-Token: {SECRET} was refused", "header X-Service-Token: ccs_*** was refused"),
        ("GET /api/jobs?limit=5 HTTP/1.1", "GET /api/jobs?limit=5 HTTP/1.1"),
    ],
)
def test_mask_tokens_removes_every_form_of_a_token(line, masked):
    assert mask_tokens(line) == masked


def test_django_log_lines_mask_tokens_in_the_message_and_the_traceback():
    logger = logging.getLogger("tests.token_leaks")
    try:
        raise ValueError(f"bad request /api/jobs?token={SECRET}")
    except ValueError:
        record = logger.makeRecord(
            logger.name, logging.ERROR, __file__, 1, "refused %s", (f"?token={SECRET}",), sys.exc_info()
        )
    line = LineFormatter().format(record)
    assert SECRET not in line and "refused ?token=***" in line and "ValueError: bad request" in line


def test_the_configured_console_handler_masks_tokens():
    from django.conf import settings

    assert settings.LOGGING["handlers"]["console"]["formatter"] == "line"
    assert settings.LOGGING["formatters"]["line"]["()"] == "config.logs.LineFormatter"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_gunicorns_access_log_masks_the_token_query_parameter(tmp_path, token):
    """The web server exactly as `up` starts it, with its access log read back."""
    port = free_port()
    child = web_child(host="127.0.0.1", port=port, processes=1, access_log=True)  # `up --access-log`
    assert "config.gunicorn.TokenMaskingLogger" in child.argv
    log_path = tmp_path / "web.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            child.argv, cwd=PROJECT_DIR, env=child_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        import urllib.error
        import urllib.request

        def answered(path: str) -> int | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
                    return response.status
            except urllib.error.HTTPError as exc:
                return exc.code
            except OSError:
                return None

        assert wait_until(lambda: answered(f"/api/jobs?token={token}&limit=1"), 60, message="gunicorn") == 200
        assert answered(f"/api/corpora?limit=1&token={token}") == 200  # (a wrong one would count as a failure)
        assert answered(f"/audit?token={token}") == 200  # urllib follows the redirect to the login page
        wait_until(lambda: log_path.read_text().count('"GET ') >= 4, 20, message="four access-log lines")
    finally:
        process.terminate()
        process.wait(20)
    text = log_path.read_text()
    assert token not in text
    assert text.count("token=***") == 3, text
    assert '"GET /login?next=/audit HTTP/1.1" 200' in text  # the redirect carried no token


@pytest.mark.parametrize(
    ("url", "clean"),
    [
        (f"/corpora?token={SECRET}", "/corpora"),
        (f"/corpora?a=1&token={SECRET}&b=2", "/corpora?a=1&b=2"),
        (f"/login?next=/audit%3Ftoken%3D{SECRET}%26a%3D1", "/login?next=/audit%3Fa%3D1"),
        ("/login?next=/audit", "/login?next=/audit"),
    ],
)
def test_url_without_token(url, clean):
    assert url_without_token(url) == clean


@pytest.mark.django_db
def test_a_screen_requested_with_a_token_redirects_to_login_without_it(client, token):
    response = client.get(f"/audit?token={token}&actor=x")
    assert response.status_code == 302 and token not in response["Location"]
    assert parse_qs(urlsplit(response["Location"]).query)["next"] == ["/audit?actor=x"]
    page = client.get(response["Location"])
    assert token not in page.content.decode()


@pytest.mark.django_db
def test_the_login_page_drops_a_token_from_the_page_it_returns_to(client, token):
    page = client.get("/login", {"next": f"/audit?token={token}"})
    assert token not in page.content.decode() and 'value="/audit"' in page.content.decode()
    signed_in = client.post("/login", {"token": token, "next": f"/jobs?token={token}&active=true"})
    assert signed_in.status_code == 302 and signed_in["Location"] == "/jobs?active=true"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_celery_workers_log_masks_tokens(tmp_path, purge_broker):
    """Celery writes the whole body of a message it cannot run into its log: a token there is masked."""
    from config.celery import app

    log_path = tmp_path / "celery.log"
    argv = [
        sys.executable, "-m", "celery", "-A", "config", "worker", "--loglevel", "INFO", "--concurrency", "1",
        "--pool", "solo", "--hostname", "masking@%h", "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv, cwd=PROJECT_DIR, env=child_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_until(lambda: "ready." in log_path.read_text(), 60, message="the worker to be ready")
        app.send_task("tests.no_such_task", args=[f"/api/jobs?token={SECRET}", SECRET])
        wait_until(lambda: "unregistered task" in log_path.read_text(), 30, message="the worker to log the message")
    finally:
        process.terminate()
        process.wait(30)
    text = log_path.read_text()
    assert SECRET not in text
    assert "token=***" in text and "ccs_***" in text
