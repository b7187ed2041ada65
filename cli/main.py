"""The `ccs` command: the Typer application built from the command table (cli/spec.py), plus login,
doctor, watch, the streamed downloads, and the exit codes: 0 success, 1 an error from the server (its
problem's title and detail) or a failed job, 2 a usage error, 3 a run that closed with new failures when
--fail-on-new-failures asked for it."""

from __future__ import annotations

import functools
import getpass
import inspect
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional

import httpx
import typer

from cli.choices import Shell
from cli.client import ApiError, Client, CliError
from cli.jobs import job_follow, job_uuid
from cli.layouts import LAYOUTS
from cli.output import LINK, err, out, raw_json, render
from cli.settings import DEFAULT_URL, URL_ENV, Settings, SettingsProblem, settings_load, settings_save
from cli.spec import CONFIG_READ, READS, WRITES, Command, UsageProblem, body_of, path_of, plan_of, query_of, segment
from cli.watch import EXIT_NEW_FAILURES, run_watch

HELP = """The command-line twin of the Corpus Conversion Service's API.

Reads print tables for a person, or with --json the API's JSON exactly as it answered (one page of a
paginated list: the page options are passed through). Writes print their plan and change nothing unless
--yes is given; --wait follows the job a write starts, and for activate and rerun the run to its close
(as `ccs watch`). The server and token come from CCS_URL / CCS_TOKEN, else from `ccs login`; without
either, ccs talks to the default server DEFAULT (`ccs status` and `ccs doctor` say which server answered).

Exit codes: 0 success, 1 an error (from the server, or a failed job), 2 a usage error, 3 a run that
closed with new failures when --fail-on-new-failures asks for it.""".replace("DEFAULT", DEFAULT_URL)

app = typer.Typer(
    name="ccs", help=HELP, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)  # fmt: skip
delete_app = typer.Typer(help="Delete a corpus, a service, or a screen session (with --yes).", no_args_is_help=True)
config_app = typer.Typer(help=CONFIG_READ.help + " `ccs config set KEY VALUE` changes one.")
experiment_app = typer.Typer(help="Start a profile experiment on a pair, or show one.", no_args_is_help=True)
app.add_typer(delete_app, name="delete")
app.add_typer(experiment_app, name="experiment")
app.add_typer(config_app, name="config", invoke_without_command=True)


