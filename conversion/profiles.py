"""Converter profiles: how a service's papers are converted. A profile names the engine (latexmlc, or
another program with latexmlc's command line), its options from an allow-list, and its timeout and
memory. The server checks a profile with this module when it is registered or changed; the dispatcher
hands the profile to the worker with each task, and the worker checks it again against its own roots
and turns it into the engine's command line here. No Django: a worker machine runs this alone.

A profile travels and is stored as JSON (`Profile.as_json`); its canonical text (sorted keys, no
spaces) is what its hash is taken of, so equal profiles have equal hashes wherever they are made.
No option is free-form: a switch is a boolean, a preload a binding name with option tokens, each
matched by a strict pattern, and every path lies inside configured roots (symbolic links resolved).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from conversion.sandbox import bind_problem, under_own_mount

ENGINE_DEFAULT = "latexmlc"
# The on/off options of latexmlc a profile may give, in the order they go on the command line.
SWITCHES: tuple[str, ...] = ("includestyles", "pmml", "cmml", "mathtex", "noinvisibletimes", "nodefaultresources")
TIMEOUT_MAX_SECONDS = 86_400
MEMORY_MIN_MB = 64
MEMORY_MAX_MB = 1024 * 1024
PRELOADS_MAX = 16
PRELOAD_OPTIONS_MAX = 32
PATHS_MAX = 16
PATH_MAX_CHARS = 1024
URL_MAX_CHARS = 2048

# A binding LaTeXML can preload: latexml.sty, amsmath.sty, a local `mybinding` (letters, digits, _ and -,
# in parts joined by dots).
_BINDING = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")
# `[option,key=value,...]binding`: the bracketed option list is optional.
_PRELOAD = re.compile(r"(?:\[(?P<options>[^\[\]]*)\])?(?P<binding>[^\[\]]+)")
_OPTION = re.compile(r"(?P<key>[A-Za-z][A-Za-z0-9_-]*)(?:=(?P<value>[A-Za-z0-9_.+-]+))?")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
# The options latexml.sty declares (LaTeXML/Package/latexml.sty.ltxml): switches, and keys with a number.
LATEXML_STY_SWITCHES = frozenset({
    "ids", "noids", "comments", "nocomments", "profiling", "noprofiling", "mathparserspeculate",
    "nomathparserspeculate", "guesstabularheaders", "noguesstabularheaders", "bibtex", "nobibtex", "mathlexemes",
    "rawstyles", "localrawstyles", "norawstyles", "rawclasses", "localrawclasses", "norawclasses", "breakuntex",
    "nobreakuntex",
})  # fmt: skip
LATEXML_STY_NUMBERS = frozenset(
    {"dpi", "magnify", "upsample", "zoomout", "tokenlimit", "iflimit", "absorblimit", "pushbacklimit"}
)
# An engine given by name, looked up on the worker's PATH.
_ENGINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}")
_HTTPS_URL = re.compile(r"https://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*)?")


@dataclass(frozen=True)
class Profile:
    """A service's conversion profile. `timeout_seconds` and `memory_mb` None: the worker's own limits;
    either way a worker's --timeout and --memory-mb are the ceiling on its machine."""

    engine: str = ENGINE_DEFAULT
    preloads: tuple[str, ...] = ()
    includestyles: bool = False
    pmml: bool = False
    cmml: bool = False
    mathtex: bool = False
    noinvisibletimes: bool = False
    nodefaultresources: bool = False
    css: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    timeout_seconds: int | None = None
    memory_mb: int | None = None

    def as_json(self) -> dict[str, Any]:
        """The profile as JSON values, every option present."""
        return {f.name: list(value) if isinstance(value := getattr(self, f.name), tuple) else value
                for f in fields(self)}  # fmt: skip

    def canonical(self) -> str:
        """The canonical JSON text: sorted keys, no spaces; its hash is the profile's."""
        return json.dumps(self.as_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    @property
    def digest(self) -> str:
        """sha256 of the canonical JSON, in hex."""
        return hashlib.sha256(self.canonical().encode()).hexdigest()


OPTIONS: tuple[str, ...] = tuple(f.name for f in fields(Profile))
# The bindings written here (conversion/bindings/: LaTeXML's binding language, public domain), carried by
# every worker: a profile names them among its binding paths by this name, which each machine resolves to
# its own copy (shipped_bindings), so the profile and its hash are the same everywhere.
SHIPPED_BINDINGS = "@bindings"
BINDINGS_DIR = Path(__file__).resolve().parent / "bindings"
ARXIV_PRELOAD = (
    "[nobibtex,ids,localrawstyles,nobreakuntex,magnify=1.8,zoomout=1.8,tokenlimit=249999999,iflimit=3599999,"
    "absorblimit=1299999,pushbacklimit=599999]latexml.sty"
)


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    profile: Profile = field(default_factory=Profile)


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset("default", "latexmlc --format=html5 with LaTeXML's defaults, under the worker's own timeout and memory"),
        Preset(
            "arxiv",
            "arXiv's published ar5iv options that LaTeXML 0.8.8 accepts: latexml.sty with its loop guards and"
            " local raw styles (and nobibtex: a shipped .bbl only, as arXiv's sources carry one), presentation"
            " and content MathML with TeX, no invisible times, no default resources, and the bindings written"
            " here (@bindings: biblatex, xparse, the AAS and REVTeX classes, ...); 1200 s at most (arXiv"
            " allows 2700). Left out: --preload=ar5iv.sty, ar5iv's own binding paths and remote CSS.",
            Profile(
                preloads=(ARXIV_PRELOAD,),
                pmml=True,
                cmml=True,
                mathtex=True,
                noinvisibletimes=True,
                nodefaultresources=True,
                paths=(SHIPPED_BINDINGS,),
                timeout_seconds=1200,
            ),
        ),
    )
}
DEFAULT = PRESETS["default"].profile


