"""The list arithmetic of IncrementalAlterConfigs' APPEND and SUBTRACT (pure)."""

from hypothesis import given
from hypothesis import strategies as st

from broker.config_ops import APPEND, SUBTRACT, apply_list_op, list_op_refused, split_list

ITEM = st.text("abcxyz.-_", min_size=1, max_size=5)


def test_append_adds_only_the_missing_items_in_order():
    assert apply_list_op(APPEND, "delete", "compact, delete") == "delete,compact"
    assert apply_list_op(APPEND, "", "a,b") == "a,b"


def test_subtract_removes_every_given_item():
    assert apply_list_op(SUBTRACT, "a, b,c", "b ,c") == "a"
    assert apply_list_op(SUBTRACT, "a", "z") == "a"
    assert apply_list_op(SUBTRACT, "", "a") == ""


def test_split_drops_whitespace_around_commas():
    assert split_list(" a , b ") == ["a", "b"] and split_list("  ") == []


@given(st.lists(ITEM, unique=True), st.lists(ITEM))
def test_append_then_subtract_leaves_what_was_not_given(current, value):
    appended = split_list(apply_list_op(APPEND, ",".join(current), ",".join(value)))
    assert set(appended) == set(current) | set(value) and len(appended) == len(set(appended))
    left = split_list(apply_list_op(SUBTRACT, ",".join(appended), ",".join(value)))
    assert left == [v for v in current if v not in value]


def test_refusal_names_the_operation_and_key():
    assert list_op_refused(APPEND, "retention.ms") == (
        "Config value append is not allowed for config key: retention.ms"
    )
    assert list_op_refused(SUBTRACT, "x").startswith("Config value subtract ")
