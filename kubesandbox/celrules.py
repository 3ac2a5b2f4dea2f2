"""CEL as kube-apiserver uses it: the CRDs' ``x-kubernetes-validations`` rules and the expressions
of ValidatingAdmissionPolicies, compiled and evaluated with cel-python (module ``celpy``).

cel-python knows standard CEL; Kubernetes adds libraries (quantities, list and string helpers).
The functions of those libraries are added here as far as the served rules and the policies need
them. An expression that calls a function neither library has does not compile, as on a real API
server, so a rule is never passed without being evaluated: :func:`crd_rule_inventory` lists every
rule of the served CRDs with its state, and a test asserts that all of them are evaluated.
cel-python checks no types; :func:`check_admission_types` does the part kube-apiserver refuses
a policy for (fields of ``namespaceObject`` and ``request``, undeclared ``params`` and
``variables``). Compile errors are worded as cel-go's, with line, column and caret.

Rules are compiled once per process (compiling costs ~20 ms, evaluating ~1 ms).
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

import celpy
import lark
from celpy import celtypes

from kubesandbox.quantity import QuantityError, format_milli, parse_quantity
from kubesandbox.schemas import FieldError, bad_value, crd_schemas

# -- the Kubernetes CEL libraries (the parts the served expressions use) ----------------------


class Quantity(celtypes.StringType):
    """A Kubernetes ``quantity()`` value; compares and adds by its exact number."""

    value: Fraction

    def __new__(cls, text: str, value: Fraction | None = None) -> Quantity:
        obj = super().__new__(cls, text)
        obj.value = parse_quantity(text) if value is None else value
        return obj


def _quantity(text: Any) -> Quantity:
    try:
        return Quantity(str(text))
    except QuantityError as exc:
        raise ValueError(f"invalid quantity: {text}") from exc


def _is_quantity(text: Any) -> celtypes.BoolType:
    try:
        parse_quantity(str(text))
    except (QuantityError, ValueError):
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _number(value: Any) -> Fraction:
    return value.value if isinstance(value, Quantity) else Fraction(int(value))


def _q_compare(left: Quantity, right: Any) -> celtypes.IntType:
    a, b = _number(left), _number(right)
    return celtypes.IntType((a > b) - (a < b))


def _q_add(left: Quantity, right: Any) -> Quantity:
    total = _number(left) + _number(right)
    return Quantity(format_milli(total), total)


def _q_sub(left: Quantity, right: Any) -> Quantity:
    total = _number(left) - _number(right)
    return Quantity(format_milli(total), total)


def _q_as_integer(q: Quantity) -> celtypes.IntType:
    if q.value.denominator != 1:
        raise ValueError(f"cannot convert quantity {q} to an integer without losing precision")
    return celtypes.IntType(q.value.numerator)


def _list_or_string_index(target: Any, item: Any, last: bool = False) -> celtypes.IntType:
    if isinstance(target, str):
        found = target.rfind(item) if last else target.find(item)
        return celtypes.IntType(found)
    items = list(target)
    positions = [i for i, x in enumerate(items) if x == item]
    if not positions:
        return celtypes.IntType(-1)
    return celtypes.IntType(positions[-1] if last else positions[0])


def _sum(items: Any) -> Any:
    values = list(items)
    if not values:
        return celtypes.IntType(0)
    total = values[0]
    for value in values[1:]:
        total = _q_add(total, value) if isinstance(total, Quantity) else total + value
    return total


def _ordered(items: Any) -> list[Any]:
    values = list(items)
    if values and isinstance(values[0], Quantity):
        return sorted(values, key=lambda q: q.value)
    return sorted(values)


def _go_float(value: float) -> str:
    """A double as cel-go's ``string()`` writes it, Go's ``%g``: the shortest digits, in
    exponent form below 1e-04 and from 1e+06 on (``9.0`` is "9", not "9.0")."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if str(value).startswith("-") else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    point = len(text) + int(exponent)  # position of the decimal point in ``text``
    prefix = "-" if sign else ""
    if point - 1 < -4 or point - 1 >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        power = point - 1
        return f"{prefix}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{text}"
    if point >= len(text):
        return prefix + text + "0" * (point - len(text))
    return f"{prefix}{text[:point]}.{text[point:]}"


def _string(value: Any) -> celtypes.StringType:
    """CEL ``string()`` with cel-go's spelling of doubles and booleans."""
    if isinstance(value, celtypes.BoolType):
        return celtypes.StringType("true" if value else "false")
    if isinstance(value, float):  # DoubleType, or a float cel-python's arithmetic left
        return celtypes.StringType(_go_float(float(value)))
    return celtypes.StringType(value)


