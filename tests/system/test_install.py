"""The production install on a machine that has never seen deployctl, and the demo from that install.

``scripts/install WHEEL`` runs inside a private mount namespace whose /etc, /opt and /usr/local are
overlays (their changes land in this test's directories, nothing on the host changes), as on a fresh
Debian host: it must put ``deployctl`` on PATH with its man page, completion, units and polkit rule, all
from the wheel, and nothing of the test toolchain. Then, from another directory, the README's first
hour: ``validate``, ``render``, ``check``, ``promote --dry-run``, ``man deployctl``, completion, and the
demo (which boots its own sandboxed systemd) -- the one run of the demo in the suite.
Before the install, ``--help`` and refusals must change nothing; after it, ``nobody`` runs deployctl
(issue 44.4); a pip install of the wheel into a venv of its own has ``man deployctl`` (issue 38.6); at the end,
``--uninstall`` removes every file the install wrote and keeps the ledger, ``--uninstall --purge`` does not
(issue 44.11).
The wheel is built as a user would (``python -m build``) and installed with ``--no-deps``: its
dependencies come from the test environment through a .pth file (tests/support/runtime_site.py), so the
test downloads nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

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


def _public_python() -> str:
    """An interpreter of this Python's version that every user can run (the runtime site's packages are built
    for this version; the test's own may live under root's private home, as pyenv's does)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
        runs = subprocess.run(["runuser", "-u", "nobody", "--", candidate, "-c",
                               "import sys, ensurepip; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True)
        if runs.returncode == 0 and runs.stdout.strip() == version:
            return candidate
    pytest.skip(f"no Python {version} with ensurepip that every user can run (e.g. Debian's python3-venv)")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Install into overlays; run the first hour's commands there, then uninstall; their outputs, by name."""
    if os.geteuid() != 0:
        pytest.skip("overlay mounts in a private mount namespace need root (CI runs as root)")
    tmp = tmp_path_factory.mktemp("install")
    wheel = _wheel(tmp)
    python = _public_python()
    # Where every user can read it (the test's tmp is root's alone): the installer checks that `nobody` runs deployctl.
    shared = Path(tempfile.mkdtemp(prefix="deployctl-runtime-site-"))
    shared.chmod(0o755)
    deps = runtime_site(shared / "site")
    out = tmp / "out"
    out.mkdir()
    # /var/lib: a --purge gone wrong must not reach the host's ledger; bash-completion: this host lacks the
    # package, which the installer would apt-get (a stand-in for it, in the overlay).
    overlays = "\n".join(
        f"mkdir -p {tmp}/upper{d} {tmp}/work{d}; "
        f"mount -t overlay overlay -o lowerdir={d},upperdir={tmp}/upper{d},workdir={tmp}/work{d} {d}"
        for d in ("/etc", "/opt", "/usr/local", "/var/lib", "/usr/share/bash-completion"))
    ours = "find /usr/local /opt /etc/systemd/system /etc/polkit-1 -name '*deployctl*' 2>/dev/null | sort"
    script = f"""
set -u
{overlays}
[ -f /usr/share/bash-completion/bash_completion ] || echo '# stands in for the package' >/usr/share/bash-completion/bash_completion
# The venv the installer makes, made first only to hand it its dependencies (the installer keeps a venv).
{python} -m venv {VENV} && echo {deps} > {SITE}/runtime-deps.pth
mkdir -p /etc/deployctl && cp {REPO}/inventory/example.yaml /etc/deployctl/inventory.yaml
run() {{ name=$1; shift; "$@" >{out}/$name 2>{out}/$name.err; echo $? >{out}/$name.rc; }}
export PIP_NO_DEPS=1 PIP_NO_INDEX=1
(cd {tmp}/upper && find . | sort) >{out}/upper.before
run help {REPO}/scripts/install --help
run help_short {REPO}/scripts/install -h
run bogus {REPO}/scripts/install --bogus
run purge_alone {REPO}/scripts/install --purge
ln -s {sys.executable} {tmp}/private-python  # under the test's own 0700 directory: root's alone, as pyenv in /root
run private env PYTHON={tmp}/private-python {REPO}/scripts/install {wheel}
(cd {tmp}/upper && find . | sort) >{out}/upper.refused
# From the checkout, as the README has it: the installer must use the package it installed, not ./deployctl
(cd {REPO} && PYTHON={python} {REPO}/scripts/install {wheel}) >{out}/install 2>&1
echo $? >{out}/install.rc
(cd {tmp}/upper && find . | sort) >{out}/upper.installed
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/nonexistent MANPAGER=cat MANWIDTH=120
unset DEPLOYCTL_INVENTORY DEPLOYCTL_STATE_DIR VIRTUAL_ENV PYTHONPATH
cd {tmp}
run nobody runuser -u nobody -- deployctl --version
run group getent group deployctl
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
ls {tmp}/keep >{out}/kept
# A pip user: the wheel into a venv of its own; man finds the page through PATH (bin/ -> share/man)
{sys.executable} -m venv {tmp}/pip-venv && {tmp}/pip-venv/bin/python -m pip install -q --disable-pip-version-check {wheel}
run pipman env PATH={tmp}/pip-venv/bin:$PATH man deployctl
run pipcompletion cat {tmp}/pip-venv/share/bash-completion/completions/deployctl
run uninstall {REPO}/scripts/install --uninstall
{ours} >{out}/ours.uninstalled
run group_kept getent group deployctl
run inventory_kept test -f /etc/deployctl/inventory.yaml
run ledger_kept test -f $DEPLOYCTL_STATE_DIR/ledger.sqlite3  # the demo's, exported above
{python} -m venv {VENV} && echo {deps} > {SITE}/runtime-deps.pth  # its dependencies again, as before
run reinstall env PYTHON={python} {REPO}/scripts/install {wheel}
mkdir -p {tmp}/purged && touch {tmp}/purged/ledger.sqlite3
run purge env DEPLOYCTL_STATE_DIR={tmp}/purged {REPO}/scripts/install --uninstall --purge
{ours} >{out}/ours.purged
run group_purged getent group deployctl
"""
    try:
        done = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", script],
                              capture_output=True, text=True, timeout=480)
        assert done.returncode == 0, done.stderr
        results = {p.name: p.read_text() for p in out.iterdir()}
        results["purged_left"] = " ".join(p.name for p in (tmp / "purged").iterdir()) if (tmp / "purged").exists() else ""
        results["upper"] = "\n".join(line.removeprefix("./") for line in results["upper.installed"].splitlines())
        yield results
    finally:
        shutil.rmtree(shared)


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


def test_help_and_a_wrong_argument_change_nothing(installed: dict[str, str]) -> None:
    for name in ("help", "help_short"):
        assert installed[f"{name}.rc"].strip() == "0", installed[f"{name}.err"]
        assert installed[name].startswith("usage: scripts/install [WHEEL]") and "--uninstall" in installed[name]
    for name in ("bogus", "purge_alone"):
        assert installed[f"{name}.rc"].strip() == "2" and "usage: scripts/install" in installed[f"{name}.err"]
    assert "unknown option --bogus" in installed["bogus.err"]
    assert installed["upper.refused"] == installed["upper.before"]


def test_the_install_is_for_every_user_with_a_group_for_its_polkit_rule(installed: dict[str, str]) -> None:
    # an interpreter only root can run is refused before anything is made (the venv would link to it)
    assert installed["private.rc"].strip() == "2", installed["private"] + installed["private.err"]
    assert "cannot be run by other users" in installed["private.err"] and "PYTHON=/usr/bin/python3" in installed["private.err"]
    assert installed["nobody.rc"].strip() == "0" and installed["nobody"].startswith("deployctl "), installed["nobody.err"]
    assert installed["group.rc"].strip() == "0" and installed["group"].startswith("deployctl:")
    assert "usermod -aG deployctl OPERATOR" in installed["install"]
    assert "scripts/install --uninstall" in installed["install"]
    # run from the checkout, it names the examples of the package it installed, not the checkout's
    assert f"deployctl's examples: {SITE}/deployctl/share/inventory" in installed["install"], installed["install"]


def test_a_pip_install_of_the_wheel_has_the_man_page_and_completion(installed: dict[str, str]) -> None:
    assert installed["pipman.rc"].strip() == "0", installed["pipman.err"]
    assert "EXIT STATUS" in installed["pipman"] and "deployctl promote" in installed["pipman"]
    assert installed["pipcompletion.rc"].strip() == "0" and "_python_argcomplete" in installed["pipcompletion"]


def test_uninstall_removes_what_the_install_wrote_and_keeps_the_ledger_unless_purged(installed: dict[str, str]) -> None:
    assert installed["uninstall.rc"].strip() == "0", installed["uninstall"] + installed["uninstall.err"]
    # nothing named deployctl left where the install writes (the host's own copies from scripts/bootstrap neither)
    assert installed["ours.uninstalled"] == "", installed["uninstall"]
    assert installed["inventory_kept.rc"].strip() == "0" and installed["ledger_kept.rc"].strip() == "0"
    assert f"removed {VENV}" in installed["uninstall"] and "kept /etc/deployctl" in installed["uninstall"]
    assert installed["group_kept.rc"].strip() == "0"
    assert installed["reinstall.rc"].strip() == "0", installed["reinstall"] + installed["reinstall.err"]
    assert installed["purge.rc"].strip() == "0", installed["purge"] + installed["purge.err"]
    assert installed["ours.purged"] == ""
    assert installed["purged_left"] == "" and installed["group_purged.rc"].strip() != "0"
