import sys

from slate_ops.cli.main import main

sys.exit(main())
