"""rankcollapse: the helper package behind the companion book.

Every page imports this package; the modules follow DESIGN.md: ``masks``, ``metrics``,
``dynamics``, ``san``, ``models``, ``data``, ``experiments``, ``plotting``, ``runner``.
"""

import torch

# TF32 would spoil a precision study: switch it off once, for every user of the package.
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

__version__ = "0.1.0"
