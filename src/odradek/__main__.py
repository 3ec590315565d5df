import sys

from odradek.cli import run_own_parser

run_own_parser(sys.argv[1:])  # `python -m odradek broker` runs without importing typer

from odradek.cli.main import main  # noqa: E402

main()
