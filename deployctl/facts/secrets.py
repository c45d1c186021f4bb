"""Which names carry secrets, and how to take their values out of anything deployctl keeps or prints.

Two rules decide a name (a flag, a ServerArgs field, an environment variable, a JSON key):

- SGLang's own fields: exactly the ones in ``SGLANG_SECRET_FIELDS``. Every other field of SGLang's
  ``ServerArgs`` (any version in ``sglang-serverargs-fields.json``) is *not* secret, even when one of its words looks like it (``speculative_num_draft_tokens``,
  ``bucket_time_to_first_token``, ``ssl_keyfile`` — a path): a false positive redacts the unit text and
  then blocks ``rollback --to``.
- Any other name: secret when one of its whole words (split at ``_``, ``-``, ``.`` and camelCase) is in
  ``SECRET_WORDS`` (``HF_TOKEN``, ``OPENAI_API_KEY``, ``DB_PASSWORD``, ``apiKey``). Words, not substrings:
  ``MONKEY``, ``TOKENIZERS_PARALLELISM`` and ``max_total_tokens`` are not secrets.

Values are taken out wherever they can appear in text: ``--flag value`` / ``--flag=value`` (quoted values
with spaces or escaped quotes included), ``NAME=value`` assignments (unit ``Environment=`` lines, Python
``repr`` dumps such as SGLang's ``server_args=ServerArgs(api_key='…')``), ``'name': value`` pairs of a
dict ``repr`` or JSON, ``name: value`` lines, and structures that describe one flag
(``{"flag": "api_key", "before": …, "after": …}``). Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

REDACTED = "<redacted>"

# From SGLang's ServerArgs (0.4.10 … 0.5.23): the fields whose value is a credential. ``ssl_keyfile`` and
# ``ssl_certfile`` are paths (the secret is the file's content, which deployctl never reads).
SGLANG_SECRET_FIELDS = frozenset({"api_key", "admin_api_key", "ssl_keyfile_password", "watermark_key"})

SECRET_WORDS = frozenset({
    "token", "key", "apikey", "secret", "password", "passwd", "passphrase", "pwd", "credential",
    "credentials", "auth", "authorization", "cookie", "privatekey",
})

_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")

# A value as a shell, systemd or Python writes it: bare characters and quoted strings (backslash escapes
# included) up to unquoted whitespace, less the closing brackets / commas of a surrounding repr.
_VALUE = re.compile(r"""(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s"'])+?(?=[,)\]}]*(?:\s|$))""")
_DQ_WORD_REST = re.compile(r'(?:[^"\\]|\\.)*')  # the rest of a "NAME=…" word, up to its closing quote
_SQ_WORD_REST = re.compile(r"(?:[^'\\]|\\.)*")
_NAME = r"[A-Za-z_][A-Za-z0-9_.-]*"
# Where a value follows a name; only the name part is consumed, so "a=b=c" or "'x', '--api-key', 'v'"
# still offer every name.
_LEADS = (
    re.compile(rf"--(?P<name>{_NAME})(?:=|[ \t]+)"),  # --flag value, --flag=value
    re.compile(r"(?P<q>[\"'])(?P<name>[A-Za-z_][A-Za-z0-9_]*)="),  # Environment="NAME=a b"
    re.compile(rf"(?<![\w.\-\"'])(?P<name>{_NAME})="),  # NAME=value, repr keyword api_key='…'
    re.compile(rf"(?P<q>[\"'])(?:--)?(?P<name>{_NAME})(?P=q)\s*[:,]\s*"),  # 'key': v, JSON, argv list
    re.compile(rf"(?<![\w.\-\"'])(?P<name>{_NAME}):[ \t]+"),  # key: value (YAML, a log's "name: value")
)
# A mapping that describes one flag or field ({"flag": "api_key", "before": …, "after": …}): every other
# value in it is that flag's.
_IDENTIFYING_KEYS = ("flag", "name", "field", "key", "dest")
_EMPTY = frozenset({"None", "null", "''", '""'})


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(name)]


@lru_cache(maxsize=1)
def _sglang_fields() -> frozenset[str]:
    data = json.loads(resources.files("deployctl.facts").joinpath("sglang-serverargs-fields.json").read_text())
    return frozenset(name for version in data.values() for name, _default in version["fields"])


@lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True when ``name`` (a flag with or without ``--``, a field, an environment variable) holds a secret."""
    field = name.lstrip("-").replace("-", "_").lower()
    if field in SGLANG_SECRET_FIELDS:
        return True
    if field in _sglang_fields():
        return False
    return any(w in SECRET_WORDS for w in _words(name.lstrip("-")))


def _value_end(text: str, lead: re.Match[str]) -> int | None:
    """Where the secret value after ``lead`` ends, or None when there is no value to take out."""
    q = lead.groupdict().get("q")
    if q and lead[0].endswith("="):  # the quoted word "NAME=…" runs to its closing quote
        rest = (_DQ_WORD_REST if q == '"' else _SQ_WORD_REST).match(text, lead.end())
        end = rest.end() if rest else lead.end()
        return end if end > lead.end() else None
    value = _VALUE.match(text, lead.end())
    if value is None or value[0] in _EMPTY:
        return None
    return value.end()


def _redact_after(text: str, lead_re: re.Pattern[str]) -> str:
    out: list[str] = []
    pos = 0
    for lead in lead_re.finditer(text):
        if lead.start() < pos or not is_secret_name(lead["name"]):
            continue
        end = _value_end(text, lead)
        if end is not None:
            out += [text[pos:lead.end()], REDACTED]
            pos = end
    out.append(text[pos:])
    return "".join(out)


def redact_text(text: str) -> str:
    """``text`` (a unit, a log line, a ``repr`` dump) with the value of every secret-named flag,
    assignment or key replaced by ``<redacted>``."""
    for lead_re in _LEADS:
        if text:
            text = _redact_after(text, lead_re)
    return text


def redact_mapping(values: Mapping[str, Any]) -> dict[str, Any]:
    """A flat mapping (flags, environment) with secret-named entries' values replaced."""
    return {k: (REDACTED if is_secret_name(k) and v not in (None, "") else v) for k, v in values.items()}


def redact(value: Any) -> Any:
    """Any JSON-like value (a startup report, an event's detail, a benchmark result) with secrets taken
    out: secret-named keys lose their value at any depth, and every string goes through ``redact_text``."""
    if isinstance(value, Mapping):
        about = next((value[k] for k in _IDENTIFYING_KEYS if isinstance(value.get(k), str)), None)
        if about is not None and is_secret_name(about):
            return {k: (v if k in _IDENTIFYING_KEYS or v in (None, "", True, False) else REDACTED)
                    for k, v in value.items()}
        return {
            k: (REDACTED if isinstance(k, str) and is_secret_name(k) and v not in (None, "") else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
