"""``python -m rankcollapse ...`` (and ``torchrun -m rankcollapse run ...``): the ``rankcollapse`` command."""

import sys

from rankcollapse.book.cli import main

sys.exit(main())
