"""CI: pip-audit the locked dependencies; fail on a known vulnerability, not on the network.

pip-audit asks a vulnerability service about every locked package. Where the service cannot be
reached (no route, no name resolution) or answers nothing for any package (an index mirror that
serves installs but not the vulnerability data: pip-audit then skips every package and exits 0),
nothing was audited: say so loudly and pass. A vulnerability found fails the run, and so does
any other error of pip-audit.
"""

import json
import subprocess
import sys
from pathlib import Path

AUDIT_OPTIONS = ("--require-hashes", "--disable-pip", "-f", "json", "--progress-spinner", "off")
NETWORK_ERRORS = (
    "ConnectionError",
    "NameResolutionError",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "Read timed out",
    "ConnectTimeout",
)


def judge(lock: str, returncode: int, stdout: str, stderr: str) -> tuple[int, str]:
    """(exit status, message) for one pip-audit run with ``-f json``."""
    try:
        report = json.loads(stdout)
    except ValueError:
        report = None
    if report is None:
        if any(marker in stderr for marker in NETWORK_ERRORS):
            last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
            return 0, f"WARNING {lock}: NOT AUDITED, vulnerability service unreachable: {last}"
        return 1, f"{lock}: pip-audit failed (exit {returncode}):\n{stderr.strip()}"
    dependencies = report.get("dependencies", [])
    found = [
        f"{d['name']} {d['version']}: {v['id']} "
        f"(fixed in {', '.join(v.get('fix_versions') or ['-'])})"
        for d in dependencies
        for v in d.get("vulns", [])
    ]
    if found:
        return 1, f"{lock}: known vulnerabilities:\n" + "\n".join(found)
    skipped = [d for d in dependencies if "skip_reason" in d]
    if dependencies and len(skipped) == len(dependencies):
        return 0, (
            f"WARNING {lock}: NOT AUDITED, the vulnerability service had no data for any of "
            f"{len(skipped)} packages (e.g. {skipped[0]['skip_reason']})"
        )
    if returncode != 0:
        return 1, f"{lock}: pip-audit failed (exit {returncode}):\n{stderr.strip()}"
    note = f", {len(skipped)} skipped" if skipped else ""
    return (
        0,
        f"{lock}: no known vulnerabilities in {len(dependencies) - len(skipped)} packages{note}",
    )


def main(locks: list[str]) -> int:
    pip_audit = Path(sys.executable).with_name("pip-audit")
    status = 0
    for lock in locks:
        run = subprocess.run(
            [str(pip_audit), "-r", lock, *AUDIT_OPTIONS],
            capture_output=True,
            text=True,
            timeout=900,
        )
        code, message = judge(lock, run.returncode, run.stdout, run.stderr)
        print(message, file=sys.stderr if code else sys.stdout)
        status = max(status, code)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["requirements.txt", "requirements-dev.txt"]))
