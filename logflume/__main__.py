from logflume.cli import main

raise SystemExit(main())
