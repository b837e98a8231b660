"""The operators' documents name no commit and no issue: they describe the product as
it is, in words that stay true for someone without the repository's history
(bench/RESULTS.md, the developers' record, may). A commit is a hexadecimal token of 7
to 40 digits that git resolves to a commit of this repository; an issue reference is
"issue 16", "issues 3 and 4", "PR 12" or "#16" in prose. Links to other projects'
trackers (a URL) are fine, and so are hex colours, checksums and numbers that are no
commit."""

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
USER_DOCS = (
    "README.md",
    "CONFIGURATION.md",
    "BROKER-CONFIGURATION.md",
    "COMPATIBILITY.md",
    "deploy/README.md",
    "TROUBLESHOOTING.md",
    "UPGRADING.md",
    "CHANGELOG.md",
)

URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
# a run of 7-40 hex digits that is a word of its own: not part of a longer hex run (a
# sha256 sum), of an identifier or path, nor a "#rrggbb"-style colour
HEX_TOKEN = re.compile(r"(?<![0-9A-Za-z_#/.-])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
ISSUE_WORDS = re.compile(
    r"\b(?:issues?|pull requests?|PRs?|tickets?)\s+#?\d+(?:\s*(?:,|and|or)\s*#?\d+)*\b",
    re.IGNORECASE,
)
# "#16" in prose; not "&#16;", not an anchor "(#1-install)", not a colour after ":",
# "=" or a quote (`color: #123`)
HASH_NUMBER = re.compile(r"(?<![\w&#/])(?<![:=\"'] )(?<![:=\"'])#\d{1,6}(?![\w-])")


def commits(tokens: set[str]) -> set[str]:
    """The tokens that name a commit of this repository (`git cat-file --batch-check`:
    an abbreviation that is ambiguous or names no commit is not one)."""
    if not tokens:
        return set()
    ordered = sorted(tokens)
    out = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "--batch-check"],
        input="".join(f"{t}^{{commit}}\n" for t in ordered),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    # "<sha> commit <size>" for a commit; "<name> missing" or "<name> ambiguous" else
    return {t for t, line in zip(ordered, out, strict=True) if line.split()[1:2] == ["commit"]}


def issue_references(text: str) -> list[str]:
    prose = URL.sub(" ", text)
    return [m.group(0) for m in ISSUE_WORDS.finditer(prose)] + [
        m.group(0) for m in HASH_NUMBER.finditer(prose)
    ]


def commit_references(text: str) -> set[str]:
    return commits(set(HEX_TOKEN.findall(URL.sub(" ", text))))


def git_repository() -> bool:
    try:
        probe = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


@pytest.mark.parametrize("doc", USER_DOCS)
def test_no_issue_numbers(doc):
    path = REPO / doc
    assert path.exists(), f"{doc} is missing"
    found = issue_references(path.read_text())
    assert found == [], f"{doc} refers to issues: {found}; say what changed in plain words"


@pytest.mark.parametrize("doc", USER_DOCS)
def test_no_commit_hashes(doc):
    assert git_repository(), "the suite runs in a git checkout: commits to compare with"
    path = REPO / doc
    assert path.exists(), f"{doc} is missing"
    found = commit_references(path.read_text())
    assert found == set(), f"{doc} names commits: {sorted(found)}; say what changed instead"


def test_the_checks_find_what_they_should_and_nothing_else():
    assert git_repository(), "the suite runs in a git checkout: commits to compare with"
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    # commits: in full and abbreviated, in prose and in brackets
    assert commit_references(f"fixed in {head}.") == {head}
    assert commit_references(f"before ({head[:7]}): lost") == {head[:7]}
    # hex that is no commit of this repository, and hex that is not a word of its own
    sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert commit_references(f"sha256 {sha256}, colour #{head[:8]} or #a1b2c3") == set()
    assert commit_references("deadbeefcafe 604800000 1000000 and 0x7fffffff") == set()
    assert commit_references(f"https://example.org/commit/{head}") == set()
    assert commit_references(f"path/{head[:7]}.json and x-{head[:7]}") == set()
    # issues
    assert issue_references("Output written before issue 16 cannot be read.") == ["issue 16"]
    assert issue_references("see issues 3 and 4, PR 12") == ["issues 3 and 4", "PR 12"]
    assert issue_references("fixed (#16); librdkafka #4895") == ["#16", "#4895"]
    assert issue_references("https://github.com/confluentinc/librdkafka/issues/4895") == []
    assert issue_references('color: #123456; fill="#123"; &#160; [link](#contents)') == []
    assert issue_references("[1. Install](#1-install-a-web-host)") == []
    assert issue_references("the `#` comment, 16 issues, an issue with 3 brokers") == []
