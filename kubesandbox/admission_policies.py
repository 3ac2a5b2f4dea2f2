"""ValidatingAdmissionPolicies enforced as kube-apiserver enforces them: which policy and binding
match a request, their CEL evaluated with the sandbox's CEL environment (``celrules``), and the
answer: a denial worded and coded as upstream, or ``Warning`` headers.

Follows kube-apiserver's ``ValidatingAdmissionPolicy`` admission plugin (k8s.io/apiserver
``pkg/admission/plugin/policy/{validating,generic,matching}``):

- a policy applies through its bindings; ``spec.matchConstraints`` of the policy and
  ``spec.matchResources`` of a binding (resourceRules with subresources such as ``pods/resize``,
  excludeResourceRules, resourceNames, scope, matchPolicy ``Equivalent``, namespaceSelector,
  objectSelector) both have to match; requests for admission-registration objects are exempt;
- then ``matchConditions``; then every validation, with ``object``, ``oldObject``, ``request``,
  ``namespaceObject`` and ``variables`` (``spec.variables``, evaluated lazily and at most once
  per binding and request);
- a failed validation is handled per ``validationActions``: ``Deny`` answers with the first
  denial (reason from the validation, default ``Invalid``: 422; ``Forbidden``: 403), ``Warn``
  adds a ``Warning``;
- an expression that fails to evaluate, or a selector that cannot be read, denies under
  ``failurePolicy: Fail`` and is ignored under ``Ignore``.

Not imitated (the portal's policies use none of it; a policy or binding that does is refused
on write, see ``core_validation``): parameter resources (``paramKind``/``paramRef``), the
``Audit`` action and ``auditAnnotations``, the ``authorizer`` variable (an expression using it
does not compile here) and the runtime cost budget. ``request.userInfo`` is the sandbox's one
user, a cluster admin.

Policies are compiled once per resourceVersion; a request no policy matches costs a scan of
the bindings.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from kubesandbox import errors
from kubesandbox.celrules import (
    CelCompileError,
    CelEvalError,
    Compiled,
    compile_expression,
    evaluate,
    to_cel,
)
from kubesandbox.discovery import Discovery, Resource
from kubesandbox.store import Store

ADMISSION_GROUP = "admissionregistration.k8s.io"
POLICIES = (ADMISSION_GROUP, "validatingadmissionpolicies")
BINDINGS = (ADMISSION_GROUP, "validatingadmissionpolicybindings")
# Never subject to admission policies (upstream: IsExemptAdmissionConfigurationResource).
_EXEMPT = frozenset(
    {
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
        "mutatingadmissionpolicies",
        "mutatingadmissionpolicybindings",
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
    }
)
_MAX_MESSAGE_BYTES = 5 * 1024  # celconfig.MaxEvaluatedMessageExpressionSizeBytes
_REASON_CODES = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413}
USER_INFO = {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}


@dataclass
class AdmissionRequest:
    """One write as the admission chain sees it (``admission.Attributes``)."""

    operation: str  # CREATE, UPDATE or DELETE
    resource: Resource
    subresource: str
    namespace: str  # "" for cluster-scoped objects; a namespace's own name for namespaces
    name: str
    obj: dict[str, Any] | None
    old: dict[str, Any] | None
    dry_run: bool = False
    field_manager: str = ""

    @property
    def gvr(self) -> tuple[str, str, str]:
        info = self.resource.info
        return (info.group, info.version, info.plural)


class SelectorError(ValueError):
    pass


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """``metav1.LabelSelector`` semantics; an empty selector matches everything."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for requirement in selector.get("matchExpressions") or []:
        key, op = requirement.get("key", ""), requirement.get("operator", "")
        values = requirement.get("values") or []
        if op == "In":
            if labels.get(key) not in values:
                return False
        elif op == "NotIn":
            if key in labels and labels[key] in values:
                return False
        elif op == "Exists":
            if key not in labels:
                return False
        elif op == "DoesNotExist":
            if key in labels:
                return False
        else:
            raise SelectorError(f'"{op}" is not a valid label selector operator')
    return True


