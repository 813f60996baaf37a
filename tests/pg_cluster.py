"""A throwaway PostgreSQL cluster from the installed server binaries (``initdb`` + ``pg_ctl``), for tests and bench.

PostgreSQL refuses to run as root, so as root the cluster runs as the ``postgres`` system user (``runuser``); its
folder is under /tmp with a private Unix socket and a loopback TCP port. ``trust`` authentication: the cluster
listens on 127.0.0.1 only and lives as long as the test session.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


class PgUnavailable(RuntimeError):
    """No PostgreSQL can be started here (the message says what is missing)."""


def pgvector_bin() -> Path:
    """Folder of the server binaries of the ``pgserver`` wheel (PostgreSQL 16 with the pgvector extension).
    Raises :class:`PgUnavailable` when the package is not installed (``pip install -e '.[dev]'``)."""
    import warnings

    try:
        with warnings.catch_warnings():  # pgserver reads XDG_RUNTIME_DIR on import; the cluster here does not use it
            warnings.simplefilter("ignore")
            from pgserver._commands import POSTGRES_BIN_PATH
    except ImportError as exc:
        raise PgUnavailable(
            "the pgserver package (PostgreSQL with pgvector) is not installed: pip install pgserver"
        ) from exc
    bin_dir = Path(POSTGRES_BIN_PATH)
    if os.geteuid() == 0 and not _traversable(bin_dir):
        # as root the server runs as the postgres user, who cannot reach a venv under /root: a world-readable copy
        src, dst = bin_dir.parent, Path("/tmp") / f"aisac-pgserver-{int(bin_dir.stat().st_mtime)}"
        if not (dst / "bin" / "initdb").exists():
            tmp = dst.with_name(f"{dst.name}.{os.getpid()}")
            shutil.copytree(src, tmp, symlinks=True)
            os.chmod(tmp, 0o755)
            try:
                tmp.rename(dst)
            except OSError:  # another session copied it first
                shutil.rmtree(tmp, ignore_errors=True)
        bin_dir = dst / "bin"
    return bin_dir


def _traversable(path: Path) -> bool:
    """Whether any user may reach ``path`` (every folder on the way has the others' execute bit)."""
    return all(p.stat().st_mode & 0o001 for p in [path, *path.parents])


def pg_bin() -> Path | None:
    """Folder of the newest installed ``initdb`` and ``pg_ctl`` (Debian: /usr/lib/postgresql/<major>/bin)."""
    for d in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (d / "initdb").exists() and (d / "pg_ctl").exists():
            return d
    return None


@dataclass
class PgCluster:
    """A running cluster: ``url(db)``, ``create_database()``, ``stop()``."""

    root: Path
    port: int
    bin_dir: Path
    prefix: list[str]
    _names: itertools.count = field(default_factory=lambda: itertools.count(1))

    @classmethod
    def start(cls, bin_dir: Path | None = None) -> PgCluster:
        """Start a cluster from ``bin_dir`` (default: the newest Debian server, :func:`pg_bin`)."""
        bin_dir = bin_dir or pg_bin()
        if bin_dir is None:
            raise PgUnavailable("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:
            raise PgUnavailable("the psycopg driver is not installed (pip install 'aisac[postgres]')") from exc
        prefix: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres user
            if shutil.which("runuser") is None:
                raise PgUnavailable("running as root without runuser: cannot start PostgreSQL unprivileged")
            try:
                pwd.getpwnam("postgres")
            except KeyError as exc:
                raise PgUnavailable("running as root and there is no postgres user to start PostgreSQL as") from exc
            prefix = ["runuser", "-u", "postgres", "--"]
        root = Path("/tmp") / f"aisac-pg-{os.getpid()}-{time.monotonic_ns()}"
        root.mkdir(mode=0o777)
        os.chmod(root, 0o777)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        data = root / "data"
        try:
            subprocess.run(
                [
                    *prefix,
                    str(bin_dir / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "aisac",
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ],
                check=True,
                capture_output=True,
                timeout=120,
            )
            # fsync off: a test cluster need not survive a power cut, and it makes CREATE DATABASE fast
            subprocess.run(
                [
                    *prefix,
                    str(bin_dir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-w",
                    "-l",
                    str(root / "log"),
                    "-o",
                    f"-h 127.0.0.1 -p {port} -k {root} -c fsync=off -c synchronous_commit=off "
                    "-c full_page_writes=off -c max_connections=300",
                    "start",
                ],
                check=True,
                capture_output=True,
                timeout=120,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            shutil.rmtree(root, ignore_errors=True)
            err = getattr(exc, "stderr", b"") or b""
            raise PgUnavailable(f"could not start PostgreSQL: {err.decode(errors='replace')[-500:]}") from exc
        return cls(root=root, port=port, bin_dir=bin_dir, prefix=prefix)

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            [*self.prefix, str(self.bin_dir / "pg_ctl"), "-D", str(self.root / "data"), *args],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def server_stop(self) -> None:
        """Stop the server (fast shutdown: open connections are cut), keeping its data (:meth:`server_start`)."""
        self._ctl("-w", "-m", "fast", "stop")

    def server_start(self) -> None:
        """Start the stopped server again, same port and settings."""
        self._ctl(
            "-w",
            "-l",
            str(self.root / "log"),
            "-o",
            f"-h 127.0.0.1 -p {self.port} -k {self.root} -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=300",
            "start",
        )

    def url(self, db: str = "postgres") -> str:
        """SQLAlchemy URL (psycopg 3 driver) of database ``db``."""
        return f"postgresql+psycopg://aisac@127.0.0.1:{self.port}/{db}"

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        import psycopg

        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=aisac dbname=postgres", autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        subprocess.run(
            [*self.prefix, str(self.bin_dir / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(self.root, ignore_errors=True)
