"""Compile gettext catalogues (.po) into the binary form Django reads (.mo), in pure Python.

A fresh clone needs no GNU gettext to run the portal in every language: the .mo files are
committed, written by this module (``manage.py compile_translations``, ``make messages``), and a
test compiles every .po again and compares the bytes, so a stale .mo fails CI.

Like ``msgfmt``, entries that are untranslated, fuzzy or obsolete are left out. The output is a
function of the .po alone (entries sorted by their key, no hash table, which readers do not
need), so compiling twice gives the same bytes.
"""

from __future__ import annotations

import ast
import struct
from dataclasses import dataclass, field
from pathlib import Path

MO_MAGIC = 0x950412DE
# Separators of the .mo format: context from msgid, and the plural forms from each other.
CONTEXT_SEPARATOR = "\x04"
PLURAL_SEPARATOR = "\x00"


class PoSyntaxError(ValueError):
    def __init__(self, path: str, line: int, problem: str):
        super().__init__(f"{path}:{line}: {problem}")


@dataclass
class PoEntry:
    msgid: str = ""
    msgid_plural: str | None = None
    msgctxt: str | None = None
    # msgstr, or msgstr[0], msgstr[1], ... by index.
    msgstr: dict[int, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)
    obsolete: bool = False
    line: int = 0

    @property
    def fuzzy(self) -> bool:
        return "fuzzy" in self.flags

    @property
    def translated(self) -> bool:
        return bool(self.msgstr) and all(self.msgstr.values())

    @property
    def is_header(self) -> bool:
        return self.msgid == "" and self.msgctxt is None

    def key(self) -> str:
        key = self.msgid
        if self.msgid_plural is not None:
            key += PLURAL_SEPARATOR + self.msgid_plural
        if self.msgctxt is not None:
            key = self.msgctxt + CONTEXT_SEPARATOR + key
        return key

    def value(self) -> str:
        return PLURAL_SEPARATOR.join(self.msgstr[i] for i in sorted(self.msgstr))


def _unquote(token: str, path: str, line: int) -> str:
    """The text of one C-style quoted string of a .po file ("a\\n\\"b\\"")."""
    token = token.strip()
    if len(token) < 2 or token[0] != '"' or token[-1] != '"':
        raise PoSyntaxError(path, line, f"expected a quoted string, got {token!r}")
    try:
        # The escapes gettext writes (\\ \" \n \t \r \a \b \f \v, octal) are Python's too.
        value = ast.literal_eval(token)
    except (SyntaxError, ValueError) as exc:
        raise PoSyntaxError(path, line, f"bad string {token!r}: {exc}") from None
    if not isinstance(value, str):
        raise PoSyntaxError(path, line, f"bad string {token!r}")
    return value


def parse_po(text: str, path: str = "<po>") -> list[PoEntry]:
    """Every entry of a .po file, in file order (the header first, when it has one).

    An entry ends where the next one's comments or msgctxt/msgid begin after its msgstr."""
    entries: list[PoEntry] = []
    entry = PoEntry()
    # Which string a continuation line ("...") adds to: "msgid", "msgid_plural", "msgctxt" or
    # the index of a msgstr.
    target: str | int | None = None

    def finish() -> None:
        nonlocal entry, target
        if entry.line:
            entries.append(entry)
        entry, target = PoEntry(), None

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        obsolete = line.startswith("#~")
        if obsolete:
            line = line[2:].strip()
        if not line:
            target = None
            continue
        if line.startswith("#"):
            if entry.msgstr:
                finish()
            if line.startswith("#,"):
                entry.flags |= {f.strip() for f in line[2:].split(",") if f.strip()}
            continue
        if line.startswith('"'):
            if target is None:
                raise PoSyntaxError(path, number, "a string continues nothing")
            _append(entry, target, _unquote(line, path, number))
            continue
        keyword, _, rest = line.partition(" ")
        if keyword in ("msgctxt", "msgid") and entry.msgstr:
            finish()
        entry.line = entry.line or number
        entry.obsolete = entry.obsolete or obsolete
        value = _unquote(rest, path, number)
        if keyword == "msgctxt":
            entry.msgctxt, target = value, "msgctxt"
        elif keyword == "msgid":
            entry.msgid, target = value, "msgid"
        elif keyword == "msgid_plural":
            entry.msgid_plural, target = value, "msgid_plural"
        elif keyword == "msgstr":
            entry.msgstr[0], target = value, 0
        elif keyword.startswith("msgstr[") and keyword.endswith("]"):
            try:
                index = int(keyword[7:-1])
            except ValueError:
                raise PoSyntaxError(path, number, f"bad plural index in {keyword}") from None
            entry.msgstr[index], target = value, index
        else:
            raise PoSyntaxError(path, number, f"unknown keyword {keyword!r}")
    finish()
    return entries


