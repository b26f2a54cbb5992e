"""Marks the op the user called, so a run-time error names it (src/ir/origin.h).

`cross_entropy` records a `gather`; when the program runs and a target is out of range, the error
says "cross_entropy at train.py:41", not "gather". The outermost marked function names the op.
"""
import functools

from . import _C


def user_op(name):
    def decorate(fn):
        @functools.wraps(fn)
        def marked(*args, **kwargs):
            outer = _C._enter_user_op(name)
            try:
                return fn(*args, **kwargs)
            finally:
                _C._exit_user_op(outer)
        return marked
    return decorate
