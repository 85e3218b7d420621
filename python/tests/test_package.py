"""The package: records, help, type stubs, version, and the wheel in a fresh virtualenv."""

from __future__ import annotations

import glob
import importlib.metadata
import json
import os
import pickle
import pydoc
import re
import socket
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

import sockstat
from conftest import REPO, skip_loudly

RECORDS = [
    sockstat.Socket, sockstat.Endpoint, sockstat.Owner, sockstat.Timer, sockstat.Cgroup,
    sockstat.Zone, sockstat.Memory, sockstat.WarningRecord, sockstat.ListeningPort,
    sockstat.PortsReport, sockstat.Destination, sockstat.Server, sockstat.CountersReport,
    sockstat.Counter, sockstat.DiagnoseReport,
]


def test_records_are_dicts_with_attributes(closing):
    lst = closing(socket.socket())
    lst.bind(("127.0.0.1", 0))
    lst.listen()
    [s] = sockstat.sockets(ports=lst.getsockname()[1])
    assert isinstance(s, dict) and s["local"]["port"] == s.local.port
    assert json.loads(json.dumps(s)) == s
    assert pickle.loads(pickle.dumps(s)) == s and type(pickle.loads(pickle.dumps(s))) is sockstat.Socket
    assert "owners_status" in dir(s)
    with pytest.raises(AttributeError):
        s.no_such_field
    assert "LISTEN" in repr(s) and str(lst.getsockname()[1]) in repr(s)


def test_no_documented_field_hides_behind_a_dict_method():
    for cls in RECORDS:
        for name in cls._fields:
            assert not hasattr(dict, name), (cls.__name__, name)
            assert isinstance(cls.__dict__[name], property), (cls.__name__, name)


def test_help_is_useful():
    text = pydoc.render_doc(sockstat, renderer=pydoc.plaintext)
    for word in ("net_connections", "SockstatWarning", "PermissionError", "GIL"):
        assert word in text, word
    text = pydoc.render_doc(sockstat.sockets, renderer=pydoc.plaintext)
    for word in ("ports", "22,80,8000-8100", "owners", "ValueError", "tcp_info", "(-l)"):
        assert word in text, word
    text = pydoc.render_doc(sockstat.Socket, renderer=pydoc.plaintext)
    assert re.search(r"owners_status\n[ |]+known, none", text), text
    assert "psutil" in pydoc.render_doc(sockstat.net_connections, renderer=pydoc.plaintext)


def test_version_is_the_workspaces():
    cargo = (REPO / "Cargo.toml").read_text()
    want = re.search(r'\[workspace\.package\][^\[]*?\nversion = "([^"]+)"', cargo).group(1)
    assert sockstat.__version__ == want
    assert f'version = "{want}"' in (REPO / "python" / "Cargo.toml").read_text()


TYPED = """
import sockstat
for s in sockstat.sockets(listening=True):
    port: int | None = s.local.port
    owners: list[sockstat.Owner] = s.owners
for c in sockstat.net_connections("tcp"):
    pid: int | None = c.pid
"""


def test_stubs_match_the_runtime_and_type_check(tmp_path):
    try:
        import mypy  # noqa: F401
    except ImportError:
        skip_loudly("mypy is not installed: the stubs were not checked (pip install mypy)")
    out = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "sockstat"],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (tmp_path / "use.py").write_text(TYPED)
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--python-version", "3.10", str(tmp_path / "use.py")],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr


USE = r"""
import os, socket, sockstat, warnings
warnings.simplefilter("ignore")
lst = socket.socket(); lst.bind(("127.0.0.1", 0)); lst.listen()
[s] = sockstat.sockets(ports=lst.getsockname()[1], listening=True)
assert (s.state, s.owners[0].pid, s.owners[0].fd) == ("LISTEN", os.getpid(), lst.fileno()), s
rows = [r for r in sockstat.net_connections("tcp4") if r.laddr and r.laddr.port == lst.getsockname()[1]]
assert [(r.pid, r.status) for r in rows] == [(os.getpid(), "LISTEN")], rows
print(sockstat.__version__, sockstat.__file__)
"""


def test_the_wheel_installs_into_a_fresh_virtualenv_and_works(tmp_path):
    """The wheel `maturin build --release` made ($SOCKSTAT_WHEEL), in a new virtualenv with
    nothing else installed."""
    pattern = os.environ.get("SOCKSTAT_WHEEL")
    wheels = sorted(glob.glob(pattern)) if pattern else []
    if not wheels:
        skip_loudly("SOCKSTAT_WHEEL names no wheel (.ci/run builds one with maturin)")
    wheel = wheels[-1]
    assert re.search(r"-cp39-abi3-.*linux.*\.whl$", wheel), wheel
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    subprocess.run(
        [str(py), "-m", "pip", "install", "--no-index", "--quiet", wheel],
        check=True, timeout=300,
    )
    out = subprocess.run(
        [str(py), "-c", USE], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    version, where = out.stdout.split()
    assert version == sockstat.__version__ and where.startswith(str(env_dir))


def test_the_package_under_test_is_the_wheel():
    """With $SOCKSTAT_WHEEL (CI), the whole suite runs against that wheel installed into this
    virtualenv, not against a build from the source tree: the installed distribution carries the
    wheel's tags and its extension module is the wheel's, byte for byte."""
    pattern = os.environ.get("SOCKSTAT_WHEEL")
    wheels = sorted(glob.glob(pattern)) if pattern else []
    if not wheels:
        skip_loudly("SOCKSTAT_WHEEL names no wheel: the suite ran against whatever sockstat is installed")
    wheel = Path(wheels[-1])
    where = Path(sockstat.__file__).resolve()
    assert Path(sys.prefix).resolve() in where.parents and "site-packages" in where.parts, where
    _name, _version, py, abi, plat = wheel.name[: -len(".whl")].split("-")
    want = {f"{py}-{abi}-{p}" for p in plat.split(".")}
    wheel_meta = importlib.metadata.distribution("sockstat").read_text("WHEEL") or ""
    got = {line.split(":", 1)[1].strip() for line in wheel_meta.splitlines() if line.startswith("Tag:")}
    assert got == want, (got, want)
    native = Path(sockstat._native.__file__)
    with zipfile.ZipFile(wheel) as z:
        [member] = [n for n in z.namelist() if n.startswith("sockstat/_native") and n.endswith(".so")]
        assert z.read(member) == native.read_bytes(), (member, native)


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub and PyPI's renderer make it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_readme_reads_the_same_outside_the_repository():
    """python/README.md is the package's long description (PyPI shows it): every link in it is
    absolute or to one of its own headings, none into the repository (../doc/... breaks there)."""
    text = (REPO / "python" / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    anchors = {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    for link in links:
        if link.startswith("#"):
            assert link[1:] in anchors, (link, sorted(anchors))
        else:
            assert link.startswith("https://"), link
    assert "../" not in text
