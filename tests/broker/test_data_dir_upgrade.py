"""A data directory written by an earlier release is read by this one: each fixture
of tests/fixtures (`data-dir-<version>.tar.gz`, made by
tests/fixtures/upgrade_data_dir.py) is unpacked, a broker of the working tree is
started on it, and every record (offset, key, value, timestamp, headers), each
partition's log start and end, what read_committed shows of the transactions
(committed ones, not the aborted one) and the group's committed offsets are as the
fixture's manifest recorded them when the old release wrote them. The broker then
takes new writes on top, the transactional id's state included."""

import json
import tarfile
from pathlib import Path

import pytest
from confluent_kafka import Producer

from testkit.procs import BrokerProcess
from tests.fixtures.upgrade_data_dir import snapshot

FIXTURES = sorted((Path(__file__).parents[1] / "fixtures").glob("data-dir-*.tar.gz"))


def test_there_is_a_fixture_of_the_on_disk_format():
    assert FIXTURES
    for tarball in FIXTURES:
        assert tarball.stat().st_size < 200_000, tarball


@pytest.mark.parametrize("tarball", FIXTURES, ids=lambda p: p.name.removesuffix(".tar.gz"))
def test_a_data_directory_of_an_earlier_release_is_read_as_written(tarball, tmp_path):
    manifest = json.loads(tarball.with_name(tarball.name.replace(".tar.gz", ".json")).read_text())
    with tarfile.open(tarball) as tar:
        tar.extractall(tmp_path, filter="data")
    data = tmp_path / "data"
    assert (
        sorted(p.relative_to(data).as_posix() for p in data.rglob("*") if p.is_file())
        == (manifest["files"])
    )
    broker = BrokerProcess(data, settings=manifest["settings"]).start()
    try:
        state = snapshot(broker.bootstrap)
        assert state["partitions"] == manifest["partitions"]
        assert state["read_committed"] == manifest["read_committed"]
        assert state["committed"] == manifest["committed"]
        # and it goes on from there: the transactional id's epoch is bumped, the
        # partition's next offset follows the old log end
        txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "upgrade-txn"})
        txn.init_transactions(30)
        txn.begin_transaction()
        txn.produce("txn", key="after", value="after upgrade", partition=0)
        txn.commit_transaction(30)
        after = snapshot(broker.bootstrap)
        old_end = manifest["partitions"]["txn-0"]["log_end"]
        assert after["partitions"]["txn-0"]["records"][-1]["offset"] == old_end
        assert after["read_committed"]["txn-0"] == [
            *manifest["read_committed"]["txn-0"],
            "after upgrade",
        ]
    finally:
        assert broker.stop(60) == 0
    assert "recover" not in broker.log_text().lower(), broker.log_text()
