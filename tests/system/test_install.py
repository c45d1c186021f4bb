"""The production install on a machine that has never seen deployctl, and the demo from that install.

``scripts/install WHEEL`` runs inside a private mount namespace whose /etc, /opt and /usr/local are
overlays (their changes land in this test's directories, nothing on the host changes), as on a fresh
Debian host: it must put ``deployctl`` on PATH with its man page, completion, units and polkit rule, all
from the wheel, and nothing of the test toolchain. Then, from another directory, the README's first
hour: ``validate``, ``render``, ``check``, ``promote --dry-run``, ``man deployctl``, completion, and the
demo (which boots its own sandboxed systemd) -- the one run of the demo in the suite.
The wheel is built as a user would (``python -m build``) and installed with ``--no-deps``: its
dependencies come from the test environment through a .pth file (tests/support/runtime_site.py), so the
test downloads nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.runtime_site import runtime_site
from testpaths import REPO

pytestmark = [pytest.mark.system, pytest.mark.parallel, pytest.mark.packaging]

VENV = "/opt/deployctl/venv"
SITE = f"{VENV}/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"


def _wheel(tmp: Path) -> Path:
    # --no-isolation: build with this environment's setuptools instead of downloading one into a build venv.
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp / "dist"),
                            str(REPO)], capture_output=True, text=True, timeout=300, cwd=tmp)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("deployctl-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Install into overlays; run the first hour's commands there; their outputs, by name."""
    if os.geteuid() != 0:
        pytest.skip("overlay mounts in a private mount namespace need root (CI runs as root)")
    tmp = tmp_path_factory.mktemp("install")
    wheel = _wheel(tmp)
    deps = runtime_site(tmp / "runtime-site")
    out = tmp / "out"
    out.mkdir()
    overlays = "\n".join(
        f"mkdir -p {tmp}/upper{d} {tmp}/work{d}; "
        f"mount -t overlay overlay -o lowerdir={d},upperdir={tmp}/upper{d},workdir={tmp}/work{d} {d}"
        for d in ("/etc", "/opt", "/usr/local"))
    script = f"""
set -u
{overlays}
# The venv the installer makes, made first only to hand it its dependencies (the installer keeps a venv).
{sys.executable} -m venv {VENV} && echo {deps} > {SITE}/runtime-deps.pth
mkdir -p /etc/deployctl && cp {REPO}/inventory/example.yaml /etc/deployctl/inventory.yaml
PIP_NO_DEPS=1 PIP_NO_INDEX=1 PYTHON={sys.executable} {REPO}/scripts/install {wheel} >{out}/install 2>&1
echo $? >{out}/install.rc
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/nonexistent MANPAGER=cat MANWIDTH=120
unset DEPLOYCTL_INVENTORY DEPLOYCTL_STATE_DIR VIRTUAL_ENV PYTHONPATH
cd {tmp}
run() {{ name=$1; shift; "$@" >{out}/$name 2>{out}/$name.err; echo $? >{out}/$name.rc; }}
run which command -v deployctl
run pytest {VENV}/bin/python -c 'import pytest'
run ansible {VENV}/bin/python -c 'import ansible'
run shipped {VENV}/bin/python -c 'from deployctl.shipped import shipped; print(*(shipped(f) for f in ("inventory/demo.yaml", "inventory/example.yaml", "systemd/50-deployctl.rules", "systemd/deployctl-promote@.service")))'
run validate deployctl validate
run render deployctl render glm5 baseline
run check deployctl check -d qwen35 --json
run dryrun deployctl promote candidate -d glm5 --dry-run
run man man deployctl
run complete bash -c '. /usr/local/share/bash-completion/completions/deployctl
  COMP_LINE="deployctl status g"; COMP_POINT=${{#COMP_LINE}}; COMP_TYPE=9; COMP_WORDS=(deployctl status g); COMP_CWORD=2
  _python_argcomplete deployctl; printf "%s\\n" "${{COMPREPLY[@]}}"'
run demo deployctl demo --keep {tmp}/keep
export DEPLOYCTL_STATE_DIR={tmp}/keep/state DEPLOYCTL_INVENTORY={tmp}/keep/demo-inventory.yaml
run history deployctl history
run show deployctl show 2
"""
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", script],
                          capture_output=True, text=True, timeout=420)
    assert done.returncode == 0, done.stderr
    results = {p.name: p.read_text() for p in out.iterdir()}
    results["kept"] = " ".join(p.name for p in (tmp / "keep").iterdir()) if (tmp / "keep").is_dir() else ""
    results["upper"] = "\n".join(sorted(str(p.relative_to(tmp / "upper")) for p in (tmp / "upper").rglob("*")))
    return results


