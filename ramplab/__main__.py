"""``python -m ramplab``: the ``ramplab`` command, for an environment without its script."""

from ramplab.cli.app import main

main()
