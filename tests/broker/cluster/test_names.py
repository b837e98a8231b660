"""broker/cluster/names.py: which topic names are legal."""

import pytest

from broker.cluster.names import InvalidTopicName, validate_topic_name


@pytest.mark.parametrize("name", ["a", "A.b_c-9", "__consumer_offsets", "x" * 249, "..."])
def test_legal_topic_names(name):
    assert validate_topic_name(name) == name


@pytest.mark.parametrize(
    "name", ["", ".", "..", "x" * 250, "../../etc", "a/b", "a\\b", "a b", "é", "a\x00", None]
)
def test_illegal_topic_names(name):
    with pytest.raises(InvalidTopicName):
        validate_topic_name(name)
