"""The persistent kernel cache (LAZULI_CACHE_DIR/kernels/*.lzk) across processes: a second process
compiles nothing, and damaged entries, unsafe or unwritable directories, concurrent writers,
read-only mode and a full disk all still give correct results and exit code 0.

Each test runs the same small program (softmax, layer norm, an MLP layer, reductions) in fresh
processes (the cache directory is read once, at start) with their own cache directory. The child
checks its values against numpy, prints its cache counters as JSON and exits non-zero on a wrong
value."""
import json
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest

import lazuli as lz

CHILD = r"""
import json, sys
import numpy as np
import lazuli as lz
from lazuli import nn

rng = np.random.default_rng(7)
x = rng.standard_normal((48, 40)).astype(np.float32)
w = (rng.standard_normal((16, 40)) * 0.2).astype(np.float32)
b = rng.standard_normal(16).astype(np.float32)
tx = lz.tensor(x)
outs = {
    "softmax": nn.functional.softmax(tx, 1),
    "layer_norm": nn.functional.layer_norm(tx, 40),
    "mlp": nn.functional.relu(nn.functional.linear(tx, lz.tensor(w), lz.tensor(b))),
    "colsum": (tx * tx + 1).sum(0),
    "rowmax": tx.exp().amax(1),
    "ints": ((tx * 100).to(lz.int32) & 7) + lz.arange(40, dtype=lz.int32),
}
lz.sync()
xs = x.astype(np.float64)
e = np.exp(xs - xs.max(1, keepdims=True))
mu = xs.mean(1, keepdims=True)
ref = {
    "softmax": e / e.sum(1, keepdims=True),
    "layer_norm": (xs - mu) / np.sqrt(((xs - mu) ** 2).mean(1, keepdims=True) + 1e-5),
    "mlp": np.maximum(xs @ w.T + b, 0),
    "colsum": (xs * xs + 1).sum(0),
    "rowmax": np.exp(xs).max(1),
    "ints": ((x * np.float32(100)).astype(np.int32) & 7) + np.arange(40, dtype=np.int32),
}
bad = [k for k in outs if not np.allclose(outs[k].numpy(), ref[k], rtol=1e-4, atol=1e-4)]
counters = {n: lz.debug.counter_value(n) for n in
            ("KernelCompile", "PersistentCacheHit", "PersistentCacheMiss", "PersistentCacheRejected",
             "PersistentCacheCrashedEntry")}
print(json.dumps({"bad": bad, **counters}))
sys.exit(1 if bad else 0)
"""

IS_ROOT = os.geteuid() == 0
PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(lz.__file__)))


def child_env(cache_dir, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZULI_")}
    env.update(PYTHONPATH=PKG_DIR, LAZULI_CACHE_DIR=str(cache_dir), LAZULI_BACKEND="cpu",
               PYTHONDONTWRITEBYTECODE="1")
    env.update(extra)
    return env


def parse(proc_stdout, proc_stderr, returncode):
    assert returncode == 0, f"exit code {returncode}\nstdout: {proc_stdout}\nstderr: {proc_stderr}"
    lines = [ln for ln in proc_stdout.splitlines() if ln.startswith("{")]
    assert lines, proc_stdout + proc_stderr
    result = json.loads(lines[-1])
    assert result["bad"] == [], result
    result["stderr"] = proc_stderr
    return result


def run_child(cache_dir, preexec_fn=None, **extra):
    """Runs the program in a fresh process; returns its counters (and stderr) after checking that
    it exited with 0 and computed correct values."""
    p = subprocess.run([sys.executable, "-c", CHILD], env=child_env(cache_dir, **extra),
                       capture_output=True, text=True, timeout=120, preexec_fn=preexec_fn)
    return parse(p.stdout, p.stderr, p.returncode)


def entries(cache_dir):
    d = os.path.join(cache_dir, "kernels")
    if not os.path.isdir(d):
        return []
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".lzk"))


def temp_files(cache_dir):
    d = os.path.join(cache_dir, "kernels")
    return [n for n in os.listdir(d) if n.startswith(".tmp")] if os.path.isdir(d) else []


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


@pytest.fixture(scope="module")
def filled_once(tmp_path_factory):
    """A cache directory filled by one run, and that run's counters: made once for the module."""
    cache = tmp_path_factory.mktemp("filled")
    first = run_child(cache)
    assert first["KernelCompile"] > 0
    assert len(entries(cache)) == first["KernelCompile"], (entries(cache), first)
    return cache, first


