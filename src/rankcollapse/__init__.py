"""rankcollapse: the helper package behind the companion book.

Seven layers, each importing only those below it (``ARCHITECTURE.md`` at the repository root):
``core`` <- {``engine``, ``theory``} <- ``hf`` <- ``experiments`` <- ``verdicts`` <- ``book``.
"""

import torch

# TF32 would spoil a precision study: switch it off once, for every user of the package.
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

__version__ = "0.1.0"