# -- compiled policies ----------------------------------------------------------------------


@dataclass
class _Expression:
    text: str
    compiled: Compiled | None
    error: str = ""


def _expression(text: str) -> _Expression:
    try:
        return _Expression(text, compile_expression(text))
    except CelCompileError as exc:
        return _Expression(text, None, str(exc))


@dataclass
class _CompiledPolicy:
    uid: str
    resource_version: str
    policy: dict[str, Any]
    variables: dict[str, _Expression]
    match_conditions: list[tuple[str, _Expression]]
    validations: list[tuple[dict[str, Any], _Expression, _Expression | None]]


def _compile_policy(policy: dict[str, Any]) -> _CompiledPolicy:
    spec = policy.get("spec") or {}
    meta = policy.get("metadata") or {}
    return _CompiledPolicy(
        uid=meta.get("uid", ""),
        resource_version=meta.get("resourceVersion", ""),
        policy=policy,
        variables={
            v.get("name", ""): _expression(v.get("expression", ""))
            for v in spec.get("variables") or []
        },
        match_conditions=[
            (c.get("name", ""), _expression(c.get("expression", "")))
            for c in spec.get("matchConditions") or []
        ],
        validations=[
            (
                v,
                _expression(v.get("expression", "")),
                _expression(v["messageExpression"]) if v.get("messageExpression") else None,
            )
            for v in spec.get("validations") or []
        ],
    )


def _run(expression: _Expression, activation: dict[str, Any]) -> tuple[Any, str]:
    """(value, "") or (None, the error as kube-apiserver words it)."""
    if expression.compiled is None:
        return None, expression.error
    try:
        return evaluate(expression.compiled, activation), ""
    except CelEvalError as exc:
        return None, f"expression '{expression.text}' resulted in error: {exc}"


def _is_true(value: Any) -> bool:
    return isinstance(value, celtypes.BoolType) and bool(value)


class _LazyVariables(celtypes.MapType):
    """``variables``: each one evaluated on first use, then kept for the rest of the request.

    An error is kept as a CEL error value, so ``false && variables.broken`` stays false, as in
    CEL's commutative logic operators.
    """

    def __init__(self, expressions: dict[str, _Expression], activation: dict[str, Any]) -> None:
        super().__init__()
        self._expressions = expressions
        self._activation = activation
        self._busy: set[str] = set()

    def __contains__(self, key: object) -> bool:
        return str(key) in self._expressions

    def __getitem__(self, key: Any) -> Any:
        name = str(key)
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name)
        expression = self._expressions.get(name)
        if expression is None:
            raise KeyError(name)
        if name in self._busy:
            return CELEvalError(f'composited variable "{name}" refers to itself', ValueError, None)
        self._busy.add(name)
        try:
            if expression.compiled is None:
                value: Any = CELEvalError(
                    f'composited variable "{name}" fails to compile: {expression.error}',
                    ValueError,
                    None,
                )
            else:
                try:
                    value = evaluate(expression.compiled, self._activation)
                except CelEvalError as exc:
                    value = CELEvalError(
                        f'composited variable "{name}" fails to evaluate: {exc}', ValueError, None
                    )
        finally:
            self._busy.discard(name)
        dict.__setitem__(self, celtypes.StringType(name), value)
        return value


# -- decisions ------------------------------------------------------------------------------


@dataclass
class _Decision:
    deny: bool
    message: str = ""
    reason: str = ""


@dataclass
class _Denial:
    policy: str
    binding: str | None
    message: str
    reason: str = ""