def _is_null(value: Any) -> bool:
    return value is None or isinstance(value, celtypes.NullType)


def _equals(left: Any, right: Any) -> Any:
    """``==`` with CEL's heterogeneous null equality: ``object == null`` on a CREATE is false,
    ``oldObject == null`` true (cel-python 0.5 has no overload for a map against null)."""
    if _is_null(left) or _is_null(right):
        return celtypes.BoolType(_is_null(left) and _is_null(right))
    return celpy.evaluation.bool_eq(left, right)


def _not_equals(left: Any, right: Any) -> Any:
    if _is_null(left) or _is_null(right):
        return celtypes.BoolType(not (_is_null(left) and _is_null(right)))
    return celpy.evaluation.bool_ne(left, right)


# Function name -> implementation; methods get the receiver as their first argument.
K8S_FUNCTIONS: dict[str, Any] = {
    "_==_": _equals,
    "_!=_": _not_equals,
    "string": _string,
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "isGreaterThan": lambda a, b: celtypes.BoolType(_q_compare(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_q_compare(a, b) < 0),
    "compareTo": _q_compare,
    "add": _q_add,
    "sub": _q_sub,
    "asInteger": _q_as_integer,
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(q.value)),
    "isInteger": lambda q: celtypes.BoolType(q.value.denominator == 1),
    "sign": lambda q: celtypes.IntType((q.value > 0) - (q.value < 0)),
    "isSorted": lambda items: celtypes.BoolType(list(items) == _ordered(items)),
    "sum": _sum,
    "indexOf": _list_or_string_index,
    "lastIndexOf": lambda target, item: _list_or_string_index(target, item, last=True),
    "lowerAscii": lambda s: celtypes.StringType(s.lower()),
    "upperAscii": lambda s: celtypes.StringType(s.upper()),
    "trim": lambda s: celtypes.StringType(s.strip()),
    "split": lambda s, sep: celtypes.ListType([celtypes.StringType(p) for p in s.split(sep)]),
    "join": lambda items, sep="": celtypes.StringType(sep.join(items)),
    "replace": lambda s, old, new: celtypes.StringType(s.replace(old, new)),
}

# What cel-python provides itself: its functions and the macros its evaluator knows.
_CELPY_NAMES = {
    name for name in celpy.evaluation.base_functions if name[0].isalpha() and "_" not in name
} | {"has", "dyn", "all", "exists", "exists_one", "map", "filter", "size"}
KNOWN_FUNCTIONS = frozenset(_CELPY_NAMES | set(K8S_FUNCTIONS))


class CelCompileError(ValueError):
    """The expression does not parse, or calls a function no library provides."""


_env = celpy.Environment()
_compile_lock = threading.Lock()
_CONTAINER = " (in container '')"


def _called_functions(ast: lark.Tree) -> list[lark.Token]:
    """The name token of every function and method call."""
    names = []
    for node in ast.iter_subtrees_topdown():
        if node.data == "member_dot_arg" and len(node.children) >= 2:
            names.append(node.children[1])
        elif node.data == "ident_arg" and node.children:
            names.append(node.children[0])
    return names


# -- cel-go's wording of compile errors ------------------------------------------------------


def _offset_after(source: str, token: lark.Token, char: str) -> int:
    """Where ``char`` follows ``token`` (whitespace skipped); the token's end if it does not."""
    at = token.end_pos
    while at < len(source) and source[at].isspace():
        at += 1
    return at if source[at : at + 1] == char else token.end_pos


def _offset_before(source: str, token: lark.Token, char: str) -> int:
    """Where ``char`` precedes ``token`` (whitespace skipped); the token's start if it does not."""
    at = token.start_pos - 1
    while at >= 0 and source[at].isspace():
        at -= 1
    return at if at >= 0 and source[at] == char else token.start_pos


def _issues(source: str, issues: list[tuple[int, str]]) -> str:
    """``compilation failed:`` and one ``ERROR: <input>:line:col: ...`` block per issue, with
    the line and a caret under the place, as cel-go reports them (in source order)."""
    blocks = []
    for offset, message in sorted(issues):
        line_start = source.rfind("\n", 0, offset) + 1
        line_end = source.find("\n", offset)
        text = source[line_start : line_end if line_end >= 0 else len(source)]
        line, column = source.count("\n", 0, offset) + 1, offset - line_start
        blocks.append(
            f"ERROR: <input>:{line}:{column + 1}: {message}\n | {text}\n | {'.' * column}^"
        )
    return "compilation failed: " + "\n".join(blocks)


