"""The translation catalogues: committed .mo files are exactly the compiled .po files, the
Chinese catalogue translates every string the code marks, and the pure-Python compiler
(compile_translations, with polib) gives what GNU msgfmt gives."""

import gettext
import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import polib
import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from portal.management.commands.compile_translations import compile_po, po_files
from tests.support.layout import LAYERS

ROOT = Path(settings.BASE_DIR)
LOCALE = ROOT / "locale"
ZH_PO = LOCALE / "zh_Hans" / "LC_MESSAGES" / "django.po"
PLACEHOLDER = re.compile(r"%\((\w+)\)[sd]")


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path:
        return path
    message = f"{tool} not found: install GNU gettext (apt-get install -y gettext)"
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def test_every_committed_mo_is_its_po_compiled():
    files = po_files([Path(p) for p in settings.LOCALE_PATHS])
    assert ZH_PO in files
    stale = [
        str(po.relative_to(ROOT))
        for po in files
        if not po.with_suffix(".mo").exists()
        or po.with_suffix(".mo").read_bytes() != compile_po(po)
    ]
    assert stale == [], "run `make messages` (or manage.py compile_translations) and commit"


def test_django_reads_the_committed_chinese_catalogue():
    from django.utils import translation

    with translation.override("zh-hans"):
        assert translation.gettext("Preview of request #%(id)s") == "申请 #%(id)s 的预览"


def test_the_chinese_catalogue_has_no_untranslated_or_fuzzy_entry():
    catalogue = polib.pofile(str(ZH_PO))
    assert len(catalogue) > 100
    assert [e.msgid for e in catalogue.untranslated_entries()] == []
    assert [e.msgid for e in catalogue.fuzzy_entries()] == []
    assert [e.msgid for e in catalogue.obsolete_entries()] == []
    assert not catalogue.metadata_is_fuzzy


def test_translations_keep_every_placeholder():
    wrong = []
    for entry in polib.pofile(str(ZH_PO)):
        wanted = set(PLACEHOLDER.findall(entry.msgid_plural or entry.msgid))
        forms = entry.msgstr_plural.values() if entry.msgid_plural else [entry.msgstr]
        for form in forms:
            if set(PLACEHOLDER.findall(form)) != wanted:
                wrong.append((entry.msgid, form))
    assert wrong == []


def test_compile_translations_check_fails_on_a_stale_mo(tmp_path, settings):
    folder = tmp_path / "xx" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    shutil.copy(ZH_PO, folder / "django.po")
    settings.LOCALE_PATHS = [tmp_path]
    with pytest.raises(CommandError, match="stale or missing"):
        call_command("compile_translations", "--check", stdout=io.StringIO())
    call_command("compile_translations", stdout=io.StringIO())
    assert (folder / "django.mo").read_bytes() == compile_po(ZH_PO)
    call_command("compile_translations", "--check", stdout=io.StringIO())  # now up to date
    (folder / "django.po").write_text(
        ZH_PO.read_text(encoding="utf-8").replace('msgstr "退出登录"', 'msgstr "登出"'),
        encoding="utf-8",
    )
    with pytest.raises(CommandError, match="stale or missing"):
        call_command("compile_translations", "--check", stdout=io.StringIO())


PO_SAMPLE = r"""# header comment
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"
"POT-Creation-Date: 2026-01-01 00:00+0000\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\n"

#: a.py
msgid "Hello"
msgstr "Hallo"

msgctxt "token state"
msgid "active"
msgstr "aktiv"

#, python-format
msgid "%(n)d file"
msgid_plural "%(n)d files"
msgstr[0] "%(n)d Datei"
msgstr[1] "%(n)d Dateien"

msgid ""
"a long message "
"on two lines with \"quotes\"\n"
"and a tab\t"
msgstr "eine lange Nachricht"

#, fuzzy
msgid "Maybe"
msgstr "Vielleicht"

msgid "Untranslated"
msgstr ""

#~ msgid "Gone"
#~ msgstr "Weg"
"""


def test_the_compiler_reads_every_kind_of_entry():
    catalog = gettext.GNUTranslations(io.BytesIO(compile_po(PO_SAMPLE)))
    assert catalog.gettext("Hello") == "Hallo"
    assert catalog.pgettext("token state", "active") == "aktiv"
    assert catalog.ngettext("%(n)d file", "%(n)d files", 1) == "%(n)d Datei"
    assert catalog.ngettext("%(n)d file", "%(n)d files", 3) == "%(n)d Dateien"
    assert (
        catalog.gettext('a long message on two lines with "quotes"\nand a tab\t')
        == "eine lange Nachricht"
    )
    # Like msgfmt: fuzzy, untranslated and obsolete entries are left out.
    assert catalog.gettext("Maybe") == "Maybe"
    assert catalog.gettext("Untranslated") == "Untranslated"
    assert catalog.gettext("Gone") == "Gone"
    assert "POT-Creation-Date" not in catalog._info and "pot-creation-date" not in catalog._info
    assert compile_po(PO_SAMPLE) == compile_po(PO_SAMPLE)


def test_the_compiler_refuses_what_it_cannot_read(tmp_path, settings):
    with pytest.raises(OSError, match=r"Syntax error in po file \(line 2\)"):
        compile_po('msgid "a"\nmsgstring "b"\n')
    with pytest.raises(OSError, match=r"Syntax error in po file \(line 1\)"):
        compile_po('"orphan"\n')
    folder = tmp_path / "xx" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    (folder / "django.po").write_text('msgid "a"\nmsgstring "b"\n', encoding="utf-8")
    settings.LOCALE_PATHS = [tmp_path]
    with pytest.raises(CommandError, match=r"django\.po: Syntax error in po file"):
        call_command("compile_translations", stdout=io.StringIO())


def test_the_compiler_agrees_with_msgfmt(tmp_path):
    msgfmt = _need("msgfmt")
    sample = tmp_path / "sample.po"
    sample.write_text(PO_SAMPLE, encoding="utf-8")
    for po in [ZH_PO, sample]:
        reference = tmp_path / "reference.mo"
        subprocess.run([msgfmt, "-o", str(reference), str(po)], check=True)
        ours = gettext.GNUTranslations(io.BytesIO(compile_po(po)))
        theirs = gettext.GNUTranslations(reference.open("rb"))
        assert ours._catalog == theirs._catalog, po


def test_the_chinese_catalogue_covers_every_marked_string(tmp_path, settings, monkeypatch):
    """makemessages over a copy of the sources finds no string the committed .po lacks:
    a new {% translate %} or gettext() without `make messages` fails here."""
    _need("xgettext")
    for folder in (*LAYERS, "templates", "jinja2", "locale"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("*.pyc"))
    settings.LOCALE_PATHS = [tmp_path / "locale"]
    monkeypatch.chdir(tmp_path)
    call_command(
        "makemessages",
        locale=["zh_Hans"],
        no_obsolete=True,
        add_location="file",
        verbosity=0,
    )
    fresh = polib.pofile(str(tmp_path / ZH_PO.relative_to(ROOT)))
    committed = {_key(e) for e in polib.pofile(str(ZH_PO))}
    missing = [e.msgid for e in fresh if _key(e) not in committed]
    assert missing == [], "run `make messages` and translate the new entries"
    untranslated = [e.msgid for e in fresh if not e.translated()]
    assert untranslated == []


def _key(entry: polib.POEntry) -> tuple[str | None, str, str | None]:
    return (entry.msgctxt, entry.msgid, entry.msgid_plural or None)
