"""``python -m ppo_viz.export [OUT_DIR]``: see :func:`ppo_viz.export.main`."""

import sys

from ppo_viz.export.site import main

if __name__ == "__main__":  # importing this module (a doctest or module walk) runs nothing
    sys.exit(main())