def test_the_install_puts_deployctl_on_path_and_its_files_where_the_host_looks(installed: dict[str, str]) -> None:
    assert installed["install.rc"].strip() == "0", installed["install"]
    assert installed["which"].strip() == "/usr/local/bin/deployctl"
    # the wheel carries the example inventories, units and polkit rule (read by demo, shown by the installer)
    assert installed["shipped.rc"].strip() == "0" and installed["shipped"].count(f"{SITE}/deployctl/share/") == 4, \
        installed["shipped.err"]
    files = installed["upper"].splitlines()
    for path in ("usr/local/bin/deployctl", "usr/local/share/man/man1/deployctl.1",
                 "usr/local/share/bash-completion/completions/deployctl", "usr/local/share/zsh/site-functions/_deployctl",
                 "usr/local/share/fish/vendor_completions.d/deployctl.fish",
                 "etc/systemd/system/deployctl-promote@.service", "etc/systemd/system/deployctl-canary@.service",
                 "etc/systemd/system/deployctl-canary@.timer", "etc/polkit-1/rules.d/50-deployctl.rules"):
        assert path in files, installed["install"]


def test_nothing_of_the_test_toolchain_is_installed(installed: dict[str, str]) -> None:
    assert installed["pytest.rc"].strip() != "0" and "No module named 'pytest'" in installed["pytest.err"]
    assert installed["ansible.rc"].strip() != "0"
    assert not any("chromium" in line or "pytest" in line for line in installed["upper"].splitlines())


def test_the_first_hour_works_from_the_installed_wheel(installed: dict[str, str]) -> None:
    assert installed["validate.rc"].strip() == "0", installed["validate.err"]
    assert installed["render.rc"].strip() == "0" and "ExecStart=" in installed["render"], installed["render.err"]
    assert installed["check.rc"].strip() in ("0", "3"), installed["check.err"]
    assert "findings" in json.loads(installed["check"])
    assert installed["dryrun.rc"].strip() == "0", installed["dryrun"] + installed["dryrun.err"]
    assert installed["man.rc"].strip() == "0" and "EXIT STATUS" in installed["man"] and "ENVIRONMENT" in installed["man"]
    assert installed["complete"].split() == ["glm5"], installed["complete.err"]


def test_the_demo_runs_from_the_installed_wheel_and_keeps_what_it_made(installed: dict[str, str]) -> None:
    assert installed["demo.rc"].strip() == "0", installed["demo"][-3000:] + installed["demo.err"][-3000:]
    assert "both candidates were rejected and rolled back" in installed["demo"]
    # --keep: the ledger, inventory and reports stay, and the demo says how to read them
    assert "export DEPLOYCTL_STATE_DIR=" in installed["demo"] and "deployctl show 2 " in installed["demo"]
    assert installed["history.rc"].strip() == "0", installed["history.err"]
    assert [line.split()[6] for line in installed["history"].splitlines() if " promote " in line] == ["rejected"] * 2
    assert installed["show.rc"].strip() == "0" and "max_running_requests fell from 48 to 26" in installed["show"]
    assert {"incident-a.html", "incident-b.html", "demo-inventory.yaml", "state"} <= set(installed["kept"].split())
