"""The README's test command provisions what the suite needs, and CI adds nothing to it (issue 23).

``make test`` runs ``scripts/provision`` before pytest: the machine's programs the tests run
(PgBouncer for tests/drivers/test_pooler_fleet.py) are installed from apt when missing, and a
machine that cannot install them gets one line naming the packages and the command. ``.ci/run``
installs nothing itself, so a green CI means the README's command works on a fresh machine.

The script's tests put a stand-in ``apt-get`` first on ``PATH``: it records how it was called
and "installs" a program by writing it, because a test cannot install a real Debian package on
every run. The real apt path is what ``make test`` itself takes on a machine without PgBouncer.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import pgbouncer
from tests.support.process import ROOT

SCRIPT = ROOT / "scripts" / "provision"
BASH = shutil.which("bash") or "/bin/bash"


def readme_test_command() -> str:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "the README opens with its commands in a bash block"
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    (test,) = [command for command in commands if command.startswith("make test")]
    return test


def ci_commands() -> list[list[str]]:
    """.ci/run's command lines (continuations joined), without comments."""
    text = (ROOT / ".ci" / "run").read_text().replace("\\\n", " ")
    lines = [line.split(" #")[0].strip() for line in text.splitlines()]
    return [shlex.split(line) for line in lines if line and not line.startswith("#")]


def test_ci_installs_nothing_itself():
    for words in ci_commands():
        assert not {"apt-get", "apt", "dpkg", "pip", "install"} & set(words), words


def test_ci_runs_the_readmes_test_command():
    readme = readme_test_command()
    assert readme == "make test"
    runs = []
    for words in ci_commands():
        if "make" in words:
            # VAR=value before it (the environment), `env -u VAR`, and VAR=value after the
            # target (which Python, which venv) choose the stack; nothing else may differ
            start = words.index("make")
            assert all(
                "=" in word or word in ("env", "-u") or word.isupper() for word in words[:start]
            ), words
            target = [word for word in words[start + 1 :] if "=" not in word]
            runs.append(target)
    assert runs.count(["test"]) == 2, runs  # the two stacks
    assert all(target in (["test"], ["lint"], ["docs"]) for target in runs), runs


@pytest.mark.process  # runs make or bash
def test_make_test_provisions_before_it_runs_pytest():
    dry_run = subprocess.run(
        ["make", "-n", "test", "VENV=/nonexistent-venv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    provision = dry_run.index("bash scripts/provision")
    (pytest_line,) = [i for i, line in enumerate(dry_run) if "-m pytest" in line]
    assert provision < pytest_line, dry_run


def table() -> dict[str, str]:
    listed = subprocess.run(
        [BASH, str(SCRIPT), "--list"], capture_output=True, text=True, check=True
    ).stdout
    return dict(line.split() for line in listed.splitlines())


@pytest.mark.process  # runs make or bash
def test_the_table_has_the_pgbouncer_the_pooler_tests_run():
    assert table()[Path(pgbouncer.BINARY).name] == "pgbouncer"


@pytest.fixture
def fake_apt() -> Iterator[Path]:
    """A folder for PATH holding an ``apt-get`` that logs its arguments and, for ``install``,
    writes each package's program into ``installed/`` (also on PATH). Outside pytest's own
    temporary folder, which only its owner may enter: one test runs the script as nobody."""
    with tempfile.TemporaryDirectory(prefix="xjobs-provision-") as folder:
        Path(folder).chmod(0o755)
        yield from _fake_apt(Path(folder))


def _fake_apt(tmp_path: Path) -> Iterator[Path]:
    bin_dir = tmp_path / "bin"
    (tmp_path / "installed").mkdir()
    bin_dir.mkdir()
    apt = bin_dir / "apt-get"
    apt.write_text(
        f"#!{BASH}\n"
        f'echo "$@" >> {tmp_path}/apt.log\n'
        'if [ "$1" = install ]; then\n'
        '  for word in "$@"; do\n'
        f'    case $word in -*|install) ;; *) printf "#!/bin/sh\\n" > {tmp_path}/installed/${{word%-package}}; chmod +x {tmp_path}/installed/${{word%-package}};; esac\n'
        "  done\n"
        "fi\n"
    )
    apt.chmod(0o755)
    yield tmp_path


def provision(
    *needs: str, path: str, user: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(user or []), BASH, str(SCRIPT), *needs],
        env={"PATH": path, "HOME": "/nonexistent"},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.process
def test_with_everything_there_it_calls_no_apt_get(fake_apt):
    # the real table: make test provisioned it before this test ran
    result = provision(path=f"{fake_apt / 'bin'}:{os.environ['PATH']}")
    assert result.returncode == 0, result
    assert result.stdout + result.stderr == ""
    assert not (fake_apt / "apt.log").exists()


@pytest.mark.process
def test_it_installs_what_is_missing_with_apt_get(fake_apt):
    # not root: through sudo, here one that needs no password and runs the command as is
    sudo = fake_apt / "bin" / "sudo"
    sudo.write_text(f'#!{BASH}\n[ "$1" = -n ] && shift\nexec "$@"\n')
    sudo.chmod(0o755)
    result = provision(
        "sh:sh-package",
        "xjobs-absent:xjobs-absent-package",
        "xjobs-gone:xjobs-gone-package",
        path=f"{fake_apt / 'bin'}:{fake_apt / 'installed'}:{os.environ['PATH']}",
    )
    assert result.returncode == 0, result
    assert (fake_apt / "apt.log").read_text().splitlines() == [
        "update -qq",
        "install -y -qq xjobs-absent-package xjobs-gone-package",
    ]
    assert "xjobs-absent-package xjobs-gone-package" in result.stdout


@pytest.mark.process
def test_without_apt_get_it_says_what_to_install_in_one_line(tmp_path):
    result = provision("xjobs-absent:xjobs-absent-package", path=str(tmp_path))
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert "apt-get install -y xjobs-absent-package" in line
    assert "no apt-get" in line


@pytest.mark.process
def test_without_root_or_sudo_it_says_what_to_run_in_one_line(fake_apt):
    # as nobody, with apt-get there and no sudo: it cannot install, so it says what to run
    as_nobody = [
        shutil.which("setpriv") or "/usr/bin/setpriv",
        "--reuid=nobody",
        "--regid=nogroup",
        "--clear-groups",
    ]
    result = provision(
        "xjobs-absent:xjobs-absent-package",
        path=str(fake_apt / "bin"),
        user=as_nobody if os.geteuid() == 0 else [],
    )
    assert result.returncode == 1, result
    (line,) = result.stderr.splitlines()
    assert "sudo apt-get install -y xjobs-absent-package" in line
    assert not (fake_apt / "apt.log").exists()
