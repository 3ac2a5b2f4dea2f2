"""Serves plotly.js from the pinned ``plotly`` Python package as ``vendor/plotly.min.js``:
the portal works offline (no CDN) and no 4 MB copy is kept in the repository; collectstatic
copies it like any other static file."""

from pathlib import Path

from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_JS = "vendor/plotly.min.js"


def _package_data() -> Path:
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data"


class PlotlyFinder(BaseFinder):
    """Finds exactly one file, ``vendor/plotly.min.js``; nothing else of the package."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(_package_data()))
        self.storage.prefix = "vendor"

    def check(self, **kwargs):
        if not (_package_data() / "plotly.min.js").is_file():
            from django.core.checks import Error

            return [Error("plotly.min.js missing from the plotly package", id="portal.E101")]
        return []

    def find(self, path, find_all=False, **kwargs):
        if path != PLOTLY_JS:
            return []  # as Django's own finders: an empty list, found or not asked for all
        match = str(_package_data() / "plotly.min.js")
        return [match] if find_all else match

    def list(self, ignore_patterns):
        yield "plotly.min.js", self.storage
