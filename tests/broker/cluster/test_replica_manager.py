"""broker/cluster/replica_manager.py and topic_admin.py on a real data directory (single
node)."""

import errno
import os
import resource

import pytest

from broker.cluster.metadata_store import LocalMetadataStore
from broker.cluster.replica_manager import ReplicaManager, TopicError, default_log_config
from broker.cluster.single_node import SingleNode
from broker.cluster.topic_admin import TopicAdmin
from broker.config import BrokerConfig
from broker.log.manager import FILE_HEADROOM, FILES_PER_PARTITION, LogManager
from broker.protocol.errors import ErrorCode


def single_node(tmp_path) -> tuple[ReplicaManager, TopicAdmin]:
    config = BrokerConfig({"log.dirs": str(tmp_path)})
    logs = LogManager(tmp_path, default_log_config(config))
    replicas = ReplicaManager(config, LocalMetadataStore(tmp_path), logs)
    replicas.cluster = SingleNode(0, None, tmp_path, replicas, dict)
    return replicas, TopicAdmin(config, replicas)


def test_a_create_that_cannot_open_its_files_fails_cleanly(tmp_path, monkeypatch):
    """EMFILE or ENOSPC while creating the third partition: the topic is refused with
    KAFKA_STORAGE_ERROR, the partitions already made are removed (their files
    closed), and the same create succeeds once the files can be opened."""
    replicas, admin = single_node(tmp_path)
    create = replicas.logs.create

    def third_fails(topic, partition, config=None, **kw):
        if partition == 2:
            raise OSError(errno.EMFILE, "Too many open files")
        return create(topic, partition, config, **kw)

    monkeypatch.setattr(replicas.logs, "create", third_fails)
    with pytest.raises(TopicError) as caught:
        admin.create_topic("t", 3)
    assert caught.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert "Too many open files" in str(caught.value)
    assert replicas.store.get("t") is None
    assert list(replicas.logs.all_logs()) == []
    assert not [d for d in tmp_path.iterdir() if d.name.startswith("t-")]
    monkeypatch.setattr(replicas.logs, "create", create)
    admin.create_topic("t", 3)
    assert replicas.store.get("t").partitions == 3
    assert sorted(p.partition for p in replicas.logs.all_logs()) == [0, 1, 2]


def test_a_create_whose_metadata_cannot_be_written_removes_its_partitions(tmp_path, monkeypatch):
    replicas, admin = single_node(tmp_path)

    def full(meta):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(replicas.store, "put", full)
    with pytest.raises(TopicError) as caught:
        admin.create_topic("t", 2)
    assert caught.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert list(replicas.logs.all_logs()) == []
    assert not [d for d in tmp_path.iterdir() if d.name.startswith("t-")]


def test_auto_create_answers_the_storage_error(tmp_path, monkeypatch):
    replicas, admin = single_node(tmp_path)

    def full(topic, partition, config=None, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(replicas.logs, "create", full)
    assert admin.auto_create("lines") == ErrorCode.KAFKA_STORAGE_ERROR


def test_a_create_past_the_open_file_limit_is_refused_before_anything_is_made(
    tmp_path, monkeypatch
):
    replicas, admin = single_node(tmp_path)
    used = len(os.listdir("/proc/self/fd"))
    limit = used + FILE_HEADROOM + 10 * FILES_PER_PARTITION
    monkeypatch.setattr(resource, "getrlimit", lambda which: (limit, limit))
    with pytest.raises(TopicError) as caught:
        admin.create_topic("wide", 8194)
    assert caught.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert f"8194 partition(s) need about {8194 * FILES_PER_PARTITION} open files" in str(
        caught.value
    )
    assert "ulimit -n" in str(caught.value)
    assert list(replicas.logs.all_logs()) == [] and replicas.store.get("wide") is None
    before = len(os.listdir("/proc/self/fd"))
    admin.create_topic("narrow", 5)
    assert replicas.store.get("narrow").partitions == 5
    assert len(os.listdir("/proc/self/fd")) - before == 5 * FILES_PER_PARTITION


def test_a_topic_of_many_partitions_fsyncs_the_data_directory_once(tmp_path, monkeypatch):
    """The new partition directories become durable with one fsync of the data
    directory, before the topic's metadata is written (10,000 partitions, one fsync
    each, took minutes on a busy disk)."""
    replicas, admin = single_node(tmp_path)
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    admin.create_topic("t", 50)
    assert synced.count(str(tmp_path)) == 1
    assert replicas.store.get("t").partitions == 50
    assert sorted(p.partition for p in replicas.logs.all_logs()) == list(range(50))