@dataclass
class _Outcome:
    denials: list[_Denial] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class AdmissionPolicies:
    """The admission policies of one sandbox, read from its store (the caller holds the lock)."""

    def __init__(self, store: Store, discovery: Discovery) -> None:
        self.store = store
        self.discovery = discovery
        self._compiled: dict[str, _CompiledPolicy] = {}
        self.compilations = 0  # how many times a policy was compiled (tests check the cache)

    # -- entry point -----------------------------------------------------------------------

    def admit(self, request: AdmissionRequest, warnings: list[str]) -> None:
        """Run every matching policy binding; add warnings; raise the first denial."""
        info = request.resource.info
        if info.group == ADMISSION_GROUP and info.plural in _EXEMPT:
            return
        bindings = self.store.items(BINDINGS)
        if not bindings:
            return
        by_policy: dict[str, list[dict[str, Any]]] = {}
        for _, binding in bindings:
            name = (binding.get("spec") or {}).get("policyName", "")
            by_policy.setdefault(name, []).append(binding)
        outcome = _Outcome()
        for policy_name in sorted(by_policy):
            policy = self.store.get(POLICIES, "", policy_name)
            if policy is None:
                continue  # a binding to a policy that does not exist does nothing
            self._admit_policy(request, self._compile(policy), by_policy[policy_name], outcome)
        warnings.extend(outcome.warnings)
        if outcome.denials:
            raise self._denial_error(request, outcome.denials)

    def _compile(self, policy: dict[str, Any]) -> _CompiledPolicy:
        meta = policy.get("metadata") or {}
        name = meta.get("name", "")
        cached = self._compiled.get(name)
        if (
            cached is not None
            and cached.uid == meta.get("uid", "")
            and cached.resource_version == meta.get("resourceVersion", "")
        ):
            return cached
        compiled = _compile_policy(policy)
        self.compilations += 1
        self._compiled[name] = compiled
        return compiled

    # -- one policy --------------------------------------------------------------------------

    def _admit_policy(
        self,
        request: AdmissionRequest,
        compiled: _CompiledPolicy,
        bindings: list[dict[str, Any]],
        outcome: _Outcome,
    ) -> None:
        policy = compiled.policy
        spec = policy.get("spec") or {}
        policy_name = policy["metadata"]["name"]
        fail = spec.get("failurePolicy", "Fail") != "Ignore"

        def config_error(message: str, binding: str | None) -> None:
            if fail:
                prefix = "failed to configure binding" if binding else "failed to configure policy"
                outcome.denials.append(_Denial(policy_name, binding, f"{prefix}: {message}"))

        try:
            matched = self._matches(request, spec.get("matchConstraints") or {})
        except SelectorError as exc:
            config_error(str(exc), None)
            return
        if matched is None:
            return
        activation = self._activation(request, matched)
        for binding in sorted(bindings, key=lambda b: b["metadata"]["name"]):
            binding_name = binding["metadata"]["name"]
            binding_spec = binding.get("spec") or {}
            match_resources = binding_spec.get("matchResources")
            try:
                if match_resources is not None and self._matches(request, match_resources) is None:
                    continue
            except SelectorError as exc:
                config_error(str(exc), binding_name)
                continue
            # Variables are evaluated at most once per binding and request.
            bound = dict(activation)
            bound["variables"] = _LazyVariables(compiled.variables, bound)
            actions = binding_spec.get("validationActions") or []
            for decision in self._validate(compiled, bound, fail):
                if not decision.deny:
                    continue
                if "Deny" in actions:
                    outcome.denials.append(
                        _Denial(policy_name, binding_name, decision.message, decision.reason)
                    )
                if "Warn" in actions:
                    outcome.warnings.append(
                        f"Validation failed for ValidatingAdmissionPolicy '{policy_name}' "
                        f"with binding '{binding_name}': {decision.message}"
                    )

    def _validate(
        self, compiled: _CompiledPolicy, activation: dict[str, Any], fail: bool
    ) -> list[_Decision]:
        errors_seen: list[str] = []
        for _name, condition in compiled.match_conditions:
            value, error = _run(condition, activation)
            if error:
                errors_seen.append(error)
            elif not _is_true(value):
                return []  # a false condition: the policy does not apply, errors or not
        if errors_seen:
            if not fail:
                return []
            message = errors_seen[0] if len(errors_seen) == 1 else f"[{', '.join(errors_seen)}]"
            return [_Decision(True, message)]
        decisions = []
        for validation, expression, message_expression in compiled.validations:
            value, error = _run(expression, activation)
            if error:
                decisions.append(_Decision(fail, error))
                continue
            if _is_true(value):
                decisions.append(_Decision(False))
                continue
            message = ""
            if message_expression is not None:
                rendered, message_error = _run(message_expression, activation)
                if not message_error and isinstance(rendered, str):
                    message = rendered.strip()
                    if len(message.encode()) > _MAX_MESSAGE_BYTES or "\n" in message:
                        message = ""
            if not message and validation.get("message"):
                message = validation["message"].strip()
            if not message:
                message = f"failed expression: {expression.text.strip()}"
            reason = validation.get("reason") or "Invalid"
            decisions.append(_Decision(True, message, reason))
        return decisions

    # -- matching --------------------------------------------------------------------------

    def _matches(
        self, request: AdmissionRequest, match: dict[str, Any]
    ) -> tuple[str, str, str] | None:
        """The (group, version, resource) a policy sees the request as, or None: no match."""
        if not self._namespace_matches(request, match.get("namespaceSelector")):
            return None
        if not self._object_matches(request, match.get("objectSelector")):
            return None
        policy = match.get("matchPolicy", "Equivalent")
        if self._rules_match(request, match.get("excludeResourceRules") or [], policy):
            return None
        rules = match.get("resourceRules") or []
        if not rules:
            return request.gvr
        return self._rules_match(request, rules, policy)

    def _rules_match(
        self, request: AdmissionRequest, rules: list[dict[str, Any]], policy: str
    ) -> tuple[str, str, str] | None:
        for rule in rules:
            if _rule_matches(rule, request, request.gvr) and _name_matches(rule, request):
                return request.gvr
        if policy != "Equivalent":
            return None
        group, version, plural = request.gvr
        for other_group, other_version, other_plural in self.discovery.by_path:
            if (other_group, other_plural) != (group, plural) or other_version == version:
                continue
            equivalent = (other_group, other_version, other_plural)
            for rule in rules:
                if _rule_matches(rule, request, equivalent) and _name_matches(rule, request):
                    return equivalent
        return None

    def _namespace_matches(self, request: AdmissionRequest, selector: Any) -> bool:
        is_namespace = request.resource.info.kind == "Namespace" and not request.resource.info.group
        if not request.namespace and not is_namespace:
            return True  # cluster-scoped objects are never exempted by a namespace selector
        if not selector:
            return True
        if is_namespace:
            source = request.obj if request.obj is not None else request.old
        else:
            source = self.store.get(("", "namespaces"), "", request.namespace)
        labels = ((source or {}).get("metadata") or {}).get("labels") or {}
        return selector_matches(selector, labels)

    def _object_matches(self, request: AdmissionRequest, selector: Any) -> bool:
        if not selector:
            return True
        return any(
            obj is not None
            and selector_matches(selector, (obj.get("metadata") or {}).get("labels") or {})
            for obj in (request.obj, request.old)
        )

    # -- CEL variables -----------------------------------------------------------------------

    def _activation(self, request: AdmissionRequest, gvr: tuple[str, str, str]) -> dict[str, Any]:
        group, version, plural = gvr
        api_version = f"{group}/{version}" if group else version

        def as_seen(obj: dict[str, Any] | None) -> Any:
            return None if obj is None else to_cel({**obj, "apiVersion": api_version})

        info = request.resource.info
        kind = {"group": group, "version": version, "kind": info.kind}
        request_kind = {"group": info.group, "version": info.version, "kind": info.kind}
        options_kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions"}.get(
            request.operation, "DeleteOptions"
        )
        options: dict[str, Any] = {"kind": options_kind, "apiVersion": "meta.k8s.io/v1"}
        if request.dry_run:
            options["dryRun"] = ["All"]
        if request.field_manager and request.operation != "DELETE":
            options["fieldManager"] = request.field_manager
        admission_request: dict[str, Any] = {
            "uid": str(uuid.uuid4()),
            "kind": kind,
            "resource": {"group": group, "version": version, "resource": plural},
            "requestKind": request_kind,
            "requestResource": {
                "group": info.group,
                "version": info.version,
                "resource": info.plural,
            },
            "name": request.name,
            "namespace": request.namespace,
            "operation": request.operation,
            "userInfo": USER_INFO,
            "dryRun": request.dry_run,
            "options": options,
        }
        if request.subresource:
            admission_request["subResource"] = request.subresource
            admission_request["requestSubResource"] = request.subresource
        namespace_object = None
        if request.namespace and not (info.kind == "Namespace" and not info.group):
            namespace_object = _namespace_object(
                self.store.get(("", "namespaces"), "", request.namespace)
            )
        return {
            "object": as_seen(request.obj),
            "oldObject": as_seen(request.old),
            "request": to_cel(admission_request),
            "namespaceObject": to_cel(namespace_object),
        }

    # -- the answer --------------------------------------------------------------------------

    def _denial_error(self, request: AdmissionRequest, denials: list[_Denial]) -> errors.ApiError:
        first = denials[0]
        if first.binding is not None:
            message = (
                f"ValidatingAdmissionPolicy '{first.policy}' with binding '{first.binding}' "
                f"denied request: {first.message}"
            )
        else:
            message = f"ValidatingAdmissionPolicy '{first.policy}' denied request: {first.message}"
        info = request.resource.info
        qualified = f"{info.plural}.{info.group}" if info.group else info.plural
        name = request.name or "Unknown"
        reason = first.reason or "Invalid"
        details: dict[str, Any] = {"name": name, "kind": info.plural}
        if info.group:
            details["group"] = info.group
        details["causes"] = [{"message": message}]
        return errors.ApiError(
            _REASON_CODES.get(reason, 422),
            reason,
            f'{qualified} "{name}" is forbidden: {message}',
            details,
        )


