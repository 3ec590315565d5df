"""tests/testing: odradek.testing (EmbeddedBroker, pytest plugin, helpers).

``example_project/`` is a stand-alone project run through pytester, never collected here.
"""

from __future__ import annotations

collect_ignore = ["example_project"]