@pytest.fixture
def warm(tmp_path, filled_once):
    """A cache directory filled by one run: (dir, {entry path: bytes}, that run's counters). The
    test's own copy (modes and times kept) of filled_once's, which a test may damage: filling one
    costs a child process and its kernel compiles."""
    cache, first = filled_once
    shutil.copytree(cache, tmp_path, symlinks=True, dirs_exist_ok=True)
    files = entries(tmp_path)
    assert len(files) == first["KernelCompile"], (files, first)
    return tmp_path, {p: read(p) for p in files}, dict(first)


# ---- the normal case --------------------------------------------------------------------------

def test_a_second_process_running_the_same_program_compiles_nothing(warm):
    cache, files, first = warm
    assert first["PersistentCacheHit"] == 0 and first["PersistentCacheMiss"] >= first["KernelCompile"]
    assert oct(stat.S_IMODE(os.stat(os.path.join(cache, "kernels")).st_mode)) == oct(0o700)
    second = run_child(cache)
    assert second["KernelCompile"] == 0, second
    assert second["PersistentCacheHit"] == len(files), second
    assert second["PersistentCacheRejected"] == 0
    assert {p: read(p) for p in entries(cache)} == files


# ---- damaged entries ----------------------------------------------------------------------------

def dead_pid():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def trial_markers(cache_dir):
    return [n for n in os.listdir(os.path.join(cache_dir, "kernels")) if n.endswith(".trial")]


def test_an_entry_a_process_died_inside_is_compiled_anew_and_a_live_ones_marker_is_not_a_crash(warm):
    cache, files, _ = warm
    paths = sorted(files)
    # What a process that died inside the first kernel leaves: its marker, naming its pid.
    write(paths[0][:-len(".lzk")] + ".trial", f"{dead_pid()}\n".encode())
    # A process trying the second kernel right now (this one): not a crash.
    write(paths[1][:-len(".lzk")] + ".trial", f"{os.getpid()}\n".encode())
    second = run_child(cache)
    assert second["PersistentCacheCrashedEntry"] == 1, second
    assert second["KernelCompile"] == 1 and second["PersistentCacheHit"] == len(paths) - 1, second
    assert "died inside the kernel" in second["stderr"], second["stderr"]
    assert read(paths[0]) == files[paths[0]]  # compiled again and stored
    assert trial_markers(cache) == []  # the child's own trial of the second kernel replaced it


def test_the_first_call_of_a_kernel_loaded_from_disk_leaves_no_marker_behind(warm):
    cache, files, _ = warm
    second = run_child(cache)
    assert second["PersistentCacheHit"] == len(files) and second["PersistentCacheCrashedEntry"] == 0
    assert trial_markers(cache) == []


