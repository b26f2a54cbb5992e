"""What a user sees of the package itself: public names print under `lazuli`, not the extension."""
import pickle
import traceback

import numpy as np
import pytest

import lazuli as lz


def test_execution_error_shows_as_lazuli_execution_error():
    assert lz.ExecutionError is lz._C.ExecutionError  # the old spelling keeps working
    assert repr(lz.ExecutionError) == "<class 'lazuli.ExecutionError'>"
    x = lz.tensor(np.arange(12.0, dtype=np.float32).reshape(4, 3))
    bad = x.index_select(0, lz.tensor([0, 5]) + 0) * 2.0  # index 5 of 4, found when it runs
    with pytest.raises(lz.ExecutionError) as info:
        bad.numpy()
    shown = "".join(traceback.format_exception_only(info.type, info.value))
    assert shown.startswith("lazuli.ExecutionError: ") and "index_select" in shown
    # Found again by its public name, so it crosses process boundaries (multiprocessing).
    assert type(pickle.loads(pickle.dumps(info.value))) is lz.ExecutionError


def test_one_version_number_from_cmakelists():
    # CMakeLists.txt's project(VERSION) is written once; the package, the wheel's metadata (when
    # installed) and the C++ library's file names all take it from there.
    import importlib.metadata
    import os
    import re
    cmake = os.path.join(os.path.dirname(__file__), "..", "..", "CMakeLists.txt")
    version = re.search(r"project\(lazuli VERSION ([0-9.]+)", open(cmake).read()).group(1)
    assert lz.__version__ == version
    try:
        installed = importlib.metadata.version("lazuli")
    except importlib.metadata.PackageNotFoundError:
        return  # run from the build tree (PYTHONPATH=python): no distribution to compare
    assert installed == version
