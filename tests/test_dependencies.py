"""Dependencies point one way, down the layers

    common (the kernel) < quotas < usage < approvals < overview < portal (the shell):

an app may use what is below it, never what is above. Read from every module's imports (nested
ones too), from the templates each app renders, includes and extends, and from the URL names
its templates and code link to (the view behind a name belongs to an app too)."""

import ast
import re
from pathlib import Path

import pytest

from tests.support.layout import LAYERS

REPO = Path(__file__).resolve().parents[1]

# Packages each package must not import: every layer above it.
FORBIDDEN = {layer: LAYERS[i + 1 :] for i, layer in enumerate(LAYERS)}
# Imports of a forbidden package that are allowed, as (importing module, imported module).
# None today: settings are read through django.conf.settings, never portal.settings.
ALLOWED: frozenset[tuple[str, str]] = frozenset()


def imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return modules


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts)


@pytest.mark.parametrize("package", [layer for layer in LAYERS if FORBIDDEN[layer]])
def test_package_imports_only_what_it_may(package):
    offenders = sorted(
        (module_name(path), imported)
        for path in (REPO / package).rglob("*.py")
        for imported in imported_modules(path)
        if imported.split(".")[0] in FORBIDDEN[package]
        and (module_name(path), imported) not in ALLOWED
    )
    assert offenders == []


def test_the_check_sees_nested_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from portal.models import ApiToken\n    import portal.urls\n")
    assert imported_modules(module) == {"portal.models", "portal.urls"}


# --- templates and URL names ------------------------------------------------------------------

TEMPLATES = REPO / "templates"
# The Jinja2 backend's templates (portal/jinja2.py): the same names, the same layers.
JINJA_TEMPLATES = REPO / "jinja2"
TEMPLATE_ROOTS = (TEMPLATES, JINJA_TEMPLATES)
# The shell's templates: the page frame every page extends, the login pages, the API docs.
SHELL_TEMPLATES = ("base.html", "registration/", "api/", "portal/")
TEMPLATE_NAME = re.compile(r"^(?:admin/)?[a-z_]+/[a-z_/]*[a-z_]+\.html$")
TEMPLATE_TAG = re.compile(r"{%\s*(?:include|extends)\s+[\"']([^\"']+)[\"']")
# {% url "name" %} (Django templates), url("name") (Jinja2's, portal/jinja2.py).
URL_TAG = re.compile(r"{%\s*url\s+[\"']([^\"']+)[\"']|\burl\(\s*[\"']([^\"']+)[\"']")
REVERSING = {"reverse", "reverse_lazy", "redirect", "resolve_url"}


def template_owner(name: str) -> str | None:
    """The app a template belongs to, by its folder (admin/<app>/ too); None for Django's own."""
    if name.startswith(SHELL_TEMPLATES):
        return "portal"
    parts = name.split("/")
    if parts[0] == "admin":
        parts = parts[1:]
    if len(parts) > 1 and parts[0] in LAYERS and any((r / name).exists() for r in TEMPLATE_ROOTS):
        return parts[0]
    return None


def template_files() -> list[tuple[Path, Path]]:
    return [(root, path) for root in TEMPLATE_ROOTS for path in sorted(root.rglob("*.html"))]


def url_names(text: str) -> list[str]:
    return [django or jinja for django, jinja in URL_TAG.findall(text)]


def may_use(user: str, used: str | None) -> bool:
    return used is None or used not in FORBIDDEN[user]


def url_owners() -> dict[str, str]:
    """Every URL name of the portal -> the app whose module holds its view."""
    from django.urls import URLPattern, URLResolver, get_resolver

    owners = {}

    def walk(patterns):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                if pattern.namespace is None:  # the admin's names are namespaced: Django's
                    walk(pattern.url_patterns)
            elif isinstance(pattern, URLPattern) and pattern.name:
                owners[pattern.name] = pattern.callback.__module__.split(".")[0]

    walk(get_resolver().url_patterns)
    return owners


def python_references(path: Path) -> tuple[set[str], set[str]]:
    """The template names and the URL names (given to reverse, redirect...) a module spells."""
    templates, urls = set(), set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if TEMPLATE_NAME.match(node.value):
                templates.add(node.value)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            first = node.args[0]
            literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
            if name in REVERSING and literal and ":" not in first.value:
                urls.add(first.value)
    return templates, urls