@dataclass
class Compiled:
    expression: str
    program: Any
    ast: Any = None


_compiled_cache: dict[str, Compiled] = {}
_COMPILED_CACHE_LIMIT = 4096


def compile_expression(expression: str) -> Compiled:
    """Parse ``expression`` and check that every function it calls exists; raise otherwise.

    Compiled programs are kept by expression text: the same policy is validated on every
    write of it and compiled again for admission.
    """
    with _compile_lock:  # the lark parser of cel-python is shared
        cached = _compiled_cache.get(expression)
        if cached is not None:
            return cached
        try:
            ast = _env.compile(expression)
        except Exception as exc:  # celpy raises its own parse errors
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CelCompileError(f"compilation failed: Syntax error: {first}") from exc
        unknown = [
            (_offset_after(expression, name, "("), f"undeclared reference to '{name}'{_CONTAINER}")
            for name in _called_functions(ast)
            if str(name) not in KNOWN_FUNCTIONS
        ]
        if unknown:
            raise CelCompileError(_issues(expression, unknown))
        compiled = Compiled(expression, _env.program(ast, functions=K8S_FUNCTIONS), ast)
        if len(_compiled_cache) >= _COMPILED_CACHE_LIMIT:
            _compiled_cache.clear()
        _compiled_cache[expression] = compiled
        return compiled


# -- type checking of admission policy expressions -------------------------------------------


@dataclass(frozen=True)
class CelType:
    """A declared CEL type, as far as field selection needs it."""

    name: str  # as cel-go prints it
    kind: str = "scalar"  # scalar, object, list, map or dyn
    fields: tuple[tuple[str, CelType], ...] = ()
    item: CelType | None = None  # a list's items, a map's values

    def field(self, name: str) -> CelType | None:
        return dict(self.fields).get(name)


def _object(type_name: str, /, **fields: CelType) -> CelType:
    return CelType(type_name, "object", tuple(fields.items()))


def _list(item: CelType) -> CelType:
    return CelType(f"list({item.name})", "list", item=item)


def _map(value: CelType) -> CelType:
    return CelType(f"map(string, {value.name})", "map", item=value)


DYN = CelType("dyn", "dyn")
_STRING, _INT, _BOOL = CelType("string"), CelType("int"), CelType("bool")
_TIME = CelType("google.protobuf.Timestamp")
_STRINGS = _list(_STRING)
# The types kube-apiserver declares for ``namespaceObject`` and ``request`` (k8s.io/apiserver
# pkg/admission/plugin/cel/compile.go: BuildNamespaceType, BuildRequestType).
NAMESPACE_TYPE = _object(
    "kubernetes.Namespace",
    metadata=_object(
        "kubernetes.NamespaceMetadata",
        name=_STRING,
        generateName=_STRING,
        namespace=_STRING,
        labels=_map(_STRING),
        annotations=_map(_STRING),
        UID=_STRING,
        creationTimestamp=_TIME,
        deletionGracePeriodSeconds=_INT,
        deletionTimestamp=_TIME,
        generation=_INT,
        resourceVersion=_STRING,
        finalizers=_STRINGS,
    ),
    spec=_object("kubernetes.NamespaceSpec", finalizers=_STRINGS),
    status=_object(
        "kubernetes.NamespaceStatus",
        conditions=_list(
            _object(
                "kubernetes.NamespaceCondition",
                status=_STRING,
                type=_STRING,
                lastTransitionTime=_TIME,
                message=_STRING,
                reason=_STRING,
            )
        ),
        phase=_STRING,
    ),
)
_GVK = _object("kubernetes.GroupVersionKind", group=_STRING, version=_STRING, kind=_STRING)
_GVR = _object("kubernetes.GroupVersionResource", group=_STRING, version=_STRING, resource=_STRING)
REQUEST_TYPE = _object(
    "kubernetes.AdmissionRequest",
    kind=_GVK,
    resource=_GVR,
    subResource=_STRING,
    requestKind=_GVK,
    requestResource=_GVR,
    requestSubResource=_STRING,
    name=_STRING,
    namespace=_STRING,
    operation=_STRING,
    userInfo=_object(
        "kubernetes.UserInfo",
        username=_STRING,
        uid=_STRING,
        groups=_STRINGS,
        extra=_map(_STRINGS),
    ),
    dryRun=_BOOL,
    options=DYN,
)


