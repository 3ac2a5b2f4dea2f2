"""Dependencies point one way: portal (the shell) includes the apps, approvals uses quotas, every
one may use the common kernel; the apps never import portal, quotas never imports approvals,
and the kernel imports none of them. Read from every module's imports (nested ones too)."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Packages each package must not import.
FORBIDDEN = {
    "common": ("portal", "quotas", "approvals"),
    "quotas": ("portal", "approvals"),
    "approvals": ("portal",),
}
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


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
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
