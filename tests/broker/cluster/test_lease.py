"""The ZooKeeper session lease (broker.cluster.lease): pure timing rules."""

import pytest

from broker.cluster.lease import MARGIN, SessionLease


def test_a_fresh_lease_runs_for_the_timeout_less_the_margin():
    lease = SessionLease(10.0, now=100.0)
    assert lease.expires_at == pytest.approx(100.0 + 10.0 * (1 - MARGIN))
    assert not lease.check(108.9)
    assert lease.check(109.0)


def test_an_answer_extends_the_lease_from_when_the_request_was_sent():
    lease = SessionLease(10.0, now=0.0)
    lease.renew(sent_at=5.0, now=6.0)  # ZooKeeper reset the session's clock after 5.0
    assert lease.expires_at == pytest.approx(5.0 + 9.0)
    assert not lease.check(13.9)
    assert lease.check(14.0)


def test_a_late_answer_to_an_old_request_never_shortens_the_lease():
    lease = SessionLease(10.0, now=0.0)
    lease.renew(sent_at=6.0, now=6.5)
    lease.renew(sent_at=2.0, now=7.0)
    assert lease.expires_at == pytest.approx(15.0)


def test_expiry_is_reported_once_and_an_answer_ends_it():
    lease = SessionLease(4.0, now=0.0)
    assert lease.check(3.6) and lease.expired
    assert not lease.check(3.7)  # already reported
    assert lease.renew(sent_at=10.0, now=10.1) is True  # ends the expiry
    assert not lease.expired
    assert lease.renew(sent_at=11.0, now=11.1) is False
    assert not lease.check(11.0 + 3.5)
    assert lease.check(11.0 + 3.6)


def test_the_lease_ends_before_zookeeper_can_expire_the_session():
    """ZooKeeper receives a request after it was sent and expires the session no
    sooner than `timeout` after that: the lease is over by then."""
    timeout, sent = 6.0, 50.0
    lease = SessionLease(timeout, now=0.0)
    lease.renew(sent, now=sent + 0.5)
    earliest_expiry_in_zookeeper = sent + timeout
    assert lease.expires_at < earliest_expiry_in_zookeeper


def test_a_late_answer_to_a_request_sent_before_a_stall_ends_no_expiry():
    """The broker froze (SIGSTOP, a long GC) with a request in flight; its answer,
    read after the wake-up, proves nothing about the session now."""
    lease = SessionLease(4.0, now=0.0)
    assert lease.check(10.0)
    assert lease.renew(sent_at=1.0, now=10.1) is False
    assert lease.expired
