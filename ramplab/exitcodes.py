"""Process exit codes of the ramplab CLI, in one place so CI scripts can rely on them.

``SLO_MISSED`` and ``RUN_FAILED`` are distinct on purpose: a missed SLO is a finding about the
target (the run itself is trustworthy), a failed run means the numbers cannot be trusted at all
(a worker died, the target never became healthy, the generator crashed). CI usually wants to
fail on both but report them differently.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    USAGE = 2  # bad arguments, shape, retry config or gate expression (argparse's convention)
    SLO_MISSED = 3  # the run completed and at least one gate failed
    RUN_FAILED = 4  # the run could not complete or its measurements cannot be trusted
    INTERRUPTED = 130  # Ctrl-C, results kept (128 + SIGINT, the shell's convention)
