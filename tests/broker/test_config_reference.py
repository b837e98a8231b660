"""BROKER-CONFIGURATION.md: made from broker/config.py's table of keys, checked in
current, and pointed to by `logflume broker --help`."""

import subprocess
import sys
from pathlib import Path

from broker.config import KEYS, KRAFT_KEYS, SECTIONS
from broker.reference import COMMAND, markdown

ROOT = Path(__file__).resolve().parents[2]
FILE = ROOT / "BROKER-CONFIGURATION.md"


def logflume(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logflume", *args], capture_output=True, text=True, cwd=ROOT
    )


def test_checked_in_reference_is_current():
    assert FILE.exists(), f"{FILE.name} is missing; make it with: {COMMAND}"
    assert FILE.read_text() == markdown(), f"{FILE.name} is out of date; regenerate it: {COMMAND}"


def test_every_key_has_a_row_in_its_section_with_type_default_and_meaning():
    text = markdown()
    for section, keys in SECTIONS:
        assert keys, f"section {section.title!r} has no keys"
        body = text.split(f"\n## {section.title}\n", 1)[1].split("\n## ", 1)[0]
        for key in keys:
            assert key.doc, f"{key.name} has no meaning"
            rows = [line for line in body.splitlines() if line.startswith(f"| `{key.name}` |")]
            assert len(rows) == 1, key.name
    assert sum(len(keys) for _, keys in SECTIONS) == len(KEYS)  # no key twice
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| `")}
    assert rows["| `log.retention.hours`"] == (
        "| `log.retention.hours` | int | `168` | read-only | Time retention, in hours. "
        "Default of the topic config `retention.ms`. |"
    )
    # Kafka's dynamic update modes (KIP-226)
    assert rows["| `log.retention.ms`"].startswith(
        "| `log.retention.ms` | long | unset | cluster-wide |"
    )
    assert rows["| `ssl.keystore.location`"].split(" | ")[3] == "per-broker"
    assert rows["| `auto.create.topics.enable`"].startswith(
        "| `auto.create.topics.enable` | boolean | `true` |"
    )
    assert rows["| `zookeeper.connect`"].startswith("| `zookeeper.connect` | string | unset |")
    assert "\\_\\_consumer\\_offsets" in rows["| `offsets.topic.num.partitions`"]
    for name in KRAFT_KEYS:
        assert f"| `{name}` |" in text


def test_command_writes_the_reference_and_help_points_to_it(tmp_path):
    out = tmp_path / "reference.md"
    done = logflume("broker", "--reference", "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert out.read_text() == markdown()
    assert logflume("broker", "--reference").stdout == markdown()
    lone = logflume("broker", "--output", str(out))
    assert lone.returncode == 2 and "--output goes with --reference" in lone.stderr
    helped = logflume("broker", "--help")
    assert helped.returncode == 0
    epilog = " ".join(helped.stdout.split("\n\n")[-1].split())
    assert "BROKER-CONFIGURATION.md" in epilog and "--set KEY=VALUE" in epilog
