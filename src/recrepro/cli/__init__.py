"""The ``recrepro`` command line: the parser and the shared verbs (:mod:`.main`), the ``data`` verbs
(:mod:`.data`), and how a known failure ends a command (:mod:`.errors`). Each paper registers its own
verbs from its ``cli`` module."""
