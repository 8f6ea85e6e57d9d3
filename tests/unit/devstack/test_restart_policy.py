"""The launcher's restart policy: doubling back-off, a crash-loop limit over a sliding window."""
from __future__ import annotations

import pytest
from meshward.devstack.launcher import CrashLoop, RestartPolicy


def test_backoff_doubles_up_to_the_cap():
    policy = RestartPolicy(backoff_s=0.2, max_backoff_s=1.0, limit=10, window_s=60)
    assert [policy.next_delay(float(t)) for t in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]


def test_more_crashes_than_the_limit_within_the_window_is_a_crash_loop():
    policy = RestartPolicy(limit=3, window_s=60)
    for t in (0.0, 1.0, 2.0):
        policy.next_delay(t)
    with pytest.raises(CrashLoop):
        policy.next_delay(3.0)


def test_old_crashes_leave_the_window():
    policy = RestartPolicy(backoff_s=0.2, limit=2, window_s=10)
    policy.next_delay(0.0)
    policy.next_delay(5.0)
    assert policy.next_delay(30.0) == 0.2  # the earlier two are forgotten: the back-off starts over
