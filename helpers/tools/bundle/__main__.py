"""``python -m helpers.tools.bundle ENGINE ...``: the bundle command without the playbook CLI."""

from helpers.tools.bundle.cli import main

raise SystemExit(main())
