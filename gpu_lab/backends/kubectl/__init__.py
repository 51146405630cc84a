"""``Session.kubectl``: what kubectl prints, on every backend.

The real backends run the real kubectl against the lab (``real.py``); the sim renders the
commands it serves from its own state in kubectl's format (``render.py`` and the modules it
calls: ``command.py`` reads the command line, ``fromsim.py`` the session, ``gettable.py`` and
``describe.py`` write kubectl's tables through Go's tabwriter, ``tabwriter.py``, with ages as
kubectl writes them, ``duration.py``). Either way the answer is a ``KubectlOutput``.
"""

from __future__ import annotations

from .output import KubectlOutput

__all__ = ["KubectlOutput"]
