"""`python -m ckpt` runs the command-line interface."""
from ckpt.cli import main

main()
