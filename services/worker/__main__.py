"""``python -m services.worker --cluster SPEC --task 0``: serve one worker task."""

import sys

from services.worker.cli import main

sys.exit(main(default_job="worker"))
