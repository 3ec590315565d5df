#!/usr/bin/env python3
"""Build odradek's wheel and sdist, install the wheel into a scratch virtual environment and
use it: ``odradek broker``, a topic, a produce/consume round trip and the console.

    python tools/package_check.py [--keep] [--workdir DIR] [--no-compiler]

Steps (each prints one line; the first failure exits 1 with what went wrong):

1. ``python -m build --wheel --sdist`` of a copy of the repository's files that git does not
   ignore (as a fresh clone has them) into ``<workdir>/dist``;
2. the wheel holds the console's templates and static assets, ``py.typed`` and, when a C
   compiler was there, the compiled ``odradek.client._speedups``; the sdist holds the C source,
   ``LICENSE`` and ``README.md``;
3. a new venv (``python -m venv``), ``pip install <wheel>`` (dependencies from the package
   index pip is configured with), run from a folder outside the repository with no
   ``PYTHONPATH``, so that nothing of the source tree is imported;
4. ``odradek broker`` on ephemeral ports (Kafka and console), data in the workdir;
5. ``odradek topics create``, ``odradek produce`` of two keyed records, ``odradek consume``
   of them back, compared line by line; the console's page and one static asset over HTTP;
6. SIGTERM, and the broker's exit code 0.

``--no-compiler`` builds with ``CC=false``, as on a machine without a C compiler: the wheel
then has no compiled speedups and must pass the same round trip on the pure-Python fallback.

Needs the ``build`` package in the running interpreter (``make install-test`` installs it).
Takes about a minute, most of it in pip.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READY = re.compile(r"odradek broker listening on (\S+):(\d+)")
CONSOLE = re.compile(r"console listening on (http://\S+)")


class CheckFailed(Exception):
    pass


def step(text: str) -> None:
    print(f"package_check: {text}", flush=True)


def run(
    cmd: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 600, **kw: object
) -> str:
    proc = subprocess.run(
        cmd,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,  # type: ignore[call-overload]
    )
    if proc.returncode != 0:
        raise CheckFailed(
            f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return str(proc.stdout)


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def source_tree(workdir: Path) -> Path:
    """A copy of the repository's files that git does not ignore (no build products such as
    an in-place compiled ``_speedups*.so``), as a fresh clone has them."""
    tree = workdir / "source"
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if src.is_file():
            dst = tree / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    return tree


def build(workdir: Path, no_compiler: bool = False) -> tuple[Path, Path]:
    dist = workdir / "dist"
    tree = source_tree(workdir)
    env = clean_env()
    if no_compiler:
        env["CC"] = "false"  # every compile fails: the optional extension is left out
    run(
        [sys.executable, "-m", "build", "--wheel", "--sdist", "--outdir", str(dist), str(tree)],
        env=env,
        cwd=workdir,
    )
    wheels = sorted(dist.glob("odradek-*.whl"))
    sdists = sorted(dist.glob("odradek-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise CheckFailed(f"expected one wheel and one sdist in {dist}: {os.listdir(dist)}")
    return wheels[0], sdists[0]


def check_contents(wheel: Path, sdist: Path) -> bool:
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = [
        "odradek/py.typed",
        "odradek/console/static/htmx.min.js",
        "odradek/console/static/uPlot.iife.min.js",
    ]
    missing = [n for n in wanted if n not in names]
    if not any(n.startswith("odradek/console/templates/") and n.endswith(".html") for n in names):
        missing.append("odradek/console/templates/*.html")
    if missing:
        raise CheckFailed(f"the wheel lacks {missing}")
    compiled = any(re.match(r"odradek/client/_speedups\..*\.(so|pyd)$", n) for n in names)
    with tarfile.open(sdist) as tar:
        sdist_names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for name in ("src/odradek/client/_speedups.c", "LICENSE", "README.md", "pyproject.toml"):
        if name not in sdist_names:
            raise CheckFailed(f"the sdist lacks {name}")
    return compiled


def install(workdir: Path, wheel: Path) -> Path:
    venv = workdir / "venv"
    run([sys.executable, "-m", "venv", str(venv)], env=clean_env(), cwd=workdir)
    run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        env=clean_env(),
        cwd=workdir,
        timeout=900,
    )
    return venv


def round_trip(workdir: Path, venv: Path, compiled: bool) -> None:
    odradek = str(venv / "bin" / "odradek")
    env = clean_env()
    where = run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import odradek, odradek.client._records as r; "
            "print(odradek.__file__); print(r.__name__)",
        ],
        env=env,
        cwd=workdir,
    )
    if str(ROOT / "src") in where or str(workdir / "source") in where:
        raise CheckFailed(f"the scratch venv imports the source tree: {where}")
    if compiled:
        run(
            [str(venv / "bin" / "python"), "-c", "import odradek.client._speedups"],
            env=env,
            cwd=workdir,
        )
    data = workdir / "data"
    broker = subprocess.Popen(
        [
            odradek,
            "broker",
            "--set",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--set",
            "http.listeners=http://127.0.0.1:0",
            "--set",
            f"log.dirs={data}",
            "--log-level",
            "info",
        ],
        env=env,
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stderr_lines: list[str] = []

    def drain() -> None:
        assert broker.stderr is not None
        for line in broker.stderr:
            stderr_lines.append(line)

    threading.Thread(target=drain, daemon=True).start()
    try:
        assert broker.stdout is not None
        ready = broker.stdout.readline()
        m = READY.search(ready)
        if m is None:
            raise CheckFailed(
                f"no ready line from odradek broker: {ready!r} {''.join(stderr_lines)}"
            )
        bootstrap = f"{m.group(1)}:{m.group(2)}"
        step(f"odradek broker from the wheel is ready on {bootstrap}")
        run(
            [odradek, "topics", "create", "packaged", "-b", bootstrap],
            env=env,
            cwd=workdir,
            timeout=60,
        )
        run(
            [odradek, "produce", "packaged", "--key-separator", ":", "-b", bootstrap],
            env=env,
            cwd=workdir,
            timeout=60,
            input="k1:hello\nk2:world\n",
        )
        out = run(
            [
                odradek,
                "consume",
                "packaged",
                "--from-beginning",
                "--max-messages",
                "2",
                "--timeout-ms",
                "20000",
                "--print-key",
                "-b",
                bootstrap,
            ],
            env=env,
            cwd=workdir,
            timeout=60,
        )
        if out.splitlines() != ["k1\thello", "k2\tworld"]:
            raise CheckFailed(f"consumed {out!r}, expected the two records produced")
        step("produced and consumed two records with the installed odradek")
        deadline = time.monotonic() + 20
        url = None
        while url is None and time.monotonic() < deadline:
            found = CONSOLE.search("".join(stderr_lines))
            url = found.group(1) if found else None
            if url is None:
                time.sleep(0.05)
        if url is None:
            raise CheckFailed(f"no console line in the broker's log: {''.join(stderr_lines)}")
        with urllib.request.urlopen(url + "/", timeout=10) as page:
            body = page.read().decode()
        asset = re.search(r'src="([^"]*htmx[^"]*\.js)"', body)
        if asset is None:
            raise CheckFailed("the console page does not load htmx")
        with urllib.request.urlopen(url + asset.group(1), timeout=10) as js:
            if js.status != 200 or len(js.read()) < 1000:
                raise CheckFailed(f"the console's asset {asset.group(1)} is not served")
        step(f"the console at {url} serves its page and assets from the wheel")
    finally:
        broker.terminate()
        try:
            code = broker.wait(30)
        except subprocess.TimeoutExpired:
            broker.kill()
            code = broker.wait(10)
    if code != 0:
        raise CheckFailed(
            f"odradek broker exited {code} on SIGTERM: {''.join(stderr_lines)[-2000:]}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--workdir", type=Path, help="scratch folder (default: a new temporary one)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument(
        "--no-compiler",
        action="store_true",
        help="build as on a machine without a C compiler: the wheel must work without speedups",
    )
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="odradek-package-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        wheel, sdist = build(workdir, args.no_compiler)
        step(f"built {wheel.name} and {sdist.name}")
        compiled = check_contents(wheel, sdist)
        if args.no_compiler and compiled:
            raise CheckFailed("built without a compiler, yet the wheel holds compiled speedups")
        step(
            "wheel and sdist hold the console assets, py.typed and the C source; compiled "
            f"speedups: {'yes' if compiled else 'no (no C compiler: the pure-Python fallback)'}"
        )
        venv = install(workdir, wheel)
        step(f"installed the wheel into {venv}")
        round_trip(workdir, venv, compiled)
    except (CheckFailed, subprocess.TimeoutExpired) as exc:
        print(f"package_check: FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    step(f"ok in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
