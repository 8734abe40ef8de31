"""``python -m somna``: the ``somna`` command (``somna._cli``)."""

from somna._cli import main

main()
