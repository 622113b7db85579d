"""``python -m helpers.bundle ENGINE ...``: the bundle command without the playbook CLI."""

from helpers.bundle.cli import main

raise SystemExit(main())
