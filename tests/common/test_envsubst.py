"""`${VAR}` expansion in configuration values (common/envsubst.py)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.envsubst import UnreadableFile, UnsetVariable, expand

ENV = {"HOST": "broker1", "PORT": "9092", "EMPTY": ""}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${HOST}:${PORT}", "broker1:9092"),
        ("${MISSING:-localhost}", "localhost"),
        ("${EMPTY:-fallback}", "fallback"),
        ("${HOST:-unused}", "broker1"),
        ("${MISSING:-}", ""),
        ("cost $$5 and $${HOST}", "cost $5 and ${HOST}"),
        ("$HOST stays: only the braced form expands", "$HOST stays: only the braced form expands"),
        ("a lone $ and ${ unclosed", "a lone $ and ${ unclosed"),
        ("${MISSING:-a:b-c}", "a:b-c"),
    ],
)
def test_expand(text, expected):
    assert expand(text, ENV) == expected


def test_an_unset_variable_without_default_is_an_error_naming_it():
    with pytest.raises(UnsetVariable) as err:
        expand("pass=${DB_PASSWORD}", ENV)
    assert err.value.name == "DB_PASSWORD"


def test_an_empty_variable_without_default_expands_to_empty():
    assert expand("[${EMPTY}]", ENV) == "[]"


@given(st.text().filter(lambda t: "$" not in t))
def test_text_without_a_dollar_is_unchanged(text):
    assert expand(text, ENV) == text


@given(st.text(alphabet=st.characters(blacklist_characters="$}"), max_size=30))
def test_values_are_inserted_as_they_are(value):
    """A value is never expanded again: `${A}` holding `${B}` stays `${B}`."""
    assert expand("<${V}>", {"V": value}) == f"<{value}>"
    assert expand("${V}", {"V": "${HOST}"}) == "${HOST}"


def test_a_file_reference_gives_the_file_without_its_trailing_newline(tmp_path):
    secret = tmp_path / "password"
    secret.write_text("p@ss ${HOST}\n")
    assert expand(f"[${{file:{secret}}}]", ENV) == "[p@ss ${HOST}]"  # never expanded again


def test_an_unreadable_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(UnreadableFile) as err:
        expand(f"${{file:{tmp_path}/missing}}", ENV)
    assert (err.value.path, err.value.reason) == (
        f"{tmp_path}/missing",
        "No such file or directory",
    )
