"""The wheel, built and installed as a user would (`python -m build`, a fresh venv outside the checkout),
validates, renders and checks the example inventory from another directory: the unit template and the
data files travel in the wheel. The wheel is installed without its dependencies, which the fresh venv sees
through a .pth file naming the test environment's site-packages: deployctl itself comes only from the wheel
(the test environment's editable install is not activated there), and the test downloads nothing."""

from __future__ import annotations

import site
import subprocess
import sys
from pathlib import Path

import pytest
from testpaths import REPO

pytestmark = pytest.mark.packaging


def _run(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=540, cwd=cwd)


def test_the_installed_wheel_renders_from_anywhere(tmp_path: Path) -> None:
    # --no-isolation: build with this environment's setuptools instead of downloading one into a build venv.
    built = _run(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", tmp_path / "dist", REPO,
                 cwd=tmp_path)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("deployctl-*.whl")
    assert _run(sys.executable, "-m", "venv", tmp_path / "venv", cwd=tmp_path).returncode == 0
    installed = _run(tmp_path / "venv" / "bin" / "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
                     wheel, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr[-3000:]
    (venv_site,) = (tmp_path / "venv" / "lib").glob("python3*/site-packages")
    (venv_site / "test-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    where = _run(tmp_path / "venv" / "bin" / "python", "-c", "import deployctl; print(deployctl.__file__)", cwd=tmp_path)
    assert where.stdout.startswith(str(venv_site)), where.stdout + where.stderr  # the wheel's, not the checkout's

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    inventory = elsewhere / "inventory.yaml"  # no templates/ next to it: the wheel's template must serve
    inventory.write_text((REPO / "inventory" / "example.yaml").read_text())
    deployctl = tmp_path / "venv" / "bin" / "deployctl"
    validated = _run(deployctl, "validate", "-i", inventory, cwd=elsewhere)
    assert validated.returncode == 0, validated.stderr
    rendered = _run(deployctl, "render", "-d", "glm5", "-i", inventory, cwd=elsewhere)
    assert rendered.returncode == 0 and "ExecStart=" in rendered.stdout, rendered.stderr
    checked = _run(deployctl, "check", "-d", "qwen35", "-i", inventory, "--json", cwd=elsewhere)
    assert checked.returncode in (0, 3), checked.stderr  # 3: this host is not the inventory's GPU host
    assert '"findings"' in checked.stdout and "Traceback" not in checked.stderr
