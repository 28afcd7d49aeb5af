"""``python -m streamshield.cli``: the command line, as the ``streamshield`` script."""

from streamshield.cli import main

main()
