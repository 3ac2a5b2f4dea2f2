"""Admission policies' CEL run in the tests, as the API server runs it.

The CEL is evaluated with cel-python. Kubernetes adds libraries of its own to CEL (lists:
``sum()``; ``quantity()`` with ``asApproximateFloat()``); they are given here with the semantics
their Kubernetes documentation states, on top of cel-python's standard CEL. Nothing else is
given, so an expression that used another function would fail here.
"""

import functools
import operator
import re
from decimal import Decimal

import celpy
from celpy import celtypes

_SUFFIXES = {
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?")


class Quantity:
    def __init__(self, value: Decimal):
        self.value = value


def k8s_quantity(text):
    match = _QUANTITY.fullmatch(str(text))
    if not match:
        raise ValueError(f"not a quantity: {text!r}")
    return Quantity(Decimal(match[1]) * _SUFFIXES[match[2] or ""])


def as_approximate_float(q: Quantity):
    return celtypes.DoubleType(float(q.value))


def list_sum(items):
    return functools.reduce(operator.add, items) if items else celtypes.IntType(0)


FUNCTIONS = {
    "quantity": k8s_quantity,
    "asApproximateFloat": as_approximate_float,
    "sum": list_sum,
}


def evaluate(env, expression: str, activation: dict):
    program = env.program(env.compile(expression), functions=FUNCTIONS)
    result = program.evaluate(activation)
    if isinstance(result, celpy.CELEvalError):
        raise AssertionError(f"{expression!r} failed: {result}")
    return result


def admit(policy: dict, pod: dict, namespace: dict) -> list[str]:
    """Run the policy as the API server does: variables in order, then every validation;
    the denial messages (messageExpression) of the validations that fail."""
    env = celpy.Environment()
    activation = {
        "object": celpy.json_to_cel(pod),
        "namespaceObject": celpy.json_to_cel(namespace),
    }
    variables: dict = {}
    for variable in policy["spec"]["variables"]:
        activation["variables"] = celtypes.MapType(variables)
        value = evaluate(env, variable["expression"], activation)
        variables[celtypes.StringType(variable["name"])] = value
    activation["variables"] = celtypes.MapType(variables)
    denials = []
    for validation in policy["spec"]["validations"]:
        if not evaluate(env, validation["expression"], activation):
            denials.append(str(evaluate(env, validation["messageExpression"], activation)))
    return denials
