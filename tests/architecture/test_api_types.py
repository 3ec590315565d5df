"""``odradek.protocol.api_types`` names every version each handler is given: regenerate it
(``tools/gen_api_types.py``) when an API's served versions change."""

from __future__ import annotations

import re
from pathlib import Path

from odradek.broker.registry import load_registry

API_TYPES = Path(__file__).resolve().parents[2] / "src" / "odradek" / "protocol" / "api_types.py"
OWN_DECODERS = {0, 4, 5, 6, 7}  # Produce and the ZooKeeper-mode inter-broker APIs


def test_every_served_version_has_its_request_and_response_type() -> None:
    aliases = set(re.findall(r"\bas (\w+)", API_TYPES.read_text()))
    missing = [
        f"{spec.name}{kind}V{version}"
        for key, spec in sorted(load_registry().items())
        if key not in OWN_DECODERS
        for version in range(spec.oldest_served, spec.max_version + 1)
        for kind in ("Request", "Response")
        if f"{spec.name}{kind}V{version}" not in aliases
    ]
    assert not missing, "run tools/gen_api_types.py: " + ", ".join(missing)
