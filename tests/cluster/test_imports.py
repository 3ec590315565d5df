"""A single-node broker must not load ZooKeeper support (kazoo, odradek.cluster, odradek.controller)."""

from __future__ import annotations

import subprocess
import sys


def test_broker_command_does_not_import_cluster_support() -> None:
    code = (
        "import sys, odradek.cli.main, odradek.cli.broker, odradek.broker\n"
        "import odradek.broker.server, odradek.broker.registry, odradek.broker.services\n"
        "bad = [m for m in sys.modules if m.split('.')[0] == 'kazoo'"
        " or m.startswith(('odradek.cluster', 'odradek.controller'))]\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
