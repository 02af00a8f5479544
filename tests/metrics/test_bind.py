"""``xjobs_worker --metrics-port`` binds this host only unless ``--metrics-host`` widens it
(issue 26, item 5): the metrics name every queue and job, not for every network to read."""

from __future__ import annotations

import pytest

from django_xjobs.management.commands.xjobs_worker import Command, _metrics_server
from tests.support.database import free_port


@pytest.mark.parametrize(
    ("args", "address"),
    [((), "127.0.0.1"), (("--metrics-host", "0.0.0.0"), "0.0.0.0")],
)
def test_the_metrics_endpoint_binds_loopback_unless_widened(args, address):
    options = (
        Command()
        .create_parser("manage.py", "xjobs_worker")
        .parse_args(["--metrics-port", str(free_port()), *args])
    )
    server = _metrics_server(options.metrics_port, options.metrics_host)
    try:
        assert server.server_address[0] == address
    finally:
        server.shutdown()
        server.server_close()
