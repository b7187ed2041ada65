"""Log message severities, without Django.

The log parser (`conversion/logparse.py`) writes them on the worker side; the Django apps take the
model's choices, the report pages' message severities (`corpora/statuses.py`), their statements and
their screens from here. Nothing else spells a severity.
"""

from __future__ import annotations


class Severity:
    """The severity of a stored log message: LaTeXML's Info, Warning, Error and Fatal lines."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    FATAL = "fatal"

    # Mildest first (the model's choices); a document's messages are shown worst first.
    ALL: tuple[str, ...] = (INFO, WARNING, ERROR, FATAL)
    WORST_FIRST: tuple[str, ...] = (FATAL, ERROR, WARNING, INFO)


# The category of the Fatal message that makes a task invalid (`Fatal:invalid:<what>`).
INVALID_CATEGORY = "invalid"
# The category of the Fatal message of a conversion killed at one of its limits (`Fatal:limit:disk`), and
# the `what` of one that the worker's memory governor stopped: that is the machine's doing, not the
# document's, and the dispatcher tries the task again while it has attempts left.
LIMIT_CATEGORY = "limit"
GOVERNOR_WHAT = "governor"
# The category of the Fatal message of a task whose service's converter profile its worker cannot run (an
# engine it lacks, a path outside its roots): `Fatal:profile:refused`.
PROFILE_CATEGORY = "profile"
