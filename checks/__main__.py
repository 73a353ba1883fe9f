from checks.cli import main

raise SystemExit(main())
