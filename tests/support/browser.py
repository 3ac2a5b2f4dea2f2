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


def live_check_answered(page, values: dict[str, str], timeout: float = 120_000):
    """A context manager that ends once the server has answered the request form's live check
    (POST .../validate/) for a form carrying ``values`` (field name -> value typed): what the
    page shows next is that answer, however slow the server is, not a guess of how long it
    takes. The deadline only bounds a check that never comes."""

    def carries_the_values(response) -> bool:
        request = response.request
        if request.method != "POST" or not request.url.rstrip("/").endswith("/validate"):
            return False
        body = request.post_data or ""
        return all(
            re.search(rf'name="{re.escape(name)}"\r\n\r\n{re.escape(value)}\r\n', body)
            for name, value in values.items()
        )

    return page.expect_response(carries_the_values, timeout=timeout)


# Nothing the page fills in after loading is still on its way: no region is aria-busy (the
# dashboard's waiting lists, the request form's check) and every chart is drawn.
SETTLED = (
    "() => !document.querySelector('[aria-busy=true]') && [...document.querySelectorAll('.chart')]"
    ".every(c => c.dataset.drawn === 'true' || !c.closest('body'))"
)


def wait_until_settled(page, timeout: float = 30_000) -> None:
    """Until a page just loaded has filled in what it fetches and draws by itself, as the page
    itself tells (Playwright's "networkidle" would wait half a second after its last request,
    on every page, and not know about drawing)."""
    page.wait_for_function(SETTLED, timeout=timeout)
