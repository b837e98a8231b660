import asyncio
import inspect
from pathlib import Path

import pytest
from hypothesis import settings

from common.aio import within
from testkit.procs import BrokerProcess

ASYNC_TEST_TIMEOUT_S = 60

# Hypothesis' per-example deadline (200 ms) is a timed assertion: on a shared, busy
# machine a slow example fails a correct property. No deadline, for every test.
settings.register_profile("logflume", deadline=None)
settings.load_profile("logflume")

# `make test` runs the suite on two workers (pytest-xdist). A group of tests runs whole
# on one worker: each module is a group (its module-scoped brokers and clusters start
# once); all Spark tests are one group, sharing one JVM; tests/deploy is one group,
# because its modules install packages on this machine (a .deb). The wheel they and
# the fleet lab build is built under a lock (testkit.fleet.build_wheel).
# tests/fleet (one module, the fleet lab) is a group of its own too. The three, the
# longest of the suite (Spark, deploy, then the fleet lab's 3-4 minutes), are handed
# out first, so that no worker ends the run alone on one of them. (xdist's own
# `--dist loadgroup` marks cannot do this with pytest 9.2, which no longer lets a
# plugin rename a test's node id.)
SHARED_GROUPS = ("tests/spark_etl/", "tests/deploy/", "tests/fleet/")


def _group(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return next((g for g in SHARED_GROUPS if path.startswith(g)), path)


def pytest_collection_modifyitems(config, items):
    order = {group: rank for rank, group in enumerate(SHARED_GROUPS)}
    items.sort(key=lambda item: order.get(_group(item.nodeid), len(SHARED_GROUPS)))


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid)

    return GroupScheduling(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Runs every `async def` test function, in any directory, on a fresh asyncio loop
    (`asyncio.run`), failing it with TimeoutError after ASYNC_TEST_TIMEOUT_S seconds."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(within(pyfuncitem.obj(**kwargs), ASYNC_TEST_TIMEOUT_S))
    return True


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


@pytest.fixture
def driver(tmp_path):
    """Headless Chromium for the console's page tests (tests/console/browser.py),
    shared by the single-node and the cluster tests; closed after the test."""
    from tests.console.browser import chromium

    browser = chromium(tmp_path)
    yield browser
    browser.quit()


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """A wheel of this tree (testkit.fleet.build_wheel), once per test worker."""
    from testkit.fleet import build_wheel

    return build_wheel(tmp_path_factory.mktemp("wheel"))
