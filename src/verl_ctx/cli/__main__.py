"""``python -m verl_ctx.cli`` is ``verl-ctx``."""

from . import main

main()