def handled(function: Callable[..., Any]) -> Callable[..., Any]:
    """Errors in words and exit codes, never a traceback."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except UsageProblem as exc:
            raise typer.BadParameter(str(exc)) from None
        except ApiError as exc:
            err.print(f"ccs: {exc.title} ({exc.status}): {exc.detail}", markup=False)
            if exc.errors:
                err.print(f"     {json.dumps(exc.errors, ensure_ascii=False)}", markup=False)
            raise typer.Exit(1) from None
        except (CliError, SettingsProblem) as exc:
            err.print(f"ccs: {exc}", markup=False)
            raise typer.Exit(1) from None

    return wrapper


def client() -> Client:
    return Client(settings_load())


# --- building commands from the table ---

JSON_HELP = "print the API's JSON exactly as it answered"


def _parameters(command: Command) -> list[inspect.Parameter]:
    made = []
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    for param in command.params:
        flag = "--" + param.name.replace("_", "-")
        if param.positional:
            annotation: Any = param.type if param.required else Optional[param.type]  # noqa: UP045 (typer reads it)
            default = typer.Argument(
                ... if param.required else None, help=param.help, metavar=param.name.upper(), show_default=False
            )
        elif param.type is bool:
            annotation, default = bool, typer.Option(False, flag, help=param.help)
        elif param.type is list:
            annotation, default = Optional[list[str]], typer.Option(None, flag, help=param.help, show_default=False)  # noqa: UP045
        else:
            annotation = Optional[param.type]  # noqa: UP045
            default = typer.Option(None, flag, help=param.help, show_default=False)
        made.append(inspect.Parameter(param.name, kind, default=default, annotation=annotation))
    made.append(
        inspect.Parameter("json_", kind, default=typer.Option(False, "--json", help=JSON_HELP), annotation=bool)
    )
    if command.write:
        made.append(inspect.Parameter(
            "yes", kind, default=typer.Option(False, "--yes", "-y", help="do it (without: print the plan only)"),
            annotation=bool,
        ))  # fmt: skip
    if command.opens_run:
        made += _run_options(kind)
    elif command.job or command.wait_read:
        made.append(inspect.Parameter(
            "wait", kind, default=typer.Option(False, "--wait", help="follow the job to its end; exit 1 if it fails"),
            annotation=bool,
        ))  # fmt: skip
    return made


WAIT_RUN_HELP = "follow the job, then the run it opens to its close (as `ccs watch`); exit 1 if the job fails"
INTERVAL_HELP = "seconds between two reads of the run"
FAIL_HELP = f"exit {EXIT_NEW_FAILURES} when the run closes with new failures (documents failed that were better before)"
INTERVAL_SECONDS = 1.0


def _run_options(kind: Any) -> list[inspect.Parameter]:
    return [
        inspect.Parameter("wait", kind, default=typer.Option(False, "--wait", help=WAIT_RUN_HELP), annotation=bool),
        inspect.Parameter(
            "interval",
            kind,
            default=typer.Option(INTERVAL_SECONDS, "--interval", help=INTERVAL_HELP, min=0.1),
            annotation=float,
        ),
        inspect.Parameter(
            "fail_on_new_failures",
            kind,
            default=typer.Option(False, "--fail-on-new-failures", help=FAIL_HELP),
            annotation=bool,
        ),
    ]


def _command_function(command: Command) -> Callable[..., None]:
    def run(**values: Any) -> None:
        (write if command.write else read)(command, values)

    parameters = _parameters(command)
    run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
    run.__name__ = command.name.replace("-", "_")
    return handled(run)


def _register(command: Command, target: typer.Typer) -> None:
    target.command(name=command.name, help=command.help)(_command_function(command))


@handled
def read(command: Command, values: dict[str, Any]) -> None:
    as_json, wait = values.pop("json_"), values.pop("wait", False)
    settings = settings_load()
    with Client(settings) as api:
        response = api.send("GET", path_of(command, values), params=query_of(command, values))
        if command.wait_read and wait:
            _finish(api, values["uuid"], as_json)
            return
    if as_json:
        raw_json(response.content)
        return
    # `ccs status` says which server answered: two stacks on one machine look alike otherwise.
    preface = [("server", settings.url_words, LINK)] if command.name == "status" else []
    render(response.json(), LAYOUTS.get(command.words), base=settings.url, preface=preface)


def _finish(api: Client, uuid: str, as_json: bool) -> dict[str, Any]:
    """Follow the job to its end: exit 1 when it did not succeed; else the job."""
    job, response = job_follow(api, uuid)
    if as_json:
        raw_json(response.content)
    if job["state"] != "succeeded":
        err.print(f"ccs: job {uuid} ({job['kind']}) {job['state']}: {job.get('message') or 'no message'}", markup=False)
        raise typer.Exit(1)
    if not as_json:
        out.print(f"job {uuid} ({job['kind']}) succeeded" + (f": {job['message']}" if job.get("message") else ""))
    return job


@handled
def write(command: Command, values: dict[str, Any]) -> None:
    as_json, yes, wait = values.pop("json_"), values.pop("yes"), values.pop("wait", False)
    interval, failing = values.pop("interval", INTERVAL_SECONDS), values.pop("fail_on_new_failures", False)
    path, query, body = path_of(command, values), query_of(command, values), body_of(command, values)
    settings = settings_load()
    lines = [f"Plan: {plan_of(command, values)}.", f"  {command.method} {httpx.URL(settings.url + path, params=query)}"]
    if body is not None:
        lines.append(f"  body: {json.dumps(body, ensure_ascii=False)}")
    shown = err if as_json or yes else out
    for line in lines:
        shown.print(line, markup=False, soft_wrap=True)
    if not yes:
        shown.print("Dry run: nothing was changed. Run it again with --yes to do it.")
        return
    with Client(settings) as api:
        response = api.send(command.method, path, params=query, body=body)
        answer = response.json() if response.content else None
        uuid = job_uuid(command.job, answer, response.headers)
        if wait and command.opens_run:
            if uuid:
                job = _finish(api, uuid, as_json)
                run_id = (job.get("result") or {}).get("run_id")
            else:
                if as_json:
                    raw_json(response.content)
                else:
                    render(answer, base=settings.url)
                run_id = (answer or {}).get("run_id")
            code = run_watch(
                api, values["corpus"], values["service"], run_id=run_id, interval=interval,
                fail_on_new_failures=failing, summary_to_stderr=as_json,
            )  # fmt: skip
            raise typer.Exit(code)
        if wait and uuid:
            _finish(api, uuid, as_json)
            return
    if as_json:
        if response.content:
            raw_json(response.content)
        return
    if answer is not None:
        render(answer, base=settings.url)
    else:
        files = response.headers.get("X-Result-Files")
        out.print(f"done ({response.status_code})" + (f"; result files: {files}" if files is not None else ""))
    if wait and not uuid:
        out.print("no job to wait for: the server did it at once")
    elif uuid:
        out.print(f"job {uuid} started; follow it with: ccs job {uuid} --wait")


GROUPS = {"delete": delete_app, "config": config_app, "experiment": experiment_app}
for _command in (*READS, *WRITES):
    _register(_command, GROUPS.get(_command.group or "", app))


@config_app.callback()
@handled
def config_read(ctx: typer.Context, json_: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False) -> None:
    """The effective configuration (without a subcommand); `ccs config set KEY VALUE` changes a value."""
    if ctx.invoked_subcommand is None:
        read(CONFIG_READ, {"json_": json_})


# --- downloads: the messages of a slice and an export's files, streamed to a file or stdout ---


def _stream(path: str, query: dict[str, Any], output: Path | None) -> None:
    with client() as api:
        sink = output.open("wb") if output else sys.stdout.buffer
        try:
            for chunk in api.stream(path, params=query):
                sink.write(chunk)
        except BaseException:
            if output:
                sink.close()
                output.unlink(missing_ok=True)
            raise
        if output:
            sink.close()
            err.print(f"wrote {output}", markup=False)
        else:
            sink.flush()


Opt = typer.Option
Arg = typer.Argument
# The arguments and the option the streaming commands share.
CorpusArg = Annotated[str, Arg(help="the corpus's name", show_default=False)]
ServiceArg = Annotated[str, Arg(help="the service's name", show_default=False)]
OutputOpt = Annotated[Optional[Path], Opt("--output", "-o", help="write to this file, not stdout")]  # noqa: UP045


@app.command(help="Every message of a pair or of a slice of it, as csv, jsonl or parquet (streamed).")
@handled
def messages(
    corpus: CorpusArg,
    service: ServiceArg,
    severity: Annotated[Optional[str], Opt(help="a severity: its report page's tasks")] = None,  # noqa: UP045
    category: Annotated[Optional[str], Opt(help="a category (needs --severity)")] = None,  # noqa: UP045
    what: Annotated[Optional[str], Opt(help="a what (needs --category)")] = None,  # noqa: UP045
    format: Annotated[str, Opt("--format", help="csv, jsonl or parquet")] = "csv",
    output: OutputOpt = None,
) -> None:
    query = {"severity": severity, "category": category, "what": what, "format": format}
    _stream(f"/api/reports/{segment(corpus)}/{segment(service)}/messages", query, output)


@app.command(
    "package-export", help="Every (package, paper) row of a pair's package ranking, or a run's, as CSV (streamed)."
)
@handled
def package_export(
    corpus: CorpusArg,
    service: ServiceArg,
    run: Annotated[Optional[int], Opt(help="a run's id (default: the tasks now)")] = None,  # noqa: UP045
    output: OutputOpt = None,
) -> None:
    _stream(f"/api/runs/{segment(corpus)}/{segment(service)}/packages/export", {"run": run}, output)


@app.command(help="Download an archive (or manifest.json) of a finished dataset export (see `ccs exports`).")
@handled
def download(
    out_dir: Annotated[str, Arg(help="the export's directory name", metavar="OUT", show_default=False)],
    name: Annotated[str, Arg(help="the file: an archive's name or manifest.json", show_default=False)],
    output: Annotated[Optional[Path], Opt("--output", "-o", help="write here (default: NAME)")] = None,  # noqa: UP045
) -> None:
    _stream(f"/api/exports/{segment(out_dir)}/{segment(name)}", {}, output or Path(name))


@app.command(
    help="A document's converted paper: its HTML, or with MEMBER another file of its result (an image, the CSS), "
    "streamed to stdout or a file."
)
@handled
def paper(
    corpus: CorpusArg,
    service: ServiceArg,
    name: Annotated[str, Arg(help="the document's name", show_default=False)],
    member: Annotated[Optional[str], Arg(help="a file of the result (default: its HTML)", show_default=False)] = None,  # noqa: UP045
    output: OutputOpt = None,
) -> None:
    document = f"/api/corpus/{segment(corpus)}/{segment(service)}/document/{segment(name)}"
    if member is None:
        # The HTML is a redirect to its member, whose relative references name the other members.
        with client() as api:
            location = api.send("GET", f"{document}/html").headers.get("Location", "")
        if not location.startswith(f"{document}/files/"):
            raise CliError(f"GET {document}/html did not name the paper's HTML (Location: {location!r})")
        _stream(location, {}, output)
    else:
        _stream(f"{document}/files/{segment(member, True)}", {}, output)


@app.command(
    help="Convert TeX with LaTeXML on the server (POST /convert, which stores nothing): the result on stdout, "
    "the status on stderr; with --json the API's answer (result, log, status)."
)
@handled
def convert(
    source: Annotated[str, Arg(help="a TeX file, or - for stdin", show_default=False)],
    format: Annotated[str, Opt("--format", help="html5, html4, xhtml or xml")] = "html5",
    whatsin: Annotated[str, Opt("--whatsin", help="document, fragment or math")] = "document",
    whatsout: Annotated[str, Opt("--whatsout", help="document, fragment or math")] = "document",
    timeout: Annotated[Optional[int], Opt("--timeout", help="seconds (the server's limit applies)")] = None,  # noqa: UP045
    pmml: Annotated[bool, Opt("--pmml", help="presentation MathML")] = False,
    cmml: Annotated[bool, Opt("--cmml", help="content MathML")] = False,
    includestyles: Annotated[bool, Opt("--includestyles", help="let LaTeXML load the document's own styles")] = False,
    json_: Annotated[bool, Opt("--json", help=JSON_HELP)] = False,
) -> None:
    try:
        tex = sys.stdin.read() if source == "-" else Path(source).read_text()
    except OSError as exc:
        raise UsageProblem(f"cannot read {source}: {exc.strerror}") from exc
    form = {"tex": tex, "format": format, "whatsin": whatsin, "whatsout": whatsout, "timeout": timeout}
    form |= {name: "true" for name, on in (("pmml", pmml), ("cmml", cmml), ("includestyles", includestyles)) if on}
    with client() as api:
        response = api.send("POST", "/convert", form={k: v for k, v in form.items() if v is not None})
    if json_:
        raw_json(response.content)
        return
    answer = response.json()
    sys.stdout.write(answer["result"] + ("" if answer["result"].endswith("\n") else "\n"))
    err.print(f"status: {answer['status']}", markup=False)


@app.command(
    help="Follow a pair's open run to its close: a progress bar (done of total, failures, rate in tasks/s, ETA) on "
    "stderr, plain lines at most every few seconds when stderr is not a terminal, then the closed run and its "
    "new failures (documents failed that were better in the snapshot before). Without an open run, the latest "
    f"run. Exit 0 when the run closes; {EXIT_NEW_FAILURES} with --fail-on-new-failures when it closed with new "
    "failures; 1 on an error."
)
@handled
def watch(
    corpus: Annotated[str, Arg(help="the corpus's name", metavar="CORPUS", show_default=False)],
    service: Annotated[str, Arg(help="the service's name", metavar="SERVICE", show_default=False)],
    interval: Annotated[float, Opt("--interval", help=INTERVAL_HELP, min=0.1)] = INTERVAL_SECONDS,
    fail_on_new_failures: Annotated[bool, Opt("--fail-on-new-failures", help=FAIL_HELP)] = False,
) -> None:
    with client() as api:
        code = run_watch(api, corpus, service, interval=interval, fail_on_new_failures=fail_on_new_failures)
    raise typer.Exit(code)


# --- login and doctor ---


def _token_read(url: str) -> str:
    """From a hidden prompt on a terminal, else the first line of stdin: never from argv."""
    if sys.stdin.isatty():
        return getpass.getpass(f"Token for {url}: ").strip()
    return sys.stdin.readline().strip()


@app.command(
    help="Save the server's URL and a token in the config file (mode 0600). The token is read from a hidden "
    "prompt, or from stdin when stdin is not a terminal; never from the command line."
)
@handled
def login(
    url: Annotated[Optional[str], Opt("--url", help=f"the server (default ${URL_ENV} or the saved one)")] = None,  # noqa: UP045
    check: Annotated[bool, Opt("--check/--no-check", help="try the token on the server before saving it")] = True,
) -> None:
    url = (url or os.environ.get(URL_ENV) or settings_load().url).rstrip("/")
    token = _token_read(url)
    if not token:
        raise UsageProblem("no token given")
    if check:
        with Client(Settings(url=url, token=token, source="login")) as api:
            api.send("GET", "/api/jobs", params={"limit": 1})
    path = settings_save(url, token)
    out.print(f"Token {'accepted by' if check else 'saved for'} {url}; saved in {path} (mode 0600).", markup=False)


@app.command(
    help="Check the server and, when run on it, this machine: one line per check with a remediation; exit 1 "
    "on a problem."
)
@handled
def doctor(
    local: Annotated[
        Optional[bool],  # noqa: UP045
        Opt("--local/--remote", help="check this machine as the server's (default: when the URL is this machine)"),
    ] = None,
) -> None:
    from cli.doctor import doctor_run

    raise typer.Exit(doctor_run(settings_load(), local))


@app.command(
    help='Print the completion script for bash or zsh: eval "$(ccs completion bash)" in ~/.bashrc, or '
    "`ccs --install-completion` for the shell you are in."
)
def completion(
    shell: Annotated[Shell, Arg(help="bash or zsh", show_default=False)],
) -> None:
    # The script `--show-completion` prints for the shell it detects, here for the shell named; Typer has no
    # public name for it (tests/cli/test_login_doctor.py runs the scripts' completion, so a change shows).
    from typer._completion_shared import get_completion_script

    sys.stdout.write(get_completion_script(prog_name="ccs", complete_var="_CCS_COMPLETE", shell=shell.value) + "\n")


def main() -> None:
    app(prog_name="ccs")


if __name__ == "__main__":
    main()
