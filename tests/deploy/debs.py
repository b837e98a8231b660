"""Building the agent's .deb of a wheel, and stubs of the systemd tools that its
maintainer scripts (and install-agent.sh) call, recording each call."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD_DEB = REPO / "deploy" / "deb" / "build-agent-deb.sh"
WHEELHOUSE = Path(sys.prefix) / "wheelhouse"
SYSTEMD_TOOLS = ("systemctl", "deb-systemd-invoke", "deb-systemd-helper")
# The scripts' stand-in for /run/systemd/system, which exists when systemd runs.
SYSTEMD_RUN_VARIABLE = "LOGFLUME_RUN_SYSTEMD_SYSTEM"


def build_deb(wheel: Path, out: Path) -> Path:
    """deploy/deb/build-agent-deb.sh of `wheel` into `out`, offline: the dependencies'
    wheels come from the wheelhouse `make test` fills in set-up (.venv/wheelhouse)."""
    assert WHEELHOUSE.is_dir(), f"no {WHEELHOUSE}: `make test` fills it in set-up"
    out.mkdir(parents=True, exist_ok=True)
    pip_args = f"--no-index --find-links {WHEELHOUSE}"
    # The package's compression is not what these tests check: gzip -1 instead of
    # dpkg-deb's default xz takes the build from about 40 s to a few.
    env = dict(os.environ, DPKG_DEB_COMPRESSOR_TYPE="gzip", DPKG_DEB_COMPRESSOR_LEVEL="1")
    result = subprocess.run(
        ["bash", str(BUILD_DEB), "--wheel", str(wheel), "--out", str(out), "--pip-args", pip_args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (path,) = out.glob("logflume-agent_*.deb")
    assert result.stdout.strip() == str(path)
    return path


class StubTools:
    """A directory of stubs of SYSTEMD_TOOLS to put first on the PATH: each appends
    its name and arguments, one call a line, to `log`, and succeeds, but for
    `is-enabled` (no unit is); `list_units` is what `systemctl list-units` prints.
    `env(systemd=True)` also points the scripts' SYSTEMD_RUN_VARIABLE at a directory
    that exists, as if systemd ran."""

    def __init__(self, root: Path, list_units: str = ""):
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        self.log = root / "calls.log"
        self.log.touch()
        self.run_dir = root / "run-systemd-system"
        self.run_dir.mkdir()
        (root / "list-units").write_text(list_units)
        for tool in SYSTEMD_TOOLS:
            stub = self.bin / tool
            stub.write_text(
                "#!/bin/sh\n"
                f'echo "{tool} $*" >>{self.log}\n'
                f'case " $* " in *" list-units "*) cat {root / "list-units"} ;; esac\n'
                'case " $* " in *" is-enabled "*) exit 1 ;; esac\n'
            )
            stub.chmod(0o755)

    def env(self, base: dict[str, str], systemd: bool) -> dict[str, str]:
        env = {**base, "PATH": f"{self.bin}:{base['PATH']}"}
        env[SYSTEMD_RUN_VARIABLE] = str(self.run_dir if systemd else self.run_dir / "absent")
        return env

    def calls(self) -> list[str]:
        """The calls recorded since the last `calls()`."""
        lines = self.log.read_text().splitlines()
        self.log.write_text("")
        return lines
