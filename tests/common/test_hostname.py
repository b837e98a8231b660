"""This machine's name (common/hostname.py): the environment's HOST wins."""

import socket

from common.hostname import this_host


def test_the_environment_wins_else_the_kernel_host_name():
    assert this_host({"HOST": "web7.example"}) == "web7.example"
    assert this_host({}) == socket.gethostname()
    assert this_host({"HOST": ""}) == socket.gethostname()
