"""Helpers for the browser tests (tests/ui)."""

import re


def watch_csp(page) -> list[str]:
    """Every CSP violation the page reports, from the console and the DOM event."""
    violations: list[str] = []
    page.on(
        "console",
        lambda msg: (
            violations.append(f"console: {msg.text}")
            if re.search(r"Content Security Policy|Refused to", msg.text)
            else None
        ),
    )
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', (e) =>"
        " console.error('Refused to load: CSP ' + e.violatedDirective + ' ' + e.blockedURI));"
    )
    return violations
