"""Pass 2 of inventory validation: what the values mean, on the raw parsed data.

Flag and environment values, references between sections, inheritance cycles, control characters
anywhere, unit names and ports unique per host, policy overrides. Tolerant of whatever pass 1 (the
models in ``deployctl.inventory.schema``) rejected, so both passes' problems are reported together.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from pydantic import ValidationError

from deployctl.facts.secrets import is_secret_name
from deployctl.inventory.flags import ALIASES, KNOWN_FLAGS, RESERVED_ENV, RESERVED_FLAGS
from deployctl.inventory.layers import deep_merge, layered
from deployctl.inventory.marked_yaml import MarkedYaml
from deployctl.inventory.policy import Policy
from deployctl.inventory.problems import Problem, dotted
from deployctl.inventory.pydantic_problems import pydantic_message, show_value
from deployctl.inventory.schema import EnvRef
from deployctl.unit_escape import ENV_NAME, forbidden_character

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_FLAG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class Checks:
    """The second pass: meaning, on the raw parsed data (tolerant of whatever pass 1 rejected)."""

    def __init__(self, marked: MarkedYaml, file: str) -> None:
        self.marked = marked
        self.file = file
        self.problems: list[Problem] = []
        # (section path) → checked flags/env mapping, for the models after validation.
        self.normalized: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.env_refs: list[tuple[Any, ...]] = []  # where a flag's value is {env: NAME}

    def add(self, path: tuple[Any, ...], message: str) -> None:
        self.problems.append(Problem(self.file, self.marked.line_of(path), dotted(path), message))

    def run(self) -> None:
        data = self.marked.data
        self._control_characters(data, ())
        hosts = _mapping(data.get("hosts"))
        models = _mapping(data.get("models"))
        for section, entries in (("hosts", hosts), ("models", models), ("deployments", _mapping(data.get("deployments")))):
            self._names(entries, (section,))
        for name, host in hosts.items():
            host = _mapping(host)
            if not host.get("simulated") and host.get("python") is None:
                self.add(("hosts", name), "python: required for a host that is not simulated (the SGLang venv's interpreter)")
        for name, preset in models.items():
            preset = _mapping(preset)
            self._flags(("models", name, "flags"), preset.get("flags"))
            self._env(("models", name, "env"), preset.get("env"))
        seen_units: dict[tuple[Any, Any], str] = {}
        seen_ports: dict[tuple[Any, Any], str] = {}
        for name, dep in _mapping(data.get("deployments")).items():
            dep = _mapping(dep)
            self._deployment(name, dep, hosts, models, data.get("policy"))
            for seen, field in ((seen_units, "unit"), (seen_ports, "port")):
                key = (dep.get("host"), dep.get(field))
                if key[1] is None:
                    continue
                if key in seen:
                    self.add(("deployments", name, field),
                             f"{field} {key[1]!r} is already used by deployment {seen[key]!r} on host {key[0]!r}")
                else:
                    seen[key] = name

    # -- pieces

    def _control_characters(self, node: Any, path: tuple[Any, ...]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str) and (bad := forbidden_character(key)):
                    self.add(path + (key,), f"the key contains {bad}")
                self._control_characters(value, path + (key,))
        elif isinstance(node, list):
            for index, item in enumerate(node):
                self._control_characters(item, path + (index,))
        elif isinstance(node, str) and (bad := forbidden_character(node)):
            self.add(path, f"contains {bad}, which may not appear in a unit file")

    def _names(self, entries: Mapping[Any, Any], path: tuple[Any, ...]) -> None:
        for name in entries:
            if isinstance(name, str) and forbidden_character(name):
                continue  # reported as a control character
            if not (isinstance(name, str) and _NAME.fullmatch(name)):
                self.add(path + (name,), "names are letters, digits and . _ - (starting with a letter or digit)")

    def _deployment(self, name: str, dep: Mapping[str, Any], hosts: Mapping[Any, Any],
                    models: Mapping[Any, Any], global_policy: Any) -> None:
        path = ("deployments", name)
        host, model = dep.get("host"), dep.get("model")
        # References into a section that is itself malformed would only repeat its problem; an absent
        # or empty section is no excuse.
        if isinstance(host, str) and self._referable("hosts") and host not in hosts:
            self.add(path + ("host",), f"unknown host {host!r} (known: {', '.join(map(str, hosts)) or 'none'})")
        if isinstance(model, str) and self._referable("models") and model not in models:
            self.add(path + ("model",), f"unknown model preset {model!r} (known: {', '.join(map(str, models)) or 'none'})")
        profiles = _mapping(dep.get("profiles"))
        self._names(profiles, path + ("profiles",))
        for pname, profile in profiles.items():
            profile = _mapping(profile)
            ppath = path + ("profiles", pname)
            self._flags(ppath + ("flags",), profile.get("flags"))
            self._env(ppath + ("env",), profile.get("env"))
            parent = profile.get("extends")
            if isinstance(parent, str) and parent not in profiles:
                self.add(ppath + ("extends",), f"unknown profile {parent!r} (known: {', '.join(map(str, profiles))})")
        refs = [ref for ref in self.env_refs if ref[:2] == path]
        if refs and not dep.get("environment_file"):
            self.add(refs[0], "{env: NAME} is filled in from the deployment's environment_file, and it has none:"
                              " set environment_file (a root-only file with NAME=value)")
        self._inheritance(path, profiles, _mapping(models.get(model)) if isinstance(model, str) else {})
        if isinstance(dep.get("policy"), dict):
            self._policy(path, dep["policy"], global_policy)

    def _referable(self, section: str) -> bool:
        return isinstance(self.marked.data.get(section), (dict, type(None)))

    def _inheritance(self, path: tuple[Any, ...], profiles: Mapping[Any, Any], preset: Mapping[str, Any]) -> None:
        for start in profiles:
            chain = [start]
            while isinstance(parent := _mapping(profiles.get(chain[-1])).get("extends"), str) and parent in profiles:
                if parent in chain:
                    if parent == start:  # report each cycle once per member, at its own extends:
                        cycle = " -> ".join(map(str, chain + [parent]))
                        self.add(path + ("profiles", start, "extends"), f"inheritance cycle: {cycle}")
                    break
                chain.append(parent)
            else:
                self._aliases(path, list(reversed(chain)), profiles, preset)

    def _aliases(self, path: tuple[Any, ...], chain: list[Any], profiles: Mapping[Any, Any],
                 preset: Mapping[str, Any]) -> None:
        layers = [("preset", _mapping(preset.get("flags")))]
        layers += [(name, _mapping(_mapping(profiles[name]).get("flags"))) for name in chain]
        merged = layered(layer for _, layer in layers)
        where = {flag: name for name, layer in layers for flag, value in layer.items() if value is not None}
        for group in ALIASES:
            present = [flag for flag in merged if flag in group]
            if len(present) > 1 and where.get(present[-1]) == chain[-1]:
                self.add(path + ("profiles", chain[-1], "flags", present[-1]),
                         f"the same SGLang option as {present[0]!r}; set it once (null removes an inherited one)")

    def _flags(self, path: tuple[Any, ...], flags: Any) -> None:
        out: dict[str, Any] = {}
        self.normalized[path] = out
        if not isinstance(flags, dict):
            return  # pass 1 reports a wrong type; None means no flags
        for name, value in flags.items():
            fpath = path + (name,)
            if isinstance(name, str) and forbidden_character(name):
                continue  # reported as a control character
            if not isinstance(name, str) or not _FLAG_NAME.fullmatch(name):
                hint = " (write flag names without the leading '--')" if str(name).startswith("-") else ""
                self.add(fpath, f"not a flag name{hint}: use letters, digits and - _ .")
                continue
            if name in RESERVED_FLAGS:
                self.add(fpath, f"not set here: {RESERVED_FLAGS[name]}")
                continue
            checked = self._flag_value(fpath, name, value)
            if checked is not _INVALID:
                out[name] = checked

    def _flag_value(self, path: tuple[Any, ...], name: str, value: Any) -> Any:
        if value is None:
            return None
        known = KNOWN_FLAGS.get(name)
        kind = known.kind if known else None
        if isinstance(value, bool):
            if kind in ("int", "float", "value"):
                return self._invalid(path, f"--{name} takes a value; true/false would pass or drop a bare switch")
            return value
        if kind == "switch":
            return self._invalid(path, f"--{name} is a switch: expected true (pass it), false or null, got {show_value(value)}")
        if isinstance(value, dict):
            if set(value) == {"env"}:
                return self._env_ref(path, name, value["env"])
            return self._invalid(path, "expected a value, true/false, a list of values, or {env: NAME}; got a mapping")
        if is_secret_name(name) and not isinstance(value, list):
            return self._invalid(path, f"--{name} holds a secret, and the inventory is not a secret store: put it in"
                                       f" the deployment's environment_file (e.g. {_env_name(name)}=…) and write"
                                       f" `{name}: {{env: {_env_name(name)}}}`")
        if isinstance(value, list):
            if kind is not None:
                return self._invalid(path, f"--{name} takes a single value, got a list")
            if not value:
                return self._invalid(path, "an empty list passes nothing; use null to remove the flag")
            items = []
            for index, item in enumerate(value):
                if item is None or isinstance(item, (bool, dict, list)):
                    return self._invalid(path + (index,), f"list items must be plain values, got {show_value(item)}")
                items.append(self._argument(path + (index,), item))
            if _INVALID in items:
                return _INVALID
            return items
        if kind == "int":
            if not isinstance(value, int):
                return self._invalid(path, f"expected an integer, got {show_value(value)}")
            return self._in_range(path, value, known)
        if kind == "float":
            if not isinstance(value, (int, float)):
                return self._invalid(path, f"expected a number, got {show_value(value)}")
            return self._in_range(path, value, known)
        return self._argument(path, value)

    def _env_ref(self, path: tuple[Any, ...], name: str, var: Any) -> Any:
        if not isinstance(var, str) or not ENV_NAME.fullmatch(var):
            return self._invalid(path + ("env",), "not an environment variable name (letters, digits, _; not"
                                                  " starting with a digit)")
        known = KNOWN_FLAGS.get(name)
        if known is not None and known.kind == "switch":
            return self._invalid(path, f"--{name} is a switch: it takes no value")
        self.env_refs.append(path)
        return EnvRef(var)

    def _argument(self, path: tuple[Any, ...], value: Any) -> Any:
        text = self._text(path, value)
        if text == ";":
            return self._invalid(path, "a lone ';' would split the command line in ExecStart=")
        return text

    def _in_range(self, path: tuple[Any, ...], value: float, known: Any) -> Any:
        low, high = known.minimum, known.maximum
        too_low = low is not None and (value <= low if known.exclusive_minimum else value < low)
        too_high = high is not None and value > high
        if too_low or too_high:
            bounds = []
            if low is not None:
                bounds.append(f"{'above' if known.exclusive_minimum else 'at least'} {low:g}")
            if high is not None:
                bounds.append(f"at most {high:g}")
            return self._invalid(path, f"expected a value {' and '.join(bounds)}, got {value!r}")
        return value

    def _env(self, path: tuple[Any, ...], env: Any) -> None:
        out: dict[str, Any] = {}
        self.normalized[path] = out
        if not isinstance(env, dict):
            return
        for name, value in env.items():
            epath = path + (name,)
            if isinstance(name, str) and forbidden_character(name):
                continue  # reported as a control character
            if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
                self.add(epath, "not an environment variable name (letters, digits, _; not starting with a digit)")
                continue
            if name in RESERVED_ENV:
                self.add(epath, f"not set here: {RESERVED_ENV[name]}")
                continue
            if value is None:
                out[name] = None
                continue
            if isinstance(value, (dict, list)):
                self.add(epath, f"expected a single value, got {show_value(value)}")
                continue
            text = self._text(epath, value)
            if name == "PYTHONUNBUFFERED" and text != "1":
                self.add(epath, "deployctl always sets PYTHONUNBUFFERED=1 (the journal needs unbuffered output)")
                continue
            out[name] = text

    def _policy(self, path: tuple[Any, ...], override: Mapping[str, Any], global_policy: Any) -> None:
        base = global_policy if isinstance(global_policy, dict) else {}
        try:
            Policy.model_validate(deep_merge(base, override))
        except ValidationError as exc:
            own = path + ("policy",)
            for err in exc.errors():
                loc = tuple(err["loc"])
                # Report what the override itself wrote; errors of the global block are reported there.
                if loc and not any(own + loc[:end] in self.marked.lines for end in range(len(loc), 0, -1)):
                    continue
                full = own + loc
                line = self.marked.lines.get(full) or self.marked.line_of(full)
                self.problems.append(Problem(self.file, line, dotted(full), pydantic_message(err, Policy, loc)))
        except TypeError as exc:  # e.g. an unhashable key in a mapping
            self.add(path + ("policy",), str(exc))

    def _text(self, path: tuple[Any, ...], value: Any) -> str:
        """A scalar as the operator wrote it (YAML would turn 1.10 into 1.1 and 010 into 8)."""
        return self.marked.raw.get(path, str(value)) if not isinstance(value, str) else value

    def _invalid(self, path: tuple[Any, ...], message: str) -> object:
        self.add(path, message)
        return _INVALID


_INVALID = object()


def _env_name(flag: str) -> str:
    return "SGLANG_" + re.sub(r"[^A-Za-z0-9]", "_", flag).upper()


def _mapping(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}
