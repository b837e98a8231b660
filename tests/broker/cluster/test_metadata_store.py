"""broker/cluster/metadata_store.py: the single-node metadata store on disk."""

import pytest

from broker.cluster.metadata_store import LocalMetadataStore, TopicMeta
from broker.cluster.names import InvalidTopicName


def test_metadata_store_persists_atomically(tmp_path):
    store = LocalMetadataStore(tmp_path)
    meta = TopicMeta("t", 2, 1, {"retention.ms": "5"}, [[0], [0]])
    store.put(meta)
    (tmp_path / "meta" / "topics" / "junk.json.tmp").write_text("{")
    (tmp_path / "meta" / "topics" / "broken.json").write_text("{not json")
    again = LocalMetadataStore(tmp_path)
    assert again.cluster_id == store.cluster_id
    assert again.get("t") == meta
    assert set(again.topics()) == {"t"}
    assert not (tmp_path / "meta" / "topics" / "junk.json.tmp").exists()
    again.delete("t")
    assert LocalMetadataStore(tmp_path).get("t") is None
    with pytest.raises(InvalidTopicName):
        again.put(TopicMeta("../x", 1, 1, {}, [[0]]))
