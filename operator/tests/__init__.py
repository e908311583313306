"""The operator's tests. A package only so that pytest names its modules `tests.*`: without
it pytest's importlib mode names them `operator.tests.*` and replaces the standard
library's `operator` module in sys.modules with this folder (pytest 8.4 re-imports a parent
module that has no __path__), which breaks every later `import operator` user.
"""
