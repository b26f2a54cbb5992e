"""Lazuli's Python log lines, through the standard `logging` module (docs/debugging.md).

Loggers: ``lazuli`` and its children (``lazuli.torch`` for the torch.compile bridge). Levels:
INFO for what LAZULI_DEBUG=1 shows (a graph compiled, a partition traced, a fallback); where the
DEBUG level is on (LAZULI_DEBUG=2, TORCH_LOGS="+lazuli", or the program's own setting) those
records carry their detail whole (every input of a traced partition). WARNING and above always
reach Python's default handling.

Where lines go:
- ``LAZULI_DEBUG`` >= 1 (or ``lz.debug._set_config("debug", n)``): Lazuli's own handler on the
  ``lazuli`` logger writes them, with the ``[lazuli] `` prefix the C++ runtime's debug lines
  carry, to ``LAZULI_DEBUG_FILE`` when set, else to standard error, beside those lines and in
  order with them. Records do not propagate further then (as torch does for TORCH_LOGS), so a
  root handler does not print them twice.
- Otherwise nothing is installed: a program that configures logging itself gets the records like
  any library's (``logging.getLogger("lazuli").setLevel(logging.INFO)``), and PyTorch's
  ``TORCH_LOGS="+lazuli"`` (or ``"lazuli"`` for INFO) routes them through torch's log format.
"""
import logging
import sys

from . import _C

PREFIX = "[lazuli] "


def _debug_level() -> int:
    return int(_C.debug._get_config("debug"))


def level_for(debug: int) -> int:
    """The logging level a LAZULI_DEBUG value turns on."""
    if debug <= 0:
        return logging.WARNING
    return logging.INFO if debug == 1 else logging.DEBUG


class _DebugHandler(logging.Handler):
    """Writes where the C++ runtime's debug lines go, read at each record (the setting can change
    while the program runs)."""

    def emit(self, record):
        try:
            text = PREFIX + self.format(record) + "\n"
            path = _C.debug._get_config("debug_file")
            if path:
                with open(path, "a") as f:
                    f.write(text)
            else:
                sys.stderr.write(text)
                sys.stderr.flush()
        except Exception:  # noqa: BLE001  (logging's contract: a handler never raises)
            self.handleError(record)


_root = logging.getLogger("lazuli")
_handler = _DebugHandler()
_installed_for = None  # the debug level the handler was installed for, or None
_saved = None          # the logger's level and propagate before the handler came, restored after


def _sync_with_debug_level():
    """Installs or removes Lazuli's handler to follow the debug level."""
    global _installed_for, _saved
    debug = _debug_level()
    if debug == (_installed_for or 0):
        return
    if debug > 0:
        if _installed_for is None:
            _saved = (_root.level, _root.propagate)
            _root.addHandler(_handler)
            _root.propagate = False
        _root.setLevel(level_for(debug))
        _installed_for = debug
    elif _installed_for is not None:
        _root.removeHandler(_handler)
        _root.setLevel(_saved[0])
        _root.propagate = _saved[1]
        _installed_for = None


def get_logger(name: str) -> logging.Logger:
    """A child of the ``lazuli`` logger ("lazuli.torch")."""
    return logging.getLogger(name)


def enabled(logger: logging.Logger, level: int) -> bool:
    """Whether a record at `level` would be handled (LAZULI_DEBUG, or the program's own setup):
    for lines whose text costs something to make."""
    _sync_with_debug_level()
    return logger.isEnabledFor(level)


def log(logger: logging.Logger, level: int, text: str) -> None:
    """Logs `text` at `level`, after bringing the handler in line with LAZULI_DEBUG."""
    _sync_with_debug_level()
    if logger.isEnabledFor(level):
        logger.log(level, text)


def summarize(items, limit: int = 3, detail: bool = False) -> str:
    """`items` joined with ", ", the first `limit` only unless `detail`, then "... N more": a log
    line that fits a terminal (LAZULI_DEBUG=2 passes detail=True: every item)."""
    items = list(items)
    if detail or len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f", ... {len(items) - limit} more"
