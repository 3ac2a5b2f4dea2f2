"""Templates are parsed once per process: Django's cached template loader, which Django uses
when TEMPLATES sets no ``loaders`` (as portal/settings.py does not), in production as in tests."""

from django.template import engines
from django.template.loaders.cached import Loader as CachedLoader


def test_the_templates_are_read_through_the_cached_loader():
    engine = engines["django"].engine
    assert not engine.debug
    [loader] = engine.template_loaders
    assert isinstance(loader, CachedLoader)
    loaded = {type(inner).__module__ for inner in loader.loaders}
    assert loaded == {
        "django.template.loaders.filesystem",
        "django.template.loaders.app_directories",
    }


def test_the_jinja2_tables_translate_escape_and_refuse_a_misspelt_name():
    import pytest
    from django.utils import translation

    from jinja2 import UndefinedError

    jinja = engines["jinja2"]
    page = jinja.from_string('{{ _("Status") }} {{ name }} <a href="{{ url("requests-list") }}">')
    with translation.override("zh-hans"):
        assert page.render({"name": "<b>x</b>"}) == (
            '状态 &lt;b&gt;x&lt;/b&gt; <a href="/requests/">'
        )
    with pytest.raises(UndefinedError, match="nmae"):
        jinja.from_string("{{ nmae }}").render({"name": "x"})