class ProfileInvalid(ValueError):
    """A profile that cannot be: `errors` maps each bad option to what is wrong with it."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{name}: {' '.join(why)}" for name, why in errors.items()))
        self.errors = errors


class ProfileRefused(Exception):
    """This machine cannot run the profile: its engine is not here, or a path is missing or outside its roots."""


def profile_load(data: dict[str, Any]) -> Profile:
    """A stored profile (its `as_json`), checked when it was stored: rebuilt as it is, without looking at
    the file system; an option it lacks has the default's value."""
    given: dict[str, Any] = {  # the stored JSON's values, lists as tuples
        name: tuple(value) if isinstance(value, list) else value for name, value in data.items() if name in OPTIONS
    }
    return replace(DEFAULT, **given)


def preset_of(profile: Profile) -> str | None:
    """The name of the preset the profile equals, or None."""
    return next((name for name, preset in PRESETS.items() if preset.profile == profile), None)


def profile_parse(data: object, *, roots: Sequence[Path]) -> Profile:
    """A profile from JSON: a preset's name, or an object of options over a base (its `preset`, else the
    default). Every option is checked (allow-list, patterns, paths inside `roots` with links resolved);
    ProfileInvalid names each bad one."""
    if isinstance(data, str):
        if data not in PRESETS:
            raise ProfileInvalid({"preset": [f"no preset is named {data[:100]!r}; the presets: {', '.join(PRESETS)}"]})
        return PRESETS[data].profile
    if not isinstance(data, dict):
        raise ProfileInvalid({"profile": ["a profile is a preset's name or an object of options"]})
    errors: dict[str, list[str]] = {}
    base = DEFAULT
    preset = data.get("preset")
    if preset is not None:
        if not isinstance(preset, str) or preset not in PRESETS:
            errors["preset"] = [f"one of {', '.join(PRESETS)}"]
        else:
            base = PRESETS[preset].profile
    given: dict[str, Any] = {}
    for name, value in data.items():
        if name == "preset":
            continue
        check = _CHECKS.get(name) if isinstance(name, str) else None
        if check is None:
            errors[str(name)[:100]] = [f"not an option of a profile; the options: {', '.join(OPTIONS)}"]
            continue
        try:
            given[name] = check(value, roots)
        except ValueError as exc:
            errors[name] = [str(exc)]
    if errors:
        raise ProfileInvalid(errors)
    return replace(base, **given)


