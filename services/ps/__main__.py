"""``python -m services.ps --cluster SPEC --task 0``: serve one parameter-server task."""

import sys

from services.worker.cli import main

sys.exit(main(default_job="ps"))
