"""The vocabularies of a conversion, each spelled here once: task statuses (CorTeX's), LaTeXML's status codes,
message severities, the message categories the code itself writes, what a conversion is killed for, and
how it is confined.

They are `enum.IntEnum` and `enum.StrEnum`, not Django's choices, because the worker's library runs without
Django; a member is its value (`TaskStatus.FATAL == -4`, `Severity.INFO == "info"`, the same in SQL, JSON and
f-strings), and the Django apps build their model choices from these (docs/decisions/vocabularies.md).
"""

from __future__ import annotations

from enum import IntEnum, StrEnum


class _Keyed(IntEnum):
    """Numbers whose members' names in lower case are their keys in counts, filters and the API."""

    @property
    def key(self) -> str:
        return self.name.lower()


class TaskStatus(_Keyed):
    """A task's status: 0 TODO, > 0 a lease mark (the dispatcher's random positive number, no member),
    -1..-5 completed, <= -6 blocked (pause writes BLOCKED). Its key: no_problem, warning, ..., todo, blocked."""

    TODO = 0
    NO_PROBLEM = -1
    WARNING = -2
    ERROR = -3
    FATAL = -4
    INVALID = -5
    BLOCKED = -6


# The completed statuses, best first; a document's result is one of these.
COMPLETED: tuple[TaskStatus, ...] = (
    TaskStatus.NO_PROBLEM, TaskStatus.WARNING, TaskStatus.ERROR, TaskStatus.FATAL, TaskStatus.INVALID,
)  # fmt: skip
COMPLETED_NAMES: dict[int, str] = {status.value: status.key for status in COMPLETED}


class LatexmlStatus(_Keyed):
    """LaTeXML's own status codes (`Status:conversion:N`); code c is task status -(c + 1)."""

    NO_PROBLEM = 0
    WARNING = 1
    ERROR = 2
    FATAL = 3


LATEXML_NAMES: dict[int, str] = {code.value: code.key for code in LatexmlStatus}


class Severity(StrEnum):
    """The severity of a stored log message: LaTeXML's Info, Warning, Error and Fatal lines, mildest first
    (the model's choices); a document's messages are shown worst first (SEVERITIES_WORST_FIRST)."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    FATAL = "fatal"


SEVERITIES_WORST_FIRST: tuple[Severity, ...] = tuple(reversed(Severity))


class Category(StrEnum):
    """The message categories that the code writes or reads by name; every other category is LaTeXML's."""

    # The Fatal message that makes a task invalid (`Fatal:invalid:<what>`).
    INVALID = "invalid"
    # The Fatal message of a conversion killed at one of its own limits (`Fatal:limit:disk`): the document's doing.
    LIMIT = "limit"
    # The Fatal message of a conversion the machine ended, not the document (`Fatal:infrastructure:<what>`,
    # an InfrastructureReason): the dispatcher tries the task again, on another worker where one exists,
    # while it has attempts left, and reports count such fatals apart from the converter's.
    INFRASTRUCTURE = "infrastructure"
    # The Fatal message of a task whose service's converter profile its worker cannot run (an engine it lacks,
    # a path outside its roots): `Fatal:profile:refused`.
    PROFILE = "profile"
    # The category whose whats name the files and packages a conversion could not load.
    MISSING_FILE = "missing_file"
    # The output checks' categories (conversion.output_checks, docs/decisions/output-checks.md): what a finished
    # conversion's HTML lost against its TeX source, one category a check.
    OUTPUT_EMPTY = "output_empty"
    OUTPUT_MATH = "output_math"
    OUTPUT_BIBLIOGRAPHY = "output_bibliography"
    OUTPUT_FIGURES = "output_figures"
    OUTPUT_ERRORS = "output_errors"


# CorTeX's own (category, what) for the fatal of a task whose attempts all ended without a result: an
# infrastructure failure by another name, counted and left out with Category.INFRASTRUCTURE.
CORTEX_NEVER_COMPLETED = ("cortex", "never_completed_with_retries")


class PackageKind(StrEnum):
    """What a LaTeX file of definitions is to package attribution (conversion/attribution.py): a package
    (`.sty`) or a class (`.cls`)."""

    PACKAGE = "package"
    CLASS = "class"


