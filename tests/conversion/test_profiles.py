"""Converter profiles: the allow-list of options, the strict patterns of preloads, paths confined to the roots
with links resolved, the hash of the canonical JSON, and the command line a worker builds from a profile."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from conversion.engine import latexmlc_path
from conversion.profiles import (
    ARXIV_PRELOAD,
    DEFAULT,
    PRESETS,
    Profile,
    ProfileInvalid,
    ProfileRefused,
    invocation,
    preset_of,
    profile_load,
    profile_options,
    profile_parse,
    roots_check,
    shipped_bindings,
)
from conversion.sandbox import under_own_mount

ARXIV_OPTIONS = [
    "--preload=[nobibtex,ids,localrawstyles,nobreakuntex,magnify=1.8,zoomout=1.8,tokenlimit=249999999,"
    "iflimit=3599999,absorblimit=1299999,pushbacklimit=599999]latexml.sty",
    "--pmml",
    "--cmml",
    "--mathtex",
    "--noinvisibletimes",
    "--nodefaultresources",
    "--path=@bindings",
]


@pytest.fixture
def roots(tmp_path: Path) -> list[Path]:
    root = tmp_path / "profiles"
    (root / "bindings").mkdir(parents=True)
    (root / "style.css").write_text("body { color: black }\n")
    return [root]


def refused(data: object, roots: list[Path] = ()) -> dict[str, list[str]]:
    with pytest.raises(ProfileInvalid) as caught:
        profile_parse(data, roots=roots)
    return caught.value.errors


def test_the_default_profile_adds_nothing_to_todays_command_line():
    assert profile_options(DEFAULT) == []
    run = invocation(DEFAULT, roots=[], timeout=300, memory_mb=4096)
    assert (run.executable, run.options, run.read_only) == (latexmlc_path(), (), ())
    assert (run.timeout, run.memory_mb) == (300, 4096)
    assert profile_parse({}, roots=[]) == profile_parse("default", roots=[]) == DEFAULT


def test_the_arxiv_preset_builds_arxivs_published_options_that_latexml_accepts():
    arxiv = profile_parse("arxiv", roots=[])
    assert profile_options(arxiv) == ARXIV_OPTIONS
    run = invocation(arxiv, roots=[], timeout=3000, memory_mb=4096)
    assert run.options == (*ARXIV_OPTIONS[:-1], f"--path={shipped_bindings()}")
    assert run.read_only == (shipped_bindings(),)
    assert arxiv.preloads == (ARXIV_PRELOAD,) and arxiv.timeout_seconds == 1200
    assert "--noinvisibletimes" in profile_options(arxiv)  # LaTeXML 0.8.8, the workers' version, takes it


def test_options_are_given_over_a_preset_and_the_preset_is_known_again():
    profile = profile_parse({"preset": "arxiv", "timeout_seconds": 600, "includestyles": True}, roots=[])
    assert profile_options(profile) == [ARXIV_OPTIONS[0], "--includestyles", *ARXIV_OPTIONS[1:]]
    assert profile.timeout_seconds == 600 and preset_of(profile) is None
    assert preset_of(profile_parse({"preset": "arxiv"}, roots=[])) == "arxiv"
    assert preset_of(DEFAULT) == "default"


def test_every_option_goes_on_the_command_line_in_a_fixed_order(roots):
    css = str(roots[0] / "style.css")
    profile = profile_parse(
        {"engine": "latexml-oxide", "preloads": ["amsmath.sty", "[ids]latexml.sty"], "noinvisibletimes": True,
         "pmml": True, "css": ["https://example.org/ar5iv.css", css], "paths": [str(roots[0] / "bindings")]},
        roots=roots,
    )  # fmt: skip
    assert profile_options(profile) == [
        "--preload=amsmath.sty", "--preload=[ids]latexml.sty", "--pmml", "--noinvisibletimes",
        "--css=https://example.org/ar5iv.css", f"--css={css}", f"--path={roots[0] / 'bindings'}",
    ]  # fmt: skip


def test_an_option_a_profile_does_not_have_is_refused_by_its_name():
    errors = refused({"preset": "arxiv", "pmml": True, "extra_args": ["--shell-escape"], "--strict": True})
    assert set(errors) == {"extra_args", "--strict"}
    assert "not an option of a profile" in errors["extra_args"][0]
    assert set(refused({"preset": "ar5iv"})) == {"preset"}
    assert set(refused("ar5iv")) == {"preset"}
    assert set(refused(["arxiv"])) == {"profile"}


@pytest.mark.parametrize(
    "preload",
    [
        ARXIV_PRELOAD,
        "latexml.sty",
        "amsmath.sty",
        "[ids,magnify=2]latexml.sty",
        "[draft,scale=1.5]mybinding.sty.ltxml",
        "local_binding-2",
    ],
)
def test_a_preload_is_a_binding_with_option_tokens(preload):
    assert profile_parse({"preloads": [preload]}, roots=[]).preloads == (preload,)


@pytest.mark.parametrize(
    "preload",
    [
        "latexml.sty;rm -rf /",
        "latexml.sty --shell-escape",
        "../escape.sty",
        "/etc/passwd",
        "[ids]",
        "[ids]latexml.sty[x]",
        "[ids;x]latexml.sty",
        "[a b]binding.sty",
        "[key=va lue]binding.sty",
        "[key=$(id)]binding.sty",
        "[,]binding.sty",
        "[unknownoption]latexml.sty",  # latexml.sty takes only the options it declares
        "[magnify=big]latexml.sty",
        "[ids=1]latexml.sty",
        "[magnify]latexml.sty",
        ".hidden.sty",
        "",
    ],
)
def test_a_preload_that_is_not_a_binding_with_option_tokens_is_refused(preload):
    assert set(refused({"preloads": [preload]})) == {"preloads"}


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("pmml", "yes"),
        ("pmml", 1),
        ("nodefaultresources", None),
        ("timeout_seconds", 0),
        ("timeout_seconds", 86_401),
        ("timeout_seconds", True),
        ("timeout_seconds", 5.0),
        ("memory_mb", 63),
        ("preloads", "latexml.sty"),
        ("preloads", ["latexml.sty"] * 17),
        ("engine", "latexmlc --strict"),
        ("engine", "rm -rf"),
        ("engine", "../bin/latexmlc"),
        ("engine", ""),
        ("engine", 7),
        ("css", ["http://example.org/a.css"]),
        ("css", ["https://example.org/a b.css"]),
        ("css", ["https://example.org/a.css\n"]),
        ("css", ["relative.css"]),
        ("paths", ["bindings"]),
        ("paths", ["/\ud800"]),
    ],
)
def test_an_option_with_a_value_it_cannot_take_is_refused_by_its_name(option, value):
    assert set(refused({option: value})) == {option}


def test_limits_are_whole_numbers_in_range_or_null_for_the_workers_own():
    profile = profile_parse({"timeout_seconds": 86_400, "memory_mb": 64}, roots=[])
    assert (profile.timeout_seconds, profile.memory_mb) == (86_400, 64)
    assert profile_parse({"preset": "arxiv", "timeout_seconds": None}, roots=[]).timeout_seconds is None


def test_paths_must_lie_inside_the_roots_with_links_resolved(roots, tmp_path):
    root = roots[0]
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil.css").write_text("x")
    (root / "escape").symlink_to(outside)
    (root / "escape.css").symlink_to(outside / "evil.css")
    (root / "inner").symlink_to(root / "bindings")
    assert profile_parse({"paths": [str(root / "inner")]}, roots=roots).paths == (str(root / "inner"),)
    for option, path in (
        ("paths", root / "escape"),
        ("css", root / "escape.css"),
        ("paths", outside),
        ("engine", outside / "latexmlc"),
    ):
        errors = refused({option: [str(path)] if option != "engine" else str(path)}, roots)
        assert "outside the profile roots" in errors[option][0], errors
    for plain in (f"{root}/../outside", f"{root}/./bindings", f"{root}/bindings/", f"/{root}"):
        assert "without . or .. parts" in refused({"paths": [plain]}, roots)["paths"][0]
    assert "none are configured" in refused({"css": [str(root / "style.css")]}, [])["css"][0]


def test_the_hash_is_the_sha256_of_the_canonical_json_whatever_the_order_given():
    one = profile_parse({"pmml": True, "timeout_seconds": 60, "preset": "default"}, roots=[])
    two = profile_parse({"timeout_seconds": 60, "pmml": True}, roots=[])
    assert one == two and one.canonical() == two.canonical()
    canonical = json.dumps(one.as_json(), sort_keys=True, separators=(",", ":"))
    assert one.canonical() == canonical and one.digest == hashlib.sha256(canonical.encode()).hexdigest()
    assert one.digest != DEFAULT.digest and len({preset.profile.digest for preset in PRESETS.values()}) == 2
    assert profile_load(json.loads(one.canonical())) == one  # as stored, as sent to a worker


def test_the_worker_checks_paths_again_against_its_own_roots_and_binds_them(roots, tmp_path):
    root = roots[0]
    (root / "linked").symlink_to(root / "bindings")
    profile = profile_parse(
        {"css": [str(root / "style.css")], "paths": [str(root / "linked")]}, roots=roots
    )  # the server's roots
    run = invocation(profile, roots=roots, timeout=300, memory_mb=4096)
    assert run.options == (f"--css={root / 'style.css'}", f"--path={root / 'bindings'}")  # links resolved
    assert run.read_only == (root / "style.css", root / "bindings")
    with pytest.raises(ProfileRefused, match="outside the profile roots of this worker"):
        invocation(profile, roots=[tmp_path / "elsewhere"], timeout=300, memory_mb=4096)
    with pytest.raises(ProfileRefused, match="none are configured"):
        invocation(profile, roots=[], timeout=300, memory_mb=4096)
    (root / "style.css").unlink()
    with pytest.raises(ProfileRefused, match="is not a file on this worker"):
        invocation(profile, roots=roots, timeout=300, memory_mb=4096)


def test_the_workers_limits_are_the_ceiling_of_the_profiles():
    long = Profile(timeout_seconds=1200, memory_mb=8192)
    assert (lambda r: (r.timeout, r.memory_mb))(invocation(long, roots=[], timeout=300, memory_mb=4096)) == (300, 4096)
    short = Profile(timeout_seconds=20, memory_mb=512)
    assert (lambda r: (r.timeout, r.memory_mb))(invocation(short, roots=[], timeout=300, memory_mb=4096)) == (20, 512)


def test_an_engine_is_a_name_on_path_or_an_executable_inside_the_roots_whose_root_is_bound(roots, tmp_path):
    root = roots[0]
    engine = root / "oxide" / "bin" / "latexmlc"
    engine.parent.mkdir(parents=True)
    shutil.copy(latexmlc_path(), engine)
    engine.chmod(engine.stat().st_mode | stat.S_IXUSR)
    run = invocation(profile_parse({"engine": str(engine)}, roots=roots), roots=roots, timeout=300, memory_mb=4096)
    assert run.executable == str(engine) and run.read_only == (root,)
    with pytest.raises(ProfileRefused, match="not installed on this worker"):
        invocation(Profile(engine="latexml-oxide-not-here"), roots=roots, timeout=300, memory_mb=4096)
    engine.chmod(0o644)
    with pytest.raises(ProfileRefused, match="not an executable file"):
        invocation(Profile(engine=str(engine)), roots=roots, timeout=300, memory_mb=4096)
    # `latexmlc` is the worker's own: its --latexmlc.
    own = invocation(DEFAULT, roots=[], timeout=300, memory_mb=4096, latexmlc=os.path.realpath(latexmlc_path()))
    assert own.executable == os.path.realpath(latexmlc_path())


def test_a_root_is_absolute_and_never_the_whole_file_system_nor_over_the_sandboxs_own_mounts(tmp_path):
    assert roots_check([str(tmp_path)]) == [tmp_path.resolve()]
    for bad in ("relative/dir", "/", "/usr/.."):
        with pytest.raises(ValueError, match=r"absolute path|cannot be /"):
            roots_check([bad])
    # A root the sandbox would have to bind over its own /tmp is refused when a profile needs it.
    scratch = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        engine = scratch / "latexmlc"
        shutil.copy(latexmlc_path(), engine)
        with pytest.raises(ProfileRefused, match="would cover the sandbox's own /tmp"):
            invocation(Profile(engine=str(engine)), roots=[Path("/tmp")], timeout=300, memory_mb=4096)
    finally:
        shutil.rmtree(scratch)


def test_the_shipped_bindings_are_named_alike_everywhere_and_bound_where_the_sandbox_can_reach_them():
    profile = profile_parse({"paths": ["@bindings"]}, roots=[])  # no root needed: every worker carries them
    assert profile.paths == ("@bindings",)
    assert "@bindings" in profile.canonical()  # the same hash on every machine, wherever the checkout lies
    where = shipped_bindings()
    assert (where / "README.md").is_file() and not under_own_mount(where)
    assert sorted(p.name for p in where.iterdir()) == sorted(
        p.name for p in (Path(__file__).resolve().parents[2] / "conversion" / "bindings").iterdir()
    )
    assert shipped_bindings() == where  # made once: the same copy the next time
    assert set(refused({"paths": ["@other"]})) == {"paths"}
