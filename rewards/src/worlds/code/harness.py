# drift's test harness: one sandboxed interpreter per completion (drift_rewards::worlds::code::
# harness). It compiles solution.py (the format check), then runs each test program
# `code + "\n\n" + test + "\n"` in its own forked child, as `python3 main.py` would: a fresh
# `__main__` module, exit status 0 unless an exception escapes (1, the traceback on stderr) or
# SystemExit says otherwise. Each child gets its own process group, the per-test wall limit
# (killed with its group at the limit), stdout and stderr in files of its own, and no access to
# the report channel. Reports go to drift on the original stdout, one line each:
#   F ok | F syntax
#   T <j> exit <code> | signal <n> | timeout 0 | output 0 | nostart 0, then <seconds> <hex tail>
import os
import select
import signal
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))


def read(name):
    with open(os.path.join(HERE, name), encoding="utf-8", errors="replace") as f:
        return f.read()


n_tests, timeout, tail, cap, gate = read("plan.txt").split()
n_tests, timeout, tail, cap, gate = int(n_tests), float(timeout), int(tail), int(cap), gate == "1"
code = read("solution.py")
# Everything is read before any test runs: a test cannot rewrite the ones after it.
tests = [read("t%d.py" % j) for j in range(n_tests)]

report = os.dup(1)
devnull = os.open(os.devnull, os.O_RDWR)
os.dup2(devnull, 1)


def emit(line):
    os.write(report, (line + "\n").encode())


try:
    compile(code, "solution.py", "exec")
    compiles = True
except (SyntaxError, ValueError):
    compiles = False
emit("F ok" if compiles else "F syntax")
if gate and not compiles:
    sys.exit(0)


def child(j, program):
    """Runs test j in this forked process and never returns."""
    status = 70
    try:
        os.close(report)
        os.setpgid(0, 0)
        out = os.open("o%d" % j, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open("e%d" % j, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.dup2(devnull, 0)
        for fd in (out, err, devnull):
            os.close(fd)
        main = types.ModuleType("__main__")
        main.__file__ = os.path.join(HERE, "main.py")
        sys.modules["__main__"] = main
        sys.argv = [main.__file__]
        try:
            exec(compile(program, main.__file__, "exec"), main.__dict__)
            status = 0
        except SystemExit as e:
            if e.code is None:
                status = 0
            elif isinstance(e.code, int):
                status = e.code & 0xFF
            else:
                print(e.code, file=sys.stderr)
                status = 1
        except BaseException:
            sys.excepthook(*sys.exc_info())
            status = 1
        try:
            import atexit

            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            status = status or 120
    finally:
        os._exit(status)


def wait(pid, deadline):
    """Waits for pid until the deadline; its wait status, or None when it is still running."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    nap = 0.0002
    try:
        while True:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                return st
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if fd is not None:
                select.select([fd], [], [], left)
            else:
                time.sleep(min(nap, left))
                nap = min(nap * 2, 0.01)
    finally:
        if fd is not None:
            os.close(fd)


def kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def stderr_tail(j):
    size = 0
    for name in ("o%d" % j, "e%d" % j):
        try:
            size += os.path.getsize(name)
        except OSError:
            pass
    try:
        with open("e%d" % j, "rb") as f:
            f.seek(max(0, os.path.getsize("e%d" % j) - tail))
            text = f.read()
    except OSError:
        text = b""
    for name in ("o%d" % j, "e%d" % j):
        try:
            os.remove(name)
        except OSError:
            pass
    return size, text


for j, test in enumerate(tests):
    program = code + "\n\n" + test + "\n"
    start = time.monotonic()
    try:
        pid = os.fork()
    except OSError:
        emit("T %d nostart 0 0 " % j)
        continue
    if pid == 0:
        child(j, program)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    st = wait(pid, start + timeout)
    if st is None:
        kill_group(pid)
        os.waitpid(pid, 0)
        kind, value = "timeout", 0
    elif os.WIFSIGNALED(st):
        kind, value = "signal", os.WTERMSIG(st)
    else:
        kind, value = "exit", os.WEXITSTATUS(st)
    kill_group(pid)
    elapsed = time.monotonic() - start
    size, text = stderr_tail(j)
    if size > cap and kind == "exit":
        kind, value = "output", 0
    emit("T %d %s %d %.6f %s" % (j, kind, value, elapsed, text.hex()))