def test_templates_and_url_names_point_down_the_layers():
    owners = url_owners()
    offenders = []
    for root, path in template_files():
        name = str(path.relative_to(root))
        owner = template_owner(name)
        if owner is None:
            continue
        text = path.read_text()
        for used in TEMPLATE_TAG.findall(text):
            if used != "base.html" and not may_use(owner, template_owner(used)):
                offenders.append((name, "includes", used))
        for url in url_names(text):
            if ":" not in url and not may_use(owner, owners.get(url)):
                offenders.append((name, "links to", f"{url} ({owners.get(url)})"))
    for layer in LAYERS:
        for path in sorted((REPO / layer).rglob("*.py")):
            templates, urls = python_references(path)
            for used in templates:
                if not may_use(layer, template_owner(used)):
                    offenders.append((module_name(path), "renders", used))
            for url in urls:
                if not may_use(layer, owners.get(url)):
                    offenders.append((module_name(path), "links to", f"{url} ({owners.get(url)})"))
    assert offenders == []


def test_every_url_name_the_templates_use_exists():
    """A misspelt name would pass the layer check unseen (it has no owner)."""
    owners = url_owners()
    spelt = {
        url
        for _root, path in template_files()
        for url in url_names(path.read_text())
        if ":" not in url
    }
    assert sorted(spelt - set(owners) - {"set_language"}) == []


def test_the_template_check_sees_a_page_of_a_higher_app(tmp_path):
    assert template_owner("overview/home.html") == "overview"
    assert template_owner("admin/quotas/cluster_preview.html") == "quotas"
    assert template_owner("base.html") == "portal"
    assert not may_use("quotas", template_owner("overview/home.html"))
    assert may_use("overview", template_owner("quotas/audit_log.html"))
    module = tmp_path / "v.py"
    module.write_text('def v(r):\n    render(r, "overview/home.html")\n    redirect("home")\n')
    assert python_references(module) == ({"overview/home.html"}, {"home"})
    # The Jinja2 templates are owned and read alike.
    assert template_owner("approvals/_request_list.html") == "approvals"
    assert url_names('<a href="{{ url("requests-new") }}">{% url "home" %}') == [
        "requests-new",
        "home",
    ]


def test_selectors_only_read_the_database():
    """A selector answers from the database; what calls the clusters (dry runs, reads of their
    pods) is named for it (preview, live usage) and never imported by a selector."""
    calls_clusters = ("quotas.kube.sync", "quotas.kube.client", "quotas.kube.live_usage")
    offenders = sorted(
        (module_name(path), imported)
        for layer in LAYERS
        for path in (REPO / layer).rglob("*selectors.py")
        for imported in imported_modules(path)
        if imported.startswith(calls_clusters)
    )
    assert offenders == []


# --- the tests themselves ---------------------------------------------------------------------

TESTS = REPO / "tests"
HELPERS = "tests.support"


def imports_of_tests(path: Path, module: str) -> set[str]:
    """The modules of the tests package that ``path`` (the module ``module``) imports, absolute
    or relative, nested ones too."""
    package = module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "tests"}
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = ".".join(
                [*package[: len(package) - node.level + 1], *filter(None, [node.module])]
            )
            found |= {base} if node.module else {f"{base}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tests":
            found.add(node.module)
    return found


def is_helper(module: str) -> bool:
    return module == HELPERS or module.startswith(HELPERS + ".")


def test_tests_import_only_the_helpers_package():
    """Test modules and conftest files share code through tests/support only: none imports a
    test module or a conftest (fixtures reach the tests through pytest, not imports), and the
    helpers import no test either."""
    offenders = sorted(
        (module_name(path), imported)
        for path in TESTS.rglob("*.py")
        for imported in imports_of_tests(path, module_name(path))
        if not is_helper(imported)
    )
    assert offenders == []


def test_the_tests_check_sees_relative_and_nested_imports(tmp_path):
    module = tmp_path / "test_probe.py"
    module.write_text(
        "from .conftest import x\nfrom . import test_api\nfrom tests.support.api import as_user\n"
        "def f():\n    from tests.quotas.test_api import results\n"
    )
    assert imports_of_tests(module, "tests.approvals.test_probe") == {
        "tests.approvals.conftest",
        "tests.approvals.test_api",
        "tests.support.api",
        "tests.quotas.test_api",
    }