def _engine(value: object, roots: Sequence[Path]) -> str:
    text = _text(value, PATH_MAX_CHARS)
    if text.startswith("/"):
        _inside(text, roots, what="the engine")
        return text
    if not _ENGINE_NAME.fullmatch(text):
        raise ValueError(
            "an engine is a program's name, looked up on the worker's PATH (letters, digits, . _ + -), or an"
            " absolute path inside the profile roots"
        )
    return text


def _preloads(value: object, roots: Sequence[Path]) -> tuple[str, ...]:
    items: list[str] = []
    for item in _list(value, PRELOADS_MAX):
        items.append(_text(item, 1000))
        preload_check(items[-1])
    return tuple(items)


def preload_check(text: str) -> None:
    """ValueError unless `text` is a binding to preload: `name` or `[option,key=value,...]name`, the
    options of latexml.sty those it declares."""
    match = _PRELOAD.fullmatch(text)
    binding = match["binding"] if match else ""
    if not match or not _BINDING.fullmatch(binding) or len(binding) > 100:
        raise ValueError(f"{text[:200]!r} is not a binding to preload: [option,key=value,...]name.sty")
    if match["options"] is None:
        return
    options = match["options"].split(",")
    if len(options) > PRELOAD_OPTIONS_MAX:
        raise ValueError(f"{binding} takes at most {PRELOAD_OPTIONS_MAX} options here")
    for option in options:
        token = _OPTION.fullmatch(option)
        if token is None:
            raise ValueError(f"{option[:100]!r} is not an option token of {binding} (key or key=value)")
        if binding == "latexml.sty":
            key, value = token["key"], token["value"]
            if key in LATEXML_STY_SWITCHES and value is None:
                continue
            if key in LATEXML_STY_NUMBERS and value is not None and _NUMBER.fullmatch(value):
                continue
            raise ValueError(
                f"{option!r} is not an option latexml.sty declares: one of {', '.join(sorted(LATEXML_STY_SWITCHES))},"
                f" or {', '.join(sorted(LATEXML_STY_NUMBERS))} with a number"
            )


def _switch(value: object, roots: Sequence[Path]) -> bool:
    if not isinstance(value, bool):
        raise ValueError("true or false")
    return value


def _css(value: object, roots: Sequence[Path]) -> tuple[str, ...]:
    items = [_text(item, URL_MAX_CHARS) for item in _list(value, PATHS_MAX)]
    for item in items:
        if item.startswith("https://"):
            if not _HTTPS_URL.fullmatch(item):
                raise ValueError(f"{item[:200]!r} is not an https URL of a stylesheet")
        else:
            _inside(item, roots, what="a stylesheet")
    return tuple(items)


def _paths(value: object, roots: Sequence[Path]) -> tuple[str, ...]:
    items = [_text(item, PATH_MAX_CHARS) for item in _list(value, PATHS_MAX)]
    for item in items:
        if item != SHIPPED_BINDINGS:
            _inside(item, roots, what=f"a binding path (or {SHIPPED_BINDINGS}, the bindings every worker carries)")
    return tuple(items)


def _limit(minimum: int, maximum: int) -> Callable[[object, Sequence[Path]], int | None]:
    def check(value: object, roots: Sequence[Path]) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
            raise ValueError(f"a whole number from {minimum} to {maximum}, or null for the worker's own")
        return value

    return check


_CHECKS: dict[str, Callable[[object, Sequence[Path]], Any]] = {
    "engine": _engine,
    "preloads": _preloads,
    **dict.fromkeys(SWITCHES, _switch),
    "css": _css,
    "paths": _paths,
    "timeout_seconds": _limit(1, TIMEOUT_MAX_SECONDS),
    "memory_mb": _limit(MEMORY_MIN_MB, MEMORY_MAX_MB),
}
assert set(_CHECKS) == set(OPTIONS)


def _text(value: object, limit: int) -> str:
    if not isinstance(value, str):
        raise ValueError("a string")
    if not value or len(value) > limit or not value.isprintable() or not _encodable(value):
        raise ValueError(f"1 to {limit} printable characters")
    return value


def _encodable(value: str) -> bool:
    try:
        value.encode()
    except UnicodeEncodeError:  # a lone surrogate from JSON: no file system takes it
        return False
    return True


