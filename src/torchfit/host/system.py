"""The system: glibc (confstr, `ldd --version`), the OS (/etc/os-release), WSL
and the machine architecture."""

import os
import re
import sys
from collections.abc import Mapping

from torchfit.host._io import DEFAULT_TIMEOUT, _read, _run_tool, _under, _unknown
from torchfit.runner import Runner
from torchfit.text import first_line


def parse_ldd_version(text: str) -> str | None:
    """glibc's version from `ldd --version`: "ldd (Ubuntu GLIBC 2.39-0ubuntu8.6) 2.39"
    -> "2.39", "ldd (GNU libc) 2.17" -> "2.17". musl's ldd ("musl libc (x86_64)") and
    anything else give None."""
    line = first_line(text, 500)
    if not line.startswith("ldd") and "GLIBC" not in line.upper():
        return None
    last = line.split()[-1]
    return last if re.fullmatch(r"[0-9]+\.[0-9]+(?:\.[0-9]+)?", last) else None


def parse_confstr_glibc(text: str | None) -> str | None:
    """`os.confstr("CS_GNU_LIBC_VERSION")` ("glibc 2.39") -> "2.39", or None."""
    if not text:
        return None
    parts = text.split()
    if (
        len(parts) == 2
        and parts[0] == "glibc"
        and re.fullmatch(r"[0-9]+\.[0-9]+(?:\.[0-9]+)?", parts[1])
    ):
        return parts[1]
    return None


def _unquote(value: str) -> str:
    # os-release(5): values may be enclosed in single or double quotes, with
    # backslash escapes inside double quotes.
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
        if value and "\\" in value:
            value = re.sub(r"\\(.)", r"\1", value)
    return value