def admission_variables(
    *, params: bool, variables: tuple[str, ...] | None
) -> dict[str, CelType | None]:
    """What an admission policy expression may name: ``object``, ``oldObject`` and ``params``
    untyped, ``namespaceObject`` and ``request`` typed; ``params`` only with a ``paramKind``,
    ``variables`` (of these names) only in a policy that has some. None: undeclared."""
    return {
        "object": DYN,
        "oldObject": DYN,
        "namespaceObject": NAMESPACE_TYPE,
        "request": REQUEST_TYPE,
        "params": DYN if params else None,
        "variables": (
            None
            if variables is None
            else _object("kubernetes.variables", **dict.fromkeys(variables, DYN))
        ),
    }


def check_admission_types(expression: str, declared: dict[str, CelType | None]) -> None:
    """Raise :class:`CelCompileError` where ``expression`` selects a field its typed variables
    do not have, or names an undeclared one, as kube-apiserver refuses such a policy at
    write time. Variables a macro binds (``c`` in ``all(c, ...)``) are not followed."""
    compiled = compile_expression(expression)
    issues: list[tuple[int, str]] = []
    has_at: dict[int, int] = {}  # id of the selection inside has(): the offset of its "("
    for node in compiled.ast.iter_subtrees():
        if node.data == "ident_arg" and str(node.children[0]) == "has" and len(node.children) > 1:
            inner = _single_chain(node.children[1])
            if inner is not None and inner.data == "member_dot":
                has_at[id(inner)] = _offset_after(expression, node.children[0], "(")
        elif node.data == "ident" and declared.get(str(node.children[0]), DYN) is None:
            token = node.children[0]
            issues.append((token.start_pos, f"undeclared reference to '{token}'{_CONTAINER}"))
    seen: dict[int, CelType | None] = {}

    def type_of(node: Any) -> CelType | None:
        if not isinstance(node, lark.Tree):
            return None
        if id(node) in seen:
            return seen[id(node)]
        found: CelType | None = None
        if node.data == "ident":
            found = declared.get(str(node.children[0]))
        elif node.data == "member_dot":
            base, name = type_of(node.children[0]), node.children[1]
            at = has_at.get(id(node), _offset_before(expression, name, "."))
            if base is None or base.kind == "dyn":
                found = None
            elif base.kind == "object":
                found = base.field(str(name))
                if found is None:
                    issues.append((at, f"undefined field '{name}'"))
            elif base.kind == "map":
                found = base.item
            else:
                issues.append((at, f"type '{base.name}' does not support field selection"))
        elif node.data == "member_index":
            base = type_of(node.children[0])
            found = base.item if base is not None and base.kind in ("list", "map") else None
        elif len(node.children) == 1:
            found = type_of(node.children[0])
        seen[id(node)] = found
        return found

    for node in compiled.ast.iter_subtrees():
        type_of(node)
    if issues:
        raise CelCompileError(_issues(expression, issues))


def _single_chain(node: Any) -> lark.Tree | None:
    """The first node below ``node`` that is not a mere wrapper of one child."""
    while isinstance(node, lark.Tree) and len(node.children) == 1:
        child = node.children[0]
        if not isinstance(child, lark.Tree):
            return node
        node = child
    return node if isinstance(node, lark.Tree) else None


def to_cel(value: Any) -> Any:
    return celpy.json_to_cel(value)


def evaluate(compiled: Compiled, activation: dict[str, Any]) -> Any:
    """The result of ``compiled``; raises ``CelEvalError`` (a ValueError) on runtime errors."""
    try:
        result = compiled.program.evaluate(activation)
    except celpy.CELEvalError as exc:
        raise CelEvalError(_eval_message(exc)) from exc
    except (TypeError, ValueError, KeyError, ZeroDivisionError) as exc:
        raise CelEvalError(str(exc)) from exc
    if isinstance(result, celpy.CELEvalError):
        raise CelEvalError(_eval_message(result))
    return result


class CelEvalError(ValueError):
    pass


def _eval_message(exc: Exception) -> str:
    args = getattr(exc, "args", ())
    return str(args[0]) if args else str(exc)


# -- CRD validation rules ------------------------------------------------------------------


