"""The production agent template (deploy/agent/) made checkable on any machine: its
nginx logs moved into a test's directory, and its agent.env with the four settings
filled in as an operator does, uncommenting each line."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PIPELINES = REPO / "deploy" / "agent" / "pipelines.yaml"
AGENT_ENV = REPO / "deploy" / "agent" / "agent.env"
SETTINGS = (
    "LOGFLUME_BOOTSTRAP_SERVERS",
    "LOGFLUME_SASL_USERNAME",
    "LOGFLUME_SASL_PASSWORD",
    "LOGFLUME_TLS_CA",
)


def settings(tmp_path: Path) -> dict[str, str]:
    """Values for the four settings; the CA is a file of `tmp_path` (validate checks
    that it can be read, not what it holds)."""
    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    return {
        "LOGFLUME_BOOTSTRAP_SERVERS": "broker1.example.net:9094,broker2.example.net:9094",
        "LOGFLUME_SASL_USERNAME": "web-01",
        "LOGFLUME_SASL_PASSWORD": "s3cret: #1 'quoted'",
        "LOGFLUME_TLS_CA": str(ca),
    }


def first_line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def relocated(pipelines: Path, tmp_path: Path) -> Path:
    """A copy of `pipelines` in `tmp_path` whose /var/log/nginx is `tmp_path`/nginx."""
    logs = tmp_path / "nginx"
    logs.mkdir(exist_ok=True)
    text = pipelines.read_text()
    assert "/var/log/nginx/" in text
    copy = tmp_path / "pipelines.yaml"
    copy.write_text(text.replace("/var/log/nginx/", f"{logs}/"))
    return copy


def filled(agent_env: Path, values: dict[str, str], out: Path) -> Path:
    """`agent_env` written to `out` with the commented line `#NAME=...` of each of
    `values` replaced by NAME and its value, double-quoted."""
    text = agent_env.read_text()
    for name, value in values.items():
        escaped = "".join("\\" + c if c in '"\\`$' else c for c in value)
        line = f'{name}="{escaped}"'.replace("\\", r"\\")  # re.subn reads backslashes
        text, found = re.subn(rf"^#{name}=.*$", line, text, flags=re.M)
        assert found == 1, f"{agent_env} has no line #{name}=..."
    out.write_text(text)
    return out
