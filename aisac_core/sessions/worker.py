"""The worker process of one sandboxed code session (started by :mod:`aisac_core.sessions.manager`, never imported by it).

Run as ``python -I aisac_core/sessions/worker.py '<config JSON>'`` with the session directory as working directory.
It uses the standard library only at start (heavy libraries are imported when the session's code imports them), so
a session starts in well under a second.

Protocol: the parent writes requests on the worker's stdin and reads replies from its stdout; each message is a
4-byte big-endian length followed by that many bytes of UTF-8 JSON. Before any user code runs the worker moves the
protocol to private file descriptors and points fds 0, 1 and 2 at ``/dev/null``, so stray output of C extensions
cannot corrupt it; the user's ``print`` goes to a bounded in-memory capture.

Requests: ``{"op": "run", "code", "cpu_s", "cell"}``, ``{"op": "vars"}``, ``{"op": "load_frame", "var", "path"}``,
``{"op": "ping"}``. Replies are JSON objects (see :func:`_run`).

What the worker enforces on itself, before the first request (the parent adds the wall-time kill and, when
available, bubblewrap / unshare for the file system and network namespaces):

- resource limits (``resource.setrlimit``): RLIMIT_AS (memory), RLIMIT_CPU (the hard limit is the session's CPU
  budget; each run gets a soft limit of its own, whose SIGXCPU is turned into an exception so the session
  survives), RLIMIT_FSIZE (largest file), RLIMIT_NPROC (no new processes; ignored for root, hence seccomp),
  RLIMIT_CORE 0;
- Landlock and a seccomp filter (:mod:`confine`, loaded from this folder): the kernel's own limits on files,
  processes and sockets, which C code cannot bypass;
- an import allow-list installed as ``builtins.__import__`` (imports by library code pass through);
- a ``sys.addaudithook`` hook (PEP 578) that refuses process creation, sockets, ctypes, prlimit, writes
  outside the session directory and reads outside the session directory and the Python installation;
- after each run, threads the cell left running are stopped (or reported, so that the parent stops the worker),
  and the worker's own signal handlers are put back; the parent checks both in the kernel's view afterwards.

Every request carries a ``seq`` tag that the reply echoes; figures travel as base64 PNG bytes in the reply.
"""

from __future__ import annotations

import ast
import base64
import builtins
import ctypes  # numpy imports it; its module-level dlopen must happen before the audit hook is set
import io
import json
import os
import random
import resource
import signal
import struct
import sys
import threading
import time
import traceback
from importlib.util import module_from_spec, spec_from_file_location

TYPE_CHECKING = False  # typing is not imported at run time: the worker starts on the standard library's core only
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from types import FrameType, ModuleType
    from typing import Any, NoReturn


def _sibling(name: str) -> ModuleType:
    """Load the module ``name`` from this script's folder (``python -I`` puts no script folder on sys.path)."""
    spec = spec_from_file_location(
        f"_aisac_{name}", os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {name}.py from the worker's folder")
    mod = module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


confine = _sibling("confine")  # aisac_core/sessions/confine.py: seccomp and Landlock

#: attribute names user code may not spell out (a tripwire against the classic object-graph escapes; the audit
#: hook and the OS limits are what contain code that reaches them anyway, e.g. through getattr with a string)
FORBIDDEN_ATTRS = frozenset(
    {
        "__subclasses__",
        "__globals__",
        "__builtins__",
        "__code__",
        "__closure__",
        "__bases__",
        "__base__",
        "__mro__",
        "__import__",
        "__loader__",
        "__spec__",
        "__getattribute__",
        "__reduce__",
        "__reduce_ex__",
        "__self__",
        "f_globals",
        "f_locals",
        "f_back",
        "f_builtins",
        "gi_frame",
        "cr_frame",
        "ag_frame",
        "tb_frame",
        "co_code",
        "_getframe",
        "__dict__",
        "__class__",
        "mro",
    }
)
#: audit events refused outright (prefix match for names ending in ".")
BLOCKED_EVENTS = (
    "socket.",
    "subprocess.",
    "ctypes.",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "os.kill",
    "os.killpg",
    "os.startfile",
    "pty.",
    "resource.prlimit",
    "sys.remote_exec",
    "webbrowser.open",
    "urllib.Request",
    "http.client.",
    "ftplib.",
    "smtplib.",
    "poplib.",
    "imaplib.",
    "nntplib.",
    "telnetlib.",
    "signal.pthread_kill",
    "os.setuid",
    "os.setgid",
    "os.chroot",
)
#: audit events whose path arguments (these positions) must lie inside the session directory
WRITE_PATH_EVENTS = {
    "os.remove": (0,),
    "os.rename": (0, 1),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.symlink": (0, 1),
    "os.link": (0, 1),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.truncate": (0,),
    "os.utime": (0,),
    "shutil.rmtree": (0,),
    "shutil.copyfile": (1,),
    "shutil.copytree": (1,),
    "shutil.move": (0, 1),
    "os.chflags": (0,),
    "os.lchown": (0,),
}


def thread_states() -> int:
    """The number of Python thread states of this interpreter, also of threads started but not yet running a line
    (C API ``PyInterpreterState_ThreadHead`` / ``PyThreadState_Next``, read with the GIL held as it requires)."""
    api, ptr = ctypes.pythonapi, ctypes.c_void_p
    api.PyInterpreterState_Get.restype = api.PyInterpreterState_ThreadHead.restype = ptr
    api.PyThreadState_Next.restype = ptr
    api.PyInterpreterState_ThreadHead.argtypes = api.PyThreadState_Next.argtypes = [ptr]
    n, ts = 0, api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Get())
    while ts:
        n, ts = n + 1, api.PyThreadState_Next(ts)
    return n


