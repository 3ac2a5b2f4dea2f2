"""What the logs may say about a webhook URL."""

from urllib.parse import urlsplit


def redact_url(url: str) -> str:
    # Some receivers put a token in the URL's path or query: log only where it goes.
    parts = urlsplit(url)
    host = (parts.netloc.rpartition("@")[2]) or "?"
    return f"{parts.scheme}://{host}"