def _append(entry: PoEntry, target: str | int, value: str) -> None:
    if isinstance(target, int):
        entry.msgstr[target] += value
    elif target == "msgid_plural":
        entry.msgid_plural = (entry.msgid_plural or "") + value
    elif target == "msgctxt":
        entry.msgctxt = (entry.msgctxt or "") + value
    else:
        entry.msgid += value


def compiled_entries(entries: list[PoEntry]) -> dict[str, str]:
    """What goes into the .mo: the header and every translated, non-fuzzy, live entry."""
    catalogue: dict[str, str] = {}
    for entry in entries:
        if entry.obsolete:
            continue
        if entry.is_header:
            # As msgfmt does: the extraction date changes with every makemessages, the .mo not.
            lines = entry.value().splitlines(keepends=True)
            catalogue[""] = "".join(x for x in lines if not x.startswith("POT-Creation-Date:"))
        elif entry.translated and not entry.fuzzy:
            catalogue[entry.key()] = entry.value()
    return catalogue


def mo_bytes(catalogue: dict[str, str]) -> bytes:
    """The .mo file of ``catalogue`` (key -> translation), UTF-8, keys sorted, no hash table."""
    pairs = sorted((k.encode("utf-8"), v.encode("utf-8")) for k, v in catalogue.items())
    count = len(pairs)
    header_size = 7 * 4
    originals_at = header_size
    translations_at = originals_at + count * 8
    data_at = translations_at + count * 8
    originals, translations, data = [], [], bytearray()
    for key, _ in pairs:
        originals.append((len(key), data_at + len(data)))
        data += key + b"\0"
    for _, value in pairs:
        translations.append((len(value), data_at + len(data)))
        data += value + b"\0"
    out = bytearray(
        struct.pack("<7I", MO_MAGIC, 0, count, originals_at, translations_at, 0, data_at)
    )
    for length, offset in originals + translations:
        out += struct.pack("<2I", length, offset)
    return bytes(out + data)


def _check_charset(entries: list[PoEntry], path: str) -> None:
    header = next((e for e in entries if e.is_header and not e.obsolete), None)
    if header is None:
        return
    for line in header.value().splitlines():
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-type" and "charset=" in value:
            charset = value.split("charset=", 1)[1].strip().lower()
            if charset not in ("utf-8", "utf8"):
                raise PoSyntaxError(path, header.line, f"only UTF-8 catalogues, not {charset}")


def compile_po(po_text: str, path: str = "<po>") -> bytes:
    """The .mo bytes of one .po file's text."""
    entries = parse_po(po_text, path)
    _check_charset(entries, path)
    return mo_bytes(compiled_entries(entries))


def compile_file(po_path: Path) -> bytes:
    return compile_po(po_path.read_text(encoding="utf-8"), str(po_path))


def po_files(locale_dirs: list[Path]) -> list[Path]:
    """Every .po under the locale folders (``<lang>/LC_MESSAGES/<domain>.po``), sorted."""
    return sorted(p for d in locale_dirs for p in Path(d).glob("*/LC_MESSAGES/*.po"))
