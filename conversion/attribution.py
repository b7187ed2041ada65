"""Package attribution: what one task's log messages say about the LaTeX packages and classes it used.

Pure library (standard library only). `attribute` reads the messages `conversion.logparse` makes of a log
and returns one `PackageUse` per package or class the log names, with the evidence for it
(`conversion.choices.PackageFlag`) and its verdicts:
- LOADED / RAW: a `loaded_file` message with the path of its LaTeXML binding (`amsmath.sty.ltxml`) or of
  its TeX file (`keyval.sty`); RAW when no binding of it was loaded, only its TeX;
- MISSING: a `missing_file` warning whose details say "Can't find [binding for] package|class NAME";
- ERROR_IN_DEFINITIONS: an error or fatal message whose details give a location in one of its files
  ("at /usr/share/.../foo.sty; line 12", "In Core::Definition[...] /usr/.../foo.sty.ltxml; line 40"):
  the error arose while LaTeXML read or ran that package's definitions;
- WEAK: an undefined macro or environment (category `undefined`) that no location ties to a package, in a
  paper whose only missing package is this one. Inferred, so it is kept apart and never counts as evidence.
- ONLY: the paper's only missing package or class (no file, or no LaTeXML binding);
- CLEARS: the paper is not error-free (error or fatal) and every one of its error and fatal messages is
  located in this package: with its messages gone the paper would be no_problem or warning. LaTeXML's
  `too_many_errors` fatal follows the errors it counts. CLEARS_WEAK
  is the same with the weak attributions counted.

LaTeXML's own pools (`LaTeX.pool.ltxml`) are the converter, not a package, and are never attributed.
Messages the service writes itself (invalid, limit, profile, infrastructure, output checks) carry no
location in a package and are never attributed: they keep a paper from being cleared.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from conversion.choices import PACKAGE_EVIDENCE, Category, PackageFlag, PackageKind, Severity, TaskStatus

NAME_MAX = 100
LOADED_FILE = "loaded_file"
UNDEFINED = "undefined"
# LaTeXML's Fatal after 100 errors: a consequence of the others, so it follows them (it clears with them).
TOO_MANY_ERRORS = "too_many_errors"
# Categories whose messages are the service's verdicts, the machine's failures or missing files, not errors in
# a package's code.
NOT_LOCATED = frozenset(
    {Category.MISSING_FILE, Category.INVALID, Category.LIMIT, Category.PROFILE, Category.INFRASTRUCTURE}
)
_EXTENSIONS = {"sty": PackageKind.PACKAGE.value, "cls": PackageKind.CLASS.value}
# A location in LaTeXML's details: a file name (any path before it) then "; line N" or "; from line N";
# the file name is found before each "; " (str methods: a pattern scanning 2,000 characters of details
# for a name of any length backtracks at every position).
_LOCATED = re.compile(r"; (?:from )?line ")
# The details of a missing package or class (LaTeXML's Package.pm, InputDefinitions and LoadClass).
_MISSING_DETAILS = re.compile(r"^Can't find (?:binding for )?(package|class) (\S+)")
_ERRORS = (Severity.ERROR.value, Severity.FATAL.value)
# The flags as plain numbers: IntFlag's operators cost microseconds each, and ingestion runs this per task.
_LOADED, _RAW, _IS_MISSING, _IN_DEFINITIONS, _WEAK, _ONLY, _CLEARS, _CLEARS_WEAK = (int(flag) for flag in PackageFlag)


class PackageUse(NamedTuple):
    """One package or class of one task: its kind, its name, its PackageFlag bits, and how many of the
    task's error and fatal messages are located in it. (A named tuple, as logparse's Message: ingestion
    makes about fifty a task.)"""

    kind: str
    name: str
    flags: int
    errors: int


@functools.lru_cache(maxsize=8192)
def package_of_path(path: str) -> tuple[str, str, bool] | None:
    """(kind, name, is a LaTeXML binding) of a loaded file's path; None for anything but a package or class
    (pools, .def, .cfg, .tex files). Cached: every paper loads much the same hundred files."""
    base = path[path.rfind("/") + 1 :].rstrip()
    binding = base.endswith(".ltxml")
    if binding:
        base = base[: -len(".ltxml")]
    stem, dot, extension = base.rpartition(".")
    kind = _EXTENSIONS.get(extension)
    if not dot or not stem or kind is None:
        return None
    return kind, stem[:NAME_MAX], binding


def located_packages(details: str) -> list[tuple[str, str]]:
    """The (kind, name) of every package or class file that a message's details give as a location, in
    the order they appear, each once."""
    found: dict[tuple[str, str], None] = {}
    if ".sty" not in details and ".cls" not in details:
        return []
    for match in _LOCATED.finditer(details):
        before = details[: match.start()]
        start = max(before.rfind(" "), before.rfind("\n"), before.rfind("\t"))
        package = package_of_path(before[start + 1 :])
        if package is not None:
            found[package[:2]] = None
    return list(found)


def attribute(messages: Iterable[Sequence[str]], status: int) -> list[PackageUse]:
    """The packages and classes one task's log names, with evidence and verdicts (module docstring).
    `messages` are (severity, category, what, details) in log order; `status` the task's TaskStatus."""
    flags: dict[tuple[str, str], int] = {}
    errors: dict[tuple[str, str], int] = {}
    binding: set[tuple[str, str]] = set()
    blocking: list[tuple[tuple[str, str], ...]] = []  # per error/fatal message, the packages it is located in
    undefined: list[int] = []  # indexes into blocking of unlocated undefined errors
    fatal_seen = False
    for severity, category, what, details in messages:
        if category == LOADED_FILE:
            found = package_of_path(what)
            if found is not None:
                key = found[:2]
                flags[key] = flags.get(key, 0) | _LOADED
                if found[2]:
                    binding.add(key)
            continue
        if category == Category.MISSING_FILE:
            missing = _MISSING_DETAILS.match(details)
            if missing is not None and severity not in _ERRORS:
                key = (PackageKind(missing.group(1)).value, what[:NAME_MAX])
                flags[key] = flags.get(key, 0) | _IS_MISSING
        if severity not in _ERRORS:
            continue
        fatal_seen = fatal_seen or severity == Severity.FATAL
        if category == TOO_MANY_ERRORS:
            continue
        located = () if category in NOT_LOCATED else tuple(located_packages(details))
        for key in located:
            flags[key] = flags.get(key, 0) | _IN_DEFINITIONS
            errors[key] = errors.get(key, 0) + 1
        if not located and category == UNDEFINED:
            undefined.append(len(blocking))
        blocking.append(located)

    for key, value in flags.items():
        if value & _LOADED and key not in binding and not value & _IS_MISSING:
            flags[key] = value | _RAW
    missing_keys = [key for key, value in flags.items() if value & _IS_MISSING]
    only = missing_keys[0] if len(missing_keys) == 1 else None
    weak = blocking.copy()
    if only is not None:
        flags[only] |= _ONLY
        if undefined:
            flags[only] |= _WEAK
            for index in undefined:
                weak[index] = (only,)
    clearable = status in (TaskStatus.ERROR, TaskStatus.FATAL) and bool(blocking)
    clearable = clearable and (status != TaskStatus.FATAL or fatal_seen)
    if clearable:
        # A package clears the paper only if every blocking message is located in it, so only the first
        # message's packages are candidates: a few checks a paper, not one per package and message.
        for key in {*blocking[0], *weak[0]}:
            if all(key in located for located in blocking):
                flags[key] |= _CLEARS | _CLEARS_WEAK
            elif all(key in located for located in weak):
                flags[key] |= _CLEARS_WEAK
    new = tuple.__new__
    return [new(PackageUse, (kind, name, value, errors.get((kind, name), 0))) for (kind, name), value in flags.items()]


def evidence_names(flags: int) -> list[str]:
    """The names of the evidence bits set in `flags`, strongest first, then `weak` when set."""
    names = [flag.key for flag in PACKAGE_EVIDENCE if flags & flag]
    return names + ([PackageFlag.WEAK.key] if flags & PackageFlag.WEAK else [])
