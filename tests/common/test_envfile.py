"""systemd EnvironmentFile= syntax (common/envfile.py), as `--env-file` reads it."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.envfile import EnvFileError, parse_env_file, read_env_file


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ("A=plain", "plain"),
        ("A = spaced  ", "spaced"),
        ("\tA=\tx y\t", "x y"),
        ("A=", ""),
        ("A=a=b", "a=b"),
        ("A=no # comment here", "no # comment here"),
        ("A=$HOME ${B}", "$HOME ${B}"),
        ('A="double  quoted "', "double  quoted "),
        ('A="esc \\" \\\\ \\$ \\` kept \\n"', 'esc " \\ $ ` kept \\n'),
        ("A='single \\ \" $x'", 'single \\ " $x'),
        ('A=""', ""),
        ("A='' ", ""),
        ("A=back\\slash\\\\", "backslash\\"),
        ("A=trailing\\ ", "trailing "),
        ('A=mid"quote"', 'mid"quote"'),
    ],
)
def test_values(line, value):
    assert parse_env_file(line + "\n") == {"A": value}


def test_comments_blank_lines_and_the_last_assignment_wins():
    text = "# comment\n; another\n   # indented\n\nA=1\r\nB=2\nA=3"
    assert parse_env_file(text) == {"A": "3", "B": "2"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("LOGFLUME_TLS_CA", "expected NAME=value"),
        ("export A=1", "'export A' is not a variable name"),
        ("1A=1", "'1A' is not a variable name"),
        ("=1", "'' is not a variable name"),
        ("A-B=1", "'A-B' is not a variable name"),
        ('A="open', 'A: the " is not closed on this line'),
        ("A='open", "A: the ' is not closed on this line"),
        ('A="a\\"', 'A: the " is not closed on this line'),
        ('A="one" two', 'A: text after the closing "'),
        ("A=continued\\", "A: a backslash ends the line"),
    ],
)
def test_a_malformed_line_is_an_error_naming_file_and_line(line, message):
    with pytest.raises(EnvFileError) as err:
        parse_env_file(f"# settings\nOK=1\n{line}\n", "agent.env")
    assert str(err.value).startswith(f"agent.env:3: {message}")
    assert (err.value.filename, err.value.line) == ("agent.env", 3)


def test_an_error_never_shows_the_value():
    with pytest.raises(EnvFileError) as err:
        parse_env_file('LOGFLUME_SASL_PASSWORD="s3cret', "agent.env")
    assert "s3cret" not in str(err.value) and "LOGFLUME_SASL_PASSWORD" in str(err.value)


def test_reading_a_file(tmp_path):
    path = tmp_path / "agent.env"
    path.write_text("A='1'\n")
    assert read_env_file(path) == {"A": "1"}
    with pytest.raises(EnvFileError, match=r"missing\.env: cannot read: No such file"):
        read_env_file(tmp_path / "missing.env")
    path.write_bytes(b"A=\xff\n")
    with pytest.raises(EnvFileError, match="not UTF-8"):
        read_env_file(path)


names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)
values = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=20)


def double_quoted(value: str) -> str:
    return '"' + "".join("\\" + c if c in '"\\`$' else c for c in value) + '"'


def escaped(value: str) -> str:
    return "".join("\\" + c for c in value)


@given(st.dictionaries(names, values), st.sampled_from([double_quoted, escaped]))
def test_any_value_written_quoted_or_escaped_reads_back(variables, write):
    text = "".join(f"{name}={write(value)}\n" for name, value in variables.items())
    assert parse_env_file(text) == variables


@given(st.dictionaries(names, values.filter(lambda v: "'" not in v)))
def test_single_quotes_keep_the_value_as_written(variables):
    text = "".join(f"{name} = '{value}'\n" for name, value in variables.items())
    assert parse_env_file(text) == variables