def test_truncated_entries_are_rejected_and_rewritten(warm):
    cache, files, _ = warm
    paths = sorted(files)
    for i, p in enumerate(paths):
        keep = [0, 10, 47, 48, len(files[p]) // 2, len(files[p]) - 1][i % 6]
        write(p, files[p][:keep])
    second = run_child(cache)
    assert second["PersistentCacheRejected"] == len(paths), second
    assert second["KernelCompile"] == len(paths), second
    assert second["PersistentCacheHit"] == 0
    for p in paths:  # rewritten whole
        assert read(p) == files[p], p
    third = run_child(cache)
    assert third["KernelCompile"] == 0 and third["PersistentCacheRejected"] == 0, third


def test_entries_overwritten_with_random_bytes_are_rejected_and_rewritten(warm):
    cache, files, _ = warm
    garbage = {p: os.urandom(len(data)) for p, data in files.items()}
    for p, data in garbage.items():
        write(p, data)
    second = run_child(cache)
    assert second["PersistentCacheRejected"] > 0, second
    assert second["PersistentCacheRejected"] == len(files), second
    assert second["KernelCompile"] == len(files)
    for p in files:
        assert read(p) != garbage[p], f"{p} was not rewritten"
        assert read(p) == files[p]


def test_a_flipped_payload_byte_under_a_valid_header_is_rejected(warm):
    cache, files, _ = warm
    p = sorted(files)[0]
    data = bytearray(files[p])
    data[len(data) // 2 + 24] ^= 0x40
    write(p, bytes(data))
    second = run_child(cache)
    assert second["PersistentCacheRejected"] == 1, second
    assert second["KernelCompile"] == 1
    assert second["PersistentCacheHit"] == len(files) - 1
    assert read(p) == files[p]


def test_an_entry_swapped_for_another_kernels_entry_is_rejected(warm):
    cache, files, _ = warm
    a, b = sorted(files)[:2]
    write(a, files[b])  # a well-formed entry, for another key
    second = run_child(cache)
    assert second["PersistentCacheRejected"] == 1, second
    assert second["KernelCompile"] == 1
    assert read(a) == files[a]


def test_entries_replaced_by_a_directory_a_fifo_and_a_symlink_do_not_hang_or_crash(warm, tmp_path_factory):
    cache, files, _ = warm
    a, b, c = sorted(files)[:3]
    os.remove(a)
    os.mkdir(a)
    os.remove(b)
    os.mkfifo(b)
    other = tmp_path_factory.mktemp("elsewhere") / "target"
    write(str(other), files[c])
    os.remove(c)
    os.symlink(other, c)
    second = run_child(cache)
    assert second["PersistentCacheRejected"] >= 3, second
    assert second["KernelCompile"] == 3, second
    assert read(str(other)) == files[c], "the symlink's target was written"
    third = run_child(cache)  # each odd file was replaced by a real entry
    assert third["KernelCompile"] == 0 and third["PersistentCacheRejected"] == 0, third


def test_a_true_spelled_read_only_setting_is_accepted(warm):
    cache, files, _ = warm
    result = run_child(cache, LAZULI_PERSISTENT_CACHE_READ_ONLY="True")
    assert result["PersistentCacheHit"] == len(files) and result["KernelCompile"] == 0, result


def test_a_cache_dir_starting_with_a_tilde_is_under_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    result = run_child("~/cache", HOME=str(home))
    assert result["KernelCompile"] > 0
    assert entries(home / "cache"), "no entries under $HOME/cache"


# ---- unsafe or unusable directories -------------------------------------------------------------

def test_a_world_writable_kernel_directory_is_refused_with_a_warning(tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    os.chmod(kernels, 0o777)
    result = run_child(tmp_path)
    assert "writable by other users" in result["stderr"], result["stderr"]
    assert result["stderr"].count("lazuli: kernel cache:") == 1, result["stderr"]
    assert result["KernelCompile"] > 0
    assert entries(tmp_path) == [] and temp_files(tmp_path) == []


def test_a_world_writable_cache_directory_warns_and_still_gives_correct_results(tmp_path):
    # LAZULI_CACHE_DIR itself 0777 (no sticky bit): anyone may rename its `kernels` directory away
    # and put their own in its place after the checks, so its entries are no safer than those of a
    # world-writable kernels directory.
    os.chmod(tmp_path, 0o777)
    first = run_child(tmp_path)
    assert first["KernelCompile"] > 0
    kernels = tmp_path / "kernels"
    if kernels.exists():  # the kernel directory it made is private
        assert stat.S_IMODE(os.stat(kernels).st_mode) & 0o022 == 0
    assert "writable by other users" in first["stderr"], (
        "no warning for a world-writable LAZULI_CACHE_DIR:\n" + first["stderr"])


@pytest.mark.skipif(not IS_ROOT, reason="needs root to give the directory to another user")
def test_a_kernel_directory_owned_by_another_user_is_refused_with_a_warning(warm):
    cache, files, _ = warm
    os.chown(os.path.join(cache, "kernels"), 65534, 65534)
    result = run_child(cache)
    assert "owned by uid 65534" in result["stderr"], result["stderr"]
    assert result["PersistentCacheHit"] == 0 and result["KernelCompile"] == len(files)


@pytest.mark.skipif(not IS_ROOT, reason="needs root to give the directory to another user")
def test_a_kernel_directory_swapped_in_after_the_checks_is_not_trusted(warm, tmp_path_factory):
    # The checks (owner, mode) run when the cache is first used; whoever can rename entries of
    # LAZULI_CACHE_DIR can put another kernels directory in its place afterwards.
    cache, files, _ = warm
    foreign = os.path.join(cache, "kernels")
    os.chown(foreign, 65534, 65534)
    for p in files:
        os.chown(p, 65534, 65534)
    victim = tmp_path_factory.mktemp("victim")
    warm_up = textwrap.dedent(f"""
        import os, time
        import lazuli as lz
        (lz.tensor([1.0, 2.0]) - 3).relu().sum().item()  # the cache is checked and in use
        open({str(victim / 'ready')!r}, "w").close()
        while not os.path.exists({str(victim / 'go')!r}):
            time.sleep(0.02)
        """)
    p = subprocess.Popen([sys.executable, "-c", warm_up + CHILD], env=child_env(victim), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while not (victim / "ready").exists() and p.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        os.rename(victim / "kernels", victim / "ours")
        os.rename(foreign, victim / "kernels")  # owned by uid 65534 now
        (victim / "go").touch()
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    result = parse(out, err, p.returncode)
    assert result["PersistentCacheHit"] == 0, (
        f"loaded {result['PersistentCacheHit']} kernels from a directory owned by uid 65534")


@pytest.mark.skipif(IS_ROOT, reason="root writes into a read-only directory anyway")
def test_an_unwritable_kernel_directory_warns_once_and_still_runs(tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir(mode=0o700)
    os.chmod(kernels, 0o500)
    try:
        result = run_child(tmp_path)
    finally:
        os.chmod(kernels, 0o700)
    assert result["KernelCompile"] > 0
    assert result["stderr"].count("cannot write") == 1, result["stderr"]
    assert entries(tmp_path) == []


def test_a_cache_path_that_is_a_file_warns_and_still_runs(tmp_path):
    (tmp_path / "kernels").write_text("not a directory")
    result = run_child(tmp_path)
    assert "kernel cache" in result["stderr"], result["stderr"]
    assert result["KernelCompile"] > 0


def test_an_empty_cache_dir_setting_turns_the_cache_off(tmp_path):
    result = run_child("")
    assert result["KernelCompile"] > 0 and result["PersistentCacheHit"] == 0
    assert "kernel cache" not in result["stderr"]


# ---- concurrency, read-only mode, a full disk, the size bound -------------------------------------

def test_two_processes_compiling_the_same_kernels_at_once_both_succeed(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", CHILD], env=child_env(tmp_path), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        results.append(parse(out, err, p.returncode))
    # Each process compiled what it did not find on disk, so their compiles may cross (each one
    # compiles 5 of 6 kernels and loads the sixth the other wrote): the cache then holds every
    # kernel a process needed, compiled or loaded, once.
    needed = {r["KernelCompile"] + r["PersistentCacheHit"] for r in results}
    assert len(needed) == 1, results
    assert max(r["KernelCompile"] for r in results) > 0
    assert len(entries(tmp_path)) == needed.pop()
    assert temp_files(tmp_path) == []
    third = run_child(tmp_path)
    assert third["KernelCompile"] == 0 and third["PersistentCacheRejected"] == 0, third


def test_read_only_mode_writes_nothing(tmp_path):
    cache = tmp_path / "cache"
    result = run_child(cache, LAZULI_PERSISTENT_CACHE_READ_ONLY="1")
    assert result["KernelCompile"] > 0
    assert not cache.exists(), "read-only mode created the cache directory"


def test_read_only_mode_reads_a_warm_cache_and_leaves_damage_alone(warm):
    cache, files, _ = warm
    paths = sorted(files)
    stamps = {p: os.stat(p).st_mtime_ns for p in paths}
    write(paths[0], b"garbage")
    stamps[paths[0]] = os.stat(paths[0]).st_mtime_ns
    result = run_child(cache, LAZULI_PERSISTENT_CACHE_READ_ONLY="1")
    assert result["PersistentCacheHit"] == len(paths) - 1, result
    assert result["PersistentCacheRejected"] == 1
    assert result["KernelCompile"] == 1
    assert read(paths[0]) == b"garbage", "read-only mode rewrote an entry"
    assert sorted(entries(cache)) == paths and temp_files(cache) == []
    assert {p: os.stat(p).st_mtime_ns for p in paths} == stamps, "read-only mode touched entries"


def _tiny_file_size_limit():
    # A full disk: every write past 64 bytes fails with EFBIG (SIGXFSZ ignored, so no kill).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))


def test_a_full_disk_gives_correct_results_and_no_partial_entries(tmp_path):
    result = run_child(tmp_path, preexec_fn=_tiny_file_size_limit)
    assert result["KernelCompile"] > 0
    assert result["stderr"].count("cannot write") == 1, result["stderr"]
    assert entries(tmp_path) == [], "a partial entry was left"
    assert temp_files(tmp_path) == [], "a temp file was left"
    # With room again, the next process fills the cache.
    again = run_child(tmp_path)
    assert again["PersistentCacheHit"] == 0 and len(entries(tmp_path)) == again["KernelCompile"]


def test_a_full_disk_over_a_warm_cache_still_loads_it(warm):
    cache, files, _ = warm
    result = run_child(cache, preexec_fn=_tiny_file_size_limit)
    assert result["KernelCompile"] == 0 and result["PersistentCacheHit"] == len(files), result


def test_the_size_bound_keeps_the_cache_small(tmp_path):
    bound = 6000
    result = run_child(tmp_path, LAZULI_PERSISTENT_CACHE_MAX_BYTES=str(bound))
    assert result["KernelCompile"] > 0
    assert sum(os.path.getsize(p) for p in entries(tmp_path)) <= bound
    assert entries(tmp_path), "nothing kept at all"


def test_boolean_settings_take_the_usual_spellings_and_cache_dir_expands_home(tmp_path):
    # READ_ONLY=True raised at the first op, and "~" was a directory named "~".
    env = dict(os.environ, PYTHONPATH=PKG_DIR, HOME=str(tmp_path), LAZULI_CACHE_DIR="~/lzcache",
               LAZULI_PERSISTENT_CACHE_READ_ONLY="True", LAZULI_SYNC_WAIT="No", LAZULI_BACKEND="cpu")
    code = "import lazuli as lz; print((lz.ones(3) * 2).sum().item())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "6.0"
    env.update(LAZULI_PERSISTENT_CACHE_READ_ONLY="0", LAZULI_SYNC_WAIT="OFF")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "lzcache").is_dir() and any((tmp_path / "lzcache").iterdir())
    env.update(LAZULI_SYNC_WAIT="maybe")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "LAZULI_SYNC_WAIT='maybe' is not a boolean" in out.stderr


def test_a_long_compile_reports_its_progress_once_then_its_total(tmp_path):
    # LAZULI_PROGRESS_AFTER_MS=0 makes every compile "long": outside a terminal, one line when
    # the threshold passes (kernels done of total), one at the end.
    r = run_child(tmp_path, LAZULI_PROGRESS_AFTER_MS="0")
    lines = [ln for ln in r["stderr"].splitlines() if "[lazuli] compil" in ln]
    assert len(lines) == 2, r["stderr"]
    m = re.fullmatch(r"\[lazuli\] compiling (\d+) kernels: (\d+) done after [\d.e-]+ s \(.*\)", lines[0])
    assert m and 1 <= int(m.group(2)) < int(m.group(1)), lines
    assert int(m.group(1)) == r["KernelCompile"]  # a cold cache: every kernel compiled
    assert re.fullmatch(rf"\[lazuli\] compiled {r['KernelCompile']} kernels in [\d.e-]+ s", lines[1]), lines


def test_a_warm_cache_and_a_disabled_report_say_nothing(warm, tmp_path_factory):
    # A warm cache compiles nothing, so even a zero threshold has nothing to report; -1 turns the
    # report off for a cold compile.
    cold = tmp_path_factory.mktemp("cold")
    for r in (run_child(warm[0], LAZULI_PROGRESS_AFTER_MS="0"),
              run_child(cold, LAZULI_PROGRESS_AFTER_MS="-1")):
        assert "[lazuli] compil" not in r["stderr"], r["stderr"]


def test_on_a_terminal_the_progress_is_one_bar_redrawn_in_place(tmp_path):
    import pty
    master, slave = pty.openpty()
    try:
        p = subprocess.run([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=slave,
                           env=child_env(tmp_path, LAZULI_PROGRESS_AFTER_MS="0"), timeout=120)
        os.close(slave)
        slave = None
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        if slave is not None:
            os.close(slave)
    assert p.returncode == 0, out
    text = out.decode()
    # Drawn with carriage returns on one line, then replaced by the total and a newline.
    assert re.search(r"\r\[lazuli\] compiling kernels \[[# ]{24}\] \d+/\d+, [\d.e-]+ s", text), text
    assert re.search(r"\r\[lazuli\] compiled \d+ kernels in [\d.e-]+ s *\r?\n", text), text
    assert text.count("\n") == 1, text  # nothing else printed a line