class PackageFlag(_Keyed):
    """What a task's log says about one package (conversion/attribution.py), as bits of one number (each
    member one bit; a combination is a plain int).

    Evidence: LOADED (a binding or style file of it was loaded), RAW (only its TeX file was read, no
    LaTeXML binding), MISSING (a `missing_file` warning names it: no binding, or no file at all),
    ERROR_IN_DEFINITIONS (an error or fatal message located in its files); WEAK (an undefined macro or
    environment in a paper whose only missing dependency it is: inferred, never counted as evidence).
    Verdicts: ONLY (the paper's only missing dependency), CLEARS (every error and fatal message of a paper
    that is not error-free is located in it), CLEARS_WEAK (the same when the weak ones count too)."""

    LOADED = 1
    RAW = 2
    MISSING = 4
    ERROR_IN_DEFINITIONS = 8
    WEAK = 16
    ONLY = 32
    CLEARS = 64
    CLEARS_WEAK = 128


# The flags that show trouble with a package: every bit from MISSING up (LOADED and RAW alone show none), so
# `flags >= TROUBLE_FROM` tells them. A closed run keeps the papers behind a package only where they show it.
TROUBLE_FROM = int(PackageFlag.MISSING)

# The flags that are evidence from the log, strongest first; WEAK is shown apart.
PACKAGE_EVIDENCE: tuple[PackageFlag, ...] = (
    PackageFlag.ERROR_IN_DEFINITIONS, PackageFlag.MISSING, PackageFlag.LOADED, PackageFlag.RAW,
)  # fmt: skip


class KillReason(StrEnum):
    """What a conversion was stopped for from outside (or died of out of memory)."""

    TIMEOUT = "timeout"
    MEMORY = "memory"
    PROCESSES = "processes"
    DISK = "disk"
    GOVERNOR = "governor"
    # The kernel's OOM killer ended it for the host's memory, not for its own cgroup's limit.
    HOST_OOM = "host_oom"


class InfrastructureReason(StrEnum):
    """Why the machine, not the document, ended a conversion: the what of a `Fatal:infrastructure` message."""

    GOVERNOR = KillReason.GOVERNOR.value  # the worker's memory governor stopped it
    HOST_OOM = KillReason.HOST_OOM.value  # the kernel's OOM killer, acting for the host's memory
    WORKER_DIED = "worker_died"  # its worker fell silent (killed, crashed, its machine gone)
    LEASE_LOST = "lease_lost"  # its lease ran out with no result and no holder known to be silent


class OutputFormat(StrEnum):
    """An output format latexmlc knows (its --format)."""

    TEX = "tex"
    BOX = "box"
    XML = "xml"
    HTML = "html"
    HTML4 = "html4"
    HTML5 = "html5"
    XHTML = "xhtml"

    @property
    def extension(self) -> str:
        """The file extension a result in this format is written under."""
        return "html" if self in (OutputFormat.HTML4, OutputFormat.HTML5) else self.value


class ConvertEngine(StrEnum):
    """What converted a /convert request: the warm engine (conversion.warm) or a cold latexmlc."""

    WARM = "warm"
    LATEXMLC = "latexmlc"


class Chunk(StrEnum):
    """What a piece of TeX is, going in or coming out of latexmlc (its --whatsin and --whatsout)."""

    DOCUMENT = "document"
    FRAGMENT = "fragment"
    FORMULA = "formula"
    MATH = "math"


class SandboxMode(StrEnum):
    """How a conversion is confined: in bubblewrap, or not at all (a machine that cannot run it, said loudly)."""

    BWRAP = "bwrap"
    NONE = "none"


class SandboxProc(StrEnum):
    """Whether the sandbox has a /proc: one of its own pid namespace, mounted by bwrap, or none at all, where
    the kernel refuses that mount (a container whose /proc has masked paths: docs/decisions/container-sandbox.md)."""

    MOUNT = "mount"
    NONE = "none"


def completed_status_name(status: int) -> str:
    """The name of a completed task status: -1..-5 -> no_problem, warning, error, fatal, invalid."""
    try:
        return COMPLETED_NAMES[status]
    except KeyError:
        raise ValueError(
            f"{status!r} is not a completed task status ({TaskStatus.INVALID.value}..{TaskStatus.NO_PROBLEM.value})"
        ) from None


def task_status_of(status_code: int | None, *, invalid: bool = False) -> int:
    """The completed task status of a log with LaTeXML status code `status_code` (None: no status line)."""
    if invalid:
        return TaskStatus.INVALID.value
    if status_code is None or not LatexmlStatus.NO_PROBLEM <= status_code <= LatexmlStatus.FATAL:
        # No status line means LaTeXML never finished; a code outside 0..3 must not become a
        # non-terminal task status (-(7+1) would read as "blocked").
        return TaskStatus.FATAL.value
    return -(status_code + 1)