class CpuLimitExceeded(Exception):
    """The run used up its CPU seconds (SIGXCPU from the soft RLIMIT_CPU)."""


class _Capture(io.TextIOBase):
    """A text stream that keeps the first ``limit`` characters and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit, self.size, self.dropped = limit, 0, 0
        self.parts: list[str] = []

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        room = self.limit - self.size
        if room > 0:
            part = s[:room]
            self.parts.append(part)
            self.size += len(part)
        self.dropped += max(0, len(s) - max(room, 0))
        return len(s)

    def getvalue(self) -> str:
        return "".join(self.parts)


class Worker:
    """State of the session: namespace, limits, policy."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.session_dir = os.path.realpath(cfg["session_dir"])
        self.allowed = frozenset(cfg["allow_imports"])
        self.output_chars = int(cfg["output_chars"])
        self.seed = int(cfg.get("seed", 0))
        self.numpy_seeded = False
        self.cell = 0
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
        extra = [
            "/usr/share/zoneinfo",
            "/usr/share/fonts",
            "/usr/lib",
            "/usr/local/lib",
            "/lib",
            "/lib64",
            "/etc/fonts",
            "/etc/ld.so.cache",
            "/etc/localtime",
            "/dev/null",
            "/dev/urandom",
            "/proc/self",
            "/proc/cpuinfo",
            "/proc/meminfo",
            "/sys/devices/system/cpu",
        ]
        self.read_roots = tuple(
            sorted(
                {os.path.realpath(p) for p in prefixes}
                | set(extra)
                | {self.session_dir}
                | {os.path.realpath(p) for p in cfg.get("read_roots", [])}
            )
        )
        self.real_import = builtins.__import__
        self.own = threading.local()  # .trusted: the worker's own calls, exempt from the audit hook
        self.ns: dict[str, Any] = {}
        self.base_threads: set[int | None] = set()  # threads running before the first request (set by main)
        self.base_states = 1  # Python thread states before the first request (set by main)
        self.base_handlers: dict[int, Any] = {}  # the worker's own signal handlers (set by main)
        self.reset_namespace()

    # -- namespace and imports ------------------------------------------------------------------------------
    def reset_namespace(self) -> None:
        safe_builtins = dict(builtins.__dict__)
        safe_builtins["__import__"] = self.guarded_import
        for name in ("breakpoint", "input", "help", "copyright", "credits", "license"):
            safe_builtins.pop(name, None)
        self.ns.clear()
        self.ns.update({"__name__": "__session__", "__builtins__": safe_builtins})

    def from_session(self, frame: FrameType) -> bool:
        """Whether ``frame`` runs the session's code: its globals are the session namespace or any dict that is not
        the ``__dict__`` of a loaded module (``exec(src, {})``); library modules run with their own module dict."""
        g = frame.f_globals
        if g is self.ns:
            return True
        mod = sys.modules.get(g.get("__name__", "")) if isinstance(g.get("__name__"), str) else None
        return mod is None or getattr(mod, "__dict__", None) is not g

    def guarded_import(
        self,
        name: str,
        globals: Mapping[str, object] | None = None,
        locals: Mapping[str, object] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> ModuleType:
        """``__import__`` of the session's own code: only allow-listed top-level packages, no relative imports.
        Installed as ``builtins.__import__`` itself, so code that reaches the real builtins module (through a
        library module's globals) meets the same check; imports made by library code pass through."""
        if not self.from_session(sys._getframe(1)):
            return self.real_import(name, globals, locals, fromlist, level)
        if level:
            raise ImportError("relative imports are not available in a sandbox session")
        top = name.partition(".")[0]
        if top not in self.allowed:
            raise ImportError(
                f"import of {name!r} is not allowed in a sandbox session (allowed: "
                f"{', '.join(sorted(self.allowed))}; a project can extend the list with "
                "AISAC_SANDBOX_ALLOW_IMPORTS)"
            )
        mod = self.real_import(name, globals, locals, fromlist, level)
        if not self.numpy_seeded and "numpy" in sys.modules:
            self.seed_numpy()
        return mod

    def seed_numpy(self) -> None:
        """Fix numpy's legacy global seed (``np.random.seed``) as soon as numpy is loaded."""
        self.numpy_seeded = True
        sys.modules["numpy"].random.seed(self.seed)

    # -- audit hook -----------------------------------------------------------------------------------------
    def _inside(self, path: Any, roots: Iterable[str]) -> bool:
        if isinstance(path, int):
            return True  # an already open descriptor
        try:
            p = os.path.realpath(os.fsdecode(path))
        except Exception:
            return False
        return any(p == r or p.startswith(r.rstrip("/") + "/") for r in roots)

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        """The PEP 578 hook: raise PermissionError for refused operations (libraries treat it as an OSError)."""
        if getattr(self.own, "trusted", False):
            return
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            if path is None or isinstance(path, int):
                return
            writing = bool((flags or 0) & (os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC)) or (
                isinstance(mode, str) and any(c in mode for c in "wax+")
            )
            if writing:
                if not self._inside(path, (self.session_dir,)):
                    raise PermissionError(
                        f"writing {os.fsdecode(path)!r} is refused: a sandbox session may write "
                        f"only inside its session directory ({self.session_dir})"
                    )
            elif not self._inside(path, self.read_roots):
                raise PermissionError(
                    f"reading {os.fsdecode(path)!r} is refused: a sandbox session may read only "
                    "its session directory and the Python installation (load data with "
                    "data_load + data_to_session)"
                )
            return
        if event.startswith(BLOCKED_EVENTS):
            raise PermissionError(
                f"operation {event!r} is refused in a sandbox session (no processes, network, ctypes or limit changes)"
            )
        pos = WRITE_PATH_EVENTS.get(event)
        if pos:
            for i in pos:
                if i < len(args) and args[i] is not None and not self._inside(args[i], (self.session_dir,)):
                    raise PermissionError(
                        f"{event} on {args[i]!r} is refused: a sandbox session may change files "
                        f"only inside its session directory ({self.session_dir})"
                    )

    # -- requests -------------------------------------------------------------------------------------------
    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._handle(req)
        finally:
            self.restore_signals()

    def restore_signals(self) -> None:
        """Put the worker's own signal handlers back: a handler a cell (or a ``__repr__`` it defined) installed ends
        with the request. The parent checks the kernel's list of caught signals afterwards and stops a worker that
        still has one (:func:`aisac_core.sessions.isolation.left_behind`)."""
        for sig, handler in self.base_handlers.items():
            try:
                if signal.getsignal(sig) is not handler:
                    signal.signal(sig, handler)
            except (OSError, ValueError, TypeError):
                pass

    def _handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        if op == "run":
            reply = self.run(req["code"], float(req.get("cpu_s") or 60), int(req.get("cell") or self.cell + 1))
            stopped, stray = self.reap_threads()
            if stopped:
                reply.setdefault("notes", []).append(
                    f"{stopped} thread(s) the cell started were still running after it and were stopped (a thread "
                    "must not outlive its run)"
                )
            if stray:
                reply["stray_threads"] = stray
            return reply
        if op == "vars":
            return {"ok": True, "variables": self.variables()}
        if op == "load_frame":
            return self.load_frame(req["var"], req["path"])
        if op == "ping":
            return {"ok": True, "pid": os.getpid(), "cell": self.cell}
        return {"ok": False, "error": f"unknown op {op!r}"}

    def load_frame(self, var: str, path: str) -> dict[str, Any]:
        import pandas as pd  # noqa: PLC0415

        if not self.numpy_seeded:
            self.seed_numpy()
        df = pd.read_parquet(path)
        self.ns[var] = df
        return {"ok": True, "variable": var, "shape": list(df.shape)}

    def variables(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for k, v in self.ns.items():
            if k.startswith("_") or type(v).__name__ == "module":
                continue
            item: dict[str, Any] = {
                "name": k,
                "type": f"{type(v).__module__}.{type(v).__qualname__}".replace("builtins.", ""),
            }
            shape = getattr(v, "shape", None)
            if isinstance(shape, tuple):
                item["shape"] = [int(s) if isinstance(s, int) or hasattr(s, "__index__") else str(s) for s in shape]
            elif hasattr(v, "__len__") and not callable(v):
                try:
                    item["len"] = len(v)
                except Exception:
                    pass
            dtype = getattr(v, "dtype", None)
            if dtype is not None:
                item["dtype"] = str(dtype)
            try:
                r = repr(v)
            except Exception as exc:
                r = f"<repr failed: {type(exc).__name__}>"
            item["repr"] = r[:200] + ("..." if len(r) > 200 else "")
            out.append(item)
        return out

    def check_source(self, tree: ast.AST) -> str | None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRS:
                return f"attribute {node.attr!r} is not available in a sandbox session (line {node.lineno})"
            if isinstance(node, ast.Name) and node.id in ("__builtins__", "__import__", "__loader__", "__spec__"):
                return f"name {node.id!r} is not available in a sandbox session (line {node.lineno})"
        return None

    def run(self, code: str, cpu_s: float, cell: int) -> dict[str, Any]:
        self.cell = cell
        filename = f"<cell {cell}>"
        out, err = _Capture(self.output_chars), _Capture(self.output_chars)
        reply: dict[str, Any] = {"ok": True, "cell": cell}
        t0 = time.perf_counter()
        try:
            tree = ast.parse(code, filename, "exec")
        except SyntaxError as exc:
            return {
                "ok": False,
                "cell": cell,
                "error_type": "SyntaxError",
                "error": f"SyntaxError: {exc.msg} (line {exc.lineno}, column {exc.offset})",
                "traceback": "".join(traceback.format_exception_only(type(exc), exc)),
                "stdout": "",
                "stderr": "",
                "duration_ms": 0.0,
            }
        bad = self.check_source(tree)
        if bad:
            return {
                "ok": False,
                "cell": cell,
                "error_type": "SandboxViolation",
                "error": bad,
                "stdout": "",
                "stderr": "",
                "duration_ms": 0.0,
            }
        last = None
        if tree.body and isinstance(final := tree.body[-1], ast.Expr):
            tree.body.pop()
            last = ast.Expression(final.value)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        used = usage.ru_utime + usage.ru_stime
        _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = int(used + cpu_s) + 1
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        old = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            # raising a soft limit up to the hard one is harmless (an unprivileged process cannot raise a hard
            # limit), so the audit hook lets resource.setrlimit through and refuses only prlimit on other processes
            resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
            exec(compile(tree, filename, "exec"), self.ns)  # noqa: S102 - the sandbox's purpose
            if last is not None:
                value = eval(compile(last, filename, "eval"), self.ns)  # noqa: S307
                if value is not None:
                    r = repr(value)
                    reply["result"] = r[: self.output_chars]
                    if len(r) > self.output_chars:
                        reply["result_truncated"] = True
        except BaseException as exc:  # noqa: BLE001 - every failure of user code is reported, the worker lives on
            reply["ok"] = False
            reply["error_type"] = type(exc).__name__
            if isinstance(exc, CpuLimitExceeded):
                reply["error"] = (
                    f"CPU time limit exceeded: the run used more than {cpu_s:g} CPU seconds and was stopped"
                )
            elif isinstance(exc, MemoryError):
                reply["error"] = (
                    f"MemoryError: {str(exc) or 'out of memory'} (the session's memory limit is "
                    f"{self.cfg['memory_mb']} MB)"
                )
            else:
                reply["error"] = f"{type(exc).__name__}: {exc}"
            tb = exc.__traceback__
            while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell"):
                tb = tb.tb_next
            try:
                reply["traceback"] = "".join(traceback.format_exception(type(exc), exc, tb))[-5000:]
            except BaseException:  # noqa: BLE001
                reply["traceback"] = reply["error"]
        finally:
            sys.stdout, sys.stderr = old
            try:  # back to the worker-life budget: no SIGXCPU between runs
                resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
            except (ValueError, OSError):
                pass
        reply["figures"] = self.save_figures(cell)
        reply["stdout"], reply["stderr"] = out.getvalue(), err.getvalue()
        notes: list[str] = []
        for label, cap in (("stdout", out), ("stderr", err)):
            if cap.dropped:
                notes.append(
                    f"{label} truncated: {cap.dropped:,} more characters dropped (limit "
                    f"{self.output_chars:,} characters per stream)"
                )
        reply["notes"] = notes
        reply["duration_ms"] = round((time.perf_counter() - t0) * 1000, 3)
        return reply

    def reap_threads(self) -> tuple[int, int]:
        """Stop the Python threads a request left behind; return ``(stopped, still running)`` (the parent kills the
        worker when any still runs). A leftover is a Python thread state beyond those the worker began with
        (:func:`thread_states`). Those running Python code, found through ``sys._current_frames()`` (also ``_thread``
        threads), get SystemExit raised in them (``PyThreadState_SetAsyncExc``) every 5 ms until they end; between
        tries the GIL is released so that a thread started but not yet running shows up too. At most a second.
        Native threads of libraries (Arrow's pools) hold no Python thread state and are left alone."""
        self.own.trusted = True  # sys._current_frames raises an audit event
        try:
            current = sys._current_frames
            me = threading.get_ident()
            seen: set[int] = set()
            deadline = time.monotonic() + 1.0
            while True:
                extra = {i for i in current() if i not in self.base_threads} | {
                    t.ident for t in threading.enumerate() if t.ident is not None and t.ident not in self.base_threads
                }
                extra.discard(me)
                for ident in extra:
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(SystemExit))
                seen |= extra
                left = max(thread_states() - self.base_states, len(extra))
                if left <= 0 or time.monotonic() >= deadline:
                    return len(seen) - min(left, len(seen)), left
                time.sleep(0.005)
        finally:
            self.own.trusted = False

    def save_figures(self, cell: int) -> list[dict[str, Any]]:
        """Render every open matplotlib figure as PNG, close it, and return ``[{name, png_b64}]`` (the bytes travel
        in the reply; the parent never opens a path a worker names). A figure larger than the per-figure limit, or
        past the per-reply budget, is replaced by ``{name, error}``. A copy is kept in ``artifacts/``."""
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return []
        figs: list[dict[str, Any]] = []
        budget = int(self.cfg.get("reply_bytes", 32 << 20)) * 3 // 4 - (1 << 20)
        try:
            os.makedirs("artifacts", exist_ok=True)
            for i, num in enumerate(plt.get_fignums(), 1):
                name = f"cell{cell:04d}-fig{i}.png"
                buf = io.BytesIO()
                plt.figure(num).savefig(buf, format="png", dpi=100)
                data = buf.getvalue()
                if len(data) > int(self.cfg.get("figure_bytes", 8 << 20)) or len(data) > budget:
                    figs.append(
                        {
                            "name": name,
                            "error": f"figure {i} is {len(data):,} bytes, over the limit of "
                            f"{int(self.cfg.get('figure_bytes', 8 << 20)):,} bytes per figure (or the reply "
                            "budget); save a smaller one (lower dpi or size)",
                        }
                    )
                    continue
                budget -= len(data)
                figs.append({"name": name, "png_b64": base64.b64encode(data).decode()})
                try:
                    with open(os.path.join("artifacts", name), "wb") as fh:
                        fh.write(data)
                except OSError:
                    pass
        except Exception as exc:  # noqa: BLE001
            figs.append({"error": f"could not save a figure: {type(exc).__name__}: {exc}"})
        finally:
            try:
                plt.close("all")
            except Exception:  # noqa: BLE001
                pass
        return figs


def _read_exact(fd: int, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _send(fd: int, obj: dict[str, Any]) -> None:
    data = json.dumps(obj, default=str).encode("utf-8", "replace")
    msg = struct.pack(">I", len(data)) + data
    view = memoryview(msg)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _set_limits(cfg: dict[str, Any]) -> None:
    def lim(which: int, value: int) -> None:
        try:
            _soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass

    lim(resource.RLIMIT_AS, int(cfg["memory_mb"]) * 1024 * 1024)
    lim(resource.RLIMIT_FSIZE, int(cfg["file_mb"]) * 1024 * 1024)
    lim(resource.RLIMIT_CORE, 0)
    # CPU: the hard limit is the session's budget (SIGKILL when reached); runs lower the soft limit for themselves
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (int(cfg["cpu_session_s"]), int(cfg["cpu_session_s"])))
    except (ValueError, OSError):
        pass
    if cfg.get("nproc") is not None:
        lim(resource.RLIMIT_NPROC, int(cfg["nproc"]))


def _scratch(cfg: dict[str, Any]) -> str | None:
    """Mount a tmpfs of ``scratch.bytes`` bytes and ``scratch.inodes`` entries (the disk quota, held by the kernel)
    over the session folder and fill it with the folder's files on disk, read through a descriptor opened before
    the mount (the worker holds CAP_SYS_ADMIN of its own user namespace until :func:`_confine` drops it). Returns
    why it failed, or None (also when the configuration asks for no tmpfs: isolation ``none``)."""
    sc = cfg.get("scratch")
    if not sc:
        return None
    target = cfg["session_dir"]
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    try:
        src = os.open(target, flags)
    except OSError as exc:
        return f"cannot open the session folder: {exc}"
    try:
        why = confine.mount_tmpfs(target, int(sc["bytes"]), int(sc["inodes"]))
        if why:
            return str(why)
        os.chdir(target)  # the tmpfs now mounted there, not the folder beneath
        dst = os.open(target, flags)
        try:
            confine.copy_tree(src, dst)
        finally:
            os.close(dst)
    except OSError as exc:
        return f"cannot fill the session tmpfs: {exc}"
    finally:
        os.close(src)
    return None


def _confine(cfg: dict[str, Any], worker: Worker) -> dict[str, Any]:
    """Apply Landlock (reads: the worker's read roots; writes: the session directory and ``/dev/null``) and the
    seccomp filter of :mod:`confine`; returns what is in force, for the ready message."""
    out: dict[str, Any] = {}
    why = confine.drop_capabilities()
    if why:
        out["capabilities_note"] = why
    abi, why = confine.apply_landlock(
        [r for r in worker.read_roots if r not in ("/dev/null", worker.session_dir)], [worker.session_dir, "/dev/null"]
    )
    out["landlock"] = abi if why is None else 0
    if why:
        out["landlock_note"] = why
    why = confine.apply_seccomp()
    out["seccomp"] = why is None
    if why:
        out["seccomp_note"] = why
    return out


def main() -> int:
    cfg = json.loads(sys.argv[1])
    try:  # die with the server's spawner thread (PR_SET_PDEATHSIG = 1): a stopped worker never lingers
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    why = _scratch(cfg)
    if why:
        sys.stderr.write(f"the session folder could not be set up: {why}\n")
        return 1
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    sys.stdin = io.StringIO("")
    random.seed(int(cfg.get("seed", 0)))
    worker = Worker(cfg)

    def on_xcpu(_sig: int, _frame: FrameType | None) -> NoReturn:
        raise CpuLimitExceeded()

    signal.signal(signal.SIGXCPU, on_xcpu)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # oversized writes then fail with EFBIG instead of killing
    _set_limits(cfg)
    confined = _confine(cfg, worker)
    try:  # a second lock on process creation where no seccomp filter exists: fork_exec raises no audit event
        import _posixsubprocess  # noqa: PLC0415

        def _refused(*_a: object, **_k: object) -> NoReturn:
            raise PermissionError("process creation is refused in a sandbox session")

        _posixsubprocess.fork_exec = _refused
    except ImportError:
        pass
    worker.base_threads = {t.ident for t in threading.enumerate()}
    worker.base_states = thread_states()
    for sig in signal.valid_signals():
        handler = signal.getsignal(sig)
        if handler is not None:  # None: a handler not set from Python (none in this worker)
            worker.base_handlers[sig] = handler
    builtins.__import__ = worker.guarded_import
    sys.addaudithook(worker.audit)
    _send(proto_out, {"ok": True, "ready": True, "pid": os.getpid(), "uid": os.getuid(), **confined})
    while True:
        head = _read_exact(proto_in, 4)
        if head is None:
            return 0
        body = _read_exact(proto_in, struct.unpack(">I", head)[0])
        if body is None:
            return 0
        req: dict[str, Any] = {}
        try:
            req = json.loads(body)
            reply = worker.handle(req)
        except BaseException as exc:  # noqa: BLE001 - e.g. CpuLimitExceeded outside user code
            reply = {"ok": False, "error_type": type(exc).__name__, "error": f"{type(exc).__name__}: {exc}"}
        reply["seq"] = req.get("seq") if isinstance(req, dict) else None
        try:
            _send(proto_out, reply)
        except (BrokenPipeError, OSError):
            return 0


if __name__ == "__main__":
    sys.exit(main())
