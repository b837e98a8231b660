"""The composition root's wiring of the coordinators (broker/server/coordinators.py),
with stand-ins for the coordinators and partitions."""

from types import SimpleNamespace

from broker.server import dispatch
from broker.server.coordinators import leadership_changed


class FakeCoordinator:
    def __init__(self):
        self.owned: dict[int, object] = {}
        self.calls: list[tuple] = []

    def load_partition(self, index, second):
        self.owned[index] = second
        self.calls.append(("load", index))

    def unload_partition(self, index):
        self.owned.pop(index, None)
        self.calls.append(("unload", index))


def _replicas(epoch: int = 5):
    part = SimpleNamespace(leader_epoch=epoch)
    return SimpleNamespace(get_partition=lambda topic, index: part)


def test_leading_a_coordinator_partition_loads_it_and_losing_it_unloads_it():
    groups, txns = FakeCoordinator(), FakeCoordinator()

    def changed(topic, index, leader):
        leadership_changed(_replicas(), groups, txns, topic, index, leader)

    changed("__consumer_offsets", 2, True)
    changed("__consumer_offsets", 2, True)  # already loaded: not again
    changed("__consumer_offsets", 2, False)
    assert groups.calls == [("load", 2), ("unload", 2)]
    changed("__transaction_state", 1, True)
    assert txns.owned == {1: 5}  # its coordinator epoch is the leader epoch
    changed("__transaction_state", 1, False)
    changed("lines", 0, True)
    assert txns.calls == [("unload", 1), ("load", 1), ("unload", 1)] and txns.owned == {}


def test_handler_modules_only_register_handlers():
    """Services are the composition root's: no handler module builds or tears down
    any (the setup/teardown hooks are gone)."""
    for module in dispatch.load_handlers():
        assert not hasattr(module, "setup") and not hasattr(module, "teardown"), module
