import pytest

from tests.procs import BrokerProcess


@pytest.fixture
def broker_factory(tmp_path):
    """Start brokers on loopback: `broker_factory(settings={...}, args=[...])`; all
    stopped at the end."""
    started = []

    def make(settings=None, name="broker", args=None):
        b = BrokerProcess(tmp_path / name, settings=settings, args=args).start()
        started.append(b)
        return b

    yield make
    for b in started:
        b.stop()


@pytest.fixture
def broker(broker_factory):
    """One single-node broker subprocess with default settings."""
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory):
    """One default broker shared by all tests of a module (tests use distinct topics)."""
    b = BrokerProcess(tmp_path_factory.mktemp("module-broker") / "data").start()
    yield b
    b.stop()
