"""Startup logs the operator names on the command line: a file, stdin or a saved ``startup-report --json``,
read for ``startup-report`` and ``startup-diff``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Iterator

from deployctl.errors import InputError
from deployctl.startup.parser import StartupParser, StartupReport


def read_log_lines(source: str) -> Iterator[str]:
    """Lines of a log file or stdin, split on '\\n' only ('\\r' meters stay inside their line)."""
    if source == "-":
        for raw in sys.stdin.buffer:
            yield raw.decode("utf-8", errors="replace")
        return
    try:
        stream = open(source, "rb")
    except OSError as exc:
        raise InputError(f"cannot read {source}: {exc.strerror}") from exc
    with stream:
        for raw in stream:
            yield raw.decode("utf-8", errors="replace")



def load_report(source: str, *, server_info: dict[str, Any] | None = None) -> StartupReport:
    """A report from a log file (or '-') or from a saved ``startup-report --json``."""
    if source != "-" and Path(source).is_file():
        with open(source, "rb") as stream:
            head = stream.read(64).lstrip()
        if head.startswith(b"{"):
            try:
                data = json.loads(Path(source).read_text(encoding="utf-8"))
                return StartupReport.from_dict(data)
            except (ValueError, TypeError) as exc:
                raise InputError(f"{source} looks like JSON but is not a startup report: {exc}",
                                 hint="give a log file or the output of `deployctl startup-report --json`") from exc
    parser = StartupParser(server_info=server_info)
    for line in read_log_lines(source):
        parser.feed(line)
    report = parser.report()
    if not report.sglang_log:
        name = "stdin" if source == "-" else source
        raise InputError(f"{name} is not an SGLang startup log: none of its {report.lines} line(s) is one SGLang "
                         "prints while it starts",
                         hint="give the server's captured stdout/stderr, `journalctl -u UNIT -o cat -a`, or "
                              "`deployctl startup-report --deployment D`")
    return report