@dataclass
class CrdRule:
    """One ``x-kubernetes-validations`` entry at one schema node of one served version."""

    api_version: str
    kind: str
    # Path of schema steps from the root: ("spec",), ("spec", "resourceGroups", "[]")
    path: tuple[str, ...]
    rule: str
    message: str = ""
    message_expression: str = ""
    reason: str = "FieldValueInvalid"
    field_path: str = ""
    node_type: str = "object"
    compiled: Compiled | None = None
    compiled_message: Compiled | None = None
    error: str = ""
    uses_old_self: bool = False

    @property
    def evaluated(self) -> bool:
        return self.compiled is not None and not self.error


@dataclass
class _KindRules:
    rules: list[CrdRule] = field(default_factory=list)
    # Schema defaults by path, applied to a copy before the rules see the object.
    schema: dict[str, Any] = field(default_factory=dict)


_crd_rules: dict[tuple[str, str], _KindRules] | None = None
_crd_lock = threading.Lock()


def _walk(node: Any, path: tuple[str, ...], out: list[tuple[tuple[str, ...], dict[str, Any]]]):
    if not isinstance(node, dict):
        return
    out.append((path, node))
    for name, child in (node.get("properties") or {}).items():
        _walk(child, (*path, name), out)
    if isinstance(node.get("items"), dict):
        _walk(node["items"], (*path, "[]"), out)
    if isinstance(node.get("additionalProperties"), dict):
        _walk(node["additionalProperties"], (*path, "{}"), out)


def _build_crd_rules() -> dict[tuple[str, str], _KindRules]:
    table: dict[tuple[str, str], _KindRules] = {}
    for (api_version, kind), schema in crd_schemas().items():
        kind_rules = _KindRules(schema=schema)
        nodes: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        _walk(schema, (), nodes)
        for path, node in nodes:
            for raw in node.get("x-kubernetes-validations") or []:
                rule = CrdRule(
                    api_version=api_version,
                    kind=kind,
                    path=path,
                    rule=raw.get("rule", ""),
                    message=raw.get("message", ""),
                    message_expression=raw.get("messageExpression", ""),
                    reason=raw.get("reason", "FieldValueInvalid"),
                    field_path=raw.get("fieldPath", ""),
                    node_type=node.get("type", "object"),
                    uses_old_self="oldSelf" in raw.get("rule", ""),
                )
                try:
                    rule.compiled = compile_expression(rule.rule)
                    if rule.message_expression:
                        rule.compiled_message = compile_expression(rule.message_expression)
                except CelCompileError as exc:
                    rule.error = str(exc)
                kind_rules.rules.append(rule)
        table[(api_version, kind)] = kind_rules
    return table


def crd_rules() -> dict[tuple[str, str], _KindRules]:
    global _crd_rules
    if _crd_rules is None:
        with _crd_lock:
            if _crd_rules is None:
                _crd_rules = _build_crd_rules()
    return _crd_rules


def crd_rule_inventory() -> list[CrdRule]:
    """Every rule of every served CRD version, with whether it is compiled and evaluated."""
    return [rule for kind_rules in crd_rules().values() for rule in kind_rules.rules]