def _namespace_object(namespace: dict[str, Any] | None) -> dict[str, Any] | None:
    """The part of a Namespace a policy sees (``cel.CreateNamespaceObject``)."""
    if namespace is None:
        return None
    meta = namespace.get("metadata") or {}
    kept = (
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "finalizers",
    )
    out: dict[str, Any] = {"metadata": {k: meta[k] for k in kept if k in meta}}
    for part in ("spec", "status"):
        if part in namespace:
            out[part] = namespace[part]
    return out


def _rule_matches(
    rule: dict[str, Any], request: AdmissionRequest, gvr: tuple[str, str, str]
) -> bool:
    """``rules.Matcher``: scope, operation, group, version, resource with subresource."""
    group, version, plural = gvr
    is_namespace = plural == "namespaces" and not group
    scope = rule.get("scope", "*")
    if scope == "Namespaced" and (is_namespace or not request.namespace):
        return False
    if scope == "Cluster" and not (is_namespace or not request.namespace):
        return False
    operations = rule.get("operations") or []
    if "*" not in operations and request.operation not in operations:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and group not in groups:
        return False
    versions = rule.get("apiVersions") or []
    if "*" not in versions and version not in versions:
        return False
    for resource in rule.get("resources") or []:
        res, _, sub = resource.partition("/")
        if (res in ("*", plural)) and (sub in ("*", request.subresource)):
            return True
    return False


def _name_matches(rule: dict[str, Any], request: AdmissionRequest) -> bool:
    names = rule.get("resourceNames") or []
    return not names or request.name in names
