"""The test hosts in network namespaces: strom.devtools.netns, shared with
`strom-dev-cluster --netns` (see that module's docstring). Tests `import netns` as before."""

from strom.devtools.netns import *  # noqa: F403
from strom.devtools.netns import __all__ as __all__