def parse_os_release(text: str) -> str | None:
    """/etc/os-release -> "ID:VERSION_ID" ("ubuntu:24.04", "centos:7"), "ID" alone on
    rolling distributions without VERSION_ID (Arch), None without an ID."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        values.setdefault(key.strip(), _unquote(value))
    os_id = values.get("ID", "").strip().lower()
    if not os_id or any(c.isspace() or c == ":" for c in os_id):
        return None
    version = values.get("VERSION_ID", "").strip()
    if version and not any(c.isspace() for c in version):
        return f"{os_id}:{version}"
    return os_id


def parse_wsl(text: str) -> bool:
    """True when a kernel release or /proc/version string is WSL's.

    WSL2 kernels are "5.15.153.1-microsoft-standard-WSL2", WSL1 reports
    "4.4.0-19041-Microsoft" (Microsoft's WSL docs, "check which version of WSL").
    """
    low = text.lower()
    return "microsoft" in low or "wsl" in low

def probe_glibc(
    runner: Runner, root: str = "/", *, timeout: float = DEFAULT_TIMEOUT
) -> tuple[str | None, str | None]:
    """glibc's version: confstr on this host (no subprocess), else `ldd --version`."""
    if root == "/":
        try:
            found = parse_confstr_glibc(os.confstr("CS_GNU_LIBC_VERSION"))
        except (ValueError, OSError, AttributeError):
            found = None  # not glibc (musl), or not a POSIX confstr at all
        if found:
            return found, None
    res, cause = _run_tool(runner, ["ldd", "--version"], timeout)
    if res is None:
        return None, _unknown(cause or "ldd failed")
    # musl's ldd prints its banner on stderr and exits 1; glibc's on stdout, exit 0.
    found = parse_ldd_version(res.stdout) or parse_ldd_version(res.stderr)
    if found:
        return found, None
    said = first_line(res.stdout) or first_line(res.stderr)
    if "musl" in said.lower():
        return None, _unknown(f"this system's C library is not glibc ({said})")
    return None, _unknown(f"`ldd --version` did not name a glibc version ({said or 'no output'})")


def probe_os(root: str = "/") -> tuple[str | None, str | None]:
    """ "ubuntu:24.04" from /etc/os-release (or /usr/lib/os-release, per os-release(5))."""
    if root == "/" and not sys.platform.startswith("linux"):
        import platform

        return None, _unknown(
            f"this is {platform.system() or sys.platform}, not Linux (out of scope)"
        )
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        text = _read(_under(root, path))
        if text is not None:
            found = parse_os_release(text)
            if found:
                return found, None
            return None, _unknown(f"{path} has no ID")
    return None, _unknown("/etc/os-release and /usr/lib/os-release are absent")


def probe_wsl(root: str = "/") -> tuple[bool | None, str | None]:
    """Whether this Linux runs under WSL, from the kernel release string."""
    texts = [
        _read(_under(root, "/proc/sys/kernel/osrelease")),
        _read(_under(root, "/proc/version")),
    ]
    if all(t is None for t in texts):
        return None, _unknown("/proc/sys/kernel/osrelease and /proc/version are unreadable")
    return any(parse_wsl(t) for t in texts if t is not None), None


def parse_nv_tegra_release(text: str) -> str | None:
    """"# R36 (release), REVISION: 4.3, GCID: ..." -> "R36.4.3"; None when not that line."""
    m = re.search(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*([0-9.]+)", text)
    return f"R{m.group(1)}.{m.group(2).rstrip('.')}" if m else None


def probe_l4t(root: str = "/") -> tuple[str | None, str | None]:
    """The L4T (Jetson Linux) release from /etc/nv_tegra_release; None off Jetson.

    Absent file: not a Jetson (no reason). A file that does not parse: unknown, with why.
    """
    text = _read(_under(root, "/etc/nv_tegra_release"))
    if text is None:
        return None, None
    found = parse_nv_tegra_release(text)
    return (found, None) if found else (None, _unknown("/etc/nv_tegra_release has no '# R<N> (release), REVISION:' line"))


_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


def probe_arch(
    runner: Runner, *, timeout: float = DEFAULT_TIMEOUT
) -> tuple[str | None, str | None]:
    """The CPU architecture as wheel tags spell it (x86_64, aarch64)."""
    # What platform.machine() returns on POSIX, without importing platform (~2 ms).
    machine = os.uname().machine if hasattr(os, "uname") else ""
    if not machine:
        res, cause = _run_tool(runner, ["uname", "-m"], timeout)
        if res is None or cause is not None:
            return None, _unknown(cause or "uname -m failed")
        machine = res.stdout.strip()
    if not machine:
        return None, _unknown("uname(2) and `uname -m` give no machine name")
    return _ARCH_ALIASES.get(machine.lower(), machine), None


# Container runtimes by the word their cgroup path carries (cgroup v1 and v2 under the host's
# systemd: "/system.slice/docker-<id>.scope", "/kubepods/...", "/machine.slice/libpod-<id>.scope").
_CGROUP_ENGINES = (("kubepods", "kubernetes"), ("libpod", "podman"), ("docker", "docker"),
                   ("containerd", "containerd"), ("lxc", "lxc"))


def parse_containerenv(text: str) -> str:
    """podman's /run/.containerenv: its `engine="podman-4.3.1"` line -> "podman-4.3.1" (else "podman")."""
    m = re.search(r'^engine="([^"\n]+)"', text, re.MULTILINE)
    return m.group(1) if m else "podman"


def parse_cgroup_engine(text: str) -> str | None:
    """/proc/1/cgroup -> the container runtime its paths name, or None (a host, or cgroup v2's "0::/")."""
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        for word, engine in _CGROUP_ENGINES:
            if word in path:
                return engine
    return None


def probe_container(root: str = "/", environ: "Mapping[str, str] | None" = None) -> tuple[str | None, str | None]:
    """(runtime, how it was seen) when this process runs in a container, (None, None) on a host.

    The marks each runtime leaves: podman's /run/.containerenv (podman-run(1)), docker's
    /.dockerenv, the `container` variable of systemd's Container Interface (podman, nspawn,
    LXC set it), a runtime's name in PID 1's cgroup path (cgroup v1).
    """
    text = _read(_under(root, "/run/.containerenv"))
    if text is not None:
        return parse_containerenv(text), "/run/.containerenv"
    if os.path.exists(_under(root, "/.dockerenv")):
        return "docker", "/.dockerenv"
    env = os.environ if environ is None else environ
    if env.get("container"):
        return env["container"], f"container={env['container']}"
    cgroup = _read(_under(root, "/proc/1/cgroup"))
    engine = parse_cgroup_engine(cgroup) if cgroup else None
    return (engine, "/proc/1/cgroup") if engine else (None, None)
