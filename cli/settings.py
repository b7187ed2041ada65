"""Where ccs finds its server and token: CCS_URL / CCS_TOKEN, else the config file `ccs login` wrote
($XDG_CONFIG_HOME/ccs/config.json, by default ~/.config/ccs/config.json, mode 0600), else for the URL the
default http://127.0.0.1:8000; each setting remembers where it came from."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

URL_ENV = "CCS_URL"
TOKEN_ENV = "CCS_TOKEN"
DEFAULT_URL = "http://127.0.0.1:8000"
URL_DEFAULT_SOURCE = "the default"


class SettingsProblem(Exception):
    """The URL or token cannot be found or the config file cannot be read; the message says what to do."""


@dataclass(frozen=True)
class Settings:
    url: str
    token: str | None
    source: str  # where the token came from, for `ccs doctor` and error messages
    url_source: str = "the default"  # where the URL came from: $CCS_URL, the login file, or the default

    @property
    def url_words(self) -> str:
        """The server and where its URL came from, as `ccs status` and `ccs doctor` say it."""
        if self.url_source == URL_DEFAULT_SOURCE:
            return f"{self.url} (the default: neither ${URL_ENV} nor `ccs login` names a server)"
        return f"{self.url} (from {self.url_source})"


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ccs"


def config_path() -> Path:
    return config_dir() / "config.json"


def _read_file(path: Path) -> dict[str, str]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise SettingsProblem(f"cannot read {path}: {exc.strerror}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SettingsProblem(f"{path} is not JSON: run `ccs login` again") from exc
    if not isinstance(data, dict):
        raise SettingsProblem(f"{path} is not a JSON object: run `ccs login` again")
    return {key: value for key, value in data.items() if isinstance(value, str)}


def settings_load() -> Settings:
    """The environment wins over the file, each of URL and token on its own."""
    stored = _read_file(config_path())
    url, url_source = _setting(stored, URL_ENV, "url")
    token, source = _setting(stored, TOKEN_ENV, "token")
    return Settings(
        url=(url or DEFAULT_URL).rstrip("/"), token=token, source=source or "none",
        url_source=url_source or URL_DEFAULT_SOURCE,
    )  # fmt: skip


def _setting(stored: dict[str, str], variable: str, key: str) -> tuple[str | None, str | None]:
    """One setting and where it came from: the environment variable, else the file's `key` (each only when
    it is not empty), else (None, None)."""
    if os.environ.get(variable):
        return os.environ[variable], f"${variable}"
    if stored.get(key):
        return stored[key], str(config_path())
    return None, None


def settings_save(url: str, token: str) -> Path:
    """Write the config file with mode 0600 from its first byte: a temporary file made by mkstemp (0600)
    in a directory of mode 0700, then renamed over the old one, so no reader ever sees it open."""
    directory = config_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=".config-", suffix=".json")
    try:
        with os.fdopen(descriptor, "w") as handle:
            os.fchmod(handle.fileno(), 0o600)
            json.dump({"url": url.rstrip("/"), "token": token}, handle)
            handle.write("\n")
        os.replace(temporary, config_path())
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return config_path()
