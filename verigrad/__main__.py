"""`python -m verigrad` is the `verigrad` command."""

from .cli import main

raise SystemExit(main())
