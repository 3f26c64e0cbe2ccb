"""`python -m docs_tools.diagram`: see the package's docstring."""

import sys

from docs_tools.diagram import main

sys.exit(main())