def _list(value: object, limit: int) -> list[object]:
    if not isinstance(value, list):
        raise ValueError("a list")
    if len(value) > limit:
        raise ValueError(f"at most {limit} items")
    return value


def _inside(path: str, roots: Sequence[Path], *, what: str, whose: str = "") -> Path:
    """The path with its links resolved, which must lie inside one of `roots`; ValueError otherwise. The
    path must be absolute and plain (no `.` or `..` parts, no doubled or trailing slash)."""
    if not path.startswith("/") or os.path.normpath(path) != path or path.startswith("//"):
        raise ValueError(f"{what} is an absolute path without . or .. parts: {path[:200]!r}")
    if not roots:
        raise ValueError(f"{what} must lie inside the profile roots{whose}, and none are configured")
    resolved = Path(path).resolve()
    if not any(resolved.is_relative_to(root) for root in roots_resolved(roots)):
        raise ValueError(f"{what} {path[:200]!r} lies outside the profile roots{whose} (links resolved)")
    return resolved


def roots_resolved(roots: Sequence[Path]) -> list[Path]:
    return [Path(root).resolve() for root in roots]


def roots_check(roots: Sequence[str]) -> list[Path]:
    """Profile roots as given to a worker or the server: absolute paths, never `/` itself (the sandbox binds
    what an engine inside a root needs, and the whole file system would be no sandbox). ValueError."""
    checked = []
    for root in roots:
        if not root.startswith("/"):
            raise ValueError(f"a profile root is an absolute path, not {root!r}")
        resolved = Path(root).resolve()
        if resolved == Path("/"):
            raise ValueError("a profile root cannot be / itself")
        checked.append(resolved)
    return checked


# --- what a worker runs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Invocation:
    """A profile as this machine runs it: the engine's executable, the options after latexmlc's fixed ones
    (`--format=html5 --dest=… --log=cortex.log --timeout=…`), the host paths the sandbox binds read-only
    at the same place, and the conversion's timeout and memory within the worker's ceiling."""

    executable: str
    options: tuple[str, ...]
    read_only: tuple[Path, ...]
    timeout: float
    memory_mb: int


def profile_options(
    profile: Profile, *, css: Sequence[str] | None = None, paths: Sequence[str] | None = None
) -> list[str]:
    """The profile's options on latexmlc's command line, in a fixed order: preloads, switches, stylesheets,
    binding paths (`css` and `paths` as this machine resolved them, else as the profile gives them)."""
    return [
        *(f"--preload={preload}" for preload in profile.preloads),
        *(f"--{switch}" for switch in SWITCHES if getattr(profile, switch)),
        *(f"--css={item}" for item in (profile.css if css is None else css)),
        *(f"--path={item}" for item in (profile.paths if paths is None else paths)),
    ]


def invocation(
    profile: Profile, *, roots: Sequence[Path], timeout: float, memory_mb: int, latexmlc: str = ENGINE_DEFAULT
) -> Invocation:
    """How this worker runs `profile`: its paths resolved now and checked against this worker's `roots`
    (they must exist), its engine found (`latexmlc` is the worker's own, `latexmlc` argument), its limits
    capped at the worker's `timeout` and `memory_mb`. Raises ProfileRefused saying why it cannot run here."""
    roots = roots_resolved(roots)
    read_only: list[Path] = []
    executable = engine_executable(profile.engine, roots=roots, latexmlc=latexmlc)
    engine_root = next((root for root in roots if Path(executable).is_relative_to(root)), None)
    if profile.engine.startswith("/") and engine_root is not None:
        read_only.append(engine_root)  # the engine's installation: its libraries lie beside it
    css = []
    for item in profile.css:
        if item.startswith("https://"):
            css.append(item)
            continue
        resolved = _present(item, roots, directory=False, what="the stylesheet")
        read_only.append(resolved)
        css.append(str(resolved))
    paths = []
    for item in profile.paths:
        if item == SHIPPED_BINDINGS:
            resolved = shipped_bindings()
        else:
            resolved = _present(item, roots, directory=True, what="the binding path")
        read_only.append(resolved)
        paths.append(str(resolved))
    for path in read_only:
        if (why := bind_problem(path)) is not None:
            raise ProfileRefused(f"a profile's path cannot be bound into the sandbox: {why}")
    return Invocation(
        executable=executable,
        options=tuple(profile_options(profile, css=css, paths=paths)),
        read_only=tuple(dict.fromkeys(read_only)),
        timeout=min(timeout, profile.timeout_seconds or timeout),
        memory_mb=min(memory_mb, profile.memory_mb or memory_mb),
    )