def apply_schema_defaults(schema: dict[str, Any], value: Any) -> Any:
    """A copy of ``value`` with the structural schema's ``default`` values filled in."""
    if isinstance(value, dict):
        out = dict(value)
        for name, child in (schema.get("properties") or {}).items():
            if name not in out and isinstance(child, dict) and "default" in child:
                out[name] = copy.deepcopy(child["default"])
            if name in out:
                out[name] = apply_schema_defaults(child, out[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            props = schema.get("properties") or {}
            for key in list(out):
                if key not in props:
                    out[key] = apply_schema_defaults(extra, out[key])
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_schema_defaults(schema["items"], item) for item in value]
    return value


def _render(path: list[Any]) -> str:
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        elif isinstance(step, tuple):  # a map key
            out += f"[{step[1]}]"
        else:
            out = f"{out}.{step}" if out else step
    return out


def _values_at(
    value: Any, old: Any, steps: tuple[str, ...], schema: dict[str, Any], where: list[Any]
) -> list[tuple[list[Any], Any, Any]]:
    """(field path, value, correlated old value or _NO_OLD) for every node a rule applies to."""
    if not steps:
        return [(where, value, old)]
    step, rest = steps[0], steps[1:]
    if step == "[]":
        if not isinstance(value, list):
            return []
        items_schema = schema.get("items") or {}
        keys = schema.get("x-kubernetes-list-map-keys") or []
        correlate = schema.get("x-kubernetes-list-type") == "map" and keys
        old_by_key = {}
        if correlate and isinstance(old, list):
            old_by_key = {
                tuple(item.get(k) for k in keys): item for item in old if isinstance(item, dict)
            }
        out = []
        for i, item in enumerate(value):
            item_old: Any = _NO_OLD
            if correlate and isinstance(item, dict):
                item_old = old_by_key.get(tuple(item.get(k) for k in keys), _NO_OLD)
            out += _values_at(item, item_old, rest, items_schema, [*where, i])
        return out
    if step == "{}":
        if not isinstance(value, dict):
            return []
        child_schema = schema.get("additionalProperties") or {}
        out = []
        for key, item in value.items():
            item_old = old.get(key, _NO_OLD) if isinstance(old, dict) else _NO_OLD
            out += _values_at(item, item_old, rest, child_schema, [*where, ("key", key)])
        return out
    if not isinstance(value, dict) or step not in value:
        return []
    child_old = old.get(step, _NO_OLD) if isinstance(old, dict) else _NO_OLD
    child_schema = (schema.get("properties") or {}).get(step) or {}
    return _values_at(value[step], child_old, rest, child_schema, [*where, step])


_NO_OLD = object()


class UnevaluatedRule(RuntimeError):
    """A served rule could not be compiled: the object cannot be judged (never silently passed)."""


def check_crd_rules(
    api_version: str, kind: str, obj: dict[str, Any], old: dict[str, Any] | None
) -> list[FieldError]:
    """Errors of ``obj`` (an update of ``old`` when given) against its CRD's CEL rules.

    As kube-apiserver: schema defaults are applied first; a rule applies at each node present;
    transition rules (``oldSelf``) only on updates where the old node correlates; a value that
    did not change since ``old`` is not held against newer rules (validation ratcheting).
    """
    kind_rules = crd_rules().get((api_version, kind))
    if kind_rules is None or not kind_rules.rules:
        return []
    schema = kind_rules.schema
    new = apply_schema_defaults(schema, obj)
    previous = apply_schema_defaults(schema, old) if old is not None else _NO_OLD
    errors: list[FieldError] = []
    for rule in kind_rules.rules:
        if rule.compiled is None:
            raise UnevaluatedRule(f"{kind} rule {rule.rule!r} at {rule.path}: {rule.error}")
        node_schema = _schema_at(schema, rule.path)
        for where, value, old_value in _values_at(new, previous, rule.path, schema, []):
            if old_value is not _NO_OLD and old_value == value:
                continue  # ratcheting: unchanged values pass (and self == oldSelf holds)
            if rule.uses_old_self and old_value is _NO_OLD:
                continue
            activation = {"self": to_cel(value)}
            if rule.uses_old_self:
                activation["oldSelf"] = to_cel(old_value)
            path = _render(where)
            if rule.field_path:
                path = path + rule.field_path
            node_type = (node_schema or {}).get("type", rule.node_type)
            try:
                passed = evaluate(rule.compiled, activation)
            except CelEvalError as exc:
                shown = rule.message.strip() or rule.rule.strip()
                errors.append(
                    FieldError(
                        path, f'Invalid value: "{node_type}": {exc} evaluating rule: {shown}'
                    )
                )
                continue
            if passed is True or passed == celtypes.BoolType(True):
                continue
            message = rule.message.strip() or f"failed rule: {rule.rule.strip()}"
            if rule.compiled_message is not None:
                try:
                    rendered = evaluate(rule.compiled_message, activation)
                    if isinstance(rendered, str) and rendered.strip():
                        message = str(rendered)
                except CelEvalError:
                    pass
            errors.append(FieldError(path, _rule_failure(rule.reason, node_type, value, message)))
    return errors


def _rule_failure(reason: str, node_type: str, value: Any, message: str) -> str:
    """A failed rule as apiextensions-apiserver words it: by the rule's ``reason``, with the
    value shown unless it is an object or a list."""
    if reason == "FieldValueForbidden":
        return f"Forbidden: {message}"
    if reason == "FieldValueRequired":
        return f"Required value: {message}"
    kind = "Duplicate value" if reason == "FieldValueDuplicate" else "Invalid value"
    if node_type not in ("object", "array"):
        kind = f"{kind}: {bad_value(value)}"
    return kind if reason == "FieldValueDuplicate" else f"{kind}: {message}"


def _schema_at(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    node: Any = schema
    for step in path:
        if not isinstance(node, dict):
            return None
        if step == "[]":
            node = node.get("items")
        elif step == "{}":
            node = node.get("additionalProperties")
        else:
            node = (node.get("properties") or {}).get(step)
    return node if isinstance(node, dict) else None
