"""Build the compiled twin ``odradek.client._speedups`` with the machine's C compiler.

    python -m odradek.client._build          # writes _speedups<EXT_SUFFIX> next to this file

Needs gcc (or $CC) and the Python headers. Without it everything still works, slower: every
function has a pure-Python twin (``_records`` / ``columnar``) with the same results.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "_speedups.c"


def target() -> Path:
    return HERE / ("_speedups" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))


def build(*, force: bool = False, quiet: bool = False) -> Path:
    out = target()
    if not force and out.exists() and out.stat().st_mtime >= SOURCE.stat().st_mtime:
        return out
    cc = shlex.split(os.environ.get("CC", "gcc"))
    include = sysconfig.get_paths()["include"]
    tmp = out.with_suffix(".tmp")
    cmd = [*cc, "-O3", "-shared", "-fPIC", "-Wall", f"-I{include}", str(SOURCE), "-o", str(tmp)]
    if not quiet:
        print(" ".join(cmd))
    subprocess.run(cmd, check=True)
    os.replace(tmp, out)
    return out


if __name__ == "__main__":
    print(build(force="--force" in sys.argv))