def with_shipped_bindings(profile: Profile, shipped: bool) -> Profile:
    """The profile with `@bindings` last among its binding paths, or without it."""
    paths = tuple(path for path in profile.paths if path != SHIPPED_BINDINGS)
    return replace(profile, paths=(*paths, SHIPPED_BINDINGS) if shipped else paths)


def shipped_bindings() -> Path:
    """The directory of the shipped bindings on this machine, as the sandbox can bind it at its own place:
    BINDINGS_DIR itself, or, where that lies under one of the sandbox's own mounts (a checkout under /work
    or /tmp, whose place inside the sandbox is the paper's directory), a copy under /var/tmp named by the
    hash of its content, made once and replaced by no one. ProfileRefused when the directory is missing."""
    if not BINDINGS_DIR.is_dir():
        raise ProfileRefused(f"the shipped bindings {BINDINGS_DIR} are not on this worker")
    if not under_own_mount(BINDINGS_DIR):
        return BINDINGS_DIR
    files = sorted(path for path in BINDINGS_DIR.rglob("*") if path.is_file())
    copy = _bindings_copy(tuple((str(path), path.stat().st_mtime_ns, path.stat().st_size) for path in files))
    if copy.is_dir():
        return copy
    return _bindings_copy_make(copy)


@functools.lru_cache(maxsize=8)
def _bindings_copy(signature: tuple[tuple[str, int, int], ...]) -> Path:
    """Where the copy of the shipped bindings whose files have this (path, mtime, size) signature lies."""
    digest = hashlib.sha256()
    for name, _mtime, _size in signature:
        path = Path(name)
        digest.update(f"{path.relative_to(BINDINGS_DIR)}\0".encode())
        digest.update(path.read_bytes())
    return Path("/var/tmp") / f"ccs-bindings-{digest.hexdigest()[:16]}"  # noqa: S108 - read-only content


def _bindings_copy_make(copy: Path) -> Path:
    staging = Path(tempfile.mkdtemp(prefix=".ccs-bindings-", dir=copy.parent))
    try:
        shutil.copytree(BINDINGS_DIR, staging, dirs_exist_ok=True)
        for path in [staging, *staging.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)  # the sandbox user reads them
        os.rename(staging, copy)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not copy.is_dir():  # another process made it meanwhile, or the copy failed
            raise
    return copy


def engine_executable(engine: str, *, roots: Sequence[Path], latexmlc: str = ENGINE_DEFAULT) -> str:
    """The absolute path of a profile's engine on this machine: `latexmlc` is the worker's own (`latexmlc`),
    another name is looked up on PATH, a path must be an executable file inside `roots`. ProfileRefused."""
    if not engine.startswith("/"):
        found = shutil.which(latexmlc if engine == ENGINE_DEFAULT else engine)
        if found is None:
            raise ProfileRefused(f"the engine {engine} is not installed on this worker")
        return found
    try:
        resolved = _inside(engine, roots, what="the engine", whose=" of this worker")
    except ValueError as exc:
        raise ProfileRefused(str(exc)) from None
    if not resolved.is_file() or not os.access(resolved, os.X_OK):
        raise ProfileRefused(f"the engine {engine} is not an executable file on this worker")
    return str(resolved)


def _present(path: str, roots: Sequence[Path], *, directory: bool, what: str) -> Path:
    try:
        resolved = _inside(path, roots, what=what, whose=" of this worker")
    except ValueError as exc:
        raise ProfileRefused(str(exc)) from None
    if not (resolved.is_dir() if directory else resolved.is_file()):
        kind = "directory" if directory else "file"
        raise ProfileRefused(f"{what} {path} is not a {kind} on this worker")
    return resolved
