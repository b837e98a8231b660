"""The pure parts of `logflume cluster restart --rolling` (logflume/rolling_restart.py):
what a Metadata answer says of the cluster, the restart order, and the systemctl
command lines. The roll itself runs against real brokers in
tests/cluster/test_rolling_restart.py."""

from logflume.rolling_restart import SystemdRestarter, parse_view


def metadata(controller: int, partitions: list[tuple[int, list[int], list[int]]]) -> dict:
    return {
        "brokers": [{"node_id": b, "host": "127.0.0.1", "port": 9090 + b} for b in (2, 0, 1)],
        "controller_id": controller,
        "topics": [
            {
                "name": "t",
                "error_code": 0,
                "partitions": [
                    {
                        "partition_index": i,
                        "leader_id": leader,
                        "replica_nodes": r,
                        "isr_nodes": isr,
                    }
                    for i, (leader, r, isr) in enumerate(partitions)
                ],
            },
            {"name": "gone", "error_code": 3, "partitions": []},
        ],
    }


def test_the_controller_goes_last_the_others_by_id():
    assert parse_view(metadata(0, [])).order() == [1, 2, 0]
    assert parse_view(metadata(1, [])).order() == [0, 2, 1]


def test_under_replicated_means_no_leader_or_a_replica_out_of_the_isr():
    view = parse_view(
        metadata(
            0,
            [
                (0, [0, 1, 2], [2, 1, 0]),  # full, in another order
                (1, [1, 2, 0], [1, 2]),  # one out
                (-1, [2, 0, 1], [2, 0, 1]),  # no leader
            ],
        )
    )
    assert [p.index for p in view.under_replicated()] == [1, 2]
    assert str(view.under_replicated()[0]) == "t-1 (leader 1, replicas [1, 2, 0], isr [1, 2])"


def test_a_partition_is_off_its_preferred_leader_when_not_led_by_its_first_replica():
    view = parse_view(metadata(0, [(0, [0, 1, 2], [0, 1, 2]), (2, [1, 2, 0], [1, 2, 0])]))
    assert [p.index for p in view.not_on_preferred()] == [1]


def test_systemctl_restarts_the_unit_here_or_on_the_brokers_host():
    here = SystemdRestarter("logflume-broker@{id}")
    assert here.command(3) == ["systemctl", "restart", "logflume-broker@3"]
    remote = SystemdRestarter("logflume-broker@{id}", "root@broker{id}.example.net")
    assert remote.describe(1) == (
        "systemctl --host root@broker1.example.net restart logflume-broker@1"
    )
